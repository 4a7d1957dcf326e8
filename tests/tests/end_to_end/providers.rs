//! Providers as users run them, end to end through the real agent loop,
//! store and engine against the local wire-format server: reasoning models
//! in tool loops across a resume (Anthropic signed thinking, OpenAI
//! encrypted reasoning), reasoning text kept away from every surface,
//! calibration by a provider that counts 1.3× Latch's estimate, and the
//! estimate-versus-provider figures of a 50-turn session per wire format.

use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentError, AgentOptions};
use latch::engine::runtime::EngineSource;
use latch::engine::{ComponentEngine, EngineRuntime, Materialization, Observed, SandboxLimits};
use latch_engine_sdk::types::*;
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_provider::fake::{
    FakeServer, REASONING_TEXT, Script, ScriptStep, ScriptedFailure, ScriptedTurn, ScriptedUsage,
    WireFormat, WireUsage,
};
use latch_provider::{
    OpenAiWire, Provider, ProviderConfig, ProviderKind, ReasoningOptions, RetryPolicy,
};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub(crate) struct Setup {
    _dir: tempfile::TempDir,
    pub(crate) ws: PathBuf,
    _io: tokio::runtime::Runtime,
    pub(crate) server: FakeServer,
    pub(crate) store: Arc<Store>,
    provider: Provider,
    pub(crate) session: SessionRecord,
    /// Latch's estimate (the view's total) of every materialized view.
    totals: Arc<Mutex<Vec<u64>>>,
}

