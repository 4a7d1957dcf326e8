//! Child agents as data: the [`AgentReport`] a finished child hands back, and
//! [`AgentTree`], the pure reducer of one parent's agent log (spawns, resumes,
//! reports, deliveries and messages) that says which children exist, what
//! state each is in, which reports still wait for delivery and which queued
//! messages each child has not received yet.
//!
//! The reducer's input is [`crate::Store::agent_log`]: the parent session's
//! child-lifecycle events and its children's report and message-delivery
//! events, in sequence order. Applying them one by one equals replaying the
//! whole log (pinned by the tests), so the tree survives any restart.

mod report;
#[cfg(test)]
mod tests;

pub use report::{
    AgentReport, InformationalValidation, ReportOutcome, build_report, notification_text,
};

use crate::event::{EventKind, StoredEvent};
use std::collections::{BTreeMap, BTreeSet};

/// A child's durable state, as the log says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildState {
    /// Spawned or resumed and not finished: running in a live process, or
    /// interrupted when no process runs it.
    Unfinished,
    /// Its latest run ended with a report whose outcome is not a failure.
    Finished,
    /// Its latest run ended with a failed (or cancelled) report.
    Failed,
}

/// One child as the parent's agent log describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildEntry {
    /// The child's session id.
    pub id: String,
    /// Its role.
    pub role: String,
    /// The task it was given.
    pub task: String,
    /// The model it runs.
    pub model: String,
    /// Its engine, as built at spawn.
    pub engine: String,
    /// Its engine's effective configuration (JSON) at spawn.
    pub engine_config: String,
    /// Its durable state.
    pub state: ChildState,
    /// Every report it committed, `(seq, report)`, oldest first.
    pub reports: Vec<(u64, AgentReport)>,
}

impl ChildEntry {
    /// The newest report, if any.
    pub fn latest_report(&self) -> Option<&(u64, AgentReport)> {
        self.reports.last()
    }
}

/// A queued message for a child, not yet delivered to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingMessage {
    /// The sequence number of the queueing event (the dedupe key).
    pub seq: u64,
    /// The text.
    pub text: String,
}

/// The reducer of one parent's agent log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentTree {
    children: BTreeMap<String, ChildEntry>,
    order: Vec<String>,
    delivered: BTreeSet<u64>,
    queued: BTreeMap<u64, (String, String)>,
    received: BTreeSet<u64>,
    watermark: u64,
}

impl AgentTree {
    /// The tree of a log, replayed from the start.
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a StoredEvent>) -> AgentTree {
        let mut tree = AgentTree::default();
        for e in events {
            tree.apply(e);
        }
        tree
    }

    /// The highest sequence number applied.
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// Apply one event of the agent log (events of other kinds are
    /// ignored; an event at or below the watermark is applied only once).
    pub fn apply(&mut self, event: &StoredEvent) {
        if event.seq <= self.watermark && self.watermark != 0 {
            return;
        }
        self.watermark = event.seq;
        match &event.kind {
            EventKind::ChildSpawned {
                child,
                role,
                task,
                model,
                engine,
                engine_config,
            } => {
                if !self.children.contains_key(child) {
                    self.order.push(child.clone());
                }
                self.children.insert(
                    child.clone(),
                    ChildEntry {
                        id: child.clone(),
                        role: role.clone(),
                        task: task.clone(),
                        model: model.clone(),
                        engine: engine.clone(),
                        engine_config: engine_config.clone(),
                        state: ChildState::Unfinished,
                        reports: Vec::new(),
                    },
                );
            }
            EventKind::AgentResumed { child } => {
                if let Some(c) = self.children.get_mut(child) {
                    c.state = ChildState::Unfinished;
                }
            }
            EventKind::AgentReport(report) => {
                if let Some(c) = self.children.get_mut(&event.session) {
                    c.state = if report.outcome.is_failure() {
                        ChildState::Failed
                    } else {
                        ChildState::Finished
                    };
                    c.reports.push((event.seq, report.clone()));
                }
            }
            EventKind::AgentNotificationDelivered { report_seq, .. }
            | EventKind::AgentReportReceived { report_seq, .. } => {
                self.delivered.insert(*report_seq);
            }
            EventKind::AgentMessageQueued { child, text } => {
                self.queued.insert(event.seq, (child.clone(), text.clone()));
            }
            EventKind::AgentMessageDelivered { message_seq, .. } => {
                self.received.insert(*message_seq);
            }
            _ => {}
        }
    }

    /// The children, in spawn order.
    pub fn children(&self) -> impl Iterator<Item = &ChildEntry> {
        self.order.iter().filter_map(|id| self.children.get(id))
    }

    /// One child.
    pub fn child(&self, id: &str) -> Option<&ChildEntry> {
        self.children.get(id)
    }

    /// True when the report committed at `seq` was delivered (as a
    /// notification or in a `wait_agents` result).
    pub fn is_delivered(&self, report_seq: u64) -> bool {
        self.delivered.contains(&report_seq)
    }

    /// Reports not delivered yet, oldest first: `(child, seq, report)`.
    pub fn undelivered(&self) -> Vec<(&ChildEntry, u64, &AgentReport)> {
        let mut out: Vec<_> = self
            .children()
            .flat_map(|c| {
                c.reports
                    .iter()
                    .filter(|(seq, _)| !self.delivered.contains(seq))
                    .map(move |(seq, r)| (c, *seq, r))
            })
            .collect();
        out.sort_by_key(|(_, seq, _)| *seq);
        out
    }

    /// Messages queued for `child` and not delivered to it, FIFO.
    pub fn pending_messages(&self, child: &str) -> Vec<PendingMessage> {
        self.queued
            .iter()
            .filter(|(seq, (to, _))| to == child && !self.received.contains(seq))
            .map(|(seq, (_, text))| PendingMessage {
                seq: *seq,
                text: text.clone(),
            })
            .collect()
    }
}
