//! The port between the web surface and the agent: what the binary supplies.
//!
//! The binary implements [`Backend`] with the same agent and supervisor API
//! the CLI uses (`host/src/cli/serve_cmd.rs`). Every method that runs the
//! agent blocks; the server calls them on blocking threads, never on a
//! request's task, so closing a page never cancels a run.

use crate::approvals::Approvals;
use latch_engine_sdk::types::{ContextReport, Event};
use latch_kernel::group::GroupPort;
use latch_kernel::{RewindPlan, SessionRecord, Store};
use latch_surface::Delta;
use std::sync::Arc;

/// What a running command reports as it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    /// A durable event with this sequence number was committed.
    Committed(u64),
    /// A transient signal (streamed text, reasoning reported, a retry).
    Delta(Delta),
}

/// Why a backend command failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// No such session in this workspace.
    #[error("no session `{0}` in this workspace; list them with GET /api/sessions")]
    NotFound(String),
    /// The request itself was wrong.
    #[error("{0}")]
    BadRequest(String),
    /// The agent, engine, provider or store failed.
    #[error("{0}")]
    Failed(String),
    /// The user interrupted the turn (it committed `run_interrupted`).
    #[error("{0}")]
    Interrupted(String),
    /// Another process (or another holder in this one) drives the session:
    /// the message names it. The page can still view the session.
    #[error("{0}")]
    InUse(String),
}

/// An image the page sent with a message: its file name (for messages
/// about it) and its bytes, unchecked until [`Backend::check_image`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// The file's name as the browser gave it.
    pub name: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// Where a session's agent group lives: what the group route, the GROUP
/// block and the event stream's `group` wake-ups read.
#[derive(Clone)]
pub struct GroupHome {
    /// The group's store.
    pub port: Arc<dyn GroupPort>,
    /// The group's id: its lead's session.
    pub root: String,
    /// True for a shared store: the group's events are not in this host's
    /// log, so the block is read from the port (and follows its changes).
    pub shared: bool,
}

impl GroupHome {
    /// The local store, the group of `session`'s root.
    pub fn local(store: Arc<Store>, session: &SessionRecord) -> GroupHome {
        GroupHome {
            port: store,
            root: session.parent.clone().unwrap_or_else(|| session.id.clone()),
            shared: false,
        }
    }
}

/// The sink a command reports its signals to.
pub type Sink<'a> = &'a mut (dyn FnMut(Signal) + Send);

