//! `latch-tui`: Latch's terminal UI on ratatui + crossterm.
//!
//! The screen is a pure function of [`UiState`]: the shared
//! [`latch_surface::Surface`] (transcript, task state, usage, phases,
//! children, GROUP) plus UI-only state (composer, scroll, popups). The
//! session side sends [`Input`]s (committed events, deltas, reports); the
//! screen sends [`Command`]s back (submit, steer, interrupt, slash
//! commands). Nothing in this crate touches the store, an engine or a
//! provider.
//!
//! * [`event`] — the bus: [`Input`] and [`Command`].
//! * [`state`] — [`UiState`] and how inputs change it.
//! * [`composer`] — the multi-line input editor with history.
//! * [`keys`] — keys and paste → state changes and commands.
//! * [`log_sink`] — log lines to `.latch/latch.log` and the status line
//!   while the screen is up, never across it.
//! * [`widgets`] — the renderers: transcript, sidebar, input, status line,
//!   overlays, the workspace-trust modal; [`draw`] lays them out.
//! * [`app`] — the terminal loop ([`run`]) and the trust question before a
//!   session ([`ask_trust`]), the only I/O.

#![warn(missing_docs)]

pub mod app;
pub mod composer;
pub mod event;
pub mod keys;
pub mod log_sink;
pub mod state;
pub mod widgets;

pub use app::{KeySource, Questions, ask_trust, run, run_loop};
pub use event::{Command, Input, PermissionAnswer};
/// The terminal library the keys come from (its key types drive
/// [`keys::on_key`]).
pub use ratatui::crossterm;
pub use state::{Popup, UiState};
pub use widgets::trust::TrustQuestion;
pub use widgets::{draw, snapshot};
