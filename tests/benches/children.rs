//! Child agents' costs, as ratios that stay meaningful on a noisy machine.
//!
//! * **Per-request overhead of idle children.** The parent's per-request
//!   work (its safe boundary, then the engine's view) with 8 idle
//!   (finished, delivered) children, against a childless session with the
//!   same tool schemas on the same conversation — goal ≤ 5 %. Two more
//!   sessions isolate the suspects: a childless one without the five agent
//!   schemas (what the schemas cost), and the 8 children's lifecycle rows
//!   at the very end of the log (the worst case: they once made
//!   `latest-seq` name an event the engine could never read, so its
//!   watermark cache looked for new events on every request; now the
//!   store walks back over them to the newest visible event).
//! * **Report to delivery.** A real child (engine from the factory, a
//!   request over HTTP to the local wire-format server) finishes while the
//!   parent blocks in `wait_agents`: the time from the report's commit to
//!   the parent holding it. And the parent's side of a delivery at a safe
//!   boundary: finding the waiting report and committing the notification.
//!
//! Samples of the variants being compared are interleaved, so drift of a
//! shared machine hits them alike; the printed figures are medians.

use criterion::{Criterion, criterion_group, criterion_main};
use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentOptions, Delegation};
use latch::config::Config;
use latch::supervisor::Supervisor;
use latch::supervisor::children::{ChildRuntime, ChildSettings, ParentAgents};
use latch_engine_sdk::types::{ModelProfile, ToolCall};
use latch_kernel::agents::{ReportOutcome, build_report};
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn};
use latch_provider::{Provider, ProviderConfig, ProviderKind, RetryPolicy};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The 10th percentile: what a sample costs when the machine lets it run.
fn p10(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 10]
}

/// Medians and 10th percentiles of `fs`, sampled `n` times each,
/// interleaved.
fn interleaved(n: usize, fs: &mut [&mut dyn FnMut()]) -> Vec<(Duration, Duration)> {
    let mut samples = vec![Vec::with_capacity(n); fs.len()];
    for _ in 0..n {
        for (f, s) in fs.iter_mut().zip(samples.iter_mut()) {
            let t = Instant::now();
            f();
            s.push(t.elapsed());
        }
    }
    samples
        .into_iter()
        .map(|s| (median(s.clone()), p10(s)))
        .collect()
}

/// Steps `steps` of a short conversation (the same in every store).
fn conversation(store: &Store, id: &str, steps: std::ops::Range<usize>) {
    for i in steps {
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

/// One parent session, ready to materialize.
struct Setup {
    _dir: tempfile::TempDir,
    parent: SessionRecord,
    agent: Agent,
    /// The parent's boundary (a second delegation over the same runtime:
    /// the agent's own is not reachable from outside the loop).
    boundary: ParentAgents,
}

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// No agent tools, no children.
    Plain,
    /// The agent tools, no children.
    Childless,
    /// The agent tools and 8 idle children spawned and reported early in
    /// the conversation, as a real log holds them (the conversation goes on
    /// after their lifecycle rows).
    Idle8,
    /// The worst case: the same 8 children's lifecycle rows at the very end
    /// of the log.
    Idle8Last,
}

fn setup(shape: Shape, supervisor: &Arc<Supervisor>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let store = Arc::new(Store::open(ws.join("latch.db")).unwrap());
    let model = ModelProfile::with_defaults("openai", "bench");
    let parent = store
        .create_session(&ws.display().to_string(), None, &model)
        .unwrap();
    conversation(&store, &parent.id, 0..2);
    if shape == Shape::Idle8 {
        children(&store, &parent, 8);
    }
    conversation(&store, &parent.id, 2..20);
    if shape == Shape::Idle8Last {
        children(&store, &parent, 8);
    }
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
    if shape != Shape::Plain {
        agent = agent.with_delegation(Box::new(ParentAgents::new(rt.clone())));
    }
    // One boundary consumes the start-up flag, as the first request does.
    let mut boundary = ParentAgents::new(rt);
    boundary.at_safe_boundary(&parent).unwrap();
    Setup {
        _dir: dir,
        parent,
        agent,
        boundary,
    }
}

impl Setup {
    /// The parent's per-request work: its boundary, then the view.
    fn request(&mut self) {
        assert!(
            self.boundary
                .at_safe_boundary(&self.parent)
                .unwrap()
                .is_empty()
        );
        self.agent.materialize("parser").unwrap();
    }
}

fn pct(a: Duration, b: Duration) -> f64 {
    (a.as_secs_f64() / b.as_secs_f64() - 1.0) * 100.0
}

fn overhead(c: &mut Criterion, supervisor: &Arc<Supervisor>) {
    let mut plain = setup(Shape::Plain, supervisor);
    let mut childless = setup(Shape::Childless, supervisor);
    let mut idle = setup(Shape::Idle8, supervisor);
    let mut idle_last = setup(Shape::Idle8Last, supervisor);
    let mut g = c.benchmark_group("children");
    g.bench_function("request_childless_same_schemas", |b| {
        b.iter(|| childless.request())
    });
    g.bench_function("request_8_idle_children", |b| b.iter(|| idle.request()));
    g.finish();

    let figures = interleaved(
        1000,
        &mut [
            &mut || plain.request(),
            &mut || childless.request(),
            &mut || idle.request(),
            &mut || idle_last.request(),
        ],
    );
    for (label, pick) in [
        (
            "median",
            (|f: (Duration, Duration)| f.0) as fn((Duration, Duration)) -> Duration,
        ),
        ("p10", |f| f.1),
    ] {
        let (plain_t, childless_t, idle_t, last_t) = (
            pick(figures[0]),
            pick(figures[1]),
            pick(figures[2]),
            pick(figures[3]),
        );
        println!(
            "figure children overhead ({label}): per request {childless_t:?} childless (same \
             schemas) vs {idle_t:?} with 8 idle children = {:+.1}% (goal <= 5%)",
            pct(idle_t, childless_t)
        );
        println!(
            "figure children suspects ({label}): the five agent schemas {plain_t:?} -> \
             {childless_t:?} ({:+.1}%); the 8 children's lifecycle rows last in the log \
             {last_t:?} ({:+.1}% over childless)",
            pct(childless_t, plain_t),
            pct(last_t, childless_t)
        );
    }
}

/// The child always answers at once; the parent is never asked.
fn instant_child() -> Script {
    Script::default().with_responder(|_| -> ScriptStep { ScriptedTurn::text("done").into() })
}

fn call(name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: format!("call-{name}"),
        name: name.to_string(),
        arguments_json: args.to_string(),
    }
}

