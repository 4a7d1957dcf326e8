//! Paths of the engine components built for the end-to-end tests.

/// The sliding-window example engine, as a component.
pub const WINDOW_WASM: &str = env!("LATCH_WINDOW_WASM");
/// The adversarial fixture engine, as a component.
pub const FIXTURE_WASM: &str = env!("LATCH_FIXTURE_WASM");
/// The fixture child policy, as a component.
pub const POLICY_WASM: &str = env!("LATCH_POLICY_WASM");
