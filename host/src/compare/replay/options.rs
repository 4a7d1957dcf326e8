//! What a replay is asked to do: the engines (each a way to build a fresh
//! instance per recorded session) and the options every request is asked
//! under.

use crate::compare::CompareError;
use crate::compare::engines::EngineChoice;
use crate::compare::recording::RecordedSession;
use crate::engine::{ContextEngine, SandboxLimits};
use latch_conformance::compare::Summarizer;
use latch_surface::PriceTable;
use std::path::Path;

/// Builds an engine instance for a recorded session, given the summarizer a
/// summarizing engine asks (answered without a model during a replay).
pub type MakeEngine<'a> = dyn Fn(&RecordedSession, Box<dyn Summarizer>) -> Result<Box<dyn ContextEngine>, CompareError>
    + 'a;

/// An engine to replay sessions through.
pub struct ReplayEngine<'a> {
    /// Its name, as given (the column heading).
    pub name: String,
    /// A fresh instance per session.
    pub make: Box<MakeEngine<'a>>,
}

impl ReplayEngine<'static> {
    /// `spec` as `latch engine compare` takes it: `builtin:NAME`,
    /// `baseline:summarize` or a component path (relative to `base`),
    /// optionally `@{JSON}` configured.
    pub fn from_spec(
        spec: &str,
        base: &Path,
        limits: &SandboxLimits,
    ) -> Result<ReplayEngine<'static>, CompareError> {
        let choice = EngineChoice::resolve(spec, base, limits)?;
        let name = spec.to_string();
        Ok(ReplayEngine {
            name: name.clone(),
            make: Box::new(move |session, summarizer| {
                choice.create(&name, &session.id, &session.model, || Ok(summarizer))
            }),
        })
    }
}

/// How to replay.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    /// Replay every request with this context window instead of the
    /// recorded one.
    pub window_tokens: Option<u64>,
    /// ... and this reserve.
    pub reserve_tokens: Option<u64>,
    /// Prices (dollars where the model is priced).
    pub prices: Option<PriceTable>,
}
