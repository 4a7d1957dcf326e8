//! The engines a comparison plays: any component (`builtin:NAME` or a
//! path), loaded once and instantiated per run, and `baseline:summarize`,
//! linked natively with a summarizer that calls the model over HTTP.

use super::CompareError;
use crate::engine::runtime::EngineSource;
use crate::engine::{
    ComponentFactory, ContextEngine, ContextEngineFactory, EngineRuntime, Materialization,
    NativeEngine, Observed, SandboxLimits,
};
use latch_conformance::compare::{SummarizeEngine, Summarizer};
use latch_engine_sdk::types::*;
use latch_engine_sdk::validate::request_tokens;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The name of the summarize-and-discard baseline.
pub const BASELINE: &str = "baseline:summarize";

/// An engine to compare, ready to build one instance per run.
pub enum EngineChoice {
    /// A component, through the same factory sessions use.
    Component(ComponentFactory),
    /// The summarize-and-discard baseline.
    Baseline,
}

impl EngineChoice {
    /// Resolve `spec`: `baseline:summarize`, `builtin:NAME` or a component
    /// path (relative to `base`), optionally followed by `@` and the
    /// engine's configuration as a JSON object
    /// (`builtin:continuity@{"rotation":"cost"}`), passed to `set-config`.
    pub fn resolve(
        spec: &str,
        base: &Path,
        limits: &SandboxLimits,
    ) -> Result<EngineChoice, CompareError> {
        let (spec, config) = match spec.split_once("@{") {
            Some((engine, rest)) => (engine, Some(format!("{{{rest}"))),
            None => (spec, None),
        };
        if let Some(name) = spec.strip_prefix("baseline:") {
            if config.is_some() {
                return Err(CompareError::ConfiguredBaseline(spec.to_string()));
            }
            return match name {
                "summarize" => Ok(EngineChoice::Baseline),
                _ => Err(CompareError::UnknownBaseline(spec.to_string())),
            };
        }
        let runtime = EngineRuntime::global()?;
        let loaded = runtime.load(&EngineSource::parse(spec, base))?;
        Ok(EngineChoice::Component(ComponentFactory::new(
            loaded,
            limits.clone(),
            config,
        )))
    }

    /// A fresh engine for one run; the baseline summarizes through
    /// `summarizer` (made only for the baseline).
    pub fn create(
        &self,
        spec: &str,
        session_id: &str,
        model: &ModelProfile,
        summarizer: impl FnOnce() -> Result<Box<dyn Summarizer>, CompareError>,
    ) -> Result<Box<dyn ContextEngine>, CompareError> {
        Ok(match self {
            EngineChoice::Component(factory) => factory.create(session_id, model)?,
            EngineChoice::Baseline => Box::new(NativeEngine::new(
                spec,
                SummarizeEngine::with_summarizer(model.clone(), summarizer()?),
            )),
        })
    }
}

/// `inner`, recording for each view the agent asked for its size under
/// the host's canonical estimator (into `sizes`, shared with the baseline's
/// summarizer) and the epoch generation it reports (into `generations`).
pub fn recorded(
    inner: Box<dyn ContextEngine>,
    profile: EstimatorProfile,
    sizes: Arc<Mutex<Vec<u64>>>,
    generations: Arc<Mutex<Vec<Option<u64>>>>,
) -> Box<dyn ContextEngine> {
    Box::new(Observed::new(inner, move |m| {
        if let Materialization::After(request, view) = m {
            let size = request_tokens(profile, view, request.budget.tools_tokens);
            sizes.lock().unwrap_or_else(|p| p.into_inner()).push(size);
            generations
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(view.report.epoch_generation);
        }
    }))
}
