//! The conformance suite against the repository's engines: the reference
//! ContinuityEngine and the window example pass it, and every adversarial
//! fixture mode is rejected on the case that names its misbehaviour (a suite
//! that passes a bad engine is itself broken).

use latch::engine::conformance::{ComponentCandidate, FactoryCandidate};
use latch::engine::runtime::EngineSource;
use latch::engine::{EngineRuntime, LoadedComponent, NativeFactory, SandboxLimits};
use latch_conformance::{Options, Report, Status, import_verdict};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

fn runtime() -> &'static EngineRuntime {
    static RT: OnceLock<EngineRuntime> = OnceLock::new();
    RT.get_or_init(|| EngineRuntime::new(None).expect("runtime"))
}

fn load(source: EngineSource) -> Arc<LoadedComponent> {
    runtime().load(&source).expect("component loads")
}

fn fixture() -> Arc<LoadedComponent> {
    static LOADED: OnceLock<Arc<LoadedComponent>> = OnceLock::new();
    LOADED
        .get_or_init(|| load(EngineSource::Path(PathBuf::from(latch_tests::FIXTURE_WASM))))
        .clone()
}

fn check(loaded: Arc<LoadedComponent>, limits: SandboxLimits, config: Option<&str>) -> Report {
    let options = Options {
        deadline_ms: limits.deadline_ms,
        config_json: config.map(str::to_string),
        ..Options::default()
    };
    let candidate = ComponentCandidate::new(loaded, limits, config.map(str::to_string));
    let report = latch_conformance::run(&candidate, &options);
    println!("{}", report.table());
    report
}

