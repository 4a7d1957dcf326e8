//! The supervisor: the one place that builds context engines. It holds a
//! single [`ContextEngineFactory`] and builds every root, child and resumed
//! session's engine through it; child sessions get their engine from the
//! configured child policy, and a non-default root engine without a child
//! policy refuses to spawn children rather than fall back to the default.

pub mod children;
pub mod groups;
pub mod profile;

use crate::config::Config;
use crate::engine::policy::{Brief, ChildPolicyComponent, PolicyError};
use crate::engine::runtime::EngineSource;
use crate::engine::{
    ComponentFactory, ContextEngine, ContextEngineFactory, EngineFailure, EngineRuntime, LoadError,
    SandboxLimits,
};
use latch_engine_sdk::types::ModelProfile;
use std::path::Path;
use std::sync::Arc;

/// Why the supervisor could not build an engine.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// The configured engine could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The engine could not be created or configured.
    #[error(transparent)]
    Engine(#[from] EngineFailure),
    /// The configuration is unusable.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A child was requested but no child policy covers a non-default root
    /// engine.
    #[error(
        "cannot spawn a child agent: the root engine `{root}` is not the default, and no [engine.child_policy] says which engine children get; add `[engine.child_policy] component = \"builtin:same\"` (children share the root engine) or a child-policy component"
    )]
    NoChildPolicy { root: String },
    /// The child-policy component refused or failed.
    #[error(transparent)]
    ChildPolicy(#[from] PolicyError),
}

/// Which engine child sessions get.
#[derive(Clone)]
pub enum ChildPolicy {
    /// Children use the root's factory (the default engine, or `builtin:same`).
    SameAsRoot,
    /// No policy: child spawn fails (non-default root engine).
    Refuse,
    /// A child-policy component picks each child's engine; engines it names
    /// by path resolve against `workspace` and run under `limits`.
    Component {
        /// The policy.
        policy: Arc<ChildPolicyComponent>,
        /// Base for relative component paths.
        workspace: std::path::PathBuf,
        /// Sandbox limits for the chosen engines.
        limits: SandboxLimits,
    },
}

/// Builds every session's engine.
pub struct Supervisor {
    factory: Arc<dyn ContextEngineFactory>,
    child_policy: ChildPolicy,
    /// Where engines named by a relative path live, and the limits they
    /// run under, for rebuilding a child's recorded engine.
    workspace: std::path::PathBuf,
    limits: SandboxLimits,
}

/// The engine a child was built with, as its spawn recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedEngine {
    /// The engine's name (`builtin:continuity`, a component path).
    pub engine: String,
    /// Its effective configuration (a JSON object) at spawn.
    pub config: String,
}

impl Supervisor {
    /// A supervisor over an explicit factory and child policy.
    pub fn new(factory: Arc<dyn ContextEngineFactory>, child_policy: ChildPolicy) -> Self {
        Supervisor {
            factory,
            child_policy,
            workspace: std::path::PathBuf::from("."),
            limits: SandboxLimits::default(),
        }
    }

