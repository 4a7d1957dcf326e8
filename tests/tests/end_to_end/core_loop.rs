//! The agent loop's data-safety pins, in process against the real store, the
//! embedded ContinuityEngine component and the local wire-format server:
//! tool results commit as each call finishes, an answer cut off at the
//! output limit is continued, a store failure under an engine call is an
//! error and never a panic, the open-turn check costs what is new, and a
//! resume in another mode keeps the first provider-visible message.

use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentError, AgentOptions, ToolSet};
use latch::engine::{ComponentEngine, ContextEngine, Materialization, Observed, SandboxLimits};
use latch_engine_sdk::types::*;
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use latch_provider::{Provider, ProviderConfig, ProviderKind, RetryPolicy, ToolSchema};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::common::continuity;

/// A store, a session and the scripted server (Anthropic wire), from which
/// agents are built as a process would build them (also for resumes).
pub(crate) struct Rig {
    dir: tempfile::TempDir,
    ws: PathBuf,
    io: tokio::runtime::Runtime,
    pub(crate) server: FakeServer,
    pub(crate) store: Arc<Store>,
    pub(crate) session: SessionRecord,
}

pub(crate) fn rig(script: Script) -> Rig {
    rig_with(
        ModelProfile::with_defaults("anthropic", "test-model"),
        script,
    )
}

fn rig_with(model: ModelProfile, script: Script) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    std::fs::write(ws.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = io.block_on(FakeServer::start(script)).unwrap();
    let store = Arc::new(Store::open(ws.join(".latch/latch.db")).unwrap());
    let session = store
        .create_session(&ws.display().to_string(), None, &model)
        .unwrap();
    Rig {
        dir,
        ws,
        io,
        server,
        store,
        session,
    }
}

impl Rig {
    fn agent_with(&self, mode: &str, tools: Box<dyn ToolSet>, max_tokens: u32) -> Agent {
        self.agent_full(mode, tools, max_tokens, |e| e)
    }

    fn agent_full(
        &self,
        mode: &str,
        tools: Box<dyn ToolSet>,
        max_tokens: u32,
        wrap: impl FnOnce(Box<dyn ContextEngine>) -> Box<dyn ContextEngine>,
    ) -> Agent {
        let provider = Provider::new(ProviderConfig {
            base_url: Some(self.server.anthropic_base_url()),
            api_key: Some("k".into()),
            retry: RetryPolicy::none(),
            ..ProviderConfig::new(ProviderKind::Anthropic)
        })
        .unwrap();
        let engine = ComponentEngine::new(
            continuity(),
            SandboxLimits::default(),
            &self.session.id,
            self.session.model.clone(),
        );
        Agent::new(
            self.store.clone(),
            self.session.clone(),
            self.ws.clone(),
            wrap(Box::new(engine)),
            provider,
            tools,
            AgentOptions {
                mode: mode.into(),
                max_tokens,
                ..AgentOptions::default()
            },
        )
        .unwrap()
    }

    pub(crate) fn agent(&self, mode: &str) -> Agent {
        self.agent_with(mode, self.tools(), 4_096)
    }

    fn tools(&self) -> Box<dyn ToolSet> {
        let ctx =
            latch_tools::ToolContext::new(self.store.clone(), self.session.id.clone(), &self.ws)
                .unwrap();
        Box::new(StandardTools::new(ctx))
    }

    pub(crate) fn events(&self) -> Vec<EventKind> {
        self.store
            .events(&self.session.id, 0, u64::MAX, 100_000)
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect()
    }

    pub(crate) fn finish(self) {
        let Rig {
            io, server, dir, ..
        } = self;
        io.block_on(server.shutdown());
        drop(dir);
    }
}

/// Standard tools that note, before each call runs, how many tool results
/// the store already holds.
struct Probe {
    inner: Box<dyn ToolSet>,
    store: Arc<Store>,
    session: String,
    seen: Arc<Mutex<Vec<usize>>>,
}

impl ToolSet for Probe {
    fn schemas(&self) -> Vec<ToolSchema> {
        self.inner.schemas()
    }
    fn execute(&mut self, call: &ToolCall) -> ToolResult {
        let committed = self
            .store
            .events(&self.session, 0, u64::MAX, 100_000)
            .unwrap()
            .iter()
            .filter(|e| matches!(e.kind, EventKind::ToolResult(_)))
            .count();
        self.seen.lock().unwrap().push(committed);
        self.inner.execute(call)
    }
}

