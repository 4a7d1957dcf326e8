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
//!
//! Beside it, the same engines judged on recorded sessions: a session tree
//! read from a store opened read-only or from a trace ([`recording`]),
//! replayed request by request through each engine ([`replay`]); traces to
//! share, in a documented, versioned JSONL format ([`trace`]).

pub mod driver;
pub mod engines;
pub mod recording;
pub mod replay;
pub mod summarizer;
pub mod trace;

pub use driver::{CompareOptions, RunOutcome, run_compare, run_in, run_one, save_trace};
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
    /// No session was named and the workspace has none.
    #[error("there is no session in {0} yet; name one, or pass the store's path with --store")]
    NoSession(String),
    /// The session was deleted from history.
    #[error(
        "session {0} was deleted from history (`latch history delete`); Latch does not export \
         or replay deleted sessions"
    )]
    Deleted(String),
    /// The session asked the model before Latch recorded its requests.
    #[error(
        "session {0} was recorded by a Latch that did not record its model requests, so its \
         requests cannot be asked again; sessions recorded from now on can be replayed"
    )]
    Unrecorded(String),
    /// A trace could not be read or written.
    #[error(transparent)]
    Trace(#[from] trace::TraceError),
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
