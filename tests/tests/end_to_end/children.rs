//! Child agents end to end over real HTTP to the scripted provider: a parent
//! spawns two children that run concurrently on their own workers with
//! their own engines, their reports reach the parent at a safe boundary as
//! one notification each (never their transcripts), the parent's prefix is
//! not rewritten by a delivery, and a restart delivers what was not
//! delivered, exactly once.

use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentOptions};
use latch::config::Config;
use latch::engine::{ContextEngine, ContextEngineFactory, EngineFailure};
use latch::supervisor::children::{ChildRuntime, ChildSettings, ParentAgents};
use latch::supervisor::{ChildPolicy, Supervisor};
use latch_kernel::{ChildState, EventKind, SessionRecord, Store};
use latch_provider::fake::{
    CapturedRequest, FakeServer, Script, ScriptStep, ScriptedTurn, WireFormat,
};
use latch_provider::{Provider, ProviderConfig, ProviderKind, RetryPolicy};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The phrase only a child's brief carries.
const BRIEF: &str = "You are a child agent of session";
/// Content only the fixer child's transcript carries.
const CHILD_SECRET: &str = "CHILD-SECRET-CONTENT";

/// The provider-visible messages of a request, as JSON text.
fn messages(r: &CapturedRequest) -> String {
    r.body["messages"].to_string()
}

fn is_child(r: &CapturedRequest) -> bool {
    messages(r).contains(BRIEF)
}

fn has_tool_result(r: &CapturedRequest) -> bool {
    let m = messages(r);
    m.contains("tool_use_id") || m.contains("tool_call_id")
}

/// Both children hold their first request until the other has sent its
/// own (or a timeout): proof that they run at once.
#[derive(Default)]
struct Rendezvous {
    arrived: Mutex<usize>,
    cv: Condvar,
    overlapped: AtomicUsize,
}

impl Rendezvous {
    fn meet(&self) {
        // The responder runs on a server worker: hand its other tasks to
        // the other workers while this request waits.
        tokio::task::block_in_place(|| self.wait_for_the_other());
    }

