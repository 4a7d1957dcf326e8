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
    /// The provider refused the request as longer than the model's window;
    /// it is not retried unchanged (its count now calibrates the budget).
    #[error(
        "{source}. Latch estimated the request at ≈{estimated_tokens} tokens and took model `{model}`'s window to be {window} tokens{}. Nothing committed is lost",
        too_long_advice(model, *window, source)
    )]
    ContextTooLong {
        /// Latch's estimate of the refused request.
        estimated_tokens: u64,
        /// The model.
        model: String,
        /// The window Latch used for it.
        window: u64,
        /// The provider's refusal, with its own figures when it gave them.
        source: Box<ProviderError>,
    },
    /// The request cannot fit the model's window (the host's figures: the
    /// window, the reserve, the fixed part and what fits).
    #[error("{0}")]
    Window(Box<super::window::WindowShortfall>),
    /// `[tools] allow` / `deny` names a tool the session does not have.
    #[error("{0}")]
    ToolFilter(String),
    /// An image the user attached could not be used.
    #[error(transparent)]
    Image(#[from] super::images::ImageError),
    /// A rewind could not be planned or applied.
    #[error(transparent)]
    Rewind(#[from] latch_kernel::RewindError),
    /// The store failed.
    #[error("event store: {0}")]
    Store(#[from] StoreError),
    /// The store failed while it served an engine call; the engine's answer
    /// was discarded.
    #[error(
        "the event store failed while engine `{engine}` ran `{engine_call}` (its `{view_call}` read): {source}. The engine's answer was discarded and nothing committed is lost; fix the store, then resume the session"
    )]
    EngineStore {
        /// The engine.
        engine: String,
        /// The engine call (`materialize`, `manual-compact`, `recall`).
        engine_call: &'static str,
        /// The session-view read that failed.
        view_call: &'static str,
        /// The store's error.
        source: StoreError,
    },
    /// An earlier store failure left the engine instance unusable.
    #[error(
        "engine `{engine}` is not asked again in this process because {reason}; resume the session (`latch resume`) to start a fresh engine instance"
    )]
    EngineTainted {
        /// The engine.
        engine: String,
        /// What happened.
        reason: String,
    },
    /// The model's answers kept hitting the output limit.
    #[error(
        "the model's answer was cut off at the output limit ({max_tokens} tokens) {times} times in a row; raise [provider] max_tokens or ask for a shorter answer"
    )]
    Truncated {
        /// The configured output limit.
        max_tokens: u32,
        /// Consecutive cut-off answers.
        times: usize,
    },
    /// The model kept calling tools past the configured step limit.
    #[error(
        "the turn stopped after {0} model requests without finishing (the configured max_steps); continue with another message, or raise or remove [agent] max_steps / --max-steps"
    )]
    StepLimit(usize),
    /// The run was cancelled (a child agent's `cancel_agent`).
    #[error("cancelled: {0}")]
    Cancelled(String),
    /// The user interrupted the turn (Esc or Ctrl-C in the terminal UI).
    #[error("interrupted by the user")]
    Interrupted,
    /// The configured sandbox cannot be enforced on this machine.
    #[error(transparent)]
    Sandbox(#[from] latch_sandbox::SandboxError),
    /// The async runtime could not start.
    #[error("could not start the I/O runtime: {0}")]
    Runtime(String),
}

/// What to change after a refusal as too long: the server's own window when
/// it said it, else a smaller configured one.
fn too_long_advice(model: &str, window: u64, source: &ProviderError) -> String {
    let limit = match source {
        ProviderError::ContextTooLong { limit_tokens, .. } => *limit_tokens,
        _ => None,
    };
    match limit {
        Some(limit) if limit < window => format!(
            "; the server's window is {limit}: set [models.\"{model}\"] context_window_tokens = \
             {limit} in .latch/config.toml and resume the session (`latch resume --last`), which \
             then sends less"
        ),
        _ => format!(
            "; the server's count now tightens the budget, so continuing sends less; if it \
             recurs, set [models.\"{model}\"] context_window_tokens to the server's context size \
             and resume the session"
        ),
    }
}