/// A session on `format` against `script`; with `reasoning`, the model
/// thinks (Anthropic) or reasons (OpenAI Responses) as configured.
pub(crate) fn setup(
    format: WireFormat,
    script: Script,
    reasoning: bool,
    adjust: impl FnOnce(&mut ModelProfile),
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    std::fs::write(ws.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = io.block_on(FakeServer::start(script)).unwrap();
    let (kind, base) = match format {
        WireFormat::Anthropic => (ProviderKind::Anthropic, server.anthropic_base_url()),
        WireFormat::OpenAi => (ProviderKind::OpenAiCompatible, server.openai_base_url()),
        WireFormat::Responses => (ProviderKind::OpenAi, server.openai_base_url()),
    };
    let mut config = ProviderConfig {
        base_url: Some(base),
        api_key: Some("k".into()),
        retry: RetryPolicy::none(),
        openai_wire: OpenAiWire::Responses,
        ..ProviderConfig::new(kind)
    };
    if reasoning {
        config.reasoning.insert(
            "test-model".into(),
            ReasoningOptions {
                thinking_budget_tokens: (kind == ProviderKind::Anthropic).then_some(2048),
                reasoning_effort: (kind == ProviderKind::OpenAi).then(|| "medium".to_string()),
            },
        );
    }
    let provider = Provider::new(config).unwrap();
    let store = Arc::new(Store::open(ws.join("latch.db")).unwrap());
    let mut model = ModelProfile::with_defaults(kind.name(), "test-model");
    adjust(&mut model);
    let session = store
        .create_session(&ws.display().to_string(), None, &model)
        .unwrap();
    Setup {
        _dir: dir,
        ws,
        _io: io,
        server,
        store,
        provider,
        session,
        totals: Arc::new(Mutex::new(Vec::new())),
    }
}

impl Setup {
    /// A fresh agent (and engine instance) on the session: a new process.
    pub(crate) fn agent(&self) -> Agent {
        self.agent_with(AgentOptions {
            mode: "run".into(),
            max_tokens: 4096,
            ..AgentOptions::default()
        })
    }

    /// [`Setup::agent`] with `options`.
    pub(crate) fn agent_with(&self, options: AgentOptions) -> Agent {
        self.agent_of(self.session.clone(), options)
    }

    /// A fresh agent on `session` (this setup's session with another
    /// profile, e.g. a window the user lowered) with `options`.
    pub(crate) fn agent_of(&self, session: SessionRecord, options: AgentOptions) -> Agent {
        let rt = EngineRuntime::new(None).unwrap();
        let loaded = rt
            .load(&EngineSource::Builtin("continuity".into()))
            .unwrap();
        let totals = self.totals.clone();
        let engine = Observed::new(
            Box::new(ComponentEngine::new(
                loaded,
                SandboxLimits::default(),
                &session.id,
                session.model.clone(),
            )),
            move |m| {
                if let Materialization::After(_, view) = m {
                    totals.lock().unwrap().push(view.report.total_tokens);
                }
            },
        );
        let tools =
            latch_tools::ToolContext::new(self.store.clone(), self.session.id.clone(), &self.ws)
                .unwrap();
        Agent::new(
            self.store.clone(),
            session,
            self.ws.clone(),
            Box::new(engine),
            self.provider.clone(),
            Box::new(StandardTools::new(tools)),
            options,
        )
        .unwrap()
    }

    pub(crate) fn all_events(&self) -> Vec<latch_kernel::StoredEvent> {
        self.store.all_events(&self.session.id).unwrap()
    }
}

/// A reasoning tool loop whose continuation fails once (the process "dies"
/// with the call answered), then a resumed agent continues it.
fn tool_loop_across_a_resume(format: WireFormat) -> Setup {
    let s = setup(
        format,
        Script::new([
            ScriptStep::from(
                ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#).with_reasoning(),
            ),
            ScriptedFailure::ServerError {
                status: 500,
                message: "the process died here".into(),
            }
            .into(),
            ScriptedTurn::text("The notes list alpha and beta.")
                .with_reasoning()
                .into(),
        ]),
        true,
        |_| {},
    );
    let mut first = s.agent();
    let e = first
        .run_turn("Summarize notes.txt", &mut |_| {})
        .unwrap_err();
    assert!(matches!(e, AgentError::Provider(_)), "{e}");
    drop(first);
    let mut resumed = s.agent();
    resumed.resume(&mut |_| {}).unwrap();
    let outcome = resumed
        .run_turn("Please continue.", &mut |_| {})
        .unwrap_or_else(|e| panic!("{format:?}: the continuation after a resume was refused: {e}"));
    assert_eq!(outcome.final_text, "The notes list alpha and beta.");
    s
}

/// The opaque state the store holds, as `(assistant seq, block JSON)`.
fn stored_blocks(s: &Setup) -> Vec<(u64, String)> {
    s.all_events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ProviderState(state) => Some((e.seq - 1, state.blocks[0].json.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn anthropic_thinking_in_a_tool_loop_is_replayed_after_a_resume() {
    let s = tool_loop_across_a_resume(WireFormat::Anthropic);
    let blocks = stored_blocks(&s);
    assert_eq!(blocks.len(), 2, "both thinking turns kept");
    let events = s.all_events();
    let assistant = events.iter().find(|e| e.seq == blocks[0].0).unwrap();
    assert!(matches!(assistant.kind, EventKind::AssistantMessage { .. }));
    let requests = s.server.requests();
    // The accepted continuation (after the resume) opened the tool loop's
    // assistant turn with the stored thinking block, byte for byte.
    let last = &requests.last().unwrap().body;
    let assistant_turn = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(
        serde_json::to_string(&assistant_turn["content"][0]).unwrap(),
        blocks[0].1
    );
    assert_eq!(last["thinking"]["budget_tokens"], 2048);
    assert_eq!(
        requests.last().unwrap().headers["anthropic-beta"],
        "interleaved-thinking-2025-05-14"
    );
}

#[test]
fn responses_encrypted_reasoning_is_carried_forward_after_a_resume() {
    let s = tool_loop_across_a_resume(WireFormat::Responses);
    let blocks = stored_blocks(&s);
    assert_eq!(blocks.len(), 2, "both reasoning items kept");
    let requests = s.server.requests();
    assert!(requests.iter().all(|r| r.path == "/v1/responses"));
    let last = &requests.last().unwrap().body;
    assert_eq!(last["store"], false);
    assert_eq!(last["prompt_cache_key"], s.session.id.as_str());
    assert_eq!(last["include"][0], "reasoning.encrypted_content");
    let item = last["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "reasoning")
        .expect("the reasoning item went back");
    assert_eq!(serde_json::to_string(item).unwrap(), blocks[0].1);
    // Reasoning tokens are reported, as a count, on the usage event.
    assert!(s.all_events().iter().any(|e| matches!(
        e.kind,
        EventKind::ProviderUsage {
            reasoning_tokens: Some(r),
            ..
        } if r > 0
    )));
}

#[test]
fn reasoning_text_never_reaches_search_engines_or_the_transcript() {
    for format in [WireFormat::Anthropic, WireFormat::Responses] {
        let s = tool_loop_across_a_resume(format);
        let word = "Considering";
        assert!(REASONING_TEXT.contains(word));
        // It is stored (opaquely), so the checks below can fail.
        assert!(
            s.all_events()
                .iter()
                .any(|e| e.kind.to_json().contains(word)),
            "{format:?}: the opaque state holds the reasoning"
        );
        // Not in the store's full-text index.
        assert!(
            s.store.search(&s.session.id, word, 50).unwrap().is_empty(),
            "{format:?}: reasoning text is searchable"
        );
        assert!(s.store.recall(&s.session.id, word, 50).unwrap().is_empty());
        // Not in any event an engine reads.
        let engine_events = s.store.events(&s.session.id, 0, u64::MAX, 1000).unwrap();
        for e in &engine_events {
            let body = serde_json::to_string(&e.to_sdk()).unwrap();
            assert!(!body.contains(word), "{format:?}: engine sees {body}");
        }
        // Not in the transcript the terminal renders.
        for e in s.all_events() {
            if let Some(line) = latch::cli::render::event_line(&e.kind) {
                assert!(!line.contains(word), "{format:?}: transcript shows {line}");
            }
        }
    }
}

const WINDOW: u64 = 24_000;
const RESERVE: u64 = 4_000;

/// A session that reads a big file 30 times against a provider that counts
/// `ratio` × Latch's estimate of each request and reports it. Returns every
/// request's `(estimate, provider count)`, the agent and its last report.
fn session_counted_at(ratio: f64) -> (Vec<(u64, u64)>, Agent, ContextReport, Setup) {
    let totals: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::new()));
    let counted: Arc<Mutex<Vec<(u64, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    let (seen, record) = (totals.clone(), counted.clone());
    let steps = Arc::new(Mutex::new(0usize));
    let script = Script::new(Vec::<ScriptStep>::new()).with_responder(move |_| {
        let estimate = *seen.lock().unwrap().last().unwrap();
        let count = (estimate as f64 * ratio).ceil() as u64;
        record.lock().unwrap().push((estimate, count));
        let mut n = steps.lock().unwrap();
        *n += 1;
        let usage = ScriptedUsage::Reported(WireUsage {
            input_tokens: Some(count),
            output_tokens: Some(40),
            ..WireUsage::default()
        });
        let turn = if *n < 30 {
            ScriptedTurn::tool_call("read_file", r#"{"path":"big.txt"}"#)
        } else {
            ScriptedTurn::text("Read it all.")
        };
        turn.with_usage(usage).into()
    });
    let mut s = setup(WireFormat::Anthropic, script, false, |m| {
        m.context_window_tokens = WINDOW;
        m.reserve_tokens = RESERVE;
    });
    s.totals = totals;
    let line = "the quick brown fox jumps over the lazy dog while the parser keeps state\n";
    std::fs::write(s.ws.join("big.txt"), line.repeat(230)).unwrap();
    let mut agent = s.agent();
    agent
        .run_turn("Read big.txt again and again.", &mut |_| {})
        .unwrap();
    let report = agent.context_report().unwrap();
    let counted = counted.lock().unwrap().clone();
    assert_eq!(counted.len(), 30);
    (counted, agent, report, s)
}

#[test]
fn calibration_tightens_the_budget_so_every_later_request_fits_the_providers_count() {
    let limit = WINDOW - RESERVE;
    // Control: a provider that counts what Latch estimates leaves the
    // budget alone.
    let (exact, agent, report, _s) = session_counted_at(1.0);
    let c = agent.calibration().unwrap().expect("calibrated");
    assert!((c.ratio - 1.0).abs() < 0.01, "{c:?}");
    assert_eq!(report.limit_tokens, limit, "a ratio of 1 never tightens");
    drop(agent);

    // The provider counts 1.3×: after a few requests the budget the engine
    // receives is the usable window divided by the ratio, the engine's views
    // shrink accordingly, and every later request fits the provider's count.
    let (counted, agent, report, _s) = session_counted_at(1.3);
    let c = agent.calibration().unwrap().expect("calibrated");
    assert!((c.ratio - 1.3).abs() < 0.01, "{c:?}");
    let tightened = (limit as f64 / c.ratio).floor() as u64;
    assert_eq!(report.limit_tokens, tightened, "tightened from {limit}");
    let peak = |v: &[(u64, u64)]| v.iter().skip(3).map(|p| p.0).max().unwrap();
    assert!(
        peak(&counted) < peak(&exact),
        "the tightened budget must shrink the views: {} vs {}",
        peak(&counted),
        peak(&exact)
    );
    for (i, (estimate, count)) in counted.iter().enumerate().skip(3) {
        assert!(
            *estimate <= tightened,
            "request {i}: view {estimate} > {tightened}"
        );
        assert!(
            *count <= limit,
            "request {i}: provider counted {count} > {limit} (Latch estimated {estimate})"
        );
    }
}

/// Figures for the note: Latch's estimate against the provider's reported
/// input on a 50-turn scripted session, per wire format, with the
/// calibration ratio after the first request and at the end.
#[test]
fn estimate_against_provider_input_on_a_50_turn_session_per_wire_format() {
    for format in [
        WireFormat::Anthropic,
        WireFormat::OpenAi,
        WireFormat::Responses,
    ] {
        let steps: Vec<ScriptStep> = (0..50)
            .flat_map(|i| {
                [
                    ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#).into(),
                    ScriptedTurn::text(format!("Turn {i}: the notes list alpha and beta.")).into(),
                ]
            })
            .collect();
        let s = setup(format, Script::new(steps), false, |_| {});
        let mut agent = s.agent();
        let mut first = None;
        for i in 0..50 {
            agent
                .run_turn(&format!("Turn {i}: what do the notes say?"), &mut |_| {})
                .unwrap();
            if i == 0 {
                first = agent.calibration().unwrap();
            }
        }
        let pairs: Vec<(u64, u64)> = s
            .all_events()
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::ProviderUsage {
                    input_tokens: Some(r),
                    estimated_input_tokens: Some(est),
                    ..
                } => Some((*est, *r)),
                _ => None,
            })
            .collect();
        assert_eq!(pairs.len(), 100);
        let est: u64 = pairs.iter().map(|p| p.0).sum();
        let rep: u64 = pairs.iter().map(|p| p.1).sum();
        let last = agent.calibration().unwrap().unwrap();
        let first = first.unwrap();
        println!(
            "{format:?}: 100 requests, estimated {est} vs provider {rep} input tokens (×{:.3}); \
             calibration after request 1: {:.3}, after request 100: {:.3}; last request: est {} vs {}",
            rep as f64 / est as f64,
            first.ratio,
            last.ratio,
            pairs[99].0,
            pairs[99].1
        );
        assert!(last.ratio > 0.5 && last.ratio < 2.0, "{format:?}: {last:?}");
    }
}
