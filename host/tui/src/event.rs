//! The UI's one message bus: [`Input`] flows from the session to the
//! screen, [`Command`] from the screen to the session. Widgets and key
//! handling only ever produce [`Command`]s; they never call the agent.

use latch_engine_sdk::types::ContextReport;
use latch_kernel::StoredEvent;
use latch_surface::{Delta, GroupView, PermissionPrompt};

/// What the session side tells the screen.
#[derive(Clone, Debug)]
pub enum Input {
    /// Durable events committed since the last batch, in sequence order.
    Events(Vec<StoredEvent>),
    /// A transient provider signal.
    Delta(Delta),
    /// The session started a turn on its own (a message queued while the
    /// last turn ran, which its end did not deliver).
    TurnStarted,
    /// The running turn ended (`error` when it failed or was interrupted).
    TurnEnded {
        /// Why it did not complete, if it did not.
        error: Option<String>,
    },
    /// A `/context` report (also fills the sidebar's context figures).
    Report(ContextReport),
    /// A text to show in a popup (`/recall` results, `/sessions`, `/group`).
    Popup {
        /// The popup's title.
        title: String,
        /// Its lines.
        lines: Vec<String>,
    },
    /// A one-line notice for the status line.
    Notice(String),
    /// The images attached to the next message, as chips for the input
    /// box (`[image 1: 800×600 png]`); replaces the chips shown.
    Attachments(Vec<String>),
    /// Steering messages an interrupt left undelivered: back to the
    /// composer.
    Unsent(Vec<String>),
    /// The GROUP block (filled by the groups feature).
    Group(Option<GroupView>),
    /// A permission prompt set by hand (the log's own requests fill the
    /// modal as they commit).
    Permission(Option<PermissionPrompt>),
}

/// The user's answer to a permission prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PermissionAnswer {
    /// Allow this once (`y`).
    Allow,
    /// Deny (`n`, or `r` and a reason the model reads).
    Deny(Option<String>),
    /// Allow this and the same command (or path) for the rest of the
    /// session (`a`).
    Always,
    /// Approve the plan and act under the approval mode named (`e`:
    /// `edits`, `a`: `on-request`); `y` approves keeping the session's.
    Approve(String),
}

/// What the screen asks of the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Start a turn with this message.
    Submit(String),
    /// Queue this message for the running turn's next safe boundary.
    Steer(String),
    /// Stop the running turn now.
    Interrupt,
    /// `/compact`.
    Compact,
    /// `/context`.
    Context,
    /// `/recall <query>`.
    Recall(String),
    /// `/group`.
    Group,
    /// `/rewind` (list) or `/rewind SEQ`.
    Rewind(Option<u64>),
    /// `/image PATH`.
    Image(String),
    /// Ctrl-V (or Alt-V): attach the image on the system clipboard.
    PasteImage,
    /// `/export` or `/export PATH`.
    Export(Option<String>),
    /// `/sessions`.
    Sessions,
    /// `/agents`: the agents users defined.
    Agents,
    /// Shift+Tab: the next mode (plan → edits → auto → plan).
    CycleMode,
    /// `/plan`: plan mode on, or off again.
    TogglePlan,
    /// Answer the permission prompt of a tool call.
    Permission {
        /// The call the prompt is about (an answer for another call is
        /// stale and ignored).
        call_id: String,
        /// The answer.
        answer: PermissionAnswer,
    },
    /// Leave.
    Exit,
}
