//! Agent groups as data: the group events ([`GroupEvent`]), the pure
//! reducer [`GroupState`] of a root session's group log, the comparable
//! [`GroupSnapshot`] that the SQLite projection must equal, the
//! presentation reducer behind `/group`, `latch group` and the sidebar
//! GROUP block ([`present`]), the narrow store port ([`GroupPort`])
//! through which everything reaches the store, the one commit check
//! every backend runs over the facts it loads — fencing by epoch and the
//! removal of members whose leases expired included ([`check`]) — and
//! member leases as data ([`lease`]).
//!
//! Every group fact is an event in the root session, so tasks, claims,
//! membership and pending messages are reductions of the log: applying the
//! events one by one equals replaying them (pinned by the tests), and the
//! store's projection tables are a cache rebuilt from them at open.

pub mod check;
mod event;
pub mod lease;
mod port;
pub mod present;
#[cfg(test)]
mod tests;

pub use event::{ALL, GroupEvent, delivery_text};
pub use lease::{LeaseWatch, MemberLease, Membership};
pub use port::{
    Commit, Committed, GroupError, GroupPort, GroupRefusal, PendingMessage, new_commit_id,
};

use crate::event::{EventKind, StoredEvent};
use std::collections::BTreeMap;

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TaskStatus {
    /// Nobody holds it.
    Open,
    /// A member holds it.
    Claimed,
    /// Its holder completed it.
    Completed,
    /// Its holder gave it up as failed.
    Failed,
}

impl TaskStatus {
    /// The stable name (also the projection's `status` column).
    pub fn label(self) -> &'static str {
        match self {
            TaskStatus::Open => "open",
            TaskStatus::Claimed => "claimed",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
        }
    }

    /// The status named by [`TaskStatus::label`].
    pub fn from_label(label: &str) -> Option<TaskStatus> {
        Some(match label {
            "open" => TaskStatus::Open,
            "claimed" => TaskStatus::Claimed,
            "completed" => TaskStatus::Completed,
            "failed" => TaskStatus::Failed,
            _ => return None,
        })
    }
}

/// One task of the list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    /// Its id (the sequence number of its creation).
    pub id: u64,
    /// Title.
    pub title: String,
    /// Description.
    pub description: String,
    /// Tasks that must be completed first, ascending.
    pub depends_on: Vec<u64>,
    /// Idempotency key.
    pub key: Option<String>,
    /// Status.
    pub status: TaskStatus,
    /// The holder (claimed), or who completed or failed it.
    pub owner: Option<String>,
    /// The result of a completed or failed task.
    pub result: Option<String>,
}

/// One member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its session id.
    pub id: String,
    /// Its role.
    pub role: String,
    /// False once it left (until it rejoins).
    pub active: bool,
    /// Its membership epoch: the sequence number of its latest join.
    pub epoch: u64,
    /// Why it left, while it is away.
    pub left_reason: Option<String>,
    /// Commit time of the latest group event it caused (ms since the epoch).
    pub last_activity_ms: u64,
}

/// A message waiting for its recipient's next safe boundary.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pending {
    /// The recipient.
    pub to: String,
    /// The message id.
    pub message: u64,
    /// The sender.
    pub from: String,
    /// The text.
    pub text: String,
}

/// The durable group state as plain, comparable data: what the reducer and
/// the SQLite projection must agree on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// True once the group was created.
    pub created: bool,
    /// Members by id: `(role, active)`.
    pub members: BTreeMap<String, (String, bool)>,
    /// Tasks by id.
    pub tasks: BTreeMap<u64, Task>,
    /// Pending deliveries, ordered by recipient then message (FIFO).
    pub pending: Vec<Pending>,
    /// Deliveries made so far.
    pub delivered: u64,
}

/// The reducer of one root session's group log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupState {
    lead: Option<String>,
    members: BTreeMap<String, Member>,
    tasks: BTreeMap<u64, Task>,
    /// recipient → message id → (from, text).
    pending: BTreeMap<String, BTreeMap<u64, (String, String)>>,
    delivered: u64,
    last_activity_ms: u64,
    watermark: u64,
}