    fn wait_for_the_other(&self) {
        let mut n = self.arrived.lock().unwrap();
        *n += 1;
        self.cv.notify_all();
        let (n, timeout) = self
            .cv
            .wait_timeout_while(n, Duration::from_secs(20), |n| *n < 2)
            .unwrap();
        if !timeout.timed_out() && *n >= 2 {
            self.overlapped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The scripted behaviours, routed by the request's own text: the parent
/// spawns two children and keeps listing them until both reports were
/// delivered to it; the fixer writes a file and reports; the tester reports
/// at once.
fn team_responder(meet: Arc<Rendezvous>) -> impl Fn(&CapturedRequest) -> ScriptStep + Send + Sync {
    // Spawned once: a long listing loop may rotate the spawn results out of
    // the parent's working memory.
    let spawned = std::sync::atomic::AtomicBool::new(false);
    move |r: &CapturedRequest| {
        let m = messages(r);
        if is_child(r) {
            let fixer = m.contains("working as `fixer`");
            if !has_tool_result(r) && !m.contains("\"assistant\"") {
                meet.meet();
            }
            return if fixer && !has_tool_result(r) {
                ScriptedTurn::tool_call(
                    "write_file",
                    format!(r#"{{"path":"fixed.txt","content":"{CHILD_SECRET}"}}"#),
                )
                .into()
            } else if fixer {
                ScriptedTurn::text("Fixed: wrote fixed.txt").into()
            } else {
                ScriptedTurn::text("Tests: all 3 pass").into()
            };
        }
        if !spawned.swap(true, Ordering::SeqCst) {
            return ScriptedTurn::tool_call(
                "spawn_agent",
                r#"{"role":"fixer","task":"Write fixed.txt"}"#,
            )
            .with_tool_call(
                "spawn_agent",
                r#"{"role":"tester","task":"Run the tests","context":"tests live in tests/"}"#,
            )
            .into();
        }
        if m.contains("(fixer) completed") && m.contains("(tester) completed") {
            return ScriptedTurn::text("Both children reported.").into();
        }
        std::thread::sleep(Duration::from_millis(100));
        ScriptedTurn::tool_call("list_agents", "{}").into()
    }
}

pub(crate) struct Team {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) ws: PathBuf,
    pub(crate) _io: tokio::runtime::Runtime,
    pub(crate) server: FakeServer,
    pub(crate) store: Arc<Store>,
    pub(crate) provider: Provider,
    pub(crate) parent: SessionRecord,
}

pub(crate) fn team(format: WireFormat, script: Script) -> Team {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .enable_all()
        .build()
        .unwrap();
    let server = io.block_on(FakeServer::start(script)).unwrap();
    let (kind, base) = match format {
        WireFormat::Anthropic => (ProviderKind::Anthropic, server.anthropic_base_url()),
        WireFormat::OpenAi => (ProviderKind::OpenAiCompatible, server.openai_base_url()),
        WireFormat::Responses => (ProviderKind::OpenAi, server.openai_base_url()),
    };
    let provider = Provider::new(ProviderConfig {
        base_url: Some(base),
        api_key: Some("k".into()),
        retry: RetryPolicy::none(),
        ..ProviderConfig::new(kind)
    })
    .unwrap();
    let store = Arc::new(Store::open(ws.join("latch.db")).unwrap());
    let model = latch_engine_sdk::types::ModelProfile::with_defaults(kind.name(), "test-model");
    let parent = store
        .create_session(&ws.display().to_string(), None, &model)
        .unwrap();
    Team {
        _dir: dir,
        ws,
        _io: io,
        server,
        store,
        provider,
        parent,
    }
}

impl Team {
    /// The parent's agent over the configured supervisor (default: the
    /// continuity engine) with its children on `max_concurrent` workers.
    pub(crate) fn parent_agent(
        &self,
        config: &Config,
        max_concurrent: usize,
    ) -> (Agent, Arc<ChildRuntime>) {
        let supervisor = Arc::new(Supervisor::from_config(config, &self.ws).unwrap());
        self.parent_agent_with(supervisor, max_concurrent)
    }

    /// The parent's agent over `supervisor`.
    pub(crate) fn parent_agent_with(
        &self,
        supervisor: Arc<Supervisor>,
        max_concurrent: usize,
    ) -> (Agent, Arc<ChildRuntime>) {
        let settings = ChildSettings {
            max_concurrent,
            ..ChildSettings::default()
        };
        self.parent_agent_settings(supervisor, settings)
    }

    /// The parent's agent over `supervisor`, its children run under
    /// `settings`.
    pub(crate) fn parent_agent_settings(
        &self,
        supervisor: Arc<Supervisor>,
        settings: ChildSettings,
    ) -> (Agent, Arc<ChildRuntime>) {
        let engine = supervisor
            .root_engine(&self.parent.id, &self.parent.model)
            .unwrap();
        let options = AgentOptions {
            mode: "run".into(),
            max_steps: Some(200),
            ..AgentOptions::default()
        };
        let rt = ChildRuntime::with_settings(
            self.store.clone(),
            self.ws.clone(),
            supervisor,
            self.provider.clone(),
            options.clone(),
            settings,
        );
        let tools =
            latch_tools::ToolContext::new(self.store.clone(), self.parent.id.clone(), &self.ws)
                .unwrap();
        // A client per agent: pooled connections live on the runtime of
        // the agent that opened them.
        let provider = Provider::new(self.provider.config().clone()).unwrap();
        let agent = Agent::new(
            self.store.clone(),
            self.parent.clone(),
            self.ws.clone(),
            engine,
            provider,
            Box::new(StandardTools::new(tools)),
            options,
        )
        .unwrap()
        .with_delegation(Box::new(ParentAgents::new(rt.clone())));
        (agent, rt)
    }

    /// The parent's requests, in order.
    pub(crate) fn parent_requests(&self) -> Vec<CapturedRequest> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| !is_child(r))
            .collect()
    }

    fn deliveries(&self) -> Vec<(String, u64)> {
        self.store
            .agent_log(&self.parent.id, 0)
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::AgentNotificationDelivered {
                    child, report_seq, ..
                } => Some((child, report_seq)),
                _ => None,
            })
            .collect()
    }
}

