//! What an engine's language costs: the Rust window example against the C,
//! JavaScript and Python examples, through the host's real runtime and
//! sandbox. Per engine it prints one `figure` line: compile time
//! (`Component::new`), precompiled load (the host's cache), instantiation,
//! warm `materialize` at about 1k and 10k events (a new user turn with one
//! tool exchange each time, the view's entries persisted), and the
//! instance's memory high-water mark. The warm 1k materialize also runs
//! under criterion.
//!
//! `cargo bench -p latch-tests --bench polyglot` (build the examples first:
//! `engines/examples/{python-masking,js-window,c-window}/build.sh`).

use criterion::{Criterion, criterion_group, criterion_main};
use latch::engine::{ComponentEngine, ContextEngine, EngineRuntime, SandboxLimits};
use latch_continuity::testkit::{self, BenchSession};
use latch_engine_sdk::types::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time_n(n: usize, mut f: impl FnMut()) -> Duration {
    median(
        (0..n)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn model() -> ModelProfile {
    ModelProfile::with_defaults("anthropic", "bench")
}

/// The engines, by language, and their components.
fn engines() -> Vec<(&'static str, PathBuf)> {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engines/examples");
    let mut out = vec![("rust window", PathBuf::from(latch_tests::WINDOW_WASM))];
    for (label, name) in [
        ("c c-window", "c-window"),
        ("js js-window", "js-window"),
        ("python python-masking", "python-masking"),
    ] {
        let path = examples.join(name).join(format!("{name}.wasm"));
        assert!(
            path.is_file(),
            "{} is missing: run engines/examples/{name}/build.sh first",
            path.display()
        );
        out.push((label, path));
    }
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Median warm materialize over `runs` new turns of `bench`, on an engine
/// that has already answered once; returns it and the memory high-water.
fn warm(engine: &mut ComponentEngine, bench: &BenchSession, runs: u64) -> (Duration, usize) {
    let mut session = bench.session.clone();
    let first = testkit::bench_turn(&bench.script, &mut session, 0);
    let view = engine.materialize(&session, &first).expect("first view");
    testkit::bench_reply(&mut session, &view);
    let mut times = Vec::new();
    for n in 1..=runs {
        let request = testkit::bench_turn(&bench.script, &mut session, n);
        let t = Instant::now();
        let view = engine.materialize(&session, &request).expect("warm view");
        times.push(t.elapsed());
        testkit::bench_reply(&mut session, &view);
    }
    (median(times), engine.peak_memory_bytes())
}

fn costs(c: &mut Criterion) {
    let cache = tempfile::tempdir().unwrap();
    let rt = EngineRuntime::new(Some(cache.path().to_path_buf())).unwrap();
    let small = testkit::bench_session(1_000, model());
    let large = testkit::bench_session(10_000, model());
    let limits = SandboxLimits {
        deadline_ms: 60_000,
        ..SandboxLimits::default()
    };
    let mut group = c.benchmark_group("warm_materialize_1k");
    group.sample_size(10);
    for (label, path) in engines() {
        let bytes = std::fs::read(&path).unwrap();
        let compile = time_n(3, || {
            rt.compile_fresh(label, &bytes).unwrap();
        });
        rt.compile(label, &bytes).unwrap();
        let load = time_n(10, || {
            rt.compile(label, &bytes).unwrap();
        });
        let loaded = rt.load_bytes(label, &bytes).unwrap();
        let instantiate = time_n(20, || {
            let mut e = ComponentEngine::new(loaded.clone(), limits.clone(), "bench", model());
            e.ensure_instance().unwrap();
        });
        let mut engine = ComponentEngine::new(loaded.clone(), limits.clone(), "bench", model());
        let (warm_1k, _) = warm(&mut engine, &small, 10);
        let mut engine = ComponentEngine::new(loaded.clone(), limits.clone(), "bench", model());
        let (warm_10k, peak) = warm(&mut engine, &large, 10);
        println!(
            "figure polyglot {label}: size {:.1} MB, compile {:.0} ms, precompiled load {:.2} ms, instantiate {:.3} ms, warm materialize 1k {:.2} ms, 10k {:.2} ms, memory high-water {:.1} MiB",
            bytes.len() as f64 / 1e6,
            ms(compile),
            ms(load),
            ms(instantiate),
            ms(warm_1k),
            ms(warm_10k),
            peak as f64 / (1 << 20) as f64
        );
        let mut engine = ComponentEngine::new(loaded, limits.clone(), "bench", model());
        let mut session = small.session.clone();
        let mut n = 0u64;
        group.bench_function(label, |b| {
            b.iter(|| {
                n += 1;
                let request = testkit::bench_turn(&small.script, &mut session, n);
                let view = engine.materialize(&session, &request).expect("view");
                testkit::bench_reply(&mut session, &view);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, costs);
criterion_main!(benches);
