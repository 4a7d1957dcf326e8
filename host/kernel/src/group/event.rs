//! The group events: what an agent group records in its root session
//! ([`crate::EventKind::Group`]). Task and message ids are the sequence
//! numbers of the events that created them, so they are unique, ordered and
//! never reassigned by a replay.

use serde::{Deserialize, Serialize};

/// The recipient name that addresses every other active member.
pub const ALL: &str = "all";

/// One group coordination fact, stored in the root session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum GroupEvent {
    /// The group of a root session exists; `lead` is the root session.
    Created {
        /// The root session id.
        lead: String,
    },
    /// A member (the root or one of its children) joined or rejoined.
    MemberJoined {
        /// The member's session id.
        member: String,
        /// Its role (`lead` for the root).
        role: String,
    },
    /// A member stopped running (finished, failed, interrupted), its lease
    /// expired, or the lead's operator evicted it. Its claims are released
    /// by [`GroupEvent::TaskReleased`] events in the same transaction.
    MemberLeft {
        /// The member's session id.
        member: String,
        /// Why, e.g. `finished`, `interrupted`, `lease expired (…)`.
        reason: String,
        /// Who removed it when it did not leave by itself (`latch group
        /// evict`: the operator and host); `None` when it left, or its
        /// lease expired.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        forced_by: Option<String>,
    },
    /// A task joined the list; its id is this event's sequence number.
    TaskCreated {
        /// Short title.
        title: String,
        /// What to do.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        description: String,
        /// Tasks that must be completed before this one can be claimed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        depends_on: Vec<u64>,
        /// An idempotency key: creating a task with a key that exists
        /// returns the existing task instead.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// The member that created it.
        by: String,
    },
    /// A member claimed an open task whose dependencies are completed.
    TaskClaimed {
        /// The task id.
        task: u64,
        /// The new holder.
        by: String,
        /// The holder's membership epoch (the sequence number of the join
        /// that made it active): its completion or release must come from
        /// the same membership. `None` for a claim committed without one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        epoch: Option<u64>,
    },
    /// A claim was given up (by its holder, by the supervisor for a holder
    /// that no longer runs, or by the lead's operator); the task is open
    /// again.
    TaskReleased {
        /// The task id.
        task: u64,
        /// The former holder.
        by: String,
        /// Why.
        reason: String,
        /// Who released it on the holder's behalf (`latch group release`:
        /// the operator and host); `None` when the holder or its leaving
        /// released it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        forced_by: Option<String>,
    },
    /// The holder finished a task: completed (`ok`) or failed.
    TaskCompleted {
        /// The task id.
        task: u64,
        /// The holder.
        by: String,
        /// True for completed, false for failed.
        ok: bool,
        /// A short result.
        result: String,
    },
    /// Information queued for one member or all; its id is this event's
    /// sequence number. `recipients` is resolved when it is queued, so a
    /// replay never depends on later membership.
    MessageQueued {
        /// The sender's session id.
        from: String,
        /// What the sender addressed: a member id or [`ALL`].
        to: String,
        /// The members it goes to.
        recipients: Vec<String>,
        /// The text.
        text: String,
    },
    /// The delivery marker: the message reached `to` at a safe boundary
    /// (its [`crate::EventKind::GroupMessageDelivered`] is in `to`'s
    /// session, committed in the same transaction).
    MessageDelivered {
        /// The message id.
        message: u64,
        /// The recipient.
        to: String,
    },
}

impl GroupEvent {
    /// One line for the kernel note and recall.
    pub fn summary(&self) -> String {
        match self {
            GroupEvent::Created { lead } => format!("group of {lead} created"),
            GroupEvent::MemberJoined { member, role } => format!("{member} ({role}) joined"),
            GroupEvent::MemberLeft {
                member,
                reason,
                forced_by: None,
            } => format!("{member} left ({reason})"),
            GroupEvent::MemberLeft {
                member,
                reason,
                forced_by: Some(who),
            } => format!("{member} evicted by {who} ({reason})"),
            GroupEvent::TaskCreated { title, by, .. } => format!("task created by {by}: {title}"),
            GroupEvent::TaskClaimed { task, by, .. } => format!("task #{task} claimed by {by}"),
            GroupEvent::TaskReleased {
                task,
                by,
                reason,
                forced_by: None,
            } => format!("task #{task} released by {by} ({reason})"),
            GroupEvent::TaskReleased {
                task,
                by,
                reason,
                forced_by: Some(who),
            } => format!("task #{task} of {by} released by {who} ({reason})"),
            GroupEvent::TaskCompleted { task, by, ok, .. } => format!(
                "task #{task} {} by {by}",
                if *ok { "completed" } else { "failed" }
            ),
            GroupEvent::MessageQueued { from, to, .. } => format!("message from {from} to {to}"),
            GroupEvent::MessageDelivered { message, to } => {
                format!("message #{message} delivered to {to}")
            }
        }
    }
}

/// The provider-visible text of a delivered group message: one compact
/// user-role observation, marked as information from another agent.
pub fn delivery_text(from: &str, from_role: &str, text: &str) -> String {
    format!("[Latch] Group message from {from} ({from_role}), information only:\n{text}")
}
