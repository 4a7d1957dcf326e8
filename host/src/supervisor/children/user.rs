//! [`UserResumedChild`]: the [`Delegation`] of a child session the user
//! opens directly (`latch resume <child-id>`). Its parent learns of it as of
//! any resume: the first run appends `agent_resumed` to the parent's log,
//! the parent's queued messages reach the child at its boundaries, and each
//! turn the child's model ends commits a host-built report in the child's
//! session, which the parent receives at its next safe boundary.

use super::worker::parent_messages;
use crate::agent::{AgentError, Delegation};
use latch_engine_sdk::types::{Part, ToolCall};
use latch_kernel::agents::{ReportOutcome, build_report};
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_provider::ToolSchema;
use std::sync::Arc;

/// A child session driven by the user instead of a worker.
pub struct UserResumedChild {
    store: Arc<Store>,
    announced: bool,
}

impl UserResumedChild {
    /// The delegation of a child session opened by the user.
    pub fn new(store: Arc<Store>) -> UserResumedChild {
        UserResumedChild {
            store,
            announced: false,
        }
    }
}

impl Delegation for UserResumedChild {
    fn schemas(&self) -> Vec<ToolSchema> {
        Vec::new()
    }

    fn execute(&mut self, _: &SessionRecord, _: &ToolCall) -> Option<Vec<EventKind>> {
        None
    }

    fn at_safe_boundary(&mut self, session: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
        if let (false, Some(parent)) = (self.announced, &session.parent) {
            // Running again: the parent's tree shows it unfinished until
            // its report.
            self.store.append(
                parent,
                EventKind::AgentResumed {
                    child: session.id.clone(),
                },
            )?;
            self.announced = true;
        }
        parent_messages(&self.store, session)
    }

    fn settle(&mut self, session: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
        let Some(parent) = &session.parent else {
            return Ok(Vec::new());
        };
        let role = self
            .store
            .agent_tree(parent)?
            .child(&session.id)
            .map(|c| c.role.clone())
            .unwrap_or_else(|| "child".into());
        let events = self.store.all_events(&session.id)?;
        let summary = events
            .iter()
            .rev()
            .find_map(|e| match &e.kind {
                EventKind::AssistantMessage { parts } => Some(
                    parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::Text(t) => Some(t.as_str()),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
                _ => None,
            })
            .unwrap_or_default();
        let report = build_report(&role, &events, ReportOutcome::Completed, &summary);
        self.store
            .append(&session.id, EventKind::AgentReport(report))?;
        // A later turn in this process is a new run the parent hears of.
        self.announced = false;
        // The report goes to the parent, not into this turn.
        Ok(Vec::new())
    }
}
