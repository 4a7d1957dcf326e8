//! `latch engine replay` of the shipped 500-step session
//! (`tests/fixtures/traces/mixed500.jsonl`, 504 recorded model requests)
//! through the default engine: as the embedded component and linked
//! natively, the whole replay timed (rebuilding each request's log, the
//! engine's views with the host's checks, pricing, what each view kept and
//! the recall probes of re-read results). The goals: at most 5 s for the
//! component, and the component at most 2× the native engine.
//!
//! Both are timed in alternation, so that a machine that slows down for a
//! while slows both; the medians are printed as `figure` and `ratio`
//! lines, then criterion measures each once more.

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use latch::compare::recording::Recording;
use latch::compare::replay::{ReplayEngine, ReplayOptions, replay};
use latch::compare::trace;
use latch::engine::{NativeEngine, SandboxLimits};
use latch_conformance::compare::replay::ReplayReport;
use latch_continuity::ContinuityEngine;
use latch_engine_sdk::Engine;
use latch_engine_sdk::validate::KernelContextLimits;

/// Alternating timed replays of each engine before criterion's own.
const ROUNDS: usize = 5;
/// The goal for the component, in seconds.
const GOAL_SECONDS: f64 = 5.0;
/// The goal for component ÷ native.
const GOAL_RATIO: f64 = 2.0;

fn recording() -> Recording {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/traces/mixed500.jsonl");
    trace::read(&path).expect("the shipped mixed500 trace reads")
}

fn native() -> ReplayEngine<'static> {
    ReplayEngine {
        name: "native continuity".into(),
        make: Box::new(|session, _| {
            Ok(Box::new(
                NativeEngine::new(
                    "builtin:continuity",
                    ContinuityEngine::new(session.model.clone()),
                )
                .checked_with(session.model.estimator, KernelContextLimits::default()),
            ))
        }),
    }
}

fn component() -> ReplayEngine<'static> {
    ReplayEngine::from_spec(
        "builtin:continuity",
        Path::new("."),
        &SandboxLimits::default(),
    )
    .expect("the embedded continuity component loads")
}

fn run(recording: &Recording, engine: &ReplayEngine) -> (Duration, ReplayReport) {
    let started = Instant::now();
    let report = replay(
        recording,
        std::slice::from_ref(engine),
        &ReplayOptions::default(),
        &mut |_| {},
    )
    .expect("the replay runs");
    (started.elapsed(), report)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn benches(c: &mut Criterion) {
    let recording = recording();
    let requests: usize = recording
        .sessions
        .iter()
        .map(|s| {
            s.log
                .iter()
                .filter(|l| l.event.kind_name() == "model_request")
                .count()
        })
        .sum();
    let (native, component) = (native(), component());
    // Untimed once each: compiled code and caches in place, and both agree
    // on every request.
    let (_, a) = run(&recording, &native);
    let (_, b) = run(&recording, &component);
    let tokens = |r: &ReplayReport| -> Vec<String> {
        r.engines[0]
            .requests
            .iter()
            .map(|q| serde_json::to_string(&q.outcome).unwrap())
            .collect()
    };
    assert_eq!(tokens(&a), tokens(&b), "native and component replay alike");
    assert_eq!(a.engines[0].summary().viewed, requests);

    let (mut n, mut w) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        if round % 2 == 0 {
            n.push(run(&recording, &native).0);
            w.push(run(&recording, &component).0);
        } else {
            w.push(run(&recording, &component).0);
            n.push(run(&recording, &native).0);
        }
    }
    let (n, w) = (median(n), median(w));
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / requests as f64;
    println!(
        "figure replay_mixed500_component: {:.2} s for {requests} requests, {:.2} ms per request (goal: at most {GOAL_SECONDS} s)",
        w.as_secs_f64(),
        per(w)
    );
    println!(
        "figure replay_mixed500_native: {:.2} s for {requests} requests, {:.2} ms per request",
        n.as_secs_f64(),
        per(n)
    );
    println!(
        "ratio replay_component_vs_native: component {:.2} ms / native {:.2} ms per request = {:.2}x (goal: at most {GOAL_RATIO}x)",
        per(w),
        per(n),
        w.as_secs_f64() / n.as_secs_f64()
    );

    let mut group = c.benchmark_group("replay_mixed500");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("native", |b| b.iter(|| run(&recording, &native)));
    group.bench_function("component", |b| b.iter(|| run(&recording, &component)));
    group.finish();
}

criterion_group!(replay_bench, benches);
criterion_main!(replay_bench);
