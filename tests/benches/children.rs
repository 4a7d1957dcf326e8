//! Child agents' costs, as ratios that stay meaningful on a noisy machine:
//!
//! * the parent's per-request overhead with 8 idle (finished, delivered)
//!   children against a childless session on the same log: the safe
//!   boundary plus the engine's view (lifecycle events are filtered out by
//!   the store) — goal ≤ 5 %;
//!
//! Not measured yet: the time from a committed report to its delivery.

use criterion::{Criterion, criterion_group, criterion_main};
use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentOptions, Delegation};
use latch::config::Config;
use latch::supervisor::Supervisor;
use latch::supervisor::children::{ChildRuntime, ParentAgents};
use latch_engine_sdk::types::ModelProfile;
use latch_kernel::agents::{ReportOutcome, build_report};
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_provider::{Provider, ProviderConfig, ProviderKind};
use std::path::Path;
use std::sync::Arc;
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

/// A session with a short conversation (the same in both stores).
fn conversation(store: &Store, id: &str) {
    for i in 0..20 {
        store
            .append(
                id,
                EventKind::user_text(format!("step {i}: fix the parser")),
            )
            .unwrap();
        store
            .append(id, EventKind::assistant_text(format!("done with step {i}")))
            .unwrap();
    }
}

/// `n` finished children, each report delivered.
fn children(store: &Store, parent: &SessionRecord, n: usize) {
    for i in 0..n {
        let c = store
            .create_session(&parent.workspace, Some(&parent.id), &parent.model)
            .unwrap();
        store
            .append(
                &parent.id,
                EventKind::ChildSpawned {
                    child: c.id.clone(),
                    role: format!("worker{i}"),
                    task: "work".into(),
                    model: parent.model.model.clone(),
                    engine: "builtin:continuity".into(),
                    engine_config: "{}".into(),
                },
            )
            .unwrap();
        let report = build_report("worker", &[], ReportOutcome::Completed, "ok");
        let seq = store.append(&c.id, EventKind::AgentReport(report)).unwrap();
        store
            .append(
                &parent.id,
                EventKind::AgentReportReceived {
                    child: c.id.clone(),
                    report_seq: seq,
                },
            )
            .unwrap();
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    _store: Arc<Store>,
    parent: SessionRecord,
    agent: Agent,
    rt: Arc<ChildRuntime>,
}

fn setup(n_children: usize, supervisor: &Arc<Supervisor>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let store = Arc::new(Store::open(ws.join("latch.db")).unwrap());
    let model = ModelProfile::with_defaults("openai", "bench");
    let parent = store
        .create_session(&ws.display().to_string(), None, &model)
        .unwrap();
    conversation(&store, &parent.id);
    children(&store, &parent, n_children);
    let provider = Provider::new(ProviderConfig {
        base_url: Some("http://127.0.0.1:9/v1".into()),
        ..ProviderConfig::new(ProviderKind::OpenAiCompatible)
    })
    .unwrap();
    let rt = ChildRuntime::new(
        store.clone(),
        ws.clone(),
        supervisor.clone(),
        provider.clone(),
        AgentOptions::default(),
        4,
    );
    let tools = latch_tools::ToolContext::new(store.clone(), parent.id.clone(), &ws).unwrap();
    let mut agent = Agent::new(
        store.clone(),
        parent.clone(),
        ws,
        supervisor.root_engine(&parent.id, &model).unwrap(),
        provider,
        Box::new(StandardTools::new(tools)),
        AgentOptions::default(),
    )
    .unwrap();
    if n_children > 0 {
        agent = agent.with_delegation(Box::new(ParentAgents::new(rt.clone())));
    }
    Setup {
        _dir: dir,
        _store: store,
        parent,
        agent,
        rt,
    }
}

fn bench(c: &mut Criterion) {
    let supervisor = Arc::new(Supervisor::from_config(&Config::default(), Path::new("/")).unwrap());
    let mut plain = setup(0, &supervisor);
    let mut team = setup(8, &supervisor);
    // One boundary consumes the start-up flag, as the first request does.
    let mut idle = ParentAgents::new(team.rt.clone());
    idle.at_safe_boundary(&team.parent).unwrap();

    let mut g = c.benchmark_group("children");
    g.bench_function("request_childless", |b| {
        b.iter(|| plain.agent.materialize("parser").unwrap())
    });
    g.bench_function("request_8_idle_children", |b| {
        b.iter(|| {
            idle.at_safe_boundary(&team.parent).unwrap();
            team.agent.materialize("parser").unwrap()
        })
    });
    g.finish();

    let n = 200;
    let childless = time_n(n, || {
        plain.agent.materialize("parser").unwrap();
    });
    let with_children = time_n(n, || {
        idle.at_safe_boundary(&team.parent).unwrap();
        team.agent.materialize("parser").unwrap();
    });
    println!(
        "children: per-request {childless:?} childless vs {with_children:?} with 8 idle children \
         = overhead {:+.1}% (goal <= 5%)",
        (with_children.as_secs_f64() / childless.as_secs_f64() - 1.0) * 100.0
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
