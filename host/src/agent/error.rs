//! How a turn fails: [`AgentError`]. Nothing already committed is lost.

use crate::engine::EngineFailure;
use latch_kernel::StoreError;
use latch_provider::ProviderError;

/// How a turn failed. Nothing already committed is lost.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The engine failed or returned a view the host refused.
    #[error(transparent)]
    Engine(#[from] EngineFailure),
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The store failed.
    #[error("event store: {0}")]
    Store(#[from] StoreError),
    /// The model kept calling tools past the step limit.
    #[error(
        "the turn stopped after {0} model requests without finishing; continue with another message"
    )]
    StepLimit(usize),
    /// The async runtime could not start.
    #[error("could not start the I/O runtime: {0}")]
    Runtime(String),
}
