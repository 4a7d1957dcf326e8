//! `latch-surface`: the shared semantic reducers behind every Latch surface.
//!
//! A surface (the terminal UI, the web page, a test) shows a session as a
//! pure reduction of its durable events plus a little transient activity.
//! This crate owns that reduction and nothing else: no terminal, no HTTP, no
//! async runtime, no store handle. Its input is owned data:
//!
//! * durable events ([`latch_kernel::StoredEvent`]) in sequence order — the
//!   session's own events, the workspace-wide events of other sessions and
//!   its children's reports — through [`Surface::apply`];
//! * transient signals ([`Delta`]: streamed text, "reasoning reported",
//!   retries) through [`Surface::delta`], which never change a committed item;
//! * the last `/context` report, through [`Surface::set_report`].
//!
//! Its output is a view model: the [`Transcript`], the canonical task state
//! (reduced by the kernel's own [`latch_kernel::KernelState`]), [`Usage`],
//! the run/request/tool [`Phase`], the [`Children`] and the two extension
//! slots ([`GroupView`], [`PermissionPrompt`]) that later features fill.
//!
//! Live and resumed presentation are the same function: applying the events
//! one by one with deltas in between gives the same durable state as
//! [`Surface::replay`] over the log (pinned by the tests at every prefix).
//!
//! * [`transcript`] — transcript items: user turns, assistant text, tool
//!   calls with their results and diffs, notifications, re-grounds, dividers.
//! * [`activity`] — lifecycle phases and transient activity.
//! * [`usage`] — provider-reported usage per request and its cache metrics.
//! * [`pricing`] — per-model prices and a session's cost from its usage.
//! * [`children`] — child agents and their state.
//! * [`slots`] — the GROUP block and permission-prompt extension points.
//! * [`slash`] — slash-command parsing shared by every surface.
//! * [`commands`] — custom slash commands: Markdown files with `$ARGUMENTS`.
//! * [`export`] — a session as Markdown for a person or as its durable
//!   events in JSON (`latch export`, `/export`).
//! * [`surface`] — [`Surface`], the combined reducer.

#![warn(missing_docs)]

pub mod activity;
pub mod catch_up;
pub mod children;
pub mod commands;
pub mod export;
pub mod pricing;
pub mod slash;
pub mod slots;
pub mod surface;
pub mod transcript;
pub mod usage;

pub use activity::{Activity, Delta, Phase};
pub use catch_up::{catch_up, replay_live, surface_of};
pub use children::{ChildView, Children};
pub use commands::{CommandFileError, CustomCommand, CustomCommands};
pub use pricing::{ModelPrice, PriceTable, SessionCost};
pub use slash::{SLASH_COMMANDS, Slash, SlashError, complete as complete_slash};
pub use slots::{GroupView, PermissionPrompt};
pub use surface::{Durable, Surface, mode_label};
pub use transcript::{
    DiffLine, DividerKind, Item, ToolRow, ToolStatus, Transcript, hook_text, reground_text,
};
pub use usage::{RequestUsage, Usage};
