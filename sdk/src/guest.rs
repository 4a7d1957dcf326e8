//! Glue between an [`Engine`](crate::Engine) and the component exports. Used by
//! [`export_engine!`](crate::export_engine); compiled for every target so that a
//! native `cargo check` sees the same code, but only called inside a component.

use crate::bindings::exports::latch::context::engine::{
    ConfigError, ContextBudget, ContextRequest, ContextView, EngineError, GuestContextEngine,
};
use crate::bindings::latch::context::estimator;
use crate::bindings::latch::context::session::SessionView as ImportedSession;
use crate::engine::{Engine, SessionView};
use crate::types::*;
use std::cell::RefCell;

/// The exported resource: one engine instance behind a `RefCell`, because the
/// component model hands methods `&self`.
pub struct EngineResource<E: Engine> {
    engine: RefCell<E>,
}

/// The imported `session-view`, seen through the [`SessionView`] trait.
pub struct ImportedSessionView<'a>(pub &'a ImportedSession);

impl SessionView for ImportedSessionView<'_> {
    fn info(&self) -> SessionInfo {
        self.0.info()
    }
    fn latest_seq(&self) -> u64 {
        self.0.latest_seq()
    }
    fn events(&self, from: u64, to: u64, limit: u32) -> Vec<Event> {
        self.0.events(from, to, limit)
    }
    fn events_before(&self, before: u64, limit: u32) -> Vec<Event> {
        self.0.events_before(before, limit)
    }
    fn events_outline(
        &self,
        from: u64,
        to: u64,
        limit: u32,
        profile: EstimatorProfile,
    ) -> Vec<OutlinedEvent> {
        self.0.events_outline(from, to, limit, profile)
    }
    fn search(&self, query: &str, before: u64, limit: u32) -> Vec<SearchHit> {
        self.0.search(query, before, limit)
    }
    fn canonical_state(&self) -> CanonicalState {
        self.0.canonical_state()
    }
    fn artifact(&self, sha256: &str) -> Option<MediaRef> {
        self.0.artifact(sha256)
    }
}

/// Ask the host's estimator (for engines that want to be sure they price text
/// exactly as the host does; Rust engines can call [`crate::estimate()`] locally,
/// which is the same code).
pub fn host_estimate(profile: EstimatorProfile, texts: &[String]) -> Vec<u32> {
    estimator::estimate(profile, texts)
}

impl<E: Engine> GuestContextEngine for EngineResource<E> {
    fn new(model: ModelProfile) -> Self {
        EngineResource {
            engine: RefCell::new(E::new(model)),
        }
    }
    fn config(&self) -> String {
        self.engine.borrow().config()
    }
    fn set_config(&self, json: String) -> Result<(), ConfigError> {
        self.engine.borrow_mut().set_config(&json)
    }
    fn set_estimator(&self, profile: EstimatorProfile) {
        self.engine.borrow_mut().set_estimator(profile)
    }
    fn default_budget(&self) -> ContextBudget {
        self.engine.borrow().default_budget()
    }
    fn materialize(
        &self,
        session: &ImportedSession,
        request: ContextRequest,
    ) -> Result<ContextView, EngineError> {
        let view = ImportedSessionView(session);
        self.engine.borrow_mut().materialize(&view, &request)
    }
    fn manual_compact(
        &self,
        session: &ImportedSession,
    ) -> Result<Vec<KernelContextEntry>, EngineError> {
        let view = ImportedSessionView(session);
        self.engine.borrow_mut().manual_compact(&view)
    }
    fn recall(
        &self,
        session: &ImportedSession,
        query: String,
        limit: u32,
    ) -> Result<Vec<Event>, EngineError> {
        let view = ImportedSessionView(session);
        self.engine.borrow_mut().recall(&view, &query, limit)
    }
}

/// Export an [`Engine`](crate::Engine) type as the component's
/// `latch:context/engine` interface. Invoke once, at the crate root of a
/// `cdylib` built for `wasm32-wasip2`:
///
/// ```ignore
/// latch_engine_sdk::export_engine!(MyEngine);
/// ```
///
/// On other targets the macro expands to nothing, so the same source also
/// builds natively for tests and benchmarks.
#[macro_export]
macro_rules! export_engine {
    ($engine:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __LatchEngineExport;
            impl $crate::bindings::exports::latch::context::engine::Guest for __LatchEngineExport {
                type ContextEngine = $crate::guest::EngineResource<$engine>;
            }
            $crate::bindings::__export_context_engine!(__LatchEngineExport with_types_in $crate::bindings);
        };
    };
}
