//! Re-ground notes: at each safe boundary before a model request, the
//! re-grounds the kernel finds due (certification refused twice in a row, a
//! failure lineage that repeated; see [`latch_kernel::RegroundDue`]) become
//! durable `reground` events. Engines see them as re-ground kernel notes, so
//! the engine's re-ground instruction and its episode marker come from the
//! log, and a resumed session shows the same.

use super::{Agent, AgentError, AgentEvent};

impl Agent {
    /// Append a `reground` event for every re-ground due now.
    pub(crate) fn reground(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<(), AgentError> {
        let due = self
            .store
            .with_kernel(&self.session.id, |k| k.reground_due())?;
        self.append_batch(due.iter().map(|d| d.event()).collect(), observer)
    }
}
