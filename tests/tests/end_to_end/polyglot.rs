//! Engines in Python, JavaScript and C, and `latch engine new`.
//!
//! * The Python masking engine, as the host runs it, returns the same bytes
//!   from a fresh instance as from the warm one at every view of a generated
//!   session of more than 800 events (resume equivalence), and the same
//!   bytes when asked twice (determinism); along the way it rotates epochs,
//!   elides old tool output and answers a `/compact`, and the host's view
//!   guard accepts every view.
//! * `latch engine new` scaffolds build by their own instructions and pass
//!   the conformance suite: Rust and C here, Python and JavaScript in the
//!   local tier (`--ignored`: their toolchains take minutes per build).
//!
//! The example components are built by their build scripts, not by cargo:
//! `.ci/run` builds them before the tests, and a test that finds one missing
//! fails naming the command that builds it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use latch::cli::engine_new::{self, Lang};
use latch::engine::conformance::ComponentCandidate;
use latch::engine::runtime::EngineSource;
use latch::engine::{
    ComponentEngine, ContextEngine, EngineRuntime, LoadedComponent, SandboxLimits,
};
use latch_continuity::testkit::{self, Host, IndexedSession, Script};
use latch_engine_sdk::SessionView;
use latch_engine_sdk::types::*;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// The component an example's build script leaves, or a panic naming the
/// command that builds it.
pub fn example(name: &str) -> PathBuf {
    let path = root()
        .join("engines/examples")
        .join(name)
        .join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: build it with `engines/examples/{name}/build.sh` (.ci/run does this before the tests)",
        path.display()
    );
    path
}

fn runtime() -> &'static EngineRuntime {
    static RT: OnceLock<EngineRuntime> = OnceLock::new();
    RT.get_or_init(|| EngineRuntime::new(None).expect("runtime"))
}

fn python() -> Arc<LoadedComponent> {
    static LOADED: OnceLock<Arc<LoadedComponent>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            runtime()
                .load(&EngineSource::Path(example("python-masking")))
                .expect("python-masking loads")
        })
        .clone()
}

fn model() -> ModelProfile {
    ModelProfile::with_defaults("anthropic", "test-model")
}

fn python_engine() -> ComponentEngine {
    ComponentEngine::new(python(), SandboxLimits::default(), "generated", model())
}

/// The canonical bytes of a value (`serde_json`).
macro_rules! json {
    ($value:expr) => {
        serde_json::to_string($value).expect("serializes")
    };
}

fn assert_same(what: &str, expected: &str, got: &str) {
    if expected == got {
        return;
    }
    let at = expected
        .bytes()
        .zip(got.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(got.len()));
    let window = |s: &str| {
        let from = s.floor_char_boundary(at.saturating_sub(100));
        let to = s.ceil_char_boundary((at + 100).min(s.len()));
        s[from..to].to_string()
    };
    panic!(
        "{what}: the bytes differ at offset {at}:\n  warm  …{}…\n  fresh …{}…",
        window(expected),
        window(got)
    );
}

/// Drives a warm Python engine; at every view a fresh instance on the same
/// log must give the same bytes, and every seventh view is asked twice.
struct WarmAndFresh {
    warm: ComponentEngine,
    views: usize,
    rotations: usize,
    generations: std::collections::BTreeSet<u64>,
    reasons: std::collections::BTreeSet<String>,
    elided: usize,
    state_updates: usize,
}

impl Host for WarmAndFresh {
    fn materialize(&mut self, session: &IndexedSession, request: &ContextRequest) -> ContextView {
        let at = session.latest_seq();
        let warm = self.warm.materialize(session, request).expect("warm view");
        let cold = python_engine()
            .materialize(session, request)
            .expect("fresh view");
        assert_same(
            &format!("view {} at event {at} (warm vs fresh instance)", self.views),
            &json!(&warm),
            &json!(&cold),
        );
        if self.views % 7 == 3 {
            let again = self.warm.materialize(session, request).expect("repeat");
            assert_same(
                &format!("view {} at event {at} asked twice", self.views),
                &json!(&warm),
                &json!(&again),
            );
        }
        self.views += 1;
        self.rotations += usize::from(warm.report.status == "rotated");
        self.generations.extend(warm.report.epoch_generation);
        self.reasons.extend(warm.report.rotation_reason.clone());
        self.state_updates += warm
            .persist
            .iter()
            .filter(|e| e.kind == KernelContextKind::StateUpdate)
            .count();
        self.elided += warm
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter(
                |p| matches!(p, Part::ToolResult(r) if r.content.starts_with("[output elided: ≈")),
            )
            .count();
        warm
    }