/// Checks a fixture mode under short limits and a smaller performance session.
fn check_fixture(mode: &str) -> Report {
    let limits = SandboxLimits {
        deadline_ms: 250,
        memory_mib: 64,
        ..SandboxLimits::default()
    };
    let config = format!(r#"{{"mode":"{mode}"}}"#);
    let options = Options {
        deadline_ms: limits.deadline_ms,
        perf_events: 1_000,
        config_json: Some(config.clone()),
        ..Options::default()
    };
    let candidate = ComponentCandidate::new(fixture(), limits, Some(config));
    let report = latch_conformance::run(&candidate, &options);
    println!("{}", report.table());
    assert!(!report.passed, "the suite passed the `{mode}` fixture");
    report
}

fn status(report: &Report, case: &str) -> Status {
    report.case(case).expect("case exists").status
}

fn failure(report: &Report, case: &str) -> Option<String> {
    report.case(case).expect("case exists").failure.clone()
}

fn evidence(report: &Report, case: &str) -> String {
    report.case(case).expect("case exists").evidence.join("\n")
}

#[test]
fn continuity_component_passes_every_case() {
    let limits = SandboxLimits {
        deadline_ms: 10_000,
        ..SandboxLimits::default()
    };
    let report = check(
        load(EngineSource::Builtin("continuity".into())),
        limits,
        None,
    );
    assert!(report.passed, "failed: {:?}", report.failed());
    for case in &report.cases {
        assert_eq!(case.status, Status::Pass, "{}: {}", case.case, case.summary);
    }
    let perf = report.case("performance").unwrap();
    assert!(perf.summary.contains("p50"), "{}", perf.summary);
    assert!(perf.summary.contains("MiB"), "{}", perf.summary);
}

#[test]
fn window_example_passes_and_skips_epochs_with_the_reason() {
    let report = check(
        load(EngineSource::Path(PathBuf::from(latch_tests::WINDOW_WASM))),
        SandboxLimits::default(),
        None,
    );
    assert!(report.passed, "failed: {:?}", report.failed());
    assert_eq!(status(&report, "epochs"), Status::Skip);
    assert!(
        report
            .case("epochs")
            .unwrap()
            .summary
            .contains("no epoch generation")
    );
    for case in report.cases.iter().filter(|c| c.case != "epochs") {
        assert_eq!(case.status, Status::Pass, "{}: {}", case.case, case.summary);
    }
}

#[test]
fn natively_linked_continuity_passes_with_the_contract_skipped() {
    let factory =
        NativeFactory::<latch_continuity::ContinuityEngine>::new("native:continuity", None);
    let candidate = FactoryCandidate::new(Arc::new(factory));
    let options = Options {
        perf_events: 2_000,
        ..Options::default()
    };
    let report = latch_conformance::run(&candidate, &options);
    println!("{}", report.table());
    assert!(report.passed, "failed: {:?}", report.failed());
    assert_eq!(status(&report, "contract"), Status::Skip);
}

#[test]
fn a_well_behaved_fixture_fails_only_the_contract_naming_its_imports() {
    let report = check_fixture("ok");
    assert_eq!(report.failed(), vec!["contract"]);
    let evidence = evidence(&report, "contract");
    assert!(evidence.contains("wasi:sockets/tcp"), "{evidence}");
    assert!(evidence.contains("wasi:filesystem/preopens"), "{evidence}");
    assert!(evidence.contains("grants no network"), "{evidence}");
}

#[test]
fn an_infinite_loop_times_out_in_the_first_case_that_materializes() {
    let report = check_fixture("loop");
    assert_eq!(status(&report, "budget"), Status::Fail);
    assert_eq!(failure(&report, "budget").as_deref(), Some("timeout"));
    assert!(evidence(&report, "budget").contains("deadline"));
    // Later materializing cases are not run again, and do not count as passes.
    for case in ["protocol", "determinism", "recall", "performance"] {
        let c = report.case(case).unwrap();
        assert_eq!(c.status, Status::Skip, "{case}");
        assert!(c.summary.contains("timed out in `budget`"), "{}", c.summary);
    }
}

#[test]
fn a_huge_allocation_fails_budget_as_out_of_memory() {
    let report = check_fixture("allocate");
    assert_eq!(status(&report, "budget"), Status::Fail);
    assert_eq!(failure(&report, "budget").as_deref(), Some("out-of-memory"));
}

#[test]
fn a_panic_fails_budget_as_a_panic() {
    let report = check_fixture("panic");
    assert_eq!(status(&report, "budget"), Status::Fail);
    assert_eq!(failure(&report, "budget").as_deref(), Some("panic"));
    assert!(evidence(&report, "budget").contains("panicked on purpose"));
}

#[test]
fn an_over_budget_view_fails_budget() {
    let report = check_fixture("over-budget");
    assert_eq!(status(&report, "budget"), Status::Fail);
    assert_eq!(failure(&report, "budget"), None);
    let evidence = evidence(&report, "budget");
    assert!(evidence.contains("but the limit is"), "{evidence}");
    assert_eq!(status(&report, "protocol"), Status::Pass);
}

#[test]
fn an_orphan_tool_result_fails_protocol_not_budget() {
    let report = check_fixture("orphan");
    assert_eq!(status(&report, "budget"), Status::Pass);
    assert_eq!(status(&report, "protocol"), Status::Fail);
    let evidence = evidence(&report, "protocol");
    assert!(evidence.contains("orphan tool result"), "{evidence}");
}

#[test]
fn nondeterministic_output_fails_determinism() {
    let report = check_fixture("nondeterministic");
    assert_eq!(status(&report, "budget"), Status::Pass);
    assert_eq!(status(&report, "protocol"), Status::Pass);
    assert_eq!(status(&report, "determinism"), Status::Fail);
    let evidence = evidence(&report, "determinism");
    assert!(evidence.contains("differs"), "{evidence}");
}

#[test]
fn granted_imports_are_the_sandboxed_wasi_and_the_contract() {
    for ok in [
        "latch:context/session@0.1.0",
        "latch:context/estimator@0.1.3",
        "wasi:io/streams@0.2.6",
        "wasi:cli/environment@0.2.0",
        "wasi:clocks/wall-clock@0.2.6",
        "wasi:random/random@0.2.6",
    ] {
        assert_eq!(import_verdict(ok), None, "{ok}");
    }
    for bad in [
        "wasi:sockets/tcp@0.2.6",
        "wasi:filesystem/preopens@0.2.6",
        "wasi:http/outgoing-handler@0.2.6",
        "latch:context/session@0.2.0",
        "wasi:io/streams@0.3.0",
        "acme:secrets/vault",
    ] {
        let verdict = import_verdict(bad).expect(bad);
        assert!(verdict.contains(bad), "{verdict}");
    }
}
