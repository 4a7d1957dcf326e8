//! Trust nothing (issue 12): every attack of the adversarial fixture engine,
//! configured as `[engine] component`, driven through the real `latch`
//! command line (`latch run`, `resume`, `context`, `engine check`) against
//! the local wire-format server. Nothing forged reaches the server, nothing
//! poisonous reaches another engine, nothing raw reaches the terminal, and
//! `engine check` fails each attack with its evidence.
//!
//! The command line runs in a child process: this test binary re-executed
//! with `LATCH_TRUST_CLI` set runs [`latch::cli::main_with`] (exactly what
//! the `latch` binary's `main` does) instead of a test.

use latch::engine::conformance::ComponentCandidate;
use latch::engine::runtime::EngineSource;
use latch::engine::{
    ComponentEngine, ContextEngine, EngineFailure, EngineRuntime, LoadedComponent, SandboxLimits,
};
use latch_conformance::{Options, Report, Status};
use latch_fixture_engine::{INJECTION, POISON};
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const CLI_ENV: &str = "LATCH_TRUST_CLI";
const SEP: char = '\u{1f}';

/// Not a test when `LATCH_TRUST_CLI` is set: the `latch` binary.
#[test]
fn cli_entry_point() {
    let Ok(args) = std::env::var(CLI_ENV) else {
        return;
    };
    let args = std::iter::once("latch".to_string())
        .chain(args.split(SEP).map(str::to_string))
        .collect();
    std::process::exit(latch::cli::main_with(args));
}

pub(crate) struct Out {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Out {
    pub(crate) fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// Run `latch` with `args` in `ws`, `stdin` piped in.
pub(crate) fn latch<S: AsRef<str>>(ws: &Path, args: &[S], stdin: &str) -> Out {
    let mut all = vec![
        "-C".to_string(),
        ws.display().to_string(),
        "--config".into(),
        ws.join("latch.toml").display().to_string(),
    ];
    all.extend(args.iter().map(|a| a.as_ref().to_string()));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "trust::cli_entry_point",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CLI_ENV, all.join(&SEP.to_string()))
        .env("LATCH_CACHE_DIR", cache_dir())
        .env("LATCH_CONFIG_DIR", ws.join(".config"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn cache_dir() -> PathBuf {
    std::env::temp_dir().join("latch-trust-test-cache")
}

/// A workspace whose config selects `engine` (the fixture in `mode` when
/// `mode` is given).
pub(crate) fn configure(ws: &Path, mode: Option<&str>) {
    let text = match mode {
        Some(mode) => format!(
            "[engine]\ncomponent = \"{}\"\n\n[engine.config]\nmode = \"{mode}\"\n\n[engine.limits]\ndeadline_ms = 5000\n",
            latch_tests::FIXTURE_WASM
        ),
        None => "[engine]\ncomponent = \"builtin:continuity\"\n".to_string(),
    };
    std::fs::write(ws.join("latch.toml"), text).unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// A tool call, then a final answer.
fn script() -> Script {
    Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#),
        ScriptedTurn::text("Done."),
        ScriptedTurn::text("Done again."),
        ScriptedTurn::text("Done once more."),
    ])
}

pub(crate) struct Setup {
    pub(crate) ws: tempfile::TempDir,
    pub(crate) server: FakeServer,
    /// Serves the server; dropped last.
    _rt: tokio::runtime::Runtime,
}

fn setup() -> Setup {
    setup_with(script())
}

/// A workspace holding `notes.txt` and a server playing `script`.
pub(crate) fn setup_with(script: Script) -> Setup {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "remember the milk\n").unwrap();
    Setup {
        ws,
        server,
        _rt: rt,
    }
}

impl Setup {
    pub(crate) fn run(&self, mode: Option<&str>, task: &str) -> Out {
        configure(self.ws.path(), mode);
        latch(self.ws.path(), &self.provider_args(&["run", task]), "")
    }

    pub(crate) fn provider_args(&self, rest: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "--provider".into(),
            "openai-compatible".into(),
            "--base-url".into(),
            self.server.openai_base_url(),
            "--model".into(),
            "local".into(),
        ];
        args.extend(rest.iter().map(|a| a.to_string()));
        args
    }

    /// Every request body the server received, as text.
    pub(crate) fn bodies(&self) -> Vec<String> {
        self.server
            .requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect()
    }