    /// The supervisor the configuration describes.
    pub fn from_config(config: &Config, workspace: &Path) -> Result<Supervisor, SupervisorError> {
        let runtime = EngineRuntime::global()?;
        let loaded = runtime.load(&config.engine_source(workspace))?;
        let factory = ComponentFactory::new(loaded, config.limits(), config.engine_config_json()?);
        let child_policy = match &config.engine.child_policy {
            Some(p) if p.component == "builtin:same" => ChildPolicy::SameAsRoot,
            Some(p) => {
                let source = EngineSource::parse(&p.component, workspace);
                let EngineSource::Path(path) = &source else {
                    return Err(LoadError::UnknownBuiltin {
                        name: p.component.clone(),
                        available: "builtin:same (children share the root engine)".into(),
                    }
                    .into());
                };
                let bytes = std::fs::read(path).map_err(|e| LoadError::Read {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
                let policy = ChildPolicyComponent::load(
                    runtime,
                    &source.to_string(),
                    &bytes,
                    config.limits(),
                )?;
                ChildPolicy::Component {
                    policy,
                    workspace: workspace.to_path_buf(),
                    limits: config.limits(),
                }
            }
            None if config.engine_is_default() => ChildPolicy::SameAsRoot,
            None => ChildPolicy::Refuse,
        };
        Ok(Supervisor {
            workspace: workspace.to_path_buf(),
            limits: config.limits(),
            ..Supervisor::new(Arc::new(factory), child_policy)
        })
    }

    /// The factory every session's engine is built with.
    pub fn factory(&self) -> &Arc<dyn ContextEngineFactory> {
        &self.factory
    }

    /// The engine of a root (or resumed root) session.
    pub fn root_engine(
        &self,
        session_id: &str,
        model: &ModelProfile,
    ) -> Result<Box<dyn ContextEngine>, SupervisorError> {
        Ok(self.factory.create(session_id, model)?)
    }

    /// The engine of a child session (spawned or resumed), per the child
    /// policy, for a child with no particular brief.
    pub fn child_engine(
        &self,
        session_id: &str,
        model: &ModelProfile,
    ) -> Result<Box<dyn ContextEngine>, SupervisorError> {
        let brief = Brief {
            parent_session: String::new(),
            role: "child".into(),
            task: String::new(),
            child_model: model.clone(),
        };
        self.child_engine_for(session_id, model, &brief)
    }

    /// The engine of a child session, per the child policy, given the
    /// parent's model and the child's delegation brief.
    pub fn child_engine_for(
        &self,
        session_id: &str,
        parent_model: &ModelProfile,
        brief: &Brief,
    ) -> Result<Box<dyn ContextEngine>, SupervisorError> {
        match &self.child_policy {
            ChildPolicy::SameAsRoot => Ok(self.factory.create(session_id, &brief.child_model)?),
            ChildPolicy::Refuse => Err(SupervisorError::NoChildPolicy {
                root: self.factory.describe(),
            }),
            ChildPolicy::Component {
                policy,
                workspace,
                limits,
            } => {
                let choice = policy.choose(parent_model, brief)?;
                let runtime = EngineRuntime::global()?;
                let loaded = runtime.load(&EngineSource::parse(&choice.engine, workspace))?;
                let config = (choice.config_json.trim() != "{}").then_some(choice.config_json);
                let factory = ComponentFactory::new(loaded, limits.clone(), config);
                Ok(factory.create(session_id, &brief.child_model)?)
            }
        }
    }

    /// The engine of a resumed child, rebuilt from its durable profile:
    /// the engine and configuration its spawn recorded. The supervisor's
    /// factory builds it when the recorded engine is the factory's (with
    /// the recorded configuration set back when the current one differs);
    /// an engine the configuration no longer names is loaded again from
    /// its recorded source — never another engine in its place. A child
    /// recorded without an engine (an older log) gets the one the child
    /// policy picks for `brief`.
    pub fn rebuild_child_engine(
        &self,
        session_id: &str,
        parent_model: &ModelProfile,
        brief: &Brief,
        recorded: &RecordedEngine,
    ) -> Result<Box<dyn ContextEngine>, SupervisorError> {
        if recorded.engine.is_empty() {
            return self.child_engine_for(session_id, parent_model, brief);
        }
        let model = &brief.child_model;
        let mut engine = if recorded.engine == self.factory.describe() {
            self.factory.create(session_id, model)?
        } else {
            let runtime = EngineRuntime::global()?;
            let loaded = runtime.load(&EngineSource::parse(&recorded.engine, &self.workspace))?;
            ComponentFactory::new(loaded, self.limits.clone(), None).create(session_id, model)?
        };
        let wanted = recorded.config.trim();
        if !wanted.is_empty() && !same_json(&engine.config()?, wanted) {
            engine.set_config(wanted)?;
        }
        Ok(engine)
    }
}

/// True when two JSON texts hold the same value (key order and spacing
/// aside); texts that are not JSON compare as text.
fn same_json(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}