/// Consecutive requests of one session share their prefix: the same system
/// and tools, and every message but the previous request's last one byte
/// for byte (the last may only grow, e.g. tool results merged with a
/// delivered notification in one user turn).
/// Cache breakpoints move with the end of the conversation; they mark the
/// prefix, they are not part of it.
fn without_breakpoints(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "cache_control")
                .map(|(k, v)| (k.clone(), without_breakpoints(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_breakpoints).collect()),
        other => other.clone(),
    }
}

fn assert_prefix_kept(requests: &[CapturedRequest]) {
    for (i, pair) in requests.windows(2).enumerate() {
        let (a, b) = (
            &without_breakpoints(&pair[0].body),
            &without_breakpoints(&pair[1].body),
        );
        assert_eq!(
            a["system"],
            b["system"],
            "system changed at request {}",
            i + 1
        );
        assert_eq!(a["tools"], b["tools"], "tools changed at request {}", i + 1);
        let (ma, mb) = (
            a["messages"].as_array().unwrap(),
            b["messages"].as_array().unwrap(),
        );
        assert!(mb.len() >= ma.len(), "request {} dropped messages", i + 1);
        for k in 0..ma.len() - 1 {
            assert_eq!(
                ma[k].to_string(),
                mb[k].to_string(),
                "request {} rewrote message {k} of the previous one",
                i + 1
            );
        }
        let (last_a, last_b) = (&ma[ma.len() - 1], &mb[ma.len() - 1]);
        assert_eq!(last_a["role"], last_b["role"]);
        if let (Some(ca), Some(cb)) = (last_a["content"].as_array(), last_b["content"].as_array()) {
            assert_eq!(
                Value::Array(ca.clone()).to_string(),
                Value::Array(cb[..ca.len()].to_vec()).to_string(),
                "request {} rewrote the previous last message",
                i + 1
            );
        } else {
            assert_eq!(last_a, last_b, "request {} rewrote the last message", i + 1);
        }
    }
}

