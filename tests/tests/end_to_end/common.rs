//! Helpers shared by the end-to-end tests of this binary.

use latch::engine::runtime::EngineSource;
use latch::engine::{EngineRuntime, LoadedComponent};
use std::sync::{Arc, OnceLock};

/// The embedded ContinuityEngine, compiled once for the whole test binary.
pub fn continuity() -> Arc<LoadedComponent> {
    static RUNTIME: OnceLock<EngineRuntime> = OnceLock::new();
    static LOADED: OnceLock<Arc<LoadedComponent>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            RUNTIME
                .get_or_init(|| EngineRuntime::new(None).unwrap())
                .load(&EngineSource::Builtin("continuity".into()))
                .unwrap()
        })
        .clone()
}