/// What `latch serve` supplies: one workspace's store and its sessions'
/// agents. Methods that take a session id run on that session's agent.
pub trait Backend: Send + Sync + 'static {
    /// The event store.
    fn store(&self) -> &Arc<Store>;
    /// The workspace key sessions are stored under.
    fn workspace(&self) -> &str;
    /// Where `session`'s agent group lives. By default the local store.
    fn group_home(&self, session: &SessionRecord) -> GroupHome {
        GroupHome::local(self.store().clone(), session)
    }
    /// Create a new root session.
    fn create_session(&self) -> Result<SessionRecord, BackendError>;
    /// Take the session to drive it from this server (blocking): refused
    /// with [`BackendError::InUse`] while another driver holds it, so a
    /// message is refused before it is accepted. By default nothing is
    /// held.
    fn drive(&self, _session: &str) -> Result<(), BackendError> {
        Ok(())
    }
    /// The workspace's custom slash commands as `(usage, help)`, for the
    /// page's `/help` and completion (the turn expands them). None by
    /// default.
    fn commands(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Run one turn with the user's `text` (blocking).
    fn run_turn(&self, session: &str, text: &str, on: Sink<'_>) -> Result<(), BackendError>;
    /// Check an uploaded image as `latch run --image` checks a file
    /// (format, size): `Err(BadRequest)` says what is wrong with it. By
    /// default no image is accepted.
    fn check_image(&self, image: &Upload) -> Result<(), BackendError> {
        Err(BackendError::BadRequest(format!(
            "{}: this server does not take images",
            image.name
        )))
    }
    /// Run one turn whose user message carries `images` (checked with
    /// [`Backend::check_image`]) after its text. Without images it is
    /// [`Backend::run_turn`]; by default images are refused.
    fn run_turn_with_images(
        &self,
        session: &str,
        text: &str,
        images: &[Upload],
        on: Sink<'_>,
    ) -> Result<(), BackendError> {
        match images.first() {
            None => self.run_turn(session, text, on),
            Some(image) => self.check_image(image),
        }
    }
    /// What a rewind of the session's files to before the user message
    /// `to_seq` would do now (nothing is changed): the files restored or
    /// removed, and those changed outside Latch that it would leave alone.
    fn rewind_plan(&self, _session: &str, _to_seq: u64) -> Result<RewindPlan, BackendError> {
        Err(BackendError::BadRequest(
            "this server cannot rewind files; use `latch rewind`".into(),
        ))
    }
    /// Rewind the session's files to before the user message `to_seq` as
    /// `/rewind` does (blocking; the session's driver): new durable events,
    /// files changed outside Latch left alone and listed in the plan.
    fn rewind(
        &self,
        _session: &str,
        _to_seq: u64,
        _on: Sink<'_>,
    ) -> Result<RewindPlan, BackendError> {
        Err(BackendError::BadRequest(
            "this server cannot rewind files; use `latch rewind`".into(),
        ))
    }
    /// Switch the session's mode (`plan`, or an approval mode's name:
    /// `edits`, `on-request`, `untrusted`, `never`) as Shift+Tab and
    /// `/plan` do: the agent records it first. Returns the mode's label
    /// (`plan`, `edits`, `auto`, ...). By default the mode cannot change.
    fn switch_mode(
        &self,
        _session: &str,
        _mode: &str,
        _on: Sink<'_>,
    ) -> Result<String, BackendError> {
        Err(BackendError::BadRequest(
            "this server cannot switch modes; use the terminal's Shift+Tab or /plan".into(),
        ))
    }
    /// The agents users defined, as the lines `latch agents` prints. None
    /// by default.
    fn agents(&self) -> Vec<String> {
        Vec::new()
    }
    /// Resume the session in this process: settle what an earlier process
    /// left and mark an interrupted run interrupted. Returns the repair
    /// events appended.
    fn resume(&self, session: &str, on: Sink<'_>) -> Result<usize, BackendError>;
    /// `/compact`. Returns the kernel-context entries persisted.
    fn compact(&self, session: &str, on: Sink<'_>) -> Result<usize, BackendError>;
    /// The `/context` report for the next request.
    fn context_report(&self, session: &str) -> Result<ContextReport, BackendError>;
    /// Recall original events for a query through the engine.
    fn recall(&self, session: &str, query: &str, limit: u32) -> Result<Vec<Event>, BackendError>;
    /// Stop the session's running turn at once (not blocking): the stream
    /// in flight is dropped, a permission wait ends denied, and the turn
    /// commits `RunInterrupted` as it returns.
    fn interrupt(&self, session: &str) -> Result<(), BackendError>;
    /// Where the page's answers to permission requests go: the session's
    /// decision port waits on it.
    fn approvals(&self) -> &Approvals;
    /// Queue `text` for the session's running turn, delivered at its next
    /// safe boundary (or as the next turn when the turn ends first), as the
    /// terminal does. False when this backend cannot queue (the server
    /// then refuses the message while a turn runs).
    fn steer(&self, _session: &str, _text: &str) -> bool {
        false
    }
    /// Take the queued messages the session's turn did not deliver (it was
    /// interrupted): they go back to the page's input.
    fn unsent(&self, _session: &str) -> Vec<String> {
        Vec::new()
    }
    /// Whether a turn can start: `Ok` with the provider and model new
    /// sessions use, or `Err` with why not and how to fix it. History is
    /// browsable either way.
    fn provider(&self) -> Result<String, String> {
        Ok("configured".into())
    }
    /// The prices the sidebar's cost is computed with (default: the
    /// built-in list prices).
    fn prices(&self) -> latch_surface::PriceTable {
        latch_surface::PriceTable::builtin()
    }
}