#[test]
fn each_tool_result_is_committed_as_its_call_finishes() {
    let r = rig(Script::new([
        ScriptedTurn::text("Reading three times.")
            .with_tool_call("read_file", r#"{"path":"notes.txt"}"#)
            .with_tool_call("list_files", r#"{}"#)
            .with_tool_call("read_file", r#"{"path":"notes.txt"}"#),
        ScriptedTurn::text("Done."),
    ]));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let probe = Probe {
        inner: r.tools(),
        store: r.store.clone(),
        session: r.session.id.clone(),
        seen: seen.clone(),
    };
    let mut agent = r.agent_with("run", Box::new(probe), 4_096);
    agent.run_turn("read the notes", &mut |_| {}).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![0, 1, 2],
        "each earlier result was durable before the next call ran"
    );
    drop(agent);
    r.finish();
}

#[test]
fn an_answer_cut_off_at_the_output_limit_is_continued() {
    let r = rig(Script::new([
        ScriptedTurn::text("The first half of a long answer").with_stop_reason("max_tokens"),
        ScriptedTurn::text("and its second half."),
    ]));
    let mut agent = r.agent("run");
    let out = agent.run_turn("explain", &mut |_| {}).unwrap();
    assert_eq!(out.steps, 2, "the cut-off answer did not end the turn");
    assert_eq!(out.final_text, "and its second half.");
    let requests = r.server.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].body.to_string();
    assert!(
        second.contains("The first half of a long answer") && second.contains("cut off"),
        "the model sees its cut-off answer and is told: {second}"
    );
    drop(agent);
    r.finish();
}

#[test]
fn an_answer_cut_off_every_time_is_reported_as_truncated() {
    let cut = || ScriptedTurn::text("again cut").with_stop_reason("max_tokens");
    let r = rig(Script::new([cut(), cut(), cut(), cut(), cut()]));
    let mut agent = r.agent("run");
    let err = agent.run_turn("explain", &mut |_| {}).unwrap_err();
    assert!(
        matches!(err, AgentError::Truncated { times: 4, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("max_tokens"), "{err}");
    assert_eq!(r.server.requests().len(), 4);
    drop(agent);
    r.finish();
}

/// Write a row this build cannot decode into the session's log, the way a
/// broken disk or a newer Latch could.
fn plant_undecodable_event(store: &Store, session: &str) {
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute(
        "INSERT INTO events (session, kind, body, time_ms, wide) VALUES (?1, 'from_the_future', '{}', 0, 0)",
        [session],
    )
    .unwrap();
}

#[test]
fn a_store_failure_inside_an_engine_call_is_an_error_not_a_panic() {
    let r = rig(Script::new([ScriptedTurn::text("unused")]));
    let armed = Arc::new(AtomicBool::new(false));
    let (store, session, trigger) = (r.store.clone(), r.session.id.clone(), armed.clone());
    let mut agent = r.agent_full("run", r.tools(), 4_096, move |inner| {
        // When armed, the store breaks in the middle of the engine's own
        // `materialize` (after the host lent it the session).
        Box::new(Observed::new(inner, move |m| {
            if matches!(m, Materialization::Before(_)) && trigger.swap(false, Ordering::SeqCst) {
                plant_undecodable_event(&store, &session);
            }
        }))
    });
    // A healthy first call.
    agent.materialize("notes").unwrap();
    armed.store(true, Ordering::SeqCst);
    let err = agent.materialize("notes").unwrap_err();
    assert!(
        matches!(
            err,
            AgentError::EngineStore {
                engine_call: "materialize",
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("from_the_future") && text.contains("nothing committed is lost"),
        "{text}"
    );
    // The instance that read incomplete answers is not asked again.
    let again = agent.recall("alpha", 5).unwrap_err();
    assert!(
        matches!(again, AgentError::EngineTainted { .. }),
        "{again:?}"
    );
    drop(agent);
    r.finish();
}

#[test]
fn a_store_that_already_fails_is_reported_before_the_engine_runs() {
    let r = rig(Script::new([ScriptedTurn::text("unused")]));
    let mut agent = r.agent("run");
    plant_undecodable_event(&r.store, &r.session.id);
    let err = agent.materialize("notes").unwrap_err();
    assert!(
        matches!(
            err,
            AgentError::EngineStore {
                view_call: "info",
                ..
            }
        ),
        "{err:?}"
    );
    drop(agent);
    r.finish();
}

#[test]
fn the_open_turn_check_costs_what_is_new() {
    let r = rig(Script::new([ScriptedTurn::text("unused")]));
    let mut batch = Vec::new();
    for i in 0..3_000 {
        batch.push(EventKind::user_text(format!("old message {i}")));
    }
    r.store.append_batch(&r.session.id, batch).unwrap();
    let mut agent = r.agent("run");
    agent.repair_interrupted(&mut |_| {}).unwrap();
    r.store
        .append(&r.session.id, EventKind::user_text("one more"))
        .unwrap();
    let before = r.store.decoded_events();
    assert_eq!(agent.repair_interrupted(&mut |_| {}).unwrap(), 0);
    let read = r.store.decoded_events() - before;
    assert!(read <= 1, "the second check decoded {read} events");
    drop(agent);
    r.finish();
}

#[test]
fn resume_in_another_mode_keeps_the_first_message_byte_identical() {
    let r = rig(Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#),
        ScriptedTurn::text("alpha and beta."),
        ScriptedTurn::text("Still alpha and beta."),
    ]));
    let mut run = r.agent("run");
    run.run_turn("summarize notes.txt", &mut |_| {}).unwrap();
    drop(run);
    // A new process resumes the session interactively.
    let mut chat = r.agent("interactive");
    chat.resume(&mut |_| {}).unwrap();
    assert_eq!(chat.session_context().mode, "run");
    chat.run_turn("and now?", &mut |_| {}).unwrap();
    let requests = r.server.requests();
    assert_eq!(requests.len(), 3);
    // The Anthropic adapter merges adjacent user messages into one wire
    // message (whose cache marker moves as the conversation grows); the
    // session-context message is its first block.
    let first =
        |i: usize| serde_json::to_string(&requests[i].body["messages"][0]["content"][0]).unwrap();
    assert!(first(0).contains("Mode: run"), "{}", first(0));
    assert_eq!(first(0), first(2), "the first message is byte-identical");
    // What changed reaches the model as an appended, durable note.
    let last = requests[2].body["messages"].to_string();
    assert!(last.contains("Mode: interactive"), "{last}");
    let notes: Vec<String> = r
        .events()
        .into_iter()
        .filter_map(|k| match k {
            EventKind::NotificationDelivered { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("Mode: interactive"));
    // A second interactive run adds no second note.
    drop(chat);
    let mut again = r.agent("interactive");
    again.resume(&mut |_| {}).unwrap();
    assert_eq!(again.session_context().mode, "run");
    drop(again);
    r.finish();
}

#[test]
fn compact_sizes_the_fresh_epoch_with_the_real_request() {
    // A small window and a large task state: the snapshot must leave room
    // for the system prompt and the tool schemas the next request carries.
    let model = ModelProfile {
        context_window_tokens: 20_000,
        reserve_tokens: 2_000,
        ..ModelProfile::with_defaults("anthropic", "test-model")
    };
    let r = rig_with(model, Script::new([ScriptedTurn::text("unused")]));
    let mut notes = vec![EventKind::user_text("keep notes on the parser")];
    for i in 0..220 {
        notes.push(EventKind::StateUpdate(latch_kernel::StateOp::AddNote {
            text: format!(
                "note {i}: the parser module handles token stream {i} with lookahead \
                 buffers, error recovery and span tracking for diagnostics"
            ),
        }));
    }
    r.store.append_batch(&r.session.id, notes).unwrap();
    let mut agent = r.agent("interactive");
    let persisted = agent.compact(&mut |_| {}).unwrap();
    assert!(persisted > 0);
    let compact_generation = r
        .events()
        .into_iter()
        .filter_map(|k| match k {
            EventKind::KernelContext(e) => Some(e.generation),
            _ => None,
        })
        .max()
        .unwrap();
    // The next request continues the epoch /compact started: it fits, so
    // the engine has no reason to rotate again.
    let (_, view) = agent.materialize("parser").unwrap();
    assert!(
        view.persist.is_empty(),
        "the next request started over ({} entries, generation {:?}, reason {:?}) instead of \
         showing the epoch /compact persisted (generation {compact_generation})",
        view.persist.len(),
        view.persist.first().map(|e| e.generation),
        view.report.rotation_reason
    );
    assert!(view.report.total_tokens <= view.report.limit_tokens);
    drop(agent);
    r.finish();
}
