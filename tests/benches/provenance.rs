//! The added cost of the host's provenance checks per request, against a
//! warm `materialize`, at 10k and 100k events.
//!
//! Sessions are the ContinuityEngine's generated benchmark sessions
//! (`latch_continuity::testkit`). A warm step appends one user turn with a
//! tool exchange; the engine (natively linked, whole views restored as the
//! host restores them) materializes, and the host's `ViewChecker` — the one
//! every real session applies, with the continuation's kept count as the
//! component engine gives it — checks the view against the same session
//! view. Both are timed separately on the same step; the ratio line is the
//! figure this benchmark exists for (goal ≤ 10%).

use criterion::{Criterion, criterion_group, criterion_main};
use latch_continuity::ContinuityEngine;
use latch_continuity::testkit::{IndexedSession, Script, bench_reply, bench_session, bench_turn};
use latch_engine_sdk::types::*;
use latch_engine_sdk::validate::{KernelContextLimits, ViewChecker};
use latch_engine_sdk::{Engine, ViewAssembler};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn model() -> ModelProfile {
    ModelProfile::with_defaults("anthropic", "test-model")
}

#[derive(Clone)]
struct Warm {
    session: IndexedSession,
    engine: ContinuityEngine,
    views: ViewAssembler,
    checker: ViewChecker,
    script: Script,
    step: u64,
}

impl Warm {
    fn new(events: usize) -> Warm {
        let generated = bench_session(events, model());
        let (engine, views) = generated.engine.into_parts();
        let mut w = Warm {
            session: generated.session,
            engine,
            views,
            checker: ViewChecker::new(model().estimator, KernelContextLimits::default()),
            script: generated.script,
            step: 0,
        };
        // The host checked every earlier view: start from an accepted one.
        w.step();
        w
    }

    /// One warm request: (materialize, check) times.
    fn step(&mut self) -> (Duration, Duration) {
        self.step += 1;
        let request = bench_turn(&self.script, &mut self.session, self.step);
        // Timed as the host's component engine runs it: the engine's
        // answer, then the whole view restored from the continuation.
        let t = Instant::now();
        let view = self
            .engine
            .materialize(&self.session, &request)
            .unwrap_or_else(|e| panic!("materialize failed: {e:?}"));
        let kept = view.kept_messages as usize;
        let view = self.views.assemble(view).expect("a valid continuation");
        let materialize = t.elapsed();
        let t = Instant::now();
        let checked = self
            .checker
            .check_continued(&self.session, &request, &view, kept);
        let check = t.elapsed();
        if let Err((rule, detail)) = checked {
            panic!("the continuity engine's view was refused: {rule}: {detail}");
        }
        bench_reply(&mut self.session, &view);
        black_box(view);
        (materialize, check)
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn benches(c: &mut Criterion) {
    let pristine: Vec<(usize, Warm)> = [10_000usize, 100_000]
        .into_iter()
        .map(|n| (n, Warm::new(n)))
        .collect();
    for (n, w) in &pristine {
        let mut w = w.clone();
        let (m, k): (Vec<_>, Vec<_>) = (0..200).map(|_| w.step()).unzip();
        let (m, k) = (median(m), median(k));
        println!(
            "ratio provenance check ÷ warm materialize, {n} events: {:.1}% (check median {k:?}, materialize median {m:?}; goal ≤ 10%)",
            100.0 * k.as_secs_f64() / m.as_secs_f64()
        );
    }
    let mut group = c.benchmark_group("provenance");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for (n, w0) in &pristine {
        let mut w = w0.clone();
        group.bench_function(format!("check/{n}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    if w.step >= 100 {
                        w = w0.clone();
                    }
                    total += w.step().1;
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(provenance, benches);
criterion_main!(provenance);
