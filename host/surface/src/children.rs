//! Child agents as a surface shows them: role, task and state, from the
//! parent's spawn and resume events and each child's own report.

use latch_kernel::{EventKind, ReportOutcome};

/// A child's state as the log says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildStatus {
    /// Spawned or resumed, no report since.
    Unfinished,
    /// Its latest report completed.
    Finished,
    /// Its latest report failed.
    Failed,
    /// Its latest report says it was cancelled.
    Cancelled,
}

/// One child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildView {
    /// Its session id.
    pub id: String,
    /// Its role.
    pub role: String,
    /// Its task.
    pub task: String,
    /// Its state.
    pub status: ChildStatus,
    /// Sequence number of its latest spawn or resume.
    pub started_seq: u64,
    /// The first line of its latest report.
    pub last_report: Option<String>,
}

/// The children reducer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Children {
    children: Vec<ChildView>,
}

impl Children {
    /// The children in spawn order.
    pub fn all(&self) -> &[ChildView] {
        &self.children
    }

    /// True when `session` is one of the children.
    pub fn contains(&self, session: &str) -> bool {
        self.children.iter().any(|c| c.id == session)
    }

    /// Apply an event of the parent's own session.
    pub fn apply_parent(&mut self, seq: u64, event: &EventKind) {
        match event {
            EventKind::ChildSpawned {
                child, role, task, ..
            } => {
                self.children.retain(|c| &c.id != child);
                self.children.push(ChildView {
                    id: child.clone(),
                    role: role.clone(),
                    task: task.clone(),
                    status: ChildStatus::Unfinished,
                    started_seq: seq,
                    last_report: None,
                });
            }
            EventKind::AgentResumed { child } => {
                if let Some(c) = self.children.iter_mut().find(|c| &c.id == child) {
                    c.status = ChildStatus::Unfinished;
                    c.started_seq = seq;
                }
            }
            _ => {}
        }
    }

    /// Apply an event of child session `child`.
    pub fn apply_child(&mut self, child: &str, event: &EventKind) {
        if let EventKind::AgentReport(r) = event
            && let Some(c) = self.children.iter_mut().find(|c| c.id == child)
        {
            c.status = match r.outcome {
                ReportOutcome::Completed => ChildStatus::Finished,
                ReportOutcome::Failed => ChildStatus::Failed,
                ReportOutcome::Cancelled => ChildStatus::Cancelled,
            };
            c.last_report = Some(r.summary.lines().next().unwrap_or("").to_string());
        }
    }
}
