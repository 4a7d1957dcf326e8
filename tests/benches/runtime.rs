//! Engine runtime costs: loading a component from the precompiled cache against
//! compiling it, instantiating, and one `materialize` on a tiny session through
//! the sandbox against the same engine linked natively. Each group ends with a
//! ratio line, which stays meaningful on a noisy machine.

use criterion::{Criterion, criterion_group, criterion_main};
use latch::engine::runtime::EngineSource;
use latch::engine::{ComponentEngine, ContextEngine, EngineRuntime, NativeEngine, SandboxLimits};
use latch_engine_sdk::types::*;
use latch_engine_sdk::{Engine, MemorySession};
use std::path::PathBuf;
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
    ModelProfile::with_defaults("openai", "bench")
}

fn tiny_session() -> MemorySession {
    let mut s = MemorySession::new("bench", model());
    s.user("Fix the failing test");
    s.tool_exchange(
        "c1",
        "read_file",
        r#"{"path":"src/lib.rs"}"#,
        "fn add(a: i32, b: i32) -> i32 { a - b }",
    );
    s.assistant("Found it.");
    s
}

fn request() -> ContextRequest {
    ContextRequest {
        system_prompt: "You are a coding agent.".into(),
        session_context: SessionContext {
            workspace: "/w".into(),
            repository_instructions: String::new(),
            mode: "run".into(),
        },
        budget: ContextBudget::for_model(&model()),
        query: "failing test".into(),
        extensions: vec![],
    }
}

fn load_vs_compile(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let rt = EngineRuntime::new(Some(dir.path().to_path_buf())).unwrap();
    let bytes = latch::engine::builtin::CONTINUITY_WASM;
    rt.compile("continuity", bytes).unwrap();
    let mut g = c.benchmark_group("component_load");
    g.sample_size(10);
    g.bench_function("compile_from_bytes", |b| {
        b.iter(|| rt.compile_fresh("continuity", bytes).unwrap())
    });
    g.bench_function("load_precompiled_cache", |b| {
        b.iter(|| rt.compile("continuity", bytes).unwrap())
    });
    g.finish();
    let compile = time_n(5, || {
        rt.compile_fresh("continuity", bytes).unwrap();
    });
    let cached = time_n(20, || {
        rt.compile("continuity", bytes).unwrap();
    });
    println!(
        "ratio component_load: compile {:.1} ms / cached {:.3} ms = {:.0}x faster from the cache",
        compile.as_secs_f64() * 1e3,
        cached.as_secs_f64() * 1e3,
        compile.as_secs_f64() / cached.as_secs_f64()
    );
}

fn instantiate(c: &mut Criterion) {
    let rt = EngineRuntime::new(None).unwrap();
    let loaded = rt
        .load(&EngineSource::Builtin("continuity".into()))
        .unwrap();
    let mut g = c.benchmark_group("instantiate");
    g.bench_function("continuity", |b| {
        b.iter(|| {
            let mut e =
                ComponentEngine::new(loaded.clone(), SandboxLimits::default(), "s", model());
            e.ensure_instance().unwrap();
        })
    });
    g.finish();
    let t = time_n(200, || {
        let mut e = ComponentEngine::new(loaded.clone(), SandboxLimits::default(), "s", model());
        e.ensure_instance().unwrap();
    });
    println!(
        "figure instantiate: {:.1} µs per instance (median)",
        t.as_secs_f64() * 1e6
    );
}

fn materialize_wasm_vs_native(c: &mut Criterion) {
    let rt = EngineRuntime::new(None).unwrap();
    let session = tiny_session();
    let req = request();
    for (name, source) in [
        (
            "window",
            EngineSource::Path(PathBuf::from(latch_tests::WINDOW_WASM)),
        ),
        ("continuity", EngineSource::Builtin("continuity".into())),
    ] {
        let loaded = rt.load(&source).unwrap();
        let mut wasm = ComponentEngine::new(loaded, SandboxLimits::default(), "bench", model());
        let mut native: Box<dyn ContextEngine> = match name {
            "window" => Box::new(NativeEngine::new(
                "window",
                latch_window_engine::WindowEngine::new(model()),
            )),
            _ => Box::new(NativeEngine::new(
                "continuity",
                latch_continuity::ContinuityEngine::new(model()),
            )),
        };
        assert_eq!(
            serde_json::to_string(&wasm.materialize(&session, &req).unwrap()).unwrap(),
            serde_json::to_string(&native.materialize(&session, &req).unwrap()).unwrap(),
            "{name}: the component and the native engine must agree byte for byte"
        );
        let mut g = c.benchmark_group(format!("materialize_tiny_{name}"));
        g.bench_function("component", |b| {
            b.iter(|| wasm.materialize(&session, &req).unwrap())
        });
        g.bench_function("native", |b| {
            b.iter(|| native.materialize(&session, &req).unwrap())
        });
        g.finish();
        let w = time_n(2_000, || {
            wasm.materialize(&session, &req).unwrap();
        });
        let n = time_n(2_000, || {
            native.materialize(&session, &req).unwrap();
        });
        println!(
            "ratio materialize_tiny_{name}: component {:.1} µs / native {:.1} µs = {:.2}x",
            w.as_secs_f64() * 1e6,
            n.as_secs_f64() * 1e6,
            w.as_secs_f64() / n.as_secs_f64()
        );
    }
}

criterion_group!(
    benches,
    load_vs_compile,
    instantiate,
    materialize_wasm_vs_native
);
criterion_main!(benches);
