//! The narrow store port of agent groups. Everything the group needs from
//! durable storage goes through [`GroupPort`]: a checked commit (a claim is
//! one), append-with-delivery, the pending messages of a recipient and the
//! group log to replay. The embedded SQLite [`crate::Store`] implements it;
//! a PostgreSQL store for agents on several hosts can implement it later
//! without touching the reducers or the tools.

use super::{GroupEvent, GroupSnapshot, GroupState, TaskStatus};
use crate::event::{EventKind, StoredEvent};
use crate::store::StoreError;

/// What a commit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The sequence number of the appended event, or of the event that
    /// already says the same (an idempotent task key, a member already
    /// joined).
    pub seq: u64,
    /// False when nothing was appended because the log already says it.
    pub fresh: bool,
}

/// A message waiting for its recipient.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingMessage {
    /// The message id.
    pub message: u64,
    /// The sender.
    pub from: String,
    /// The text.
    pub text: String,
}

/// Why the group refused an operation: each names what was wrong and what
/// to do instead, in words a model can act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupRefusal {
    /// The root session has no group yet.
    #[error("session {root} has no agent group yet; the lead creates it with its first task tool")]
    NoGroup {
        /// The root session.
        root: String,
    },
    /// The acting or addressed agent is not a member.
    #[error("`{who}` is not a member of this group (members: {})", list(members))]
    NotMember {
        /// Who.
        who: String,
        /// The members' ids.
        members: Vec<String>,
    },
    /// No task has this id.
    #[error(
        "there is no task #{task} (tasks: {}); task_list shows them",
        ids(known)
    )]
    UnknownTask {
        /// The id given.
        task: u64,
        /// The tasks that exist.
        known: Vec<u64>,
    },
    /// Someone else holds the task.
    #[error(
        "task #{task} is already claimed by {holder}; pick another open task (task_list) or \
         message {holder}"
    )]
    Held {
        /// The task.
        task: u64,
        /// Its holder.
        holder: String,
    },
    /// The task is completed or failed.
    #[error("task #{task} is already {} by {by}; there is nothing left to claim", status.label())]
    Closed {
        /// The task.
        task: u64,
        /// Completed or failed.
        status: TaskStatus,
        /// Who closed it.
        by: String,
    },
    /// A dependency is not completed yet.
    #[error(
        "task #{task} waits for {}: claim it once they are completed",
        waiting.iter().map(|(id, s)| format!("#{id} ({})", s.label())).collect::<Vec<_>>().join(", ")
    )]
    Blocked {
        /// The task.
        task: u64,
        /// The dependencies not completed, with their status.
        waiting: Vec<(u64, TaskStatus)>,
    },
    /// Only the holder may release or complete a task.
    #[error("task #{task} is {}; only its holder can release or complete it", match holder {
        Some(h) => format!("held by {h}, not by you"),
        None => "not claimed: claim it first".to_string(),
    })]
    NotHolder {
        /// The task.
        task: u64,
        /// Its holder, if any.
        holder: Option<String>,
    },
    /// A dependency named at creation does not exist.
    #[error(
        "task #{dep} does not exist, so no task can depend on it (tasks: {}); create it first",
        ids(known)
    )]
    UnknownDependency {
        /// The id given.
        dep: u64,
        /// The tasks that exist.
        known: Vec<u64>,
    },
    /// A message to all with nobody else active.
    #[error("no other member is active; address a member by id instead of `all`")]
    NobodyElse,
    /// An argument is empty or malformed.
    #[error("{0}")]
    Invalid(String),
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn ids(v: &[u64]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.iter()
            .map(|i| format!("#{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A failed group operation.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// The operation was refused; nothing was written.
    #[error(transparent)]
    Refused(#[from] GroupRefusal),
    /// The store failed; nothing was written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A shared group store (another process's database, e.g. PostgreSQL
    /// for members on several hosts) could not be reached or failed; the
    /// operation may be retried and is never applied twice.
    #[error(
        "the shared group store {store} is unavailable ({detail}); the operation was not \
         applied: retry later, or check that the database is running and reachable"
    )]
    Unavailable {
        /// The store, credentials left out.
        store: String,
        /// What failed.
        detail: String,
    },
}

impl GroupError {
    /// The refusal, when this is one.
    pub fn refusal(&self) -> Option<&GroupRefusal> {
        match self {
            GroupError::Refused(r) => Some(r),
            GroupError::Store(_) | GroupError::Unavailable { .. } => None,
        }
    }
}

/// Everything agent groups need from durable storage.
pub trait GroupPort: Send + Sync {
    /// Check `event` against the group's current state and append it to
    /// the root session in one transaction, or refuse it without writing.
    ///
    /// * `Created` and `MemberJoined` are idempotent.
    /// * `MemberLeft` also releases every claim the member holds
    ///   (`TaskReleased` events in the same transaction).
    /// * `TaskCreated` with a key that exists returns the existing task.
    /// * `TaskClaimed` is the claim: the task must be open, its
    ///   dependencies completed and nobody may hold it.
    /// * `TaskReleased` and `TaskCompleted` must come from the holder.
    /// * `MessageQueued` resolves [`super::ALL`] to every other active
    ///   member; its `recipients` field is filled in here.
    /// * `MessageDelivered` is refused: deliveries go through
    ///   [`GroupPort::deliver`].
    fn commit(&self, root: &str, event: GroupEvent) -> Result<Committed, GroupError>;

    /// Claim `task` for `by` (a [`GroupPort::commit`] of `TaskClaimed`).
    fn claim(&self, root: &str, task: u64, by: &str) -> Result<Committed, GroupError> {
        self.commit(
            root,
            GroupEvent::TaskClaimed {
                task,
                by: by.to_string(),
            },
        )
    }

    /// Deliver every message pending for `recipient`, FIFO: for each, the
    /// provider-visible [`EventKind::GroupMessageDelivered`] in the
    /// recipient's own session and the `MessageDelivered` marker in the
    /// root session, all in one transaction. Returns the recipient-side
    /// events with their sequence numbers (empty when nothing waits).
    fn deliver(&self, root: &str, recipient: &str) -> Result<Vec<(u64, EventKind)>, GroupError>;

    /// The messages pending for `recipient`, FIFO.
    fn pending(&self, root: &str, recipient: &str) -> Result<Vec<PendingMessage>, GroupError>;

    /// The group events of `root` after `after`, ascending.
    fn group_log(&self, root: &str, after: u64) -> Result<Vec<StoredEvent>, GroupError>;

    /// The group state replayed from the log.
    fn replay(&self, root: &str) -> Result<GroupState, GroupError> {
        Ok(GroupState::replay(&self.group_log(root, 0)?))
    }

    /// The group state as the store's projection holds it.
    fn projection(&self, root: &str) -> Result<GroupSnapshot, GroupError>;
}
