//! The narrow store port of agent groups. Everything the group needs from
//! durable storage goes through [`GroupPort`]: a checked commit (a claim is
//! one) carrying the acting member's epoch and a client-generated commit
//! id ([`Commit`]), joining with a lease ([`GroupPort::join`]),
//! append-with-delivery, the pending messages of a recipient and the group
//! log to replay. The embedded SQLite [`crate::Store`] implements it for one
//! machine; `latch-group-pg` implements it on PostgreSQL for members on
//! several hosts, with member leases.

use super::lease::{MemberLease, Membership};
use super::{GroupEvent, GroupSnapshot, GroupState, TaskStatus};
use crate::event::{EventKind, StoredEvent};
use crate::store::StoreError;
use std::time::{Duration, Instant};

/// One commit as a member sends it: the event, the acting member's
/// membership epoch (fencing: a request from an epoch that is not the
/// member's current one is refused with [`GroupRefusal::Fenced`]) and a
/// client-generated id (exactly once: a commit retried with the id of one
/// that was applied returns that first result and appends nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    /// What to commit.
    pub event: GroupEvent,
    /// The acting member's epoch; `None` commits without fencing (the
    /// supervisor's own membership changes, the operator's escape hatch).
    pub epoch: Option<u64>,
    /// The commit id; `None` lets the store make one (a store that retries
    /// by itself after a lost reply still applies the commit once).
    pub id: Option<String>,
}

impl Commit {
    /// A commit of `event` without an epoch or an id.
    pub fn new(event: GroupEvent) -> Commit {
        Commit {
            event,
            epoch: None,
            id: None,
        }
    }

    /// The same commit made by the member at `epoch`.
    pub fn by_epoch(mut self, epoch: u64) -> Commit {
        self.epoch = Some(epoch);
        self
    }

    /// The same commit under the client-generated `id`.
    pub fn with_id(mut self, id: impl Into<String>) -> Commit {
        self.id = Some(id.into());
        self
    }
}

/// A fresh random commit id (128 bits, hex).
pub fn new_commit_id() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(32);
    for salt in 0..2u64 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.write_u32(std::process::id());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

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
    /// The request comes from a membership that is over: the member left
    /// (its lease expired, it was evicted, it stopped) or rejoined since.
    #[error("{}", fenced(member, *epoch, *current, reason.as_deref()))]
    Fenced {
        /// The member.
        member: String,
        /// The epoch the request carried.
        epoch: u64,
        /// The member's current epoch while it is active.
        current: Option<u64>,
        /// Why it left, while it is away.
        reason: Option<String>,
    },
    /// The operator's release of a task nobody holds.
    #[error("task #{task} is {}: there is no claim to release", status.label())]
    NotClaimed {
        /// The task.
        task: u64,
        /// Its status.
        status: TaskStatus,
    },
    /// An argument is empty or malformed.
    #[error("{0}")]
    Invalid(String),
}

fn fenced(member: &str, epoch: u64, current: Option<u64>, reason: Option<&str>) -> String {
    match current {
        Some(now) => format!(
            "this request comes from {member}'s membership epoch {epoch}, but {member} rejoined \
             the group since (epoch {now}): a stale membership cannot claim, complete, release \
             or message, and nothing was applied"
        ),
        None => format!(
            "{member} is no longer a member of this group ({}): this request from its \
             membership epoch {epoch} was refused and nothing was applied; its claims were \
             released for others to take. It rejoins at its next turn",
            match reason {
                Some(r) => format!("it left: {r}"),
                None => "it never joined".to_string(),
            }
        ),
    }
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
    /// for members on several hosts) could not be reached or failed before
    /// the commit was sent: nothing was applied.
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
    /// The store stopped answering after the commit was sent and did not
    /// answer again within the operation's deadline: the commit may have
    /// been applied. Retried with the same commit id it is applied once.
    #[error(
        "the shared group store {store} stopped answering after this request was sent \
         ({detail}), so it may or may not have been applied; repeating the same call is safe: \
         the store recognises it (commit {commit}) and answers with its first result"
    )]
    Uncertain {
        /// The store, credentials left out.
        store: String,
        /// What failed.
        detail: String,
        /// The commit id to retry with.
        commit: String,
    },
    /// The caller stopped waiting (the user interrupted the turn).
    #[error("interrupted while waiting for the group store{}", match commit {
        Some(id) => format!(
            "; the request may still be applied (commit {id}): repeating the same call is \
             safe and answers with its result"
        ),
        None => String::new(),
    })]
    Interrupted {
        /// The commit id to retry with, when a commit was waited for.
        commit: Option<String>,
    },
}

