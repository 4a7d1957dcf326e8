//! Builds the engine components the end-to-end tests load: the window example,
//! the adversarial fixture engine and the fixture child policy.

fn main() {
    let root = latch_guest_build::workspace_root();
    let sdk = root.join("sdk/src");
    let wit = root.join("wit");
    for (package, dir, var) in [
        (
            "latch-window-engine",
            "engines/examples/window",
            "LATCH_WINDOW_WASM",
        ),
        (
            "latch-fixture-engine",
            "tests/fixtures/misbehave",
            "LATCH_FIXTURE_WASM",
        ),
        (
            "latch-fixture-policy",
            "tests/fixtures/child-policy",
            "LATCH_POLICY_WASM",
        ),
    ] {
        let src = root.join(dir).join("src");
        let wasm = latch_guest_build::build_component(package, &[&src, &sdk, &wit]);
        println!("cargo:rustc-env={var}={}", wasm.display());
    }
}
