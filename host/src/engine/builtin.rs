//! Engines embedded in the `latch` binary, addressed as `builtin:NAME`.

/// The reference ContinuityEngine, compiled for `wasm32-wasip2` by the build.
pub static CONTINUITY_WASM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/continuity.wasm"));

/// The name of the default engine.
pub const DEFAULT_ENGINE: &str = "builtin:continuity";

/// Names of every builtin engine.
pub const BUILTIN_NAMES: &[&str] = &["continuity"];

/// The component bytes of a builtin engine by name (without the `builtin:`
/// prefix).
pub fn builtin_bytes(name: &str) -> Option<&'static [u8]> {
    match name {
        "continuity" => Some(CONTINUITY_WASM),
        _ => None,
    }
}
