//! [`NativeEngine`]: an SDK [`Engine`] linked into the host, behind the same
//! port as a component. Used to pin that an engine behaves identically linked
//! natively and sandboxed, and for benchmarks.

use super::guard::ViewGuard;
use super::{ContextEngine, ContextEngineFactory, EngineFailure};
use latch_engine_sdk::types::*;
use latch_engine_sdk::validate::KernelContextLimits;
use latch_engine_sdk::{Assembled, Engine, KeptTooMany, SessionView, ViewAssembler};

/// An SDK engine linked natively. Its views are assembled exactly as a
/// component's are, so both kinds of engine cost the host the same.
pub struct NativeEngine<E: Engine + Send> {
    name: String,
    engine: E,
    views: ViewAssembler,
    guard: ViewGuard,
}

impl<E: Engine + Send> NativeEngine<E> {
    /// Wrap an engine instance that has returned no view yet under `name`.
    pub fn new(name: &str, engine: E) -> Self {
        Self::resume(name, Assembled::new(engine))
    }

    /// Take over an engine that was driven elsewhere, with the assembler
    /// holding the previous view it continues.
    pub fn resume(name: &str, engine: Assembled<E>) -> Self {
        let (engine, views) = engine.into_parts();
        NativeEngine {
            name: name.to_string(),
            engine,
            views,
            guard: ViewGuard::new(EstimatorProfile::Openai, KernelContextLimits::default()),
        }
    }

    /// Check views priced under `profile` (the session model's estimator)
    /// with kernel-context `limits`.
    pub fn checked_with(mut self, profile: EstimatorProfile, limits: KernelContextLimits) -> Self {
        self.guard = ViewGuard::new(profile, limits);
        self
    }
}

impl<E: Engine + Send> ContextEngine for NativeEngine<E> {
    fn name(&self) -> &str {
        &self.name
    }
    fn config(&mut self) -> Result<String, EngineFailure> {
        Ok(self.engine.config())
    }
    fn set_config(&mut self, json: &str) -> Result<(), EngineFailure> {
        self.engine
            .set_config(json)
            .map_err(|error| EngineFailure::Config {
                engine: self.name.clone(),
                error,
            })
    }
    fn set_estimator(&mut self, profile: EstimatorProfile) -> Result<(), EngineFailure> {
        self.engine.set_estimator(profile);
        Ok(())
    }
    fn default_budget(&mut self) -> Result<ContextBudget, EngineFailure> {
        Ok(self.engine.default_budget())
    }
    fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, EngineFailure> {
        let view =
            self.engine
                .materialize(session, request)
                .map_err(|error| EngineFailure::Engine {
                    engine: self.name.clone(),
                    error,
                })?;
        let whole = self
            .views
            .assemble(view)
            .map_err(|e| EngineFailure::Rejected {
                engine: self.name.clone(),
                rule: KeptTooMany::RULE,
                detail: e.to_string(),
            })?;
        self.guard
            .accept_view(&self.name, session, request, &whole)?;
        Ok(whole)
    }
    fn manual_compact(
        &mut self,
        session: &dyn SessionView,
    ) -> Result<Vec<KernelContextEntry>, EngineFailure> {
        let entries =
            self.engine
                .manual_compact(session)
                .map_err(|error| EngineFailure::Engine {
                    engine: self.name.clone(),
                    error,
                })?;
        self.guard.accept_entries(&self.name, session, &entries)?;
        Ok(entries)
    }
    fn recall(
        &mut self,
        session: &dyn SessionView,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Event>, EngineFailure> {
        self.engine
            .recall(session, query, limit)
            .map_err(|error| EngineFailure::Engine {
                engine: self.name.clone(),
                error,
            })
    }
}

/// Builds [`NativeEngine`]s of one SDK engine type.
pub struct NativeFactory<E> {
    name: String,
    config_json: Option<String>,
    _engine: std::marker::PhantomData<fn() -> E>,
}

impl<E: Engine + Send> NativeFactory<E> {
    /// A factory naming its engines `name`, configured with `config_json`.
    pub fn new(name: &str, config_json: Option<String>) -> Self {
        NativeFactory {
            name: name.to_string(),
            config_json,
            _engine: std::marker::PhantomData,
        }
    }
}

impl<E: Engine + Send> ContextEngineFactory for NativeFactory<E> {
    fn describe(&self) -> String {
        self.name.clone()
    }
    fn create(
        &self,
        _session_id: &str,
        model: &ModelProfile,
    ) -> Result<Box<dyn ContextEngine>, EngineFailure> {
        let mut engine = NativeEngine::new(&self.name, E::new(model.clone()))
            .checked_with(model.estimator, KernelContextLimits::default());
        if let Some(json) = &self.config_json {
            engine.set_config(json)?;
        }
        Ok(Box::new(engine))
    }
}
