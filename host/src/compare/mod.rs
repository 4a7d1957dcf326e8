//! `latch engine compare`: plays the same scripted sessions through each
//! engine and the real agent loop — real tools in a temporary workspace,
//! the real SQLite store — against the local wire-format server, whose
//! simulated prompt cache reports the usage a provider would, and measures
//! what each engine cost and what it kept.
//!
//! What does not drive an agent (the sessions, the scripted model, the
//! grading, the figures, the report and the summarize-and-discard baseline)
//! lives in [`latch_conformance::compare`]; this module wires it to the
//! agent ([`driver`]), the engines ([`engines`]) and the baseline's summary
//! calls over HTTP ([`summarizer`]).

pub mod driver;
pub mod engines;
pub mod summarizer;

pub use driver::{CompareOptions, RunOutcome, run_compare, run_one};
pub use engines::{BASELINE, EngineChoice};

use crate::agent::AgentError;
use crate::engine::{EngineFailure, LoadError};

/// Why a comparison could not start or a run could not be set up. A run
/// that starts and then fails is reported in its column instead.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// `baseline:NAME` names no baseline.
    #[error("there is no baseline `{0}`; the baseline is `baseline:summarize`")]
    UnknownBaseline(String),
    /// `baseline:summarize@{...}`: the baseline has no settings.
    #[error("`{0}` takes no configuration; drop the `@{{...}}` after it")]
    ConfiguredBaseline(String),
    /// A component could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// An engine could not be instantiated or configured.
    #[error(transparent)]
    Engine(#[from] EngineFailure),
    /// The agent could not be built.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The store could not be opened or written.
    #[error("event store: {0}")]
    Store(#[from] latch_kernel::StoreError),
    /// The provider client could not be built.
    #[error(transparent)]
    Provider(#[from] latch_provider::ProviderError),
    /// The agent's tools could not start in the temporary workspace.
    #[error("the tools could not start: {0}")]
    Tools(String),
    /// A session plan or option was unusable.
    #[error("{0}")]
    Plan(String),
    /// The temporary workspace, the server or a runtime failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl CompareError {
    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> CompareError {
        let what = what.into();
        move |source| CompareError::Io { what, source }
    }
}
