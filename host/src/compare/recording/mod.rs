//! A recorded session tree as replay and export read it, whatever it was
//! read from: a store opened read-only ([`from_store`]) or a trace file
//! (`compare::trace`).
//!
//! Each session carries its *log*: its own events and the workspace-wide
//! events of the other sessions of its workspace (what the kernel's
//! reducers read), in sequence order. A trace does not carry the content
//! of the events engines never see; they stay in the log as
//! [`Recorded::Hidden`], so the counts engines see stay right.

mod from_store;
mod moments;

pub use from_store::{from_store, open_session};
pub use moments::{CompactPoint, Moment, RecordedUsage, RequestPoint, moments};

use latch_engine_sdk::types::{MediaRef, ModelProfile, Part};
use latch_kernel::EventKind;
use std::collections::BTreeMap;

/// One event of a recorded log.
#[derive(Clone, Debug, PartialEq)]
pub struct Logged {
    /// Its sequence number in the recording.
    pub seq: u64,
    /// The session it belongs to.
    pub session: String,
    /// When it was committed (milliseconds since the Unix epoch).
    pub time_ms: u64,
    /// The event.
    pub event: Recorded,
}

/// A recorded event, or the trace of one whose content is not carried.
/// Almost every event carries its content, so it is not boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Recorded {
    /// An event with its content.
    Event(EventKind),
    /// An engine-hidden event whose content the source does not carry: its
    /// kind name only.
    Hidden(String),
}

impl Recorded {
    /// The event's kind name.
    pub fn kind_name(&self) -> &str {
        match self {
            Recorded::Event(e) => e.kind_name(),
            Recorded::Hidden(k) => k,
        }
    }

    /// The event, when its content is carried.
    pub fn event(&self) -> Option<&EventKind> {
        match self {
            Recorded::Event(e) => Some(e),
            Recorded::Hidden(_) => None,
        }
    }
}

/// One recorded session.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedSession {
    /// Its id.
    pub id: String,
    /// Its parent, for a child agent.
    pub parent: Option<String>,
    /// Its workspace.
    pub workspace: String,
    /// The model profile it was created with.
    pub model: ModelProfile,
    /// Its own events and the workspace-wide events of the other sessions
    /// of its workspace, ascending.
    pub log: Vec<Logged>,
}

impl RecordedSession {
    /// The session's own events with content, in order.
    pub fn own_events(&self) -> impl Iterator<Item = (&Logged, &EventKind)> {
        self.log
            .iter()
            .filter(|l| l.session == self.id)
            .filter_map(|l| l.event.event().map(|e| (l, e)))
    }
}

/// A recorded session and (with `--tree`) its descendants.
#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    /// Where it was read from: `store PATH` or `trace FILE`.
    pub source: String,
    /// True when file contents and command output were replaced by
    /// same-length placeholders.
    pub redacted: bool,
    /// The sessions, the root first, then descendants in creation order.
    pub sessions: Vec<RecordedSession>,
    /// Metadata of the artifacts (images) the events cite, by SHA-256.
    pub artifacts: BTreeMap<String, MediaRef>,
}

/// The media references of an event's parts (user images, tool-result
/// images).
pub fn media_of(event: &EventKind) -> Vec<&MediaRef> {
    let parts: &[Part] = match event {
        EventKind::UserMessage { parts } | EventKind::AssistantMessage { parts } => parts,
        EventKind::ToolResult(r) => return r.images.iter().collect(),
        _ => return Vec::new(),
    };
    parts
        .iter()
        .flat_map(|p| match p {
            Part::Image(m) => vec![m],
            Part::ToolResult(r) => r.images.iter().collect(),
            _ => vec![],
        })
        .collect()
}
