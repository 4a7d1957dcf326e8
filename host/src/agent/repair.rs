//! Repair on resume: make the log a valid continuation after a crash.
//!
//! What needs repair (an unfinished run, tool calls without a result, a
//! possible mutation whose command never finished) is a
//! kernel reducer over the session's own events, cached by the store and
//! caught up from its watermark, so checking on every turn costs what is new,
//! not a decode of the whole log.

use super::{Agent, AgentError, AgentEvent};
use latch_engine_sdk::types::ToolResult;
use latch_kernel::{EventKind, settle_pending_mutations};

/// The result an interrupted tool call gets.
pub const INTERRUPTED_RESULT: &str = "interrupted: Latch stopped before this tool call finished. Any effect it had is in the workspace; check and re-run it if needed.";

impl Agent {
    /// Make the log a valid continuation after a crash: a possible mutation
    /// left pending (the process died while its command ran) is settled by a
    /// generation-advancing mutation, so evidence recorded before it goes
    /// stale (see [`latch_kernel::settle_pending_mutations`]); an unfinished
    /// run is marked interrupted and every unanswered tool call gets an
    /// error result. Returns how many events were appended.
    pub fn repair_interrupted(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<usize, AgentError> {
        // A request that waited for a decision is answered as denied first.
        let mut settled = self.settle_permissions(observer)?;
        let watermark = self.store.latest_seq(&self.session.id)?;
        if !settle_pending_mutations(&self.store, &self.session.id, &self.workspace)?.is_empty() {
            // The settling mutations and the checkpoints before them.
            for e in self.store.all_events(&self.session.id)? {
                if e.seq > watermark {
                    observer(AgentEvent::Committed {
                        seq: e.seq,
                        event: &e.kind,
                    });
                    settled += 1;
                }
            }
        }
        let open = self
            .store
            .with_kernel(&self.session.id, |k| k.unfinished().clone())?;
        let mut repairs: Vec<EventKind> = open
            .open_calls
            .into_iter()
            .map(|c| {
                EventKind::ToolResult(ToolResult {
                    call_id: c.id,
                    name: c.name,
                    content: INTERRUPTED_RESULT.into(),
                    is_error: true,
                    images: vec![],
                })
            })
            .collect();
        if open.open_run {
            repairs.push(EventKind::RunInterrupted {
                reason: "the previous run stopped before it finished (found on resume)".into(),
            });
        }
        let n = repairs.len();
        self.append_batch(repairs, observer)?;
        Ok(settled + n)
    }
}