fn spawn_deliver_and_finish(format: WireFormat) {
    let meet = Arc::new(Rendezvous::default());
    let t = team(
        format,
        Script::default().with_responder(team_responder(meet.clone())),
    );
    let (mut agent, rt) = t.parent_agent(&Config::default(), 4);
    let outcome = agent
        .run_turn("Delegate: fix it and test it.", &mut |_| {})
        .unwrap();
    assert_eq!(outcome.final_text, "Both children reported.");
    assert!(rt.wait_idle(Duration::from_secs(20)));
    let tree = t.store.agent_tree(&t.parent.id).unwrap();
    for c in tree.children() {
        assert_eq!(c.state, ChildState::Finished, "{c:?}");
    }
    assert_eq!(
        meet.overlapped.load(Ordering::SeqCst),
        2,
        "both children had a request in flight at once"
    );

    // Two children, each a session of its own with its durable profile.
    let tree = t.store.agent_tree(&t.parent.id).unwrap();
    let children: Vec<_> = tree.children().cloned().collect();
    assert_eq!(children.len(), 2);
    for c in &children {
        assert_eq!(c.state, ChildState::Finished, "{c:?}");
        assert_eq!(c.engine, "builtin:continuity");
        assert_eq!(c.model, "test-model");
        let record = t.store.session(&c.id).unwrap();
        assert_eq!(record.parent.as_deref(), Some(t.parent.id.as_str()));
        // The child's first input is its brief, never the parent's history.
        let first_user = t
            .store
            .events(&c.id, 0, u64::MAX, 1000)
            .unwrap()
            .into_iter()
            .find_map(|e| match e.kind {
                EventKind::UserMessage { parts } => Some(format!("{parts:?}")),
                _ => None,
            })
            .unwrap();
        assert!(first_user.contains(BRIEF), "{first_user}");
        assert!(!first_user.contains("Delegate: fix it"), "{first_user}");
    }
    let tester = children.iter().find(|c| c.role == "tester").unwrap();
    assert_eq!(tester.task, "Run the tests");
    let fixer = children.iter().find(|c| c.role == "fixer").unwrap();
    let (_, report) = fixer.latest_report().unwrap();
    assert_eq!(report.files_changed, ["fixed.txt"]);
    assert_eq!(report.summary, "Fixed: wrote fixed.txt");
    assert_eq!(
        std::fs::read_to_string(t.ws.join("fixed.txt")).unwrap(),
        CHILD_SECRET
    );

    // Each report delivered exactly once, as a notification.
    let mut delivered = t.deliveries();
    delivered.sort();
    let mut expected: Vec<(String, u64)> = children
        .iter()
        .map(|c| (c.id.clone(), c.latest_report().unwrap().0))
        .collect();
    expected.sort();
    assert_eq!(delivered, expected);
    assert!(tree.undelivered().is_empty());

    // The parent's requests carry the notifications and none of a child's
    // transcript; no delivery rewrote the prefix.
    let parent = t.parent_requests();
    let last = messages(parent.last().unwrap());
    assert!(last.contains("(fixer) completed") && last.contains("Fixed: wrote fixed.txt"));
    for r in &parent {
        let m = messages(r);
        assert!(!m.contains(BRIEF), "a child's brief leaked into the parent");
        assert!(
            !m.contains(CHILD_SECRET),
            "a child's tool call leaked into the parent"
        );
    }
    assert_prefix_kept(&parent);
    let names: Vec<String> = parent[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .or(t["function"]["name"].as_str())
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(names.ends_with(&[
        "spawn_agent".to_string(),
        "wait_agents".into(),
        "message_agent".into(),
        "list_agents".into(),
        "cancel_agent".into()
    ]));
}

#[test]
fn children_run_concurrently_and_report_at_a_safe_boundary_anthropic() {
    spawn_deliver_and_finish(WireFormat::Anthropic);
}

#[test]
fn children_run_concurrently_and_report_at_a_safe_boundary_openai() {
    spawn_deliver_and_finish(WireFormat::OpenAi);
}

/// `wait_agents` hands the reports over in its result; they are marked
/// received with the result and never delivered again as notifications.
#[test]
fn wait_agents_returns_reports_once() {
    let responder = |r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if is_child(r) {
            return ScriptedTurn::text("Checked: nothing to fix").into();
        }
        if !has_tool_result(r) {
            return ScriptedTurn::tool_call("spawn_agent", r#"{"role":"checker","task":"Check"}"#)
                .into();
        }
        if !m.contains(r#""name":"wait_agents""#) {
            return ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s": 30}"#).into();
        }
        ScriptedTurn::text("done").into()
    };
    let t = team(
        WireFormat::Anthropic,
        Script::default().with_responder(responder),
    );
    let (mut agent, rt) = t.parent_agent(&Config::default(), 4);
    agent.run_turn("check", &mut |_| {}).unwrap();
    assert!(rt.wait_idle(Duration::from_secs(20)));
    let parent = t.parent_requests();
    let last = messages(parent.last().unwrap());
    assert_eq!(
        last.matches("Checked: nothing to fix").count(),
        1,
        "the report arrives once, in the wait_agents result: {last}"
    );
    assert!(
        t.deliveries().is_empty(),
        "no second delivery as a notification"
    );
    let tree = t.store.agent_tree(&t.parent.id).unwrap();
    assert!(tree.undelivered().is_empty());
    // A later turn delivers nothing more.
    let before = t.parent_requests().len();
    agent.run_turn("anything else?", &mut |_| {}).unwrap();
    let after = t.parent_requests();
    assert_eq!(after.len(), before + 1);
    assert_eq!(
        messages(after.last().unwrap())
            .matches("Checked: nothing to fix")
            .count(),
        1
    );
}

/// A report committed while no parent process ran (the parent died before
/// delivering it) is delivered at the resumed parent's first safe boundary,
/// once; a child that was running when the process died is interrupted, and
/// a message to it resumes it through the factory from its durable profile.
#[test]
fn resume_delivers_undelivered_reports_once_and_resumes_interrupted_children() {
    let cut_id = Arc::new(Mutex::new(String::new()));
    let cut_for_script = cut_id.clone();
    let responder = move |r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if is_child(r) {
            if m.contains("Your run was interrupted") {
                return ScriptedTurn::text("Resumed and finished").into();
            }
            return ScriptedTurn::text("unused").into();
        }
        if m.contains("Resumed and finished") {
            return ScriptedTurn::text("all reported").into();
        }
        if m.contains("(slow) completed") || m.contains("resumed and gets the message") {
            if m.contains(r#""name":"message_agent""#) {
                return ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s": 30}"#).into();
            }
            return ScriptedTurn::tool_call(
                "message_agent",
                &*format!(
                    r#"{{"id":"{}","text":"carry on"}}"#,
                    cut_for_script.lock().unwrap()
                ),
            )
            .into();
        }
        ScriptedTurn::text("nothing yet").into()
    };
    let t = team(
        WireFormat::Anthropic,
        Script::default().with_responder(responder),
    );
    // A first process spawned two children and died: one had finished (its
    // report committed, never delivered), one was mid-run.
    let model = t.parent.model.clone();
    let ws = t.ws.display().to_string();
    let done = t
        .store
        .create_session(&ws, Some(&t.parent.id), &model)
        .unwrap();
    let cut = t
        .store
        .create_session(&ws, Some(&t.parent.id), &model)
        .unwrap();
    for (c, role) in [(&done, "slow"), (&cut, "cut")] {
        t.store
            .append(
                &t.parent.id,
                EventKind::ChildSpawned {
                    child: c.id.clone(),
                    role: role.into(),
                    task: format!("{role} task"),
                    model: model.model.clone(),
                    engine: "builtin:continuity".into(),
                    engine_config: "{}".into(),
                },
            )
            .unwrap();
        t.store
            .append(
                &c.id,
                EventKind::RunStarted {
                    mode: "child".into(),
                    context: None,
                },
            )
            .unwrap();
        t.store
            .append(
                &c.id,
                EventKind::user_text(format!("{BRIEF} P, working as `{role}`")),
            )
            .unwrap();
    }
    let report = latch_kernel::agents::build_report(
        "slow",
        &[],
        latch_kernel::ReportOutcome::Completed,
        "slow work done",
    );
    t.store
        .append(&done.id, EventKind::AgentReport(report))
        .unwrap();
    *cut_id.lock().unwrap() = cut.id.clone();

    let (mut agent, rt) = t.parent_agent(&Config::default(), 4);
    agent.resume(&mut |_| {}).unwrap();
    let tree = t.store.agent_tree(&t.parent.id).unwrap();
    assert_eq!(tree.child(&cut.id).unwrap().state, ChildState::Unfinished);
    assert!(!rt.is_live(&cut.id), "interrupted: no process runs it");
    let outcome = agent.run_turn("status?", &mut |_| {}).unwrap();
    assert_eq!(outcome.final_text, "all reported");
    assert!(rt.wait_idle(Duration::from_secs(20)));

    let delivered = t.deliveries();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0].0, done.id);
    let tree = t.store.agent_tree(&t.parent.id).unwrap();
    let resumed = tree.child(&cut.id).unwrap();
    assert_eq!(resumed.state, ChildState::Finished);
    assert_eq!(
        resumed.latest_report().unwrap().1.summary,
        "Resumed and finished"
    );
    // Its committed history is kept and repaired, not replaced.
    let events = t.store.events(&cut.id, 0, u64::MAX, 1000).unwrap();
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::RunInterrupted { .. }))
    );
    assert!(events.iter().any(
        |e| matches!(&e.kind, EventKind::AgentMessageDelivered { text, .. } if text.contains("carry on"))
    ));
    // A second resume delivers nothing again.
    let (mut again, _) = t.parent_agent(&Config::default(), 4);
    again.resume(&mut |_| {}).unwrap();
    let before = t.deliveries().len();
    let _ = again.run_turn("anything?", &mut |_| {});
    assert_eq!(
        t.deliveries().len(),
        before,
        "nothing is delivered twice across restarts"
    );
    assert_prefix_kept(&t.parent_requests());
}