impl GroupError {
    /// The refusal, when this is one.
    pub fn refusal(&self) -> Option<&GroupRefusal> {
        match self {
            GroupError::Refused(r) => Some(r),
            _ => None,
        }
    }

    /// True when the commit may have been applied (retry with its id).
    pub fn uncertain(&self) -> bool {
        matches!(
            self,
            GroupError::Uncertain { .. } | GroupError::Interrupted { commit: Some(_) }
        )
    }
}

/// Everything agent groups need from durable storage.
pub trait GroupPort: Send + Sync {
    /// Check `commit.event` against the group's current state (the kernel's
    /// one check, [`super::check`]) and append it to the root session in
    /// one transaction, or refuse it without writing.
    ///
    /// * A commit whose id was applied before returns that first result.
    /// * With an epoch, the acting member must be active in that epoch
    ///   ([`GroupRefusal::Fenced`] otherwise); a leave from an epoch that
    ///   is over is a no-op.
    /// * `Created` and `MemberJoined` are idempotent.
    /// * `MemberLeft` also releases every claim the member holds
    ///   (`TaskReleased` events in the same transaction).
    /// * `TaskCreated` with a key that exists returns the existing task.
    /// * `TaskClaimed` is the claim: the task must be open, its
    ///   dependencies completed and nobody may hold it.
    /// * `TaskReleased` and `TaskCompleted` must come from the holder,
    ///   except a release with `forced_by` (the operator's).
    /// * `MessageQueued` resolves [`super::ALL`] to every other active
    ///   member; its `recipients` field is filled in here.
    /// * `MessageDelivered` is refused: deliveries go through
    ///   [`GroupPort::deliver`].
    /// * A store with member leases first removes the members whose
    ///   leases expired, with the same commit.
    fn submit(&self, root: &str, commit: Commit) -> Result<Committed, GroupError>;

    /// [`GroupPort::submit`] of `event` without an epoch or an id.
    fn commit(&self, root: &str, event: GroupEvent) -> Result<Committed, GroupError> {
        self.submit(root, Commit::new(event))
    }

    /// Claim `task` for `by` (a [`GroupPort::commit`] of `TaskClaimed`).
    fn claim(&self, root: &str, task: u64, by: &str) -> Result<Committed, GroupError> {
        self.commit(
            root,
            GroupEvent::TaskClaimed {
                task,
                by: by.to_string(),
                epoch: None,
            },
        )
    }

    /// `member` joins (or is already active in) `root`'s group as `role`:
    /// its epoch, and on a store with member leases the lease this process
    /// now renews for it (lost when the store removes the member or the
    /// renewals stop reaching it). Without leases, [`Membership::lease`]
    /// is `None`.
    fn join(&self, root: &str, member: &str, role: &str) -> Result<Membership, GroupError> {
        let c = self.commit(
            root,
            GroupEvent::MemberJoined {
                member: member.to_string(),
                role: role.to_string(),
            },
        )?;
        Ok(Membership {
            epoch: c.seq,
            lease: None,
        })
    }

    /// The member leases of `root`'s group as the store's clock sees them;
    /// `None` for a store without leases (one machine, where the
    /// supervisor knows which members run).
    fn leases(&self, _root: &str) -> Result<Option<Vec<MemberLease>>, GroupError> {
        Ok(None)
    }

    /// Wait until `root`'s group log has events after `after` (true), the
    /// `timeout` passes or `stop` says so (false). A shared store wakes on
    /// its notifications; by default the log is read every 100 ms.
    fn wait_for_log(
        &self,
        root: &str,
        after: u64,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<bool, GroupError> {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.group_log(root, after)?.is_empty() {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || stop() {
                return Ok(false);
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
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
