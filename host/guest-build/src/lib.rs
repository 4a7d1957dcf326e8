//! Compiles a workspace engine crate to a `wasm32-wasip2` component from a
//! build script.
//!
//! The outer build holds the lock on its target directory, so the nested build
//! uses its own (`<target>/guests`), with the environment that cargo sets for
//! build scripts removed so the outer build's flags and wrappers do not leak in.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target every engine is built for.
pub const GUEST_TARGET: &str = "wasm32-wasip2";
/// The cargo profile used for engines (see the workspace `Cargo.toml`).
pub const GUEST_PROFILE: &str = "guest";

/// Build `package` (a workspace member) as a component and return the path of
/// the `.wasm` file. `watch` lists the directories whose changes must rebuild
/// it; they are forwarded as `rerun-if-changed`.
///
/// Panics with an actionable message when the build fails, e.g. when the
/// `wasm32-wasip2` target is not installed.
pub fn build_component(package: &str, watch: &[&Path]) -> PathBuf {
    let workspace = workspace_root();
    for dir in watch {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    let target_dir = guest_target_dir();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace)
        .args(["build", "--quiet", "-p", package])
        .args(["--target", GUEST_TARGET, "--profile", GUEST_PROFILE])
        .arg("--target-dir")
        .arg(&target_dir);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let leaks = key.starts_with("CARGO_")
            && key != "CARGO_HOME"
            && key != "CARGO_NET_OFFLINE"
            && key != "CARGO_REGISTRIES_CRATES_IO_PROTOCOL";
        let flags = matches!(
            &*key,
            "RUSTFLAGS"
                | "RUSTC_WRAPPER"
                | "RUSTC_WORKSPACE_WRAPPER"
                | "MAKEFLAGS"
                | "MFLAGS"
                | "CARGO_MAKEFLAGS"
                | "TARGET"
                | "HOST"
                | "OUT_DIR"
                | "OPT_LEVEL"
                | "PROFILE"
                | "DEBUG"
                | "NUM_JOBS"
                | "RUSTDOC"
        );
        if leaks || flags {
            cmd.env_remove(&*key);
        }
    }
    let status = cmd.status().unwrap_or_else(|e| {
        panic!("could not run cargo to build the `{package}` engine component: {e}")
    });
    if !status.success() {
        let installed = Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains(GUEST_TARGET))
            .unwrap_or(true);
        if !installed {
            panic!(
                "building the `{package}` engine needs the {GUEST_TARGET} target: run `rustup target add {GUEST_TARGET}`"
            );
        }
        panic!(
            "building the `{package}` engine component for {GUEST_TARGET} failed (see the errors above)"
        );
    }
    let file = format!("{}.wasm", package.replace('-', "_"));
    let wasm = target_dir.join(GUEST_TARGET).join(GUEST_PROFILE).join(file);
    assert!(
        wasm.exists(),
        "the build of `{package}` produced no {}",
        wasm.display()
    );
    wasm
}

/// The workspace root (the directory of the root `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run from a build script"));
    manifest
        .ancestors()
        .find(|dir| {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .map(|s| s.contains("[workspace]"))
                .unwrap_or(false)
        })
        .expect("the crate lives inside the Latch workspace")
        .to_path_buf()
}

/// `<target>/guests`, derived from `OUT_DIR` (`<target>/<profile>/build/<pkg>/out`).
fn guest_target_dir() -> PathBuf {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("run from a build script"));
    out.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent())
        .and_then(|profile| profile.parent())
        .map(|target| target.join("guests"))
        .unwrap_or_else(|| out.join("guests"))
}