/// Records every session the factory built an engine for.
struct Counting {
    inner: Arc<dyn ContextEngineFactory>,
    made: Arc<Mutex<Vec<String>>>,
}

impl ContextEngineFactory for Counting {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn create(
        &self,
        session_id: &str,
        model: &latch_engine_sdk::types::ModelProfile,
    ) -> Result<Box<dyn ContextEngine>, EngineFailure> {
        self.made.lock().unwrap().push(session_id.to_string());
        self.inner.create(session_id, model)
    }
}

/// The port pin for real children: a configured factory (the window engine,
/// children sharing it) builds the engine of a spawned child and, after a
/// restart, of the resumed child — and no default-engine context reaches
/// either child's requests.
#[test]
fn port_pin_a_configured_factory_governs_spawned_and_resumed_children() {
    let responder = |r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if is_child(r) {
            return ScriptedTurn::text("window child done").into();
        }
        if !has_tool_result(r) {
            return ScriptedTurn::tool_call("spawn_agent", r#"{"role":"win","task":"Look"}"#)
                .into();
        }
        if !m.contains(r#""name":"wait_agents""#) {
            return ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s": 30}"#).into();
        }
        ScriptedTurn::text("ok").into()
    };
    let t = team(
        WireFormat::OpenAi,
        Script::default().with_responder(responder),
    );
    let text = format!(
        "[engine]\ncomponent = {:?}\n[engine.child_policy]\ncomponent = \"builtin:same\"\n",
        latch_tests::WINDOW_WASM
    );
    let config = Config::parse(&text, &t.ws.join("config.toml")).unwrap();
    let made = Arc::new(Mutex::new(Vec::new()));
    let configured = Supervisor::from_config(&config, &t.ws).unwrap();
    let supervisor = Arc::new(Supervisor::new(
        Arc::new(Counting {
            inner: configured.factory().clone(),
            made: made.clone(),
        }),
        ChildPolicy::SameAsRoot,
    ));
    let (mut agent, rt) = t.parent_agent_with(supervisor.clone(), 4);
    agent.run_turn("delegate", &mut |_| {}).unwrap();
    assert!(rt.wait_idle(Duration::from_secs(20)));
    let tree = t.store.agent_tree(&t.parent.id).unwrap();
    let child = tree.children().next().unwrap().clone();
    assert!(
        child.engine.ends_with("latch_window_engine.wasm"),
        "{}",
        child.engine
    );
    assert_eq!(
        *made.lock().unwrap(),
        [t.parent.id.clone(), child.id.clone()],
        "root and spawned child built by the one factory"
    );
    // Mark the child's run as cut off, as a crash would leave it, then
    // resume it in a new process through the same factory.
    t.store
        .append(
            &t.parent.id,
            EventKind::AgentResumed {
                child: child.id.clone(),
            },
        )
        .unwrap();
    made.lock().unwrap().clear();
    let (_again, rt2) = t.parent_agent_with(supervisor, 4);
    let parent = t.store.session(&t.parent.id).unwrap();
    let entry = t
        .store
        .agent_tree(&t.parent.id)
        .unwrap()
        .child(&child.id)
        .unwrap()
        .clone();
    assert_eq!(entry.state, ChildState::Unfinished);
    latch::supervisor::children::resume_child(&rt2, &parent, &entry).unwrap();
    assert!(rt2.wait_idle(Duration::from_secs(20)));
    assert_eq!(
        *made.lock().unwrap(),
        [t.parent.id.clone(), child.id.clone()],
        "the resumed child's engine came from the factory"
    );
    let tree = t.store.agent_tree(&t.parent.id).unwrap();
    assert_eq!(tree.child(&child.id).unwrap().reports.len(), 2);
    for r in t.server.requests().iter().filter(|r| is_child(r)) {
        assert!(
            !messages(r).contains("Latch context snapshot"),
            "a default-engine snapshot reached a window child"
        );
    }
}