    fn manual_compact(&mut self, session: &IndexedSession) -> Vec<KernelContextEntry> {
        let warm = self.warm.manual_compact(session).expect("compact");
        let cold = python_engine().manual_compact(session).expect("compact");
        assert_same("/compact entries", &json!(&warm), &json!(&cold));
        warm
    }
}

#[test]
fn python_masking_views_are_deterministic_and_a_fresh_instance_equals_the_warm_one() {
    let mut script = Script::new(11, 120);
    script.compact_at = vec![80];
    let mut host = WarmAndFresh {
        warm: python_engine(),
        views: 0,
        rotations: 0,
        generations: Default::default(),
        reasons: Default::default(),
        elided: 0,
        state_updates: 0,
    };
    let session = testkit::run(&script, &mut host);
    let events = session.memory().events.len();
    assert!(events >= 800, "generated {events} events");
    assert!(host.rotations >= 3, "{} rotations", host.rotations);
    assert!(host.generations.len() >= 4, "{:?}", host.generations);
    assert!(host.elided > 0, "no view elided a tool result");
    assert!(host.state_updates > 0, "no view appended a state update");
    assert!(
        host.reasons.contains("the user asked to compact"),
        "{:?}",
        host.reasons
    );
    assert_eq!(
        host.warm.instantiations(),
        1,
        "the warm instance stayed warm"
    );
}

/// Scaffold `name` in `lang` under `dir`, build it by its README's
/// instructions and run the conformance suite on the result, as `latch
/// engine check` does.
fn scaffold_builds_and_passes(lang: Lang, env: &[(&str, PathBuf)]) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let name = "my-engine";
    let dir = tmp.path().join(name);
    engine_new::scaffold(&dir, name, lang, None).expect("scaffold");
    let (build, artifact) = engine_new::build_instructions(lang, name);
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("README");
    assert!(readme.contains(build), "the README says how to build");
    let mut command = Command::new("sh");
    command.arg("-c").arg(build).current_dir(&dir);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("the build runs");
    assert!(
        out.status.success(),
        "`{build}` failed for the {lang:?} scaffold:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let wasm = match env.iter().find(|(k, _)| *k == "CARGO_TARGET_DIR") {
        Some((_, target)) => target.join(artifact.trim_start_matches("target/")),
        None => dir.join(&artifact),
    };
    assert!(wasm.is_file(), "the build left no {}", wasm.display());
    let loaded = runtime()
        .load(&EngineSource::Path(wasm))
        .expect("the scaffold loads");
    let limits = SandboxLimits {
        deadline_ms: 20_000,
        ..SandboxLimits::default()
    };
    let options = latch_conformance::Options {
        deadline_ms: limits.deadline_ms,
        perf_events: 2_000,
        ..latch_conformance::Options::default()
    };
    let report = latch_conformance::run(&ComponentCandidate::new(loaded, limits, None), &options);
    println!("{}", report.table());
    assert!(
        report.passed,
        "the {lang:?} scaffold fails latch engine check"
    );
}

/// Where CI keeps the polyglot toolchains (`.ci/run` installs them there),
/// so scaffold builds reuse them instead of installing their own.
fn tools() -> PathBuf {
    std::env::var_os("LATCH_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".ci/cache/tools"))
}

#[test]
fn a_rust_scaffold_builds_as_is_and_passes_the_suite() {
    // One target folder for every run, so the SDK and its dependencies
    // build once.
    let target = root().join("target/scaffolds");
    scaffold_builds_and_passes(Lang::Rust, &[("CARGO_TARGET_DIR", target.clone())]);
}

#[test]
fn a_c_scaffold_builds_as_is_and_passes_the_suite() {
    scaffold_builds_and_passes(Lang::C, &[("LATCH_TOOLS", tools())]);
}

#[test]
#[ignore = "local tier: componentize-py takes about a minute per build"]
fn a_python_scaffold_builds_as_is_and_passes_the_suite() {
    scaffold_builds_and_passes(Lang::Python, &[("LATCH_TOOLS", tools())]);
}

#[test]
#[ignore = "local tier: npm install and componentize-js take minutes per build"]
fn a_js_scaffold_builds_as_is_and_passes_the_suite() {
    scaffold_builds_and_passes(Lang::Js, &[]);
}
