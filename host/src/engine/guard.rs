//! [`ViewGuard`]: the host's checks on everything an engine hands back before
//! any of it is persisted or sent. It applies the SDK's one implementation of
//! the rules ([`latch_engine_sdk::validate`]: budget, protocol, system prompt,
//! session context, provenance, kernel-context revisions, generations and
//! sizes) to every view of a real session, exactly as the conformance suite
//! applies them, so an engine cannot pass `engine check` and misbehave in a
//! session. One guard per engine instance: it remembers the last accepted
//! view, so a warm request checks only what is new.

use super::{EngineFailure, ViewRule};
use latch_engine_sdk::SessionView;
use latch_engine_sdk::types::{
    ContextRequest, ContextView, EstimatorProfile, Event, KernelContextEntry,
};
use latch_engine_sdk::validate::{KernelContextLimits, ViewChecker, check_entries, check_recall};

/// Checks an engine's views and kernel-context entries.
#[derive(Clone, Debug)]
pub struct ViewGuard {
    checker: ViewChecker,
    limits: KernelContextLimits,
}

impl ViewGuard {
    /// A guard for views priced under `profile`, persisting within `limits`.
    pub fn new(profile: EstimatorProfile, limits: KernelContextLimits) -> Self {
        ViewGuard {
            checker: ViewChecker::new(profile, limits),
            limits,
        }
    }

    /// The engine instance was replaced: check the next view whole.
    pub fn reset(&mut self) {
        self.checker.reset();
    }

    /// Accept `view` as the answer to `request` over `session` (the session
    /// as the engine saw it), or refuse it naming the rule it broke.
    pub fn accept_view(
        &mut self,
        engine: &str,
        session: &dyn SessionView,
        request: &ContextRequest,
        view: &ContextView,
    ) -> Result<(), EngineFailure> {
        self.checker
            .check(session, request, view)
            .map_err(|(rule, detail)| rejected(engine, rule, detail))
    }

    /// [`ViewGuard::accept_view`] for a view restored from a continuation
    /// whose first `kept` messages were copied from the last view this guard
    /// accepted (the caller resets its assembler whenever a view is
    /// refused): a warm check costs only what is new.
    pub fn accept_continued(
        &mut self,
        engine: &str,
        session: &dyn SessionView,
        request: &ContextRequest,
        view: &ContextView,
        kept: usize,
    ) -> Result<(), EngineFailure> {
        self.checker
            .check_continued(session, request, view, kept)
            .map_err(|(rule, detail)| rejected(engine, rule, detail))
    }

    /// Accept the entries of a `manual-compact` before they are persisted.
    pub fn accept_entries(
        &self,
        engine: &str,
        session: &dyn SessionView,
        entries: &[KernelContextEntry],
    ) -> Result<(), EngineFailure> {
        check_entries(&session.info(), entries, &self.limits)
            .map_err(|(rule, detail)| rejected(engine, rule, detail))
    }
}

/// Accept the answer of `recall(_, limit)` over `session` before any of it
/// becomes a tool result: at most `limit` events, each an event of the
/// session exactly as stored, in log order (see
/// [`latch_engine_sdk::validate::check_recall`]).
pub fn accept_recall(
    engine: &str,
    session: &dyn SessionView,
    limit: u32,
    events: &[Event],
) -> Result<(), EngineFailure> {
    check_recall(session, limit, events).map_err(|(rule, detail)| rejected(engine, rule, detail))
}

fn rejected(engine: &str, rule: ViewRule, detail: String) -> EngineFailure {
    EngineFailure::Rejected {
        engine: engine.to_string(),
        rule,
        detail,
    }
}