/// A non-default root engine without a child policy: spawn fails with the
/// supervisor's message, as a tool error the model reads, and the session
/// that never ran is hidden from history.
#[test]
fn port_pin_a_non_default_root_without_a_policy_fails_spawn() {
    let responder = |r: &CapturedRequest| -> ScriptStep {
        if !has_tool_result(r) {
            return ScriptedTurn::tool_call("spawn_agent", r#"{"role":"x","task":"y"}"#).into();
        }
        ScriptedTurn::text("ok").into()
    };
    let t = team(
        WireFormat::Anthropic,
        Script::default().with_responder(responder),
    );
    let text = format!("[engine]\ncomponent = {:?}\n", latch_tests::WINDOW_WASM);
    let config = Config::parse(&text, &t.ws.join("config.toml")).unwrap();
    let (mut agent, _rt) = t.parent_agent(&config, 4);
    agent.run_turn("delegate", &mut |_| {}).unwrap();
    let result = t
        .store
        .events(&t.parent.id, 0, u64::MAX, 1000)
        .unwrap()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::ToolResult(r) if r.name == "spawn_agent" => Some(r),
            _ => None,
        })
        .unwrap();
    assert!(result.is_error);
    assert!(
        result.content.contains("cannot spawn a child agent")
            && result.content.contains("[engine.child_policy]"),
        "{}",
        result.content
    );
    assert_eq!(
        t.store.agent_tree(&t.parent.id).unwrap().children().count(),
        0
    );
    let visible = t.store.list_sessions(&t.ws.display().to_string()).unwrap();
    assert_eq!(visible.len(), 1, "only the parent is listed");
}

