//! Builds the reference ContinuityEngine as a component and hands its path to
//! the crate, which embeds it as the default engine.

fn main() {
    let root = latch_guest_build::workspace_root();
    let wasm = latch_guest_build::build_component(
        "latch-continuity",
        &[
            &root.join("engines/continuity/src"),
            &root.join("engines/continuity/Cargo.toml"),
            &root.join("sdk/src"),
            &root.join("wit"),
        ],
    );
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::copy(&wasm, out.join("continuity.wasm")).expect("copy the continuity component");
}
