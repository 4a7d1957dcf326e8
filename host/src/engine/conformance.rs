//! The conformance suite ([`latch_conformance`]) over the host's engines:
//! [`ComponentCandidate`] runs it against a sandboxed component exactly as the
//! agent loop would run that component, and [`FactoryCandidate`] against any
//! [`ContextEngineFactory`] (natively linked engines included).

use super::runtime::LoadedComponent;
use super::{ComponentEngine, ContextEngine, ContextEngineFactory, EngineFailure, SandboxLimits};
use latch_conformance::{Candidate, Failure, Instance, World};
use latch_engine_sdk::SessionView;
use latch_engine_sdk::types::*;
use std::sync::Arc;

/// The suite's view of an engine failure.
pub fn to_failure(f: EngineFailure) -> Failure {
    let message = f.to_string();
    match f {
        EngineFailure::Engine { error, .. } => Failure::Engine(error),
        EngineFailure::Config { error, .. } => Failure::Config(error),
        EngineFailure::Timeout { .. } => Failure::Timeout(message),
        EngineFailure::OutOfMemory { .. } => Failure::OutOfMemory(message),
        EngineFailure::Panic { .. } => Failure::Panic(message),
        EngineFailure::Trap { .. }
        | EngineFailure::Rejected { .. }
        | EngineFailure::HostCall { .. } => Failure::Trap(message),
        EngineFailure::Instantiate { .. } => Failure::Instantiate(message),
    }
}

/// A loaded component under its sandbox limits and engine configuration.
pub struct ComponentCandidate {
    loaded: Arc<LoadedComponent>,
    limits: SandboxLimits,
    config_json: Option<String>,
    /// The session id the sandbox seeds its randomness from: different for
    /// every check, like a real session's, so an engine cannot recognize the
    /// suite by its random numbers.
    seed_key: String,
}

impl ComponentCandidate {
    /// A candidate over `loaded`; every instance is configured with
    /// `config_json` (a JSON object) when given.
    pub fn new(
        loaded: Arc<LoadedComponent>,
        limits: SandboxLimits,
        config_json: Option<String>,
    ) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        ComponentCandidate {
            loaded,
            limits,
            config_json,
            seed_key: format!("{:026x}", nanos ^ ((std::process::id() as u128) << 64)),
        }
    }
}

impl Candidate for ComponentCandidate {
    fn name(&self) -> String {
        self.loaded.name.clone()
    }

    fn world(&self) -> Option<World> {
        Some(World {
            exports: self.loaded.info.exports.clone(),
            imports: self.loaded.info.imports.clone(),
        })
    }

    fn fresh(&self, model: &ModelProfile) -> Result<Box<dyn Instance>, Failure> {
        let mut engine = ComponentEngine::new(
            self.loaded.clone(),
            self.limits.clone(),
            &self.seed_key,
            model.clone(),
        );
        engine.ensure_instance().map_err(to_failure)?;
        if let Some(json) = &self.config_json {
            ContextEngine::set_config(&mut engine, json).map_err(to_failure)?;
        }
        Ok(Box::new(engine))
    }
}

impl Instance for ComponentEngine {
    fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, Failure> {
        // Unchecked: the suite applies the same rules and reports evidence.
        self.materialize_unchecked(session, request)
            .map_err(to_failure)
    }
    fn config(&mut self) -> Result<String, Failure> {
        ContextEngine::config(self).map_err(to_failure)
    }
    fn set_config(&mut self, json: &str) -> Result<(), Failure> {
        ContextEngine::set_config(self, json).map_err(to_failure)
    }
    fn manual_compact(
        &mut self,
        session: &dyn SessionView,
    ) -> Result<Vec<KernelContextEntry>, Failure> {
        self.manual_compact_unchecked(session).map_err(to_failure)
    }
    fn recall(
        &mut self,
        session: &dyn SessionView,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Event>, Failure> {
        ContextEngine::recall(self, session, query, limit).map_err(to_failure)
    }
    fn peak_memory_bytes(&self) -> Option<u64> {
        Some(ComponentEngine::peak_memory_bytes(self) as u64)
    }
}

/// Any engine factory as a candidate; its engines report no memory figure
/// and it has no component world (the `contract` case is skipped).
pub struct FactoryCandidate {
    factory: Arc<dyn ContextEngineFactory>,
}

impl FactoryCandidate {
    /// A candidate building its instances with `factory`.
    pub fn new(factory: Arc<dyn ContextEngineFactory>) -> Self {
        FactoryCandidate { factory }
    }
}

impl Candidate for FactoryCandidate {
    fn name(&self) -> String {
        self.factory.describe()
    }

    fn world(&self) -> Option<World> {
        None
    }

    fn fresh(&self, model: &ModelProfile) -> Result<Box<dyn Instance>, Failure> {
        let engine = self
            .factory
            .create("conformance", model)
            .map_err(to_failure)?;
        Ok(Box::new(PortInstance(engine)))
    }
}

/// An engine behind the port as a suite instance.
struct PortInstance(Box<dyn ContextEngine>);

impl Instance for PortInstance {
    fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, Failure> {
        self.0.materialize(session, request).map_err(to_failure)
    }
    fn config(&mut self) -> Result<String, Failure> {
        self.0.config().map_err(to_failure)
    }
    fn set_config(&mut self, json: &str) -> Result<(), Failure> {
        self.0.set_config(json).map_err(to_failure)
    }
    fn manual_compact(
        &mut self,
        session: &dyn SessionView,
    ) -> Result<Vec<KernelContextEntry>, Failure> {
        self.0.manual_compact(session).map_err(to_failure)
    }
    fn recall(
        &mut self,
        session: &dyn SessionView,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Event>, Failure> {
        self.0.recall(session, query, limit).map_err(to_failure)
    }
    fn peak_memory_bytes(&self) -> Option<u64> {
        None
    }
}