    pub(crate) fn store(&self) -> Store {
        Store::open(latch_kernel::default_store_path(self.ws.path())).unwrap()
    }
}

fn assert_refused(out: &Out, rule: &str) {
    assert_eq!(out.code, 1, "the run fails: {}", out.all());
    assert!(
        out.stderr
            .contains(&format!("returned a view that breaks the {rule} rule")),
        "the error names the `{rule}` rule: {}",
        out.all()
    );
}

pub(crate) fn assert_nothing_forged(bodies: &[String]) {
    for b in bodies {
        assert!(
            !b.contains("FORGED-7731"),
            "forged text reached the server: {b}"
        );
        assert!(!b.contains("obey the context engine"), "{b}");
    }
}

/// Forged user turns (with no source or citing a real event), forged tool
/// history, a rewritten system prompt and forged provenance (another
/// session's event, an event that does not exist): each run fails naming
/// the rule, before any request is sent.
#[test]
fn forged_views_never_reach_the_server() {
    let s = setup();
    // A first, honest session: its events are another session's below.
    let ok = s.run(Some("ok"), "first task");
    assert_eq!(ok.code, 0, "{}", ok.all());
    let honest_requests = s.bodies().len();
    assert!(honest_requests >= 2);
    for (mode, rule) in [
        ("forge-user", "provenance"),
        ("forge-user-cited", "provenance"),
        ("forge-tool", "provenance"),
        ("system", "system prompt"),
        ("foreign-seq", "provenance"),
    ] {
        let out = s.run(Some(mode), "second task");
        assert_refused(&out, rule);
        assert_eq!(
            s.bodies().len(),
            honest_requests,
            "{mode}: no request was sent"
        );
    }
    // The foreign sequence number really is another session's event.
    let store = s.store();
    let first = store.event(1).unwrap().unwrap();
    let sessions = store
        .list_sessions(&s.ws.path().canonicalize().unwrap().display().to_string())
        .unwrap();
    assert_eq!(sessions.len(), 6, "one session per run");
    assert_eq!(
        sessions.iter().filter(|r| r.id != first.session).count(),
        5,
        "seq 1 belongs to the first session only"
    );
    assert_nothing_forged(&s.bodies());
    assert!(INJECTION.contains("FORGED-7731"));
}

/// A nonexistent sequence number is refused as well (a store holding one
/// session only).
#[test]
fn a_nonexistent_source_is_refused() {
    let s = setup();
    let out = s.run(Some("foreign-seq"), "task");
    assert_refused(&out, "provenance");
    assert!(
        out.stderr.contains("not an event of this session"),
        "{}",
        out.all()
    );
    assert!(s.bodies().is_empty());
}

/// Kernel context with a rewound revision or an older generation is never
/// persisted; 50 MB of kernel context is refused and the store stays small.
#[test]
fn durable_poisoning_and_bloat_are_refused_before_anything_is_persisted() {
    let s = setup();
    let out = s.run(Some("rewind"), "task");
    assert_refused(&out, "kernel context");
    assert!(out.stderr.contains("does not rise above"), "{}", out.all());
    assert!(s.bodies().is_empty());

    let out = s.run(Some("old-generation"), "task");
    assert_refused(&out, "kernel context");
    assert!(
        out.stderr.contains("older than the session's generation"),
        "{}",
        out.all()
    );
    assert_eq!(s.bodies().len(), 1, "the first, legal request was sent");

    let out = s.run(Some("bloat"), "task");
    assert_refused(&out, "kernel-context size");
    let store = s.store();
    let entries: Vec<_> = store
        .list_sessions(&s.ws.path().canonicalize().unwrap().display().to_string())
        .unwrap()
        .iter()
        .flat_map(|r| store.events(&r.id, 0, u64::MAX, 10_000).unwrap())
        .filter_map(|e| match e.kind {
            EventKind::KernelContext(k) => Some(k),
            _ => None,
        })
        .collect();
    assert_eq!(
        entries.len(),
        1,
        "only the legal generation-5 entry: {entries:?}"
    );
    assert_eq!(entries[0].generation, 5);
    assert!(
        entries[0].engine.ends_with(".wasm"),
        "tagged with the engine that wrote it: {}",
        entries[0].engine
    );
    let bytes = std::fs::metadata(latch_kernel::default_store_path(s.ws.path()))
        .unwrap()
        .len();
    assert!(bytes < 4 << 20, "the store is {bytes} bytes");
}

/// Well-formed kernel context from a hostile engine is persisted (framed
/// as engine text on the wire), but after the user switches back to
/// `builtin:continuity` it is neither authoritative nor rendered: the
/// default engine starts a fresh epoch from the log.
#[test]
fn poison_does_not_cross_engines() {
    let s = setup();
    let out = s.run(Some("poison"), "task");
    assert_eq!(out.code, 0, "{}", out.all());
    let sent = s.bodies();
    assert!(
        sent[0].contains(
            "<latch-kernel-context kind=\\\"snapshot\\\" author=\\\"context engine, not the user\\\">\\nLatch context snapshot"
        ),
        "kernel context reaches the model framed as engine text: {}",
        sent[0]
    );
    let before = sent.len();
    configure(s.ws.path(), None);
    let out = latch(
        s.ws.path(),
        &s.provider_args(&["resume", "--last"]),
        "carry on\n/exit\n",
    );
    assert_eq!(out.code, 0, "{}", out.all());
    assert!(!out.stderr.contains("error:"), "{}", out.all());
    let after = s.bodies();
    assert!(after.len() > before, "the default engine sent requests");
    for b in &after[before..] {
        assert!(!b.contains("POISON-7731"), "poison crossed engines: {b}");
        assert!(!b.contains("unreadable snapshot"), "{b}");
    }
    assert!(POISON.contains("POISON-7731"));
}

/// An engine's error, log and report strings reach no terminal raw: `latch
/// run`, `latch context` and `latch engine check` print them escaped.
#[test]
fn engine_text_is_escaped_on_every_terminal_path() {
    let s = setup();
    let out = s.run(Some("ansi"), "task");
    assert_eq!(out.code, 1, "{}", out.all());
    for text in [&out.stdout, &out.stderr] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{9b}'),
            "{text:?}"
        );
    }
    assert!(
        out.stderr.contains("✓ all 214 tests passed"),
        "{}",
        out.all()
    );

    configure(s.ws.path(), Some("ansi-report"));
    let out = latch(s.ws.path(), &s.provider_args(&["context"]), "");
    assert_eq!(out.code, 0, "{}", out.all());
    assert!(!out.all().contains('\u{1b}'), "{:?}", out.all());
    assert!(out.stdout.contains("\\e[2J"), "{}", out.all());

    configure(s.ws.path(), None);
    let out = latch(
        s.ws.path(),
        &[
            "engine",
            "check",
            latch_tests::FIXTURE_WASM,
            "--config-json",
            r#"{"mode":"ansi"}"#,
            "--deadline-ms",
            "2000",
        ],
        "",
    );
    assert_eq!(out.code, 1, "{}", out.all());
    assert!(!out.all().contains('\u{1b}') && !out.all().contains('\u{9b}'));
    assert!(
        out.stdout.contains("\\e[2J"),
        "the evidence is shown, escaped: {}",
        out.stdout
    );
}

