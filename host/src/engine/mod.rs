//! Context engines: the port the agent loop talks to, and everything that runs
//! an engine behind it.
//!
//! * [`ContextEngine`] — the port: `materialize(request) -> view` and the rest
//!   of the contract, one instance per session, no store handle.
//! * [`ContextEngineFactory`] — builds the engine of every session (root,
//!   child, resumed); [`continuity_context_engine_factory`] is the default, a
//!   [`ComponentFactory`] over the embedded ContinuityEngine component.
//! * [`runtime::EngineRuntime`] — wasmtime, the precompiled-component cache
//!   and the epoch ticker; [`component::ComponentEngine`] — one sandboxed
//!   instance; [`native::NativeEngine`] — an SDK engine linked natively.
//! * [`guard::ViewGuard`] — the host's checks on every view and every entry
//!   to persist, applied inside every [`ContextEngine`] implementation
//!   whatever engine produced them: the SDK's [`validate`] rules (hard
//!   budget, protocol safety, system prompt, session context, provenance,
//!   kernel-context revisions, generations and sizes), the same ones the
//!   conformance suite applies.

pub mod bindings;
pub mod builtin;
pub mod component;
pub mod conformance;
mod convert;
pub mod display;
pub mod guard;
pub mod native;
pub mod observed;
pub mod policy;
pub mod runtime;
pub mod sandbox;
pub mod session_host;

pub use component::{
    ComponentEngine, ComponentFactory, ViewTraffic, continuity_context_engine_factory,
};
pub use guard::ViewGuard;
pub use latch_engine_sdk::validate::{self, ViewRule, check_view};
pub use native::{NativeEngine, NativeFactory};
pub use observed::{Materialization, Observed};
pub use runtime::{EngineRuntime, LoadError, LoadedComponent};
pub use sandbox::SandboxLimits;
pub use session_host::{HostCallError, HostCallLimits};

use latch_engine_sdk::SessionView;
use latch_engine_sdk::types::{
    ConfigError, ContextBudget, ContextRequest, ContextView, EngineError, EstimatorProfile, Event,
    KernelContextEntry, ModelProfile,
};

/// How an engine call failed. Every variant names the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineFailure {
    /// The engine returned an error of its own.
    #[error("engine `{engine}` {}", engine_error_sentence(error))]
    Engine { engine: String, error: EngineError },
    /// The engine refused its configuration.
    #[error(
        "engine `{engine}` refused its configuration: {}",
        config_error_sentence(error)
    )]
    Config { engine: String, error: ConfigError },
    /// The call ran past its deadline and was interrupted (in the engine's
    /// code, or at the next host-call boundary when the time went to host
    /// calls). `elapsed_ms` is the real time the call took.
    #[error(
        "engine `{engine}` did not answer within its {deadline_ms} ms deadline and was stopped after {elapsed_ms} ms; raise [engine.limits] deadline_ms or fix the engine"
    )]
    Timeout {
        engine: String,
        deadline_ms: u64,
        elapsed_ms: u64,
    },
    /// The engine called an import with input past its limits.
    #[error("engine `{engine}` made a host call the host refuses: {detail}")]
    HostCall { engine: String, detail: String },
    /// The instance tried to grow its memory past the cap.
    #[error(
        "engine `{engine}` ran out of memory (limit {limit_mib} MiB) and was stopped; raise [engine.limits] memory_mib or fix the engine"
    )]
    OutOfMemory { engine: String, limit_mib: u64 },
    /// The guest panicked.
    #[error("engine `{engine}` panicked: {message}")]
    Panic { engine: String, message: String },
    /// The guest trapped for another reason.
    #[error("engine `{engine}` crashed (trap): {message}")]
    Trap { engine: String, message: String },
    /// A new instance could not be created.
    #[error("engine `{engine}` could not be instantiated: {message}")]
    Instantiate { engine: String, message: String },
    /// The engine returned a view (or a `recall` answer) the host refuses;
    /// the message says what the user can do.
    #[error(
        "engine `{engine}` returned {} that breaks the {rule} rule: {detail}. {}",
        refused_noun(*rule),
        rejected_advice(engine)
    )]
    Rejected {
        engine: String,
        rule: ViewRule,
        detail: String,
    },
}

/// An engine's error as the rest of a sentence that starts with the
/// engine's name (the generated types print as Rust values otherwise).
pub fn engine_error_sentence(error: &EngineError) -> String {
    let (what, message) = match error {
        EngineError::InvalidRequest(m) => ("refused the request", m),
        EngineError::BudgetExceeded(m) => ("could not fit the request into its budget", m),
        EngineError::Session(m) => ("could not read the session", m),
        EngineError::Unsupported(m) => ("does not support this call", m),
        EngineError::Internal(m) => ("failed", m),
    };
    if message.trim().is_empty() {
        what.to_string()
    } else {
        format!("{what}: {}", message.trim())
    }
}

/// An engine's refusal of its configuration, as a sentence.
pub fn config_error_sentence(error: &ConfigError) -> String {
    match error {
        ConfigError::UnknownKey(key) => format!("it has no key `{key}`"),
        ConfigError::InvalidValue((key, reason)) => format!("`{key}`: {reason}"),
        ConfigError::Malformed(m) => format!("the configuration is not a JSON object ({m})"),
    }
}

