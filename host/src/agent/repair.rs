//! Repair on resume: make the log a valid continuation after a crash.

use super::{Agent, AgentError, AgentEvent};
use latch_engine_sdk::types::{Part, ToolCall, ToolResult};
use latch_kernel::EventKind;

impl Agent {
    /// Make the log a valid continuation after a crash: an unfinished run is
    /// marked interrupted and every unanswered tool call gets an error result.
    /// Returns how many events were appended.
    pub fn repair_interrupted(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<usize, AgentError> {
        let events = self.store.events(&self.session.id, 0, u64::MAX, u32::MAX)?;
        let mut open_run = false;
        let mut open_calls: Vec<ToolCall> = Vec::new();
        for e in &events {
            match &e.kind {
                EventKind::RunStarted { .. } => open_run = true,
                EventKind::RunFinished { .. } | EventKind::RunInterrupted { .. } => {
                    open_run = false
                }
                EventKind::AssistantMessage { parts } => {
                    open_calls = parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::ToolCall(c) => Some(c.clone()),
                            _ => None,
                        })
                        .collect();
                }
                EventKind::ToolResult(r) => open_calls.retain(|c| c.id != r.call_id),
                EventKind::UserMessage { .. } => open_calls.clear(),
                _ => {}
            }
        }
        let mut repairs: Vec<EventKind> = open_calls
            .into_iter()
            .map(|c| {
                EventKind::ToolResult(ToolResult {
                    call_id: c.id,
                    name: c.name,
                    content: "interrupted: Latch stopped before this tool call finished. Any effect it had is in the workspace; check and re-run it if needed.".into(),
                    is_error: true,
                    images: vec![],
                })
            })
            .collect();
        if open_run {
            repairs.push(EventKind::RunInterrupted {
                reason: "the previous run stopped before it finished (found on resume)".into(),
            });
        }
        let n = repairs.len();
        self.append_batch(repairs, observer)?;
        Ok(n)
    }
}