fn delivery(c: &mut Criterion, supervisor: &Arc<Supervisor>) {
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = io.block_on(FakeServer::start(instant_child())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let store = Arc::new(Store::open(ws.join("latch.db")).unwrap());
    let model = ModelProfile::with_defaults("openai", "bench");
    let parent = store
        .create_session(&ws.display().to_string(), None, &model)
        .unwrap();
    let provider = Provider::new(ProviderConfig {
        base_url: Some(server.openai_base_url()),
        api_key: Some("k".into()),
        retry: RetryPolicy::none(),
        ..ProviderConfig::new(ProviderKind::OpenAiCompatible)
    })
    .unwrap();
    // The instant each report commits, seen by the runtime's observer.
    let committed: Arc<Mutex<Option<Instant>>> = Arc::default();
    let seen = committed.clone();
    let settings = ChildSettings {
        observer: Some(Arc::new(move |_: &str, _: &str, e: &EventKind| {
            if matches!(e, EventKind::AgentReport(_)) {
                *seen.lock().unwrap() = Some(Instant::now());
            }
        })),
        ..ChildSettings::default()
    };
    let rt = ChildRuntime::with_settings(
        store.clone(),
        ws,
        supervisor.clone(),
        provider,
        AgentOptions::default(),
        settings,
    );
    let agents = std::cell::RefCell::new(ParentAgents::new(rt.clone()));
    let spawn = call("spawn_agent", r#"{"role":"quick","task":"answer"}"#);
    let wait = call("wait_agents", r#"{"timeout_s":60}"#);

    // Report commit -> the parent's blocked wait_agents holds it.
    let to_wait = || -> Duration {
        *committed.lock().unwrap() = None;
        let mut agents = agents.borrow_mut();
        agents.execute(&parent, &spawn).unwrap();
        let events = agents.execute(&parent, &wait).unwrap();
        let woke = Instant::now();
        assert!(matches!(events[0], EventKind::AgentReportReceived { .. }));
        store.append_batch(&parent.id, events).unwrap();
        assert!(rt.wait_idle(Duration::from_secs(30)));
        woke - committed.lock().unwrap().expect("the report committed")
    };
    // A report waiting -> the notification committed at the next boundary.
    let at_boundary = || -> (Duration, Duration) {
        let mut agents = agents.borrow_mut();
        agents.execute(&parent, &spawn).unwrap();
        assert!(rt.wait_idle(Duration::from_secs(30)));
        let t = Instant::now();
        let events = agents.at_safe_boundary(&parent).unwrap();
        let found = t.elapsed();
        assert_eq!(events.len(), 1);
        store.append_batch(&parent.id, events).unwrap();
        (found, t.elapsed())
    };

    let mut g = c.benchmark_group("children_delivery");
    g.sample_size(10);
    g.bench_function("report_to_wait_agents", |b| {
        b.iter_custom(|n| (0..n).map(|_| to_wait()).sum())
    });
    g.bench_function("report_to_boundary_delivery", |b| {
        b.iter_custom(|n| (0..n).map(|_| at_boundary().1).sum())
    });
    g.finish();
    let wait_t = median((0..30).map(|_| to_wait()).collect());
    let (found, committed): (Vec<_>, Vec<_>) = (0..30).map(|_| at_boundary()).unzip();
    println!(
        "figure children delivery: report committed -> wait_agents holds it {:?}; a waiting \
         report at the parent's next boundary: found {:?}, its notification durable {:?} \
         (medians of 30, each a real child over HTTP)",
        wait_t,
        median(found),
        median(committed)
    );
    io.block_on(server.shutdown());
}

fn bench(c: &mut Criterion) {
    let supervisor = Arc::new(Supervisor::from_config(&Config::default(), Path::new("/")).unwrap());
    overhead(c, &supervisor);
    delivery(c, &supervisor);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
