//! Child policies: which engine a child agent gets. A policy is its own
//! component (world `child-policy-engine`); implement [`ChildPolicy`] and
//! export it with [`export_child_policy!`](crate::export_child_policy).

pub use crate::policy_bindings::exports::latch::context::child_policy::{
    ChildEngine, DelegationBrief, EngineSource,
};
use crate::types::ModelProfile;

/// Decides the engine of a child agent from the parent's profile and the
/// child's delegation brief.
pub trait ChildPolicy: 'static {
    /// The engine (and its configuration) for the child, or a reason to refuse
    /// the spawn that the user will read.
    fn choose(parent: ModelProfile, brief: DelegationBrief) -> Result<ChildEngine, String>;
}

#[doc(hidden)]
pub struct PolicyExport<P: ChildPolicy>(std::marker::PhantomData<P>);

impl<P: ChildPolicy> crate::policy_bindings::exports::latch::context::child_policy::Guest
    for PolicyExport<P>
{
    fn choose(parent: ModelProfile, brief: DelegationBrief) -> Result<ChildEngine, String> {
        P::choose(parent, brief)
    }
}

/// Export a [`ChildPolicy`] type as the component's
/// `latch:context/child-policy` interface (for `wasm32-wasip2` builds; expands
/// to nothing elsewhere).
#[macro_export]
macro_rules! export_child_policy {
    ($policy:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            type __LatchPolicyExport = $crate::policy::PolicyExport<$policy>;
            $crate::policy_bindings::__export_child_policy!(__LatchPolicyExport with_types_in $crate::policy_bindings);
        };
    };
}
