//! An engine seen from outside: [`Observed`] passes every call through to
//! the engine it wraps and shows an observer each materialization, before
//! the engine runs and after it answered. `latch engine compare` records
//! what each engine returned through it, and tests use it to record views
//! or to act at the moment an engine is called; it never changes a view.

use super::{ContextEngine, EngineFailure};
use latch_engine_sdk::SessionView;
use latch_engine_sdk::types::{
    ContextBudget, ContextRequest, ContextView, EstimatorProfile, Event, KernelContextEntry,
};

/// One moment of a `materialize` call, as the observer sees it.
#[derive(Debug)]
pub enum Materialization<'a> {
    /// The engine is about to be asked for a view of `request`.
    Before(&'a ContextRequest),
    /// The engine returned `view` for `request`.
    After(&'a ContextRequest, &'a ContextView),
}

/// An engine whose materializations an observer sees (see the module docs).
pub struct Observed<F> {
    inner: Box<dyn ContextEngine>,
    observe: F,
}

impl<F: FnMut(Materialization<'_>) + Send> Observed<F> {
    /// `inner`, with `observe` called around each `materialize`.
    pub fn new(inner: Box<dyn ContextEngine>, observe: F) -> Self {
        Observed { inner, observe }
    }
}

impl<F: FnMut(Materialization<'_>) + Send> ContextEngine for Observed<F> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn config(&mut self) -> Result<String, EngineFailure> {
        self.inner.config()
    }
    fn set_config(&mut self, json: &str) -> Result<(), EngineFailure> {
        self.inner.set_config(json)
    }
    fn set_estimator(&mut self, profile: EstimatorProfile) -> Result<(), EngineFailure> {
        self.inner.set_estimator(profile)
    }
    fn default_budget(&mut self) -> Result<ContextBudget, EngineFailure> {
        self.inner.default_budget()
    }
    fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, EngineFailure> {
        (self.observe)(Materialization::Before(request));
        let view = self.inner.materialize(session, request)?;
        (self.observe)(Materialization::After(request, &view));
        Ok(view)
    }
    fn manual_compact(
        &mut self,
        session: &dyn SessionView,
    ) -> Result<Vec<KernelContextEntry>, EngineFailure> {
        self.inner.manual_compact(session)
    }
    fn recall(
        &mut self,
        session: &dyn SessionView,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Event>, EngineFailure> {
        self.inner.recall(session, query, limit)
    }
}
