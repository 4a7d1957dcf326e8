//! Host bindings generated from `wit/` by wasmtime's `bindgen!`. Kept in its own
//! module because the generated code is large and changes only with the WIT.

/// Bindings of the `context-engine` world.
pub mod context {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "context-engine",
        with: {
            "latch:context/session.session-view": crate::engine::session_host::SessionHandle,
        },
        imports: { default: trappable },
    });
}

/// Bindings of the `child-policy-engine` world.
pub mod child_policy {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "child-policy-engine",
    });
}
