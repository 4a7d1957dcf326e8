//! `/rewind` for a running agent: the kernel's checkpoints
//! ([`latch_kernel::checkpoint`]) applied to this agent's session and
//! workspace, with the new durable events reported to the surface.

use super::{Agent, AgentError, AgentEvent};
use latch_kernel::{
    RewindError, RewindPlan, RewindPoint, apply_rewind, plan_rewind, rewind_points,
};

impl Agent {
    /// The session's user messages, each with the files a rewind to it
    /// would restore.
    pub fn rewind_points(&self) -> Result<Vec<RewindPoint>, AgentError> {
        Ok(rewind_points(&self.store, &self.session.id)?)
    }

    /// Put the files back to their state before the user message `to_seq`;
    /// files changed outside Latch, and links standing where files were,
    /// are left alone and listed in the plan (every file is read and
    /// written beneath the workspace without following a link, see
    /// [`latch_kernel::beneath`]).
    /// Every event the rewind commits is reported to `observer`.
    pub fn rewind(
        &mut self,
        to_seq: u64,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<RewindPlan, RewindError> {
        let mut plan = plan_rewind(&self.store, &self.session.id, &self.workspace, to_seq)?;
        let before = self
            .store
            .all_events(&self.session.id)?
            .last()
            .map_or(0, |e| e.seq);
        apply_rewind(&self.store, &self.session.id, &self.workspace, &mut plan)?;
        // Report what this rewind appended.
        for e in self.store.all_events(&self.session.id)? {
            if e.seq > before {
                observer(AgentEvent::Committed {
                    seq: e.seq,
                    event: &e.kind,
                });
            }
        }
        Ok(plan)
    }
}
