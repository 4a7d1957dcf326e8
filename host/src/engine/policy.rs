//! Child-policy components: the `child-policy-engine` world, run in the same
//! sandbox as engines, asked which engine each child agent gets.

use super::bindings::child_policy::ChildPolicyEnginePre;
use super::bindings::child_policy::exports::latch::context::child_policy as cp;
use super::convert::Conv;
use super::runtime::{EngineRuntime, LoadError};
use super::sandbox::{EngineState, SandboxLimits};
use latch_engine_sdk::types::ModelProfile;
use std::sync::Arc;
use wasmtime::Store;
use wasmtime::component::Linker;

/// Which engine a policy chose for a child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildChoice {
    /// `builtin:NAME` or a component path (as the policy wrote it).
    pub engine: String,
    /// The engine configuration, a JSON object.
    pub config_json: String,
}

/// The child's side of a delegation, as the policy sees it.
#[derive(Clone, Debug)]
pub struct Brief {
    /// The parent session id.
    pub parent_session: String,
    /// The child's role.
    pub role: String,
    /// The task as the parent phrased it.
    pub task: String,
    /// The child's model.
    pub child_model: ModelProfile,
}

/// Why a policy gave no engine.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The policy refused, with its reason.
    #[error("child policy `{policy}` refused: {reason}")]
    Refused { policy: String, reason: String },
    /// The policy crashed or timed out.
    #[error("child policy `{policy}` failed: {message}")]
    Failed { policy: String, message: String },
}

/// A loaded child-policy component.
pub struct ChildPolicyComponent {
    name: String,
    pre: ChildPolicyEnginePre<EngineState>,
    limits: SandboxLimits,
}

impl ChildPolicyComponent {
    /// Load a child-policy component from bytes.
    pub fn load(
        runtime: &EngineRuntime,
        name: &str,
        bytes: &[u8],
        limits: SandboxLimits,
    ) -> Result<Arc<ChildPolicyComponent>, LoadError> {
        let info = runtime.inspect_bytes(name, bytes)?;
        if info.world != "child-policy-engine" {
            return Err(LoadError::WrongWorld {
                name: name.to_string(),
                found: format!(
                    "a {} component; a child policy exports latch:context/child-policy@0.1.x",
                    info.world
                ),
            });
        }
        let (component, _) = runtime.compile(name, bytes)?;
        let link = |e: wasmtime::Error| LoadError::Link {
            name: name.to_string(),
            message: format!("{e:#}"),
        };
        let mut linker = Linker::<EngineState>::new(runtime.wasmtime());
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(link)?;
        // The contract's types interface carries no functions.
        linker.instance("latch:context/types@0.1.0").map_err(link)?;
        let pre = ChildPolicyEnginePre::new(linker.instantiate_pre(&component).map_err(link)?)
            .map_err(link)?;
        Ok(Arc::new(ChildPolicyComponent {
            name: name.to_string(),
            pre,
            limits,
        }))
    }

    /// Ask the policy for a child's engine. Every call runs in a fresh
    /// sandboxed instance, so a policy keeps no state between children.
    pub fn choose(&self, parent: &ModelProfile, brief: &Brief) -> Result<ChildChoice, PolicyError> {
        let failed = |e: wasmtime::Error| PolicyError::Failed {
            policy: self.name.clone(),
            message: format!("{e:#}"),
        };
        let (state, _handles) = EngineState::new(&self.limits, &brief.parent_session);
        let mut store = Store::new(self.pre.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(
            self.limits
                .deadline_ms
                .div_ceil(super::runtime::EPOCH_TICK.as_millis() as u64)
                + 1,
        );
        store.epoch_deadline_trap();
        let instance = self.pre.instantiate(&mut store).map_err(failed)?;
        let parent = parent.clone().conv();
        let brief = cp::DelegationBrief {
            parent_session: brief.parent_session.clone(),
            role: brief.role.clone(),
            task: brief.task.clone(),
            child_model: brief.child_model.clone().conv(),
        };
        let answer = instance
            .latch_context_child_policy()
            .call_choose(&mut store, &parent, &brief)
            .map_err(failed)?;
        match answer {
            Ok(choice) => Ok(ChildChoice {
                engine: match choice.source {
                    cp::EngineSource::Builtin(name) => format!("builtin:{name}"),
                    cp::EngineSource::Component(path) => path,
                },
                config_json: choice.config_json,
            }),
            Err(reason) => Err(PolicyError::Refused {
                policy: self.name.clone(),
                reason,
            }),
        }
    }
}