/// What a user can do about a refused view: nothing was sent or lost;
/// check the engine, and go on with another (or report the built-in one).
/// What a refusal under `rule` refused: a view, or a `recall` answer.
fn refused_noun(rule: ViewRule) -> &'static str {
    match rule {
        ViewRule::Recall => "a recall answer",
        _ => "a view",
    }
}

fn rejected_advice(engine: &str) -> String {
    if engine.starts_with("builtin:") {
        format!(
            "Nothing was sent to the provider and nothing committed is lost. This is a fault in \
             Latch's built-in engine: please report it with this message (`latch engine check \
             {engine}` runs the rules on generated sessions); `latch compact` starts a fresh \
             epoch, which may get the session past it"
        )
    } else {
        format!(
            "Nothing was sent to the provider and nothing committed is lost. `latch engine check \
             {engine}` shows the rule it breaks; to go on now, set `[engine] component = \
             \"builtin:continuity\"` in .latch/config.toml and `latch resume` the session: its \
             log is intact"
        )
    }
}

impl EngineFailure {
    /// A short, stable name of the variant (for tests and JSON output).
    pub fn kind(&self) -> &'static str {
        match self {
            EngineFailure::Engine { .. } => "engine",
            EngineFailure::Config { .. } => "config",
            EngineFailure::Timeout { .. } => "timeout",
            EngineFailure::OutOfMemory { .. } => "out-of-memory",
            EngineFailure::Panic { .. } => "panic",
            EngineFailure::Trap { .. } => "trap",
            EngineFailure::Instantiate { .. } => "instantiate",
            EngineFailure::Rejected { .. } => "rejected",
            EngineFailure::HostCall { .. } => "host-call",
        }
    }
}

/// The port: one session's context engine, as the agent loop sees it.
///
/// Implementations hold no store handle: every call gets a read-only
/// [`SessionView`]. The loop never falls back to another engine when a call
/// fails.
pub trait ContextEngine: Send {
    /// The engine's name as configured (`builtin:continuity`, a path, ...).
    fn name(&self) -> &str;
    /// The current configuration as a JSON object.
    fn config(&mut self) -> Result<String, EngineFailure>;
    /// Apply configuration keys (validated by the engine).
    fn set_config(&mut self, json: &str) -> Result<(), EngineFailure>;
    /// Choose the estimator profile.
    fn set_estimator(&mut self, profile: EstimatorProfile) -> Result<(), EngineFailure>;
    /// The engine's default budget for its model.
    fn default_budget(&mut self) -> Result<ContextBudget, EngineFailure>;
    /// Materialize the whole view for the next model request, accepted by
    /// the host's [`ViewGuard`] (`session` is the session as the engine sees
    /// it: see `StoreSessionView::for_engine`).
    fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, EngineFailure>;
    /// `/compact`: the entries starting a fresh epoch, accepted by the
    /// host's [`ViewGuard`].
    fn manual_compact(
        &mut self,
        session: &dyn SessionView,
    ) -> Result<Vec<KernelContextEntry>, EngineFailure>;
    /// Recall original events for a query.
    fn recall(
        &mut self,
        session: &dyn SessionView,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Event>, EngineFailure>;
}

/// Builds the engine of a session. The supervisor holds exactly one and builds
/// every root, child and resumed session's engine through it.
pub trait ContextEngineFactory: Send + Sync {
    /// What this factory builds, e.g. `builtin:continuity`.
    fn describe(&self) -> String;
    /// A configured engine for `session_id` talking to `model`.
    fn create(
        &self,
        session_id: &str,
        model: &ModelProfile,
    ) -> Result<Box<dyn ContextEngine>, EngineFailure>;
}

/// Materialize and check the view with [`check_view`] once more (every
/// implementation already applies its [`ViewGuard`]). A view breaking a rule
/// becomes [`EngineFailure::Rejected`] naming the engine and the rule.
pub fn materialize_checked(
    engine: &mut dyn ContextEngine,
    session: &dyn SessionView,
    request: &ContextRequest,
    profile: EstimatorProfile,
) -> Result<ContextView, EngineFailure> {
    let view = engine.materialize(session, request)?;
    check_view(profile, request, &view).map_err(|(rule, detail)| EngineFailure::Rejected {
        engine: engine.name().to_string(),
        rule,
        detail,
    })?;
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_view_says_what_the_user_can_do() {
        let refused = |engine: &str| {
            EngineFailure::Rejected {
                engine: engine.into(),
                rule: ViewRule::DuplicateToolCall,
                detail: "tool call id `call_0` appears twice".into(),
            }
            .to_string()
        };
        let own = refused("engines/mine.wasm");
        assert!(
            own.starts_with(
                "engine `engines/mine.wasm` returned a view that breaks the duplicate tool call \
                 rule: tool call id `call_0` appears twice. Nothing was sent"
            ),
            "{own}"
        );
        for what in [
            "nothing committed is lost",
            "`latch engine check engines/mine.wasm`",
            "component = \"builtin:continuity\"",
            "`latch resume`",
        ] {
            assert!(own.contains(what), "{what}: {own}");
        }
        let builtin = refused("builtin:continuity");
        assert!(builtin.contains("please report it"), "{builtin}");
        assert!(builtin.contains("`latch compact`"), "{builtin}");
    }
}