impl GroupState {
    /// The state of a log, replayed from the start.
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a StoredEvent>) -> GroupState {
        let mut state = GroupState::default();
        for e in events {
            state.apply(e);
        }
        state
    }

    /// The highest sequence number applied.
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// Apply one event of the root session's log (other kinds are ignored,
    /// and an event at or below the watermark is applied only once).
    ///
    /// The log holds only events the store checked, but the reducer does
    /// not trust that: a claim of a task that is not open, a release or
    /// completion of a task that is not claimed, change nothing, exactly
    /// as in the projection.
    pub fn apply(&mut self, event: &StoredEvent) {
        if event.seq <= self.watermark {
            return;
        }
        self.watermark = event.seq;
        let EventKind::Group(g) = &event.kind else {
            return;
        };
        self.last_activity_ms = self.last_activity_ms.max(event.time_ms);
        let touch = |members: &mut BTreeMap<String, Member>, who: &str| {
            if let Some(m) = members.get_mut(who) {
                m.last_activity_ms = m.last_activity_ms.max(event.time_ms);
            }
        };
        match g {
            GroupEvent::Created { lead } => {
                self.lead.get_or_insert_with(|| lead.clone());
            }
            GroupEvent::MemberJoined { member, role } => {
                let m = self.members.entry(member.clone()).or_insert(Member {
                    id: member.clone(),
                    role: role.clone(),
                    active: true,
                    epoch: event.seq,
                    left_reason: None,
                    last_activity_ms: 0,
                });
                m.epoch = event.seq;
                m.role = role.clone();
                m.active = true;
                m.left_reason = None;
                touch(&mut self.members, member);
            }
            GroupEvent::MemberLeft { member, reason, .. } => {
                if let Some(m) = self.members.get_mut(member) {
                    m.active = false;
                    m.left_reason = Some(reason.clone());
                }
                touch(&mut self.members, member);
            }
            GroupEvent::TaskCreated {
                title,
                description,
                depends_on,
                key,
                by,
            } => {
                let mut deps = depends_on.clone();
                deps.sort_unstable();
                deps.dedup();
                self.tasks.insert(
                    event.seq,
                    Task {
                        id: event.seq,
                        title: title.clone(),
                        description: description.clone(),
                        depends_on: deps,
                        key: key.clone(),
                        status: TaskStatus::Open,
                        owner: None,
                        result: None,
                    },
                );
                touch(&mut self.members, by);
            }
            GroupEvent::TaskClaimed { task, by, .. } => {
                if let Some(t) = self.tasks.get_mut(task)
                    && t.status == TaskStatus::Open
                {
                    t.status = TaskStatus::Claimed;
                    t.owner = Some(by.clone());
                }
                touch(&mut self.members, by);
            }
            GroupEvent::TaskReleased { task, by, .. } => {
                if let Some(t) = self.tasks.get_mut(task)
                    && t.status == TaskStatus::Claimed
                {
                    t.status = TaskStatus::Open;
                    t.owner = None;
                }
                touch(&mut self.members, by);
            }
            GroupEvent::TaskCompleted {
                task,
                by,
                ok,
                result,
            } => {
                if let Some(t) = self.tasks.get_mut(task)
                    && t.status == TaskStatus::Claimed
                {
                    t.status = if *ok {
                        TaskStatus::Completed
                    } else {
                        TaskStatus::Failed
                    };
                    t.owner = Some(by.clone());
                    t.result = Some(result.clone());
                }
                touch(&mut self.members, by);
            }
            GroupEvent::MessageQueued {
                from,
                recipients,
                text,
                ..
            } => {
                for r in recipients {
                    self.pending
                        .entry(r.clone())
                        .or_default()
                        .insert(event.seq, (from.clone(), text.clone()));
                }
                touch(&mut self.members, from);
            }
            GroupEvent::MessageDelivered { message, to } => {
                if let Some(q) = self.pending.get_mut(to)
                    && q.remove(message).is_some()
                {
                    self.delivered += 1;
                    if q.is_empty() {
                        self.pending.remove(to);
                    }
                }
            }
        }
    }

    /// True once the group was created.
    pub fn exists(&self) -> bool {
        self.lead.is_some()
    }

    /// The root session, once the group exists.
    pub fn lead(&self) -> Option<&str> {
        self.lead.as_deref()
    }

    /// Members by id.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    /// One member.
    pub fn member(&self, id: &str) -> Option<&Member> {
        self.members.get(id)
    }

    /// Tasks in creation order.
    pub fn tasks(&self) -> impl Iterator<Item = &Task> {
        self.tasks.values()
    }

    /// One task.
    pub fn task(&self, id: u64) -> Option<&Task> {
        self.tasks.get(&id)
    }

    /// Messages waiting for `member`, FIFO: `(message id, from, text)`.
    pub fn pending_for(&self, member: &str) -> Vec<(u64, &str, &str)> {
        self.pending
            .get(member)
            .into_iter()
            .flatten()
            .map(|(id, (from, text))| (*id, from.as_str(), text.as_str()))
            .collect()
    }

    /// Deliveries made so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Commit time of the latest group event (ms since the epoch).
    pub fn last_activity_ms(&self) -> u64 {
        self.last_activity_ms
    }

    /// The comparable durable state.
    pub fn snapshot(&self) -> GroupSnapshot {
        GroupSnapshot {
            created: self.exists(),
            members: self
                .members
                .values()
                .map(|m| (m.id.clone(), (m.role.clone(), m.active)))
                .collect(),
            tasks: self.tasks.clone(),
            pending: self
                .pending
                .iter()
                .flat_map(|(to, q)| {
                    q.iter().map(move |(id, (from, text))| Pending {
                        to: to.clone(),
                        message: *id,
                        from: from.clone(),
                        text: text.clone(),
                    })
                })
                .collect(),
            delivered: self.delivered,
        }
    }
}
