//! The agent loop's side of child agents: the [`Delegation`] port through
//! which the supervisor adds the agent tools (`spawn_agent`, `wait_agents`,
//! …) and hands over what arrives between requests (a child's report for a
//! parent, a parent's message for a child, a cancellation).
//!
//! The loop calls [`Delegation::at_safe_boundary`] only before a model
//! request, when every earlier tool call of the turn has its committed
//! result, so a delivery appends to the log after complete units and never
//! rewrites what the provider already saw.

use super::{Agent, AgentError, AgentEvent};
use latch_engine_sdk::estimate::estimate;
use latch_engine_sdk::types::ToolCall;
use latch_kernel::{EventKind, SessionRecord};
use latch_provider::ToolSchema;

/// What a supervisor plugs into an agent for child agents.
pub trait Delegation: Send {
    /// The tools it adds, in a byte-stable order (part of the cached
    /// prefix).
    fn schemas(&self) -> Vec<ToolSchema>;

    /// Answer `call` when it is one of this delegation's tools: the events
    /// to commit together, the last one the call's
    /// [`EventKind::ToolResult`]. `None` when the tool is not one of them.
    fn execute(&mut self, session: &SessionRecord, call: &ToolCall) -> Option<Vec<EventKind>>;

    /// At a safe model boundary: the deliveries to append before the next
    /// request, or an error that ends the turn (a cancellation).
    fn at_safe_boundary(&mut self, session: &SessionRecord) -> Result<Vec<EventKind>, AgentError>;

    /// The model ended its turn (a safe boundary too): while work it
    /// started still runs, wait until a result of it waits, and return the
    /// deliveries that continue the turn; empty when nothing runs or waits.
    /// By default nothing is awaited.
    fn settle(&mut self, _session: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
        Ok(Vec::new())
    }

    /// The agent's interrupt signal, set while the user interrupts the
    /// running turn (called once, when the delegation is plugged in). A
    /// delegation that blocks the turn — `wait_agents`, the end-of-turn
    /// wait for children — returns as soon as it is set.
    fn use_interrupt(&mut self, _interrupt: latch_tools::Cancel) {}

    /// The user interrupted the turn (it is ending; every call is
    /// answered): e.g. cancel the children when so configured.
    fn on_interrupted(&mut self) {}
}

impl Agent {
    /// Plug child agents into this agent: their tools join the schemas
    /// (call before the first request; the schemas are part of the cached
    /// prefix) and deliveries happen at its safe boundaries.
    pub fn with_delegation(mut self, mut delegation: Box<dyn Delegation>) -> Agent {
        delegation.use_interrupt(self.control.tool_cancel());
        let schemas = delegation.schemas();
        self.all_tool_names
            .extend(schemas.iter().map(|s| s.name.clone()));
        self.schemas.extend(self.options.tools.apply(schemas));
        let json = serde_json::to_string(&self.schemas).unwrap_or_default();
        self.tools_tokens = estimate(self.session.model.estimator, &json) as u64;
        self.delegation = Some(delegation);
        self
    }

    /// The tool schemas every request carries, in order.
    pub fn tool_schemas(&self) -> &[ToolSchema] {
        &self.schemas
    }

    /// Deliver what waits at a safe boundary.
    pub(crate) fn safe_boundary(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<(), AgentError> {
        let Some(delegation) = self.delegation.as_mut() else {
            return Ok(());
        };
        let events = delegation.at_safe_boundary(&self.session)?;
        self.append_batch(events, observer)
    }

    /// The model ended its turn: true when deliveries (a child's report
    /// that arrived, or that it waited for) were appended and the turn goes
    /// on, so a parent continues after its children finish.
    pub(crate) fn settle_children(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<bool, AgentError> {
        let Some(delegation) = self.delegation.as_mut() else {
            return Ok(false);
        };
        let events = delegation.settle(&self.session)?;
        let more = !events.is_empty();
        self.append_batch(events, observer)?;
        Ok(more)
    }

    /// The user interrupted the running turn: tell the delegation.
    pub(crate) fn delegation_interrupted(&mut self) {
        if let Some(delegation) = self.delegation.as_mut() {
            delegation.on_interrupted();
        }
    }

    /// Commit the answer of a delegation tool call; false when `call` is
    /// not one.
    pub(crate) fn delegated_call(
        &mut self,
        call: &ToolCall,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<bool, AgentError> {
        let Some(delegation) = self.delegation.as_mut() else {
            return Ok(false);
        };
        let Some(events) = delegation.execute(&self.session, call) else {
            return Ok(false);
        };
        // The markers and the result commit in one transaction: a report
        // handed over in a result is marked delivered exactly when the
        // result is durable.
        self.append_batch(events, observer)?;
        Ok(true)
    }
}
