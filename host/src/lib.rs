//! Latch: a coding-agent host whose context management is a swappable,
//! sandboxed WebAssembly component.
//!
//! The host owns everything durable (the event store in [`latch_kernel`], the
//! agent loop, the tools); a context engine owns one decision, what the model
//! sees on the next request. [`engine`] runs engines (embedded, native or any
//! component) behind the [`engine::ContextEngine`] port; [`config`] selects them.

pub mod agent;
pub mod cli;
pub mod commands;
pub mod compare;
pub mod config;
pub mod engine;
pub mod supervisor;