/// `cancel_agent` stops a running child at its next safe boundary; its
/// report says cancelled, and `list_agents` shows it failed.
#[test]
fn cancel_agent_stops_a_running_child() {
    let responder = |r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if is_child(r) {
            // A child that never ends on its own.
            return ScriptedTurn::tool_call("recall", r#"{"query":"anything"}"#).into();
        }
        if !has_tool_result(r) {
            return ScriptedTurn::tool_call("spawn_agent", r#"{"role":"looper","task":"Loop"}"#)
                .into();
        }
        if !m.contains(r#""name":"cancel_agent""#) {
            let id = m
                .split("Spawned child agent ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .unwrap_or_default()
                .to_string();
            return ScriptedTurn::tool_call("cancel_agent", format!(r#"{{"id":"{id}"}}"#)).into();
        }
        if !m.contains(r#""name":"wait_agents""#) {
            return ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s": 30}"#).into();
        }
        if !m.contains(r#""name":"list_agents""#) {
            return ScriptedTurn::tool_call("list_agents", "{}").into();
        }
        ScriptedTurn::text("stopped it").into()
    };
    let t = team(
        WireFormat::Anthropic,
        Script::default().with_responder(responder),
    );
    let (mut agent, rt) = t.parent_agent(&Config::default(), 4);
    agent.run_turn("start and stop", &mut |_| {}).unwrap();
    assert!(rt.wait_idle(Duration::from_secs(20)));
    let tree = t.store.agent_tree(&t.parent.id).unwrap();
    let child = tree.children().next().unwrap();
    assert_eq!(child.state, ChildState::Failed);
    let (_, report) = child.latest_report().unwrap();
    assert_eq!(report.outcome, latch_kernel::ReportOutcome::Cancelled);
    let last = messages(t.parent_requests().last().unwrap());
    assert!(last.contains("(looper) cancelled"), "{last}");
    assert!(
        last.contains(&format!("{}  looper  failed", child.id)),
        "{last}"
    );
    let child_events = t.store.events(&child.id, 0, u64::MAX, 1000).unwrap();
    assert!(child_events.iter().any(
        |e| matches!(&e.kind, EventKind::RunInterrupted { reason } if reason.contains("cancelled"))
    ));
}

/// `spawn_agent {model}` picks a configured model profile: the child's
/// session gets its window, reserve and estimator (on the parent's
/// provider) and its requests its name and output limit; an unknown name is
/// refused with the names the model may use, and no session is left for it.
#[test]
fn spawn_model_chooses_a_configured_profile_and_refuses_an_unknown_one() {
    let responder = |r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if is_child(r) {
            return ScriptedTurn::text("small child done").into();
        }
        if !has_tool_result(r) {
            return ScriptedTurn::tool_call(
                "spawn_agent",
                r#"{"role":"big","task":"Think hard","model":"huge"}"#,
            )
            .into();
        }
        if !m.contains("Spawned child agent") {
            return ScriptedTurn::tool_call(
                "spawn_agent",
                r#"{"role":"quick","task":"Look","model":"small"}"#,
            )
            .into();
        }
        if !m.contains(r#""name":"wait_agents""#) {
            return ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s": 30}"#).into();
        }
        ScriptedTurn::text("ok").into()
    };
    let t = team(
        WireFormat::Anthropic,
        Script::default().with_responder(responder),
    );
    let config = Config::parse(
        "[models.small]\ncontext_window_tokens = 32000\nmax_tokens = 1024\n\
         estimator = \"cjk-optimized\"\n[models.tiny]\n",
        &t.ws.join("config.toml"),
    )
    .unwrap();
    let supervisor = Arc::new(Supervisor::from_config(&config, &t.ws).unwrap());
    let (mut agent, rt) = t.parent_agent_settings(supervisor, ChildSettings::from_config(&config));
    agent.run_turn("delegate", &mut |_| {}).unwrap();
    assert!(rt.wait_idle(Duration::from_secs(20)));

    let refused = t
        .store
        .events(&t.parent.id, 0, u64::MAX, 1000)
        .unwrap()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::ToolResult(r) if r.name == "spawn_agent" => Some(r),
            _ => None,
        })
        .unwrap();
    assert!(refused.is_error);
    assert!(
        refused.content.contains("model `huge` is not configured")
            && refused.content.contains("`test-model` (the default)")
            && refused.content.contains("small, tiny"),
        "{}",
        refused.content
    );
    let tree = t.store.agent_tree(&t.parent.id).unwrap();
    let children: Vec<_> = tree.children().collect();
    assert_eq!(children.len(), 1, "the refused spawn left no child");
    let child = children[0];
    assert_eq!(child.model, "small");
    assert_eq!(child.state, ChildState::Finished);
    let record = t.store.session(&child.id).unwrap();
    assert_eq!(record.model.model, "small");
    assert_eq!(record.model.provider, t.parent.model.provider);
    assert_eq!(record.model.context_window_tokens, 32_000);
    assert_eq!(record.model.reserve_tokens, 1024 + 2048);
    assert_eq!(
        record.model.estimator,
        latch_engine_sdk::types::EstimatorProfile::CjkOptimized
    );
    let requests = t.server.requests();
    let child_request = requests.iter().find(|r| is_child(r)).unwrap();
    assert_eq!(child_request.body["model"], "small");
    assert_eq!(child_request.body["max_tokens"], 1024);
    let parent_request = &t.parent_requests()[0];
    assert_eq!(parent_request.body["model"], "test-model");
    assert_ne!(parent_request.body["max_tokens"], 1024);
    assert_eq!(
        t.store
            .list_sessions(&t.ws.display().to_string())
            .unwrap()
            .len(),
        2,
        "the parent and the one child"
    );
}

/// A parent that ends its turn while its child still works is not left
/// behind: the turn waits for the report, delivers it at that boundary and
/// continues on it, so `latch run` ends with the child's result.
#[test]
fn a_parent_that_ends_its_turn_continues_on_its_childs_report() {
    let responder = |r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if is_child(r) {
            std::thread::sleep(Duration::from_millis(300));
            return ScriptedTurn::text("late report: all green").into();
        }
        if m.contains("(late) completed") {
            return ScriptedTurn::text("The child reported: all green.").into();
        }
        if m.contains("Spawned child agent") {
            return ScriptedTurn::text("Started a child; it reports when done.").into();
        }
        ScriptedTurn::tool_call("spawn_agent", r#"{"role":"late","task":"Check"}"#).into()
    };
    let t = team(
        WireFormat::OpenAi,
        Script::default().with_responder(responder),
    );
    let (mut agent, rt) = t.parent_agent(&Config::default(), 4);
    let outcome = agent.run_turn("delegate and report", &mut |_| {}).unwrap();
    assert_eq!(outcome.final_text, "The child reported: all green.");
    assert!(rt.wait_idle(Duration::from_secs(20)));
    let parent = t.parent_requests();
    assert_eq!(parent.len(), 3, "spawn, the early end, the continuation");
    let last = messages(parent.last().unwrap());
    assert_eq!(last.matches("late report: all green").count(), 1, "{last}");
    assert_eq!(t.deliveries().len(), 1);
    assert_prefix_kept(&parent);
    // Nothing runs and nothing waits: the next turn ends when the model
    // ends it.
    agent.run_turn("anything else?", &mut |_| {}).unwrap();
    assert_eq!(t.parent_requests().len(), 4);
}
