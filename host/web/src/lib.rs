//! `latch-web`: the web surface of Latch (`latch serve`).
//!
//! It observes the same durable events as the terminal through the shared
//! reducers of [`latch_surface`] and sends commands through a [`Backend`]
//! that the binary implements with the same agent API the CLI uses, so this
//! crate never imports the agent loop. Everything it keeps is transient
//! transport state (SSE subscriptions, command receipts, streamed text):
//! nothing here writes to the store except through the backend's commands.
//!
//! * [`backend`] — the port the binary implements: sessions, turns, commands.
//! * [`approvals`] — permission answers from the page to the waiting agent.
//! * [`bind`] — the loopback-only bind rule.
//! * [`log`] — what the page shows of a session: the surface, its slots
//!   filled, and the permission request it waits on.
//! * [`hub`] — per-session fan-out of committed events and transient deltas.
//! * [`redact`] — what of a committed event may leave the server (never
//!   reasoning text).
//! * [`view`] — the reducers' state as JSON (snapshots, the page's model).
//! * [`server`] — the axum router: Host, Origin and token checks, the
//!   `/api/` routes, SSE, the page.

#![warn(missing_docs)]

pub mod approvals;
pub mod backend;
pub mod bind;
pub mod hub;
pub mod log;
pub mod redact;
pub mod server;
pub mod view;

pub use approvals::{Answer, Approvals};
pub use backend::{Backend, BackendError, Signal};
pub use bind::{BindError, check_bind};
pub use server::{WebConfig, router, serve};

/// What the lease of a session driven from a `latch serve` page says holds
/// it (the backend takes leases under this name; the page is told which
/// sessions another driver holds).
pub const WEB_SURFACE: &str = "`latch serve` (web page)";
