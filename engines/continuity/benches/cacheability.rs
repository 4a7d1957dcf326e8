//! Estimated architecture cacheability over a scripted 500-turn session:
//! Σ common_prefix_tokens ÷ Σ request_tokens over every request, with
//! Latch's default budget.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use latch_continuity::ContinuityEngine;
use latch_continuity::testkit::{Host, IndexedSession, Script, run};
use latch_engine_sdk::Engine;
use latch_engine_sdk::types::*;

/// Drives the engine and sums the report's cache figures.
struct Meter {
    engine: ContinuityEngine,
    common: u64,
    request: u64,
    requests: u64,
    rotations: u64,
}

impl Host for Meter {
    fn materialize(&mut self, session: &IndexedSession, request: &ContextRequest) -> ContextView {
        let view = match self.engine.materialize(session, request) {
            Ok(v) => v,
            Err(e) => panic!("materialize failed: {e:?}"),
        };
        self.common += view.report.common_prefix_tokens;
        self.request += view.report.request_tokens;
        self.requests += 1;
        self.rotations += u64::from(view.report.status == "rotated");
        view
    }
    fn manual_compact(&mut self, session: &IndexedSession) -> Vec<KernelContextEntry> {
        self.engine.manual_compact(session).unwrap_or_default()
    }
}

fn meter(turns: usize) -> Meter {
    let mut m = Meter {
        engine: ContinuityEngine::new(ModelProfile::with_defaults("anthropic", "test-model")),
        common: 0,
        request: 0,
        requests: 0,
        rotations: 0,
    };
    run(&Script::realistic(500, turns), &mut m);
    m
}

fn benches(c: &mut Criterion) {
    let m = meter(500);
    println!(
        "estimated cacheability over a scripted 500-turn session: {:.4} (goal ≥ 0.95) — {} requests, {} rotations",
        m.common as f64 / m.request as f64,
        m.requests,
        m.rotations
    );
    let mut group = c.benchmark_group("session");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("scripted/100-turns", |b| b.iter(|| meter(100).requests));
    group.finish();
}

criterion_group!(cacheability, benches);
criterion_main!(cacheability);