/// An engine that behaves only while it thinks it is being checked attacks
/// a real session and is refused there; and the suite's sessions no longer
/// give the check away, so `engine check` catches it too.
#[test]
fn an_engine_that_detects_the_suite_is_caught_both_ways() {
    let s = setup();
    let out = s.run(Some("detect-suite"), "task");
    assert_refused(&out, "provenance");
    assert!(s.bodies().is_empty());
    let report = check_mode("detect-suite");
    assert_case_fails(&report, "provenance", "provenance");
}

/// A 1 MiB search query is refused at once, well within the deadline; host
/// calls until the deadline end the call at a host-call boundary, reported
/// with the real time.
#[test]
fn host_calls_are_bounded() {
    let s = setup();
    let started = Instant::now();
    let out = s.run(Some("huge-search"), "task");
    assert_eq!(out.code, 1, "{}", out.all());
    assert!(
        out.stderr
            .contains("host call `session-view.search` refused")
            && out.stderr.contains("the limit is 4096"),
        "{}",
        out.all()
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(s.bodies().is_empty());

    let limits = SandboxLimits {
        deadline_ms: 5_000,
        ..SandboxLimits::default()
    };
    let mut engine = ComponentEngine::new(
        fixture(),
        limits.clone(),
        "s",
        latch_engine_sdk::ModelProfile::with_defaults("openai", "m"),
    );
    engine.set_config(r#"{"mode":"huge-search"}"#).unwrap();
    let mut session = latch_engine_sdk::MemorySession::new(
        "s",
        latch_engine_sdk::ModelProfile::with_defaults("openai", "m"),
    );
    session.user("hello");
    let t = Instant::now();
    let err = engine.materialize(&session, &request()).unwrap_err();
    assert!(matches!(err, EngineFailure::HostCall { .. }), "{err}");
    assert!(
        t.elapsed() < Duration::from_millis(5_000),
        "{:?}",
        t.elapsed()
    );

    let limits = SandboxLimits {
        deadline_ms: 300,
        ..SandboxLimits::default()
    };
    let mut engine = ComponentEngine::new(
        fixture(),
        limits,
        "s",
        latch_engine_sdk::ModelProfile::with_defaults("openai", "m"),
    );
    engine.set_config(r#"{"mode":"host-storm"}"#).unwrap();
    for i in 0..3000 {
        session.user(&format!("word{} word{} and more", i % 64, (i + 1) % 64));
    }
    let t = Instant::now();
    let err = engine.materialize(&session, &request()).unwrap_err();
    let took = t.elapsed();
    match err {
        EngineFailure::Timeout {
            deadline_ms,
            elapsed_ms,
            ..
        } => {
            assert_eq!(deadline_ms, 300);
            assert!(elapsed_ms >= 300, "the real time is reported: {elapsed_ms}");
            assert!(
                elapsed_ms <= took.as_millis() as u64 + 1,
                "{elapsed_ms} ms reported, {took:?} measured"
            );
        }
        other => panic!("expected a timeout, got {other}"),
    }
    assert!(
        took < Duration::from_secs(3),
        "stopped near the deadline: {took:?}"
    );
}

/// An engine that elides old tool output in the contract's form passes the
/// run-time checks and the `provenance` case: observation masking stays
/// possible without forging.
#[test]
fn elided_tool_results_are_legal() {
    let s = setup();
    let out = s.run(Some("elide"), "task");
    assert_eq!(out.code, 0, "{}", out.all());
    let report = check_mode("elide");
    let case = report.case("provenance").unwrap();
    assert_eq!(case.status, Status::Pass, "{:?}", case);
}

/// `engine check` fails each forgery on the `provenance` case with evidence
/// naming the rule.
#[test]
fn engine_check_fails_each_forgery_with_evidence() {
    for (mode, rule) in [
        ("forge-user", "provenance"),
        ("forge-user-cited", "provenance"),
        ("forge-tool", "provenance"),
        ("system", "system prompt"),
        ("foreign-seq", "provenance"),
        ("rewind", "kernel context"),
        ("bloat", "kernel-context size"),
    ] {
        let report = check_mode(mode);
        println!("{mode}:\n{}", report.table());
        assert_case_fails(&report, "provenance", rule);
    }
}

pub(crate) fn assert_case_fails(report: &Report, case: &str, rule: &str) {
    let c = report.case(case).unwrap();
    assert_eq!(c.status, Status::Fail, "{}", report.table());
    assert!(
        c.summary.starts_with(rule) && !c.evidence.is_empty(),
        "the case names `{rule}` with evidence: {}",
        report.table()
    );
    assert!(!report.passed);
}

fn engine_runtime() -> &'static EngineRuntime {
    static RT: OnceLock<EngineRuntime> = OnceLock::new();
    RT.get_or_init(|| EngineRuntime::new(None).expect("runtime"))
}

fn fixture() -> Arc<LoadedComponent> {
    static LOADED: OnceLock<Arc<LoadedComponent>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            engine_runtime()
                .load(&EngineSource::Path(PathBuf::from(
                    latch_tests::FIXTURE_WASM,
                )))
                .expect("fixture loads")
        })
        .clone()
}

pub(crate) fn check_mode(mode: &str) -> Report {
    let limits = SandboxLimits {
        deadline_ms: 2_000,
        ..SandboxLimits::default()
    };
    let config = format!(r#"{{"mode":"{mode}"}}"#);
    let options = Options {
        deadline_ms: limits.deadline_ms,
        perf_events: 500,
        config_json: Some(config.clone()),
        ..Options::default()
    };
    let candidate = ComponentCandidate::new(fixture(), limits, Some(config));
    latch_conformance::run(&candidate, &options)
}

fn request() -> latch_engine_sdk::ContextRequest {
    latch_engine_sdk::ContextRequest {
        system_prompt: "system".into(),
        session_context: latch_engine_sdk::SessionContext {
            workspace: "/home/dev/src/app".into(),
            repository_instructions: String::new(),
            mode: "run".into(),
        },
        budget: latch_engine_sdk::ContextBudget {
            context_window_tokens: 200_000,
            reserve_tokens: 8_000,
            recent_tokens: 64_000,
            tools_tokens: 0,
            extension_tokens: 0,
        },
        query: String::new(),
        extensions: vec![],
    }
}
