//! The CI invariant tier: small, fast architectural invariants that every
//! push must keep. The stress tier (thousands of events, long sessions) stays
//! out of CI and runs locally with `cargo test -- --ignored`.
//!
//! Durable history ownership, append-only cache epochs, canonical
//! authority, resume equivalence, kernel-owned evidence, safety hard-deny,
//! steering protocol correctness, deterministic serialization, cache-accounting semantics, and the port
//! pins: the default engine is byte-identical natively, behind
//! `dyn ContextEngine` and as a component; a configured factory governs
//! children; the default factory is the continuity engine; a non-default root
//! engine without a child policy refuses child spawn.

use latch::config::Config;
use latch::engine::policy::Brief;
use latch::engine::runtime::EngineSource;
use latch::engine::{
    ComponentEngine, ContextEngine, ContextEngineFactory, EngineFailure, EngineRuntime,
    LoadedComponent, NativeEngine, NativeFactory, SandboxLimits, ViewRule,
    continuity_context_engine_factory, materialize_checked,
};
use latch::supervisor::{ChildPolicy, RecordedEngine, Supervisor, SupervisorError};
use latch_continuity::ContinuityEngine;
use latch_continuity::testkit::{self, Host, IndexedSession, Script};
use latch_engine_sdk::types::*;
use latch_engine_sdk::validate::check_protocol;
use latch_engine_sdk::{Assembled, Engine, MemorySession, SessionView};
use latch_kernel::{EventKind, StateOp, Store, StoreSessionView, record_validation};
use latch_window_engine::WindowEngine;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

fn runtime() -> &'static EngineRuntime {
    static RT: OnceLock<EngineRuntime> = OnceLock::new();
    RT.get_or_init(|| EngineRuntime::new(None).expect("runtime"))
}

fn continuity_component() -> Arc<LoadedComponent> {
    static LOADED: OnceLock<Arc<LoadedComponent>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            runtime()
                .load(&EngineSource::Builtin("continuity".into()))
                .expect("builtin loads")
        })
        .clone()
}

fn fixture_component() -> Arc<LoadedComponent> {
    static LOADED: OnceLock<Arc<LoadedComponent>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            runtime()
                .load(&EngineSource::Path(PathBuf::from(
                    latch_tests::FIXTURE_WASM,
                )))
                .expect("fixture loads")
        })
        .clone()
}

fn model() -> ModelProfile {
    ModelProfile::with_defaults("anthropic", "test-model")
}

fn component(session: &str) -> ComponentEngine {
    ComponentEngine::new(
        continuity_component(),
        SandboxLimits::default(),
        session,
        model(),
    )
}

fn bytes(view: &ContextView) -> Vec<u8> {
    serde_json::to_vec(view).expect("views serialize")
}

fn request(query: &str) -> ContextRequest {
    Script::new(1, 1).request(0, query)
}

/// A small store-backed session: a goal, a tool exchange, a validation.
fn store_session() -> (tempfile::TempDir, Arc<Store>, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("latch.db")).unwrap());
    let ws = dir.path().to_str().unwrap().to_string();
    let id = store.create_session(&ws, None, &model()).unwrap().id;
    store
        .append(
            &id,
            EventKind::StateUpdate(StateOp::SetGoal {
                text: "make cargo test pass".into(),
            }),
        )
        .unwrap();
    store
        .append(&id, EventKind::user_text("fix the parser test"))
        .unwrap();
    store
        .append(
            &id,
            EventKind::AssistantMessage {
                parts: vec![Part::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments_json: "{\"path\":\"src/parser.rs\"}".into(),
                })],
            },
        )
        .unwrap();
    store
        .append(
            &id,
            EventKind::ToolResult(ToolResult {
                call_id: "c1".into(),
                name: "read_file".into(),
                content: "fn parse() {}".into(),
                is_error: false,
                images: vec![],
            }),
        )
        .unwrap();
    store
        .append(&id, EventKind::assistant_text("The parser is empty."))
        .unwrap();
    (dir, store, id)
}

// ---------------------------------------------------------------------------
// Durable history ownership

/// The contract's session view is a resource of reads only, and the engine
/// world imports nothing else that could reach the store.
#[test]
fn durable_history_ownership_the_session_view_has_only_reads() {
    let wit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../wit/context.wit"))
        .expect("the contract is readable");
    let start = wit.find("resource session-view {").expect("session-view");
    let body = &wit[start..start + wit[start..].find("\n    }").expect("end of resource")];
    let methods: Vec<&str> = body
        .lines()
        .filter_map(|l| l.trim().split_once(": func("))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        methods,
        [
            "info",
            "latest-seq",
            "events",
            "events-before",
            "events-outline",
            "search",
            "canonical-state",
            "artifact"
        ],
        "the session view gained a method: it must stay read-only"
    );
    let world = &wit[wit.find("world context-engine {").unwrap()..];
    let world = &world[..world.find('}').unwrap()];
    let lines: Vec<&str> = world
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .collect();
    assert_eq!(
        lines,
        ["import session;", "import estimator;", "export engine;"]
    );
}

/// Whatever an engine does — answer, refuse, panic — the store's events are
/// exactly what they were.
#[test]
fn durable_history_ownership_the_store_is_unchanged_by_engine_calls() {
    let (_dir, store, id) = store_session();
    let snapshot = || store.events(&id, 0, u64::MAX, 100_000).unwrap();
    let before = snapshot();
    let view = StoreSessionView::new(store.clone(), &id).unwrap();
    let mut engines: Vec<ComponentEngine> = vec![component(&id)];
    for mode in ["ok", "panic", "orphan"] {
        let mut e =
            ComponentEngine::new(fixture_component(), SandboxLimits::default(), &id, model());
        e.set_config(&format!(r#"{{"mode":"{mode}"}}"#)).unwrap();
        engines.push(e);
    }
    for engine in &mut engines {
        let _ = engine.materialize(&view, &request("parser"));
        let _ = engine.manual_compact(&view);
        let _ = engine.recall(&view, "parser", 10);
        assert_eq!(snapshot(), before, "an engine call changed the store");
    }
}

// ---------------------------------------------------------------------------
// Append-only cache epochs

/// A kernel-context message as it reads back from the log: the view that
/// asked to persist it has no sequence number for it yet.
fn as_logged(m: &Message) -> Message {
    let mut m = m.clone();
    if let Some(k) = &mut m.kernel {
        k.seq = None;
        m.source_seqs.clear();
    }
    m
}

/// Checks every view of the default engine (as a component) against the
/// previous one. Every third view comes from a fresh instance, so the
/// property is the log's, not a warm instance's memory of its last view.
struct EpochChecker {
    engine: ComponentEngine,
    views: usize,
    prev: Option<(ContextView, u64)>,
    extended: usize,
    rotations: usize,
    state_updates: usize,
}

impl Host for EpochChecker {
    fn materialize(&mut self, session: &IndexedSession, request: &ContextRequest) -> ContextView {
        self.views += 1;
        let view = if self.views.is_multiple_of(3) {
            component("generated").materialize(session, request)
        } else {
            self.engine.materialize(session, request)
        }
        .expect("materialize");
        let generation = view.report.epoch_generation.expect("an epoch generation");
        let state_revision = session.info().state_revision;
        // Older generations are excluded from the provider-visible epoch.
        for m in &view.messages {
            if let Some(k) = &m.kernel {
                assert_eq!(k.generation, generation, "an older generation shows");
            }
        }
        if let Some((prev, prev_state)) = &self.prev {
            let before = prev.report.epoch_generation.unwrap();
            let messages: Vec<Message> = view.messages.iter().map(as_logged).collect();
            if generation == before {
                let old: Vec<Message> = prev.messages.iter().map(as_logged).collect();
                assert!(
                    messages.len() >= old.len() && messages[..old.len()] == old[..],
                    "generation {generation} rewrote its prefix"
                );
                self.extended += usize::from(messages.len() > old.len());
                assert_eq!(view.report.status, "ok");
                assert!(
                    view.persist
                        .iter()
                        .all(|e| e.kind != KernelContextKind::Snapshot)
                );
                // A state update is appended exactly when the canonical
                // state moved: a full current-state update, never a rewrite.
                let updates = view
                    .persist
                    .iter()
                    .filter(|e| e.kind == KernelContextKind::StateUpdate)
                    .count();
                assert_eq!(
                    updates,
                    usize::from(state_revision != *prev_state),
                    "state update entries for revision {prev_state} -> {state_revision}"
                );
                self.state_updates += updates;
            } else {
                assert!(generation > before, "generation went back");
                assert!(
                    view.report.rotation_reason.is_some(),
                    "a new generation says why"
                );
                // Its first kernel context is the generation's snapshot
                // (persisted with this view, or by `/compact` before it).
                let first = view.messages.iter().find_map(|m| m.kernel.as_ref());
                assert!(
                    first.is_some_and(|k| k.kind == KernelContextKind::Snapshot),
                    "a new generation starts with a snapshot: {first:?}"
                );
                self.rotations += 1;
            }
        }
        self.prev = Some((view.clone(), state_revision));
        view
    }
    fn manual_compact(&mut self, session: &IndexedSession) -> Vec<KernelContextEntry> {
        self.engine.manual_compact(session).expect("compact")
    }
}

/// Within a cache epoch the provider-visible conversation only grows at its
/// end (kernel state changes are appended as full updates, only when the
/// state moved); a rotation or `/compact` starts a higher generation with a
/// fresh snapshot, and older generations never show.
#[test]
fn append_only_cache_epochs_within_a_generation_each_view_extends_the_last() {
    let script = Script {
        compact_at: vec![10],
        ..Script::new(11, 24)
    };
    let mut host = EpochChecker {
        engine: component("generated"),
        views: 0,
        prev: None,
        extended: 0,
        rotations: 0,
        state_updates: 0,
    };
    testkit::run(&script, &mut host);
    assert!(host.extended > 20, "{} views extended", host.extended);
    assert!(host.rotations >= 2, "{} rotations", host.rotations);
    assert!(
        host.state_updates >= 2,
        "{} state updates",
        host.state_updates
    );
}

// ---------------------------------------------------------------------------
// Canonical authority

/// A revised decision replaces the old one in canonical state, and the
/// rendered view's current state (its highest revision) carries only the new
/// truth; the older snapshot remains as provenance.
#[test]
fn canonical_authority_a_higher_revision_is_current_truth() {
    let (_dir, store, id) = store_session();
    store
        .append(
            &id,
            EventKind::StateUpdate(StateOp::RecordDecision {
                text: "store sessions in postgres".into(),
            }),
        )
        .unwrap();
    let r1 = store.canonical_state(&id).unwrap();
    store
        .append(
            &id,
            EventKind::StateUpdate(StateOp::ReviseDecision {
                previous: "store sessions in postgres".into(),
                text: "store sessions in sqlite".into(),
            }),
        )
        .unwrap();
    let r2 = store.canonical_state(&id).unwrap();
    assert!(r2.revision > r1.revision);
    let decisions: Vec<&str> = r2.decisions.iter().map(|d| d.text.as_str()).collect();
    assert_eq!(decisions, ["store sessions in sqlite"]);

    let mut s = MemorySession::new("authority", model());
    s.state = r1.clone();
    s.user("where do sessions live?");
    let mut engine = Assembled::new(ContinuityEngine::new(model()));
    let first = engine.materialize(&s, &request("sessions")).unwrap();
    s.persist(&first.persist);
    s.assistant("In postgres.");
    s.state = r2;
    s.push(EventBody::Kernel(KernelNote {
        kind: KernelNoteKind::StateUpdate,
        summary: "decision revised".into(),
        files: vec![],
    }));
    s.user("and now?");
    let view = engine.materialize(&s, &request("sessions")).unwrap();
    let current = view
        .messages
        .iter()
        .filter(|m| {
            m.kernel.as_ref().is_some_and(|k| {
                matches!(
                    k.kind,
                    KernelContextKind::Snapshot | KernelContextKind::StateUpdate
                )
            })
        })
        .max_by_key(|m| m.kernel.as_ref().unwrap().revision)
        .expect("the view carries canonical state");
    let text = serde_json::to_string(&current.parts).unwrap();
    assert!(text.contains("store sessions in sqlite"), "{text}");
    assert!(
        !text.contains("postgres"),
        "an old decision stays current: {text}"
    );
}

// ---------------------------------------------------------------------------
// Resume equivalence

/// Drives one component engine through a scripted session.
struct ComponentHost(ComponentEngine);

impl Host for ComponentHost {
    fn materialize(&mut self, session: &IndexedSession, request: &ContextRequest) -> ContextView {
        self.0.materialize(session, request).expect("materialize")
    }
    fn manual_compact(&mut self, session: &IndexedSession) -> Vec<KernelContextEntry> {
        self.0.manual_compact(session).expect("compact")
    }
}

/// A component instance that lived through a session and a fresh one on the
/// same log return the same bytes.
#[test]
fn resume_equivalence_warm_and_fresh_component_instances_agree() {
    let script = Script {
        compact_at: vec![9],
        ..Script::new(3, 18)
    };
    let mut host = ComponentHost(component("generated"));
    let session = testkit::run(&script, &mut host);
    let req = script.request(18, "cache scheduler");
    let warm = host.0.materialize(&session, &req).unwrap();
    let mut fresh = component("generated");
    let cold = fresh.materialize(&session, &req).unwrap();
    assert_eq!(bytes(&warm), bytes(&cold));
}

// ---------------------------------------------------------------------------
// Kernel-owned evidence

/// Kernel context an engine returned (persisted by the host) and model text
/// claiming success never become evidence: only validation events do.
#[test]
fn kernel_owned_evidence_an_engine_cannot_make_evidence() {
    let (_dir, store, id) = store_session();
    store
        .append(
            &id,
            EventKind::StateUpdate(StateOp::RequireValidation {
                requirement: "cargo test".into(),
            }),
        )
        .unwrap();
    store
        .append(
            &id,
            EventKind::kernel_context(
                "builtin:continuity",
                KernelContextEntry {
                    generation: 1,
                    revision: 99,
                    kind: KernelContextKind::StateUpdate,
                    epoch_start: None,
                    text:
                        "# Evidence\n- cargo test: PASSED (cargo test --workspace) at generation 0"
                            .into(),
                },
            ),
        )
        .unwrap();
    store
        .append(
            &id,
            EventKind::assistant_text("cargo test passed, all green."),
        )
        .unwrap();
    let state = store.canonical_state(&id).unwrap();
    assert!(state.evidence.is_empty(), "{:?}", state.evidence);
    assert!(!store.certification(&id).unwrap().blockers.is_empty());

    let generation = store.generation_of(&id).unwrap();
    record_validation(
        &store,
        &id,
        vec!["cargo test".into()],
        "cargo test",
        Some(0),
        "test result: ok",
        generation,
    )
    .unwrap();
    let state = store.canonical_state(&id).unwrap();
    assert_eq!(state.evidence.len(), 1);
    assert_eq!(state.evidence[0].outcome, ValidationOutcome::Passed);
    assert!(store.certification(&id).unwrap().blockers.is_empty());
}

// ---------------------------------------------------------------------------
// Safety hard-deny

#[test]
fn safety_hard_deny_refuses_rm_rf_root_and_records_it() {
    let (dir, store, id) = store_session();
    let ctx = latch_tools::ToolContext::new(store.clone(), &id, dir.path()).unwrap();
    let outcome = latch_tools::execute(
        &ctx,
        &ToolCall {
            id: "c-danger".into(),
            name: "shell".into(),
            arguments_json: r#"{"command":"rm -rf /"}"#.into(),
        },
    );
    assert!(outcome.result.is_error, "{}", outcome.result.content);
    let events = store.events(&id, 0, u64::MAX, 10_000).unwrap();
    let denied: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolDenied { tool, reason, .. } => Some((tool.clone(), reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0].0, "shell");
    assert!(denied[0].1.contains("rm-root-or-home"), "{}", denied[0].1);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Mutation { .. }))
    );
}

// ---------------------------------------------------------------------------
// Steering protocol correctness

/// A host that checks every view's tool-call units.
struct CheckingHost(Assembled<ContinuityEngine>, usize);

impl Host for CheckingHost {
    fn materialize(&mut self, session: &IndexedSession, request: &ContextRequest) -> ContextView {
        let view = self.0.materialize(session, request).expect("materialize");
        if let Err((rule, detail)) = check_protocol(&view.messages) {
            panic!("view {} breaks {rule}: {detail}", self.1);
        }
        self.1 += 1;
        view
    }
    fn manual_compact(&mut self, session: &IndexedSession) -> Vec<KernelContextEntry> {
        self.0.manual_compact(session).expect("compact")
    }
}

/// An engine returning a fixed message list (a split unit, an orphan).
struct Canned(Vec<Message>);

impl Engine for Canned {
    fn new(_: ModelProfile) -> Self {
        Canned(vec![])
    }
    fn default_budget(&self) -> ContextBudget {
        ContextBudget::for_model(&model())
    }
    fn materialize(
        &mut self,
        _: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, EngineError> {
        let mut view = ContinuityEngine::new(model())
            .materialize(&MemorySession::new("x", model()), request)
            .map_err(|e| EngineError::Internal(format!("{e:?}")))?;
        view.messages = self.0.clone();
        view.persist.clear();
        Ok(view)
    }
}

fn call(id: &str) -> Message {
    Message {
        role: Role::Assistant,
        parts: vec![Part::ToolCall(ToolCall {
            id: id.into(),
            name: "shell".into(),
            arguments_json: "{}".into(),
        })],
        kernel: None,
        source_seqs: vec![],
    }
}

fn result(id: &str) -> Message {
    Message {
        role: Role::User,
        parts: vec![Part::ToolResult(ToolResult {
            call_id: id.into(),
            name: "shell".into(),
            content: "ok".into(),
            is_error: false,
            images: vec![],
        })],
        kernel: None,
        source_seqs: vec![],
    }
}

#[test]
fn steering_protocol_units_are_never_split_and_split_views_are_refused() {
    // Small working memory: units are evicted and epochs rotate often.
    let script = Script {
        budget: ContextBudget {
            context_window_tokens: 16_000,
            reserve_tokens: 2_000,
            recent_tokens: 3_000,
            tools_tokens: 500,
            extension_tokens: 0,
        },
        ..Script::new(9, 30)
    };
    let mut host = CheckingHost(Assembled::new(ContinuityEngine::new(model())), 0);
    testkit::run(&script, &mut host);
    assert!(host.1 > 30, "only {} views checked", host.1);

    let s = MemorySession::new("split", model());
    let profile = EstimatorProfile::Anthropic;
    for (messages, rule) in [
        (
            vec![Message::text(Role::User, "hi"), call("a")],
            ViewRule::UnansweredToolCall,
        ),
        (
            vec![call("a"), Message::text(Role::User, "between"), result("a")],
            ViewRule::UnansweredToolCall,
        ),
        (
            vec![Message::text(Role::User, "hi"), result("a")],
            ViewRule::OrphanToolResult,
        ),
    ] {
        let mut engine = NativeEngine::new("canned", Canned(messages));
        match materialize_checked(&mut engine, &s, &request("x"), profile) {
            Err(EngineFailure::Rejected { rule: r, .. }) => assert_eq!(r, rule),
            other => panic!("expected a {rule} rejection, got {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------
// Deterministic serialization

/// Two engines that never shared anything (each lived through its own copy
/// of the same session) and a fresh third one return the same bytes for the
/// same request, and so do the provider bodies built from their views.
#[test]
fn deterministic_serialization_same_view_same_bytes() {
    let script = Script::new(4, 8);
    let req = script.request(8, "parser");
    let play = || {
        let mut host = testkit::EngineHost::new(ContinuityEngine::new(model()));
        let session = testkit::run(&script, &mut host);
        let view = host.0.materialize(&session, &req).unwrap();
        (session, view)
    };
    let (session, view) = play();
    let (other_session, other_view) = play();
    assert_eq!(
        serde_json::to_vec(&session.memory().events).unwrap(),
        serde_json::to_vec(&other_session.memory().events).unwrap(),
        "the two runs logged other events"
    );
    let a = bytes(&view);
    assert!(a.len() > 2_000, "{} bytes", a.len());
    assert!(
        a == bytes(&other_view),
        "two warm engines serialized other bytes"
    );
    let fresh = ContinuityEngine::new(model())
        .materialize(&session, &req)
        .unwrap();
    // A fresh instance returns the whole view (kept-messages 0).
    assert_eq!(fresh.kept_messages, 0);
    assert!(
        bytes(&fresh) == a,
        "a fresh instance serialized other bytes"
    );
    let back: ContextView = serde_json::from_slice(&a).unwrap();
    assert!(bytes(&back) == a, "a round trip changes the bytes");

    // The provider bodies built from the two views are byte-identical too.
    let provider_request = |view: &ContextView| latch_provider::ProviderRequest {
        model: "test-model".into(),
        system: view.system.clone(),
        tools: vec![],
        messages: view.messages.clone(),
        max_tokens: 1024,
        cache_breakpoints: latch_provider::CacheHints::for_messages(&view.messages),
    };
    let media = |m: &MediaRef| Ok(m.sha256.as_bytes().to_vec());
    let anthropic = |r: &latch_provider::ProviderRequest| {
        serde_json::to_vec(&latch_provider::anthropic::request_body(r, &media).unwrap()).unwrap()
    };
    let openai = |r: &latch_provider::ProviderRequest| {
        serde_json::to_vec(
            &latch_provider::openai::request_body(
                r,
                &media,
                latch_provider::openai::MaxTokensField::MaxTokens,
            )
            .unwrap(),
        )
        .unwrap()
    };
    let (mine, theirs) = (provider_request(&view), provider_request(&other_view));
    assert!(
        anthropic(&mine) == anthropic(&theirs),
        "Anthropic bodies differ"
    );
    assert!(openai(&mine) == openai(&theirs), "OpenAI bodies differ");
    assert!(anthropic(&mine) == anthropic(&provider_request(&fresh)));
}

// ---------------------------------------------------------------------------
// Cache-accounting semantics

fn usage(read: Option<u64>, miss: Option<u64>) -> latch_provider::Usage {
    latch_provider::Usage {
        input_tokens: Some(1_000),
        output_tokens: Some(50),
        cache_read_tokens: read,
        cache_creation_tokens: None,
        cache_miss_tokens: miss,
        reasoning_tokens: None,
    }
}

#[test]
fn cache_accounting_the_three_metrics_are_never_conflated() {
    let view = testkit::EngineHost::new(ContinuityEngine::new(model()))
        .0
        .materialize(&MemorySession::new("m", model()), &request("x"))
        .unwrap();
    let base = view.report;
    let engine_cacheability = (base.common_prefix_tokens, base.request_tokens);

    // Both provider metrics known: each from its own numerator/denominator.
    let mut r = base.clone();
    latch::agent::fill_provider_metrics(&mut r, Some((usage(Some(300), Some(700)), Some(600))));
    assert_eq!(r.measured_hit_rate, Some(0.3), "reads / (reads + misses)");
    assert_eq!(
        r.provider_prefix_utilization,
        Some(0.5),
        "reads / common prefix"
    );
    assert_eq!(
        (r.common_prefix_tokens, r.request_tokens),
        engine_cacheability
    );

    // Unknown categories stay unknown, never zero.
    let mut r = base.clone();
    latch::agent::fill_provider_metrics(&mut r, Some((usage(Some(300), None), None)));
    assert_eq!(r.measured_hit_rate, None);
    assert_eq!(r.provider_prefix_utilization, None);
    let mut r = base.clone();
    latch::agent::fill_provider_metrics(&mut r, Some((usage(None, Some(700)), Some(600))));
    assert_eq!(r.measured_hit_rate, None);
    assert_eq!(r.provider_prefix_utilization, None);
    let mut r = base.clone();
    latch::agent::fill_provider_metrics(&mut r, Some((usage(Some(0), Some(0)), Some(0))));
    assert_eq!(r.measured_hit_rate, None, "no categories reported: unknown");
    assert_eq!(r.provider_prefix_utilization, None, "no prefix: unknown");
    let mut r = base.clone();
    latch::agent::fill_provider_metrics(&mut r, None);
    assert_eq!(r.measured_hit_rate, None);
    assert_eq!(r.provider_prefix_utilization, None);
    assert_eq!(
        (r.common_prefix_tokens, r.request_tokens),
        engine_cacheability
    );
}

// ---------------------------------------------------------------------------
// Port pins

/// Drives three engines in lockstep and requires identical bytes from each.
struct Lockstep {
    direct: Assembled<ContinuityEngine>,
    port: Box<dyn ContextEngine>,
    component: ComponentEngine,
    views: usize,
}

impl Host for Lockstep {
    fn materialize(&mut self, session: &IndexedSession, request: &ContextRequest) -> ContextView {
        let direct = self.direct.materialize(session, request).unwrap();
        let port = self.port.materialize(session, request).unwrap();
        let component = self.component.materialize(session, request).unwrap();
        assert_eq!(bytes(&direct), bytes(&port), "native vs dyn ContextEngine");
        assert_eq!(bytes(&direct), bytes(&component), "native vs component");
        self.views += 1;
        direct
    }
    fn manual_compact(&mut self, session: &IndexedSession) -> Vec<KernelContextEntry> {
        let direct = self.direct.manual_compact(session).unwrap();
        assert_eq!(direct, self.port.manual_compact(session).unwrap());
        assert_eq!(direct, self.component.manual_compact(session).unwrap());
        direct
    }
}

#[test]
fn port_pin_default_engine_is_byte_identical_direct_port_and_component() {
    let script = Script {
        compact_at: vec![7],
        ..Script::new(5, 14)
    };
    let model = ModelProfile::with_defaults("anthropic", "test-model");
    let mut host = Lockstep {
        direct: Assembled::new(ContinuityEngine::new(model.clone())),
        port: Box::new(NativeEngine::new(
            "native:continuity",
            ContinuityEngine::new(model.clone()),
        )),
        component: component("generated"),
        views: 0,
    };
    testkit::run(&script, &mut host);
    assert!(host.views > 14);
}

/// Counts the engines a factory built, per session.
struct Counting {
    inner: NativeFactory<WindowEngine>,
    made: std::sync::Mutex<Vec<String>>,
}

impl ContextEngineFactory for Counting {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn create(
        &self,
        session_id: &str,
        model: &ModelProfile,
    ) -> Result<Box<dyn ContextEngine>, EngineFailure> {
        self.made.lock().unwrap().push(session_id.to_string());
        self.inner.create(session_id, model)
    }
}

/// The root, a spawned child and that child resumed from its durable
/// profile (the engine and configuration its spawn recorded) all get their
/// engine from the one configured factory, and the resumed engine continues
/// the child's log exactly as the spawned one saw it.
#[test]
fn port_pin_a_configured_factory_governs_children() {
    let factory = Arc::new(Counting {
        inner: NativeFactory::<WindowEngine>::new("native:window", None),
        made: Default::default(),
    });
    let supervisor = Supervisor::new(factory.clone(), ChildPolicy::SameAsRoot);
    let mut s = MemorySession::new("child", model());
    s.user("review the parser");
    let mut root = supervisor.root_engine("root", &model()).unwrap();
    let mut child = supervisor.child_engine("child", &model()).unwrap();
    let spawned = child.materialize(&s, &request("parser")).unwrap();
    s.persist(&spawned.persist);
    s.assistant("The parser looks fine.");
    s.user("and the lexer?");
    let warm = child.materialize(&s, &request("lexer")).unwrap();
    // What the spawn recorded, as the agent tree keeps it.
    let recorded = RecordedEngine {
        engine: child.name().to_string(),
        config: child.config().unwrap(),
    };
    let brief = Brief {
        parent_session: "root".into(),
        role: "reviewer".into(),
        task: "review the parser".into(),
        child_model: model(),
    };
    let mut resumed = supervisor
        .rebuild_child_engine("child", &model(), &brief, &recorded)
        .unwrap();
    assert_eq!(
        *factory.made.lock().unwrap(),
        ["root", "child", "child"],
        "root, spawned child and resumed child built by the one factory"
    );
    let cold = resumed.materialize(&s, &request("lexer")).unwrap();
    assert!(
        bytes(&cold) == bytes(&warm),
        "the resumed child's view differs"
    );
    for (which, engine, view) in [
        ("root", &mut root, None),
        ("child", &mut child, Some(&warm)),
        ("resumed child", &mut resumed, Some(&cold)),
    ] {
        assert_eq!(engine.name(), "native:window", "{which}");
        let engine_name = match view {
            Some(v) => v.report.engine.clone(),
            None => engine.materialize(&s, &request("x")).unwrap().report.engine,
        };
        assert!(engine_name.starts_with("window"), "{which}: {engine_name}");
    }
}

/// The spec's default factory, `continuity_context_engine_factory`, builds
/// exactly `ContinuityEngine::for_model(...)`, and it is what the default
/// configuration's supervisor holds.
#[test]
fn port_pin_the_default_factory_is_the_continuity_engine() {
    let dir = tempfile::tempdir().unwrap();
    let supervisor = Supervisor::from_config(&Config::default(), dir.path()).unwrap();
    let default = continuity_context_engine_factory(SandboxLimits::default()).unwrap();
    assert_eq!(default.describe(), "builtin:continuity");
    assert_eq!(supervisor.factory().describe(), default.describe());
    let script = Script::new(6, 6);
    let mut native = testkit::EngineHost::new(ContinuityEngine::for_model(model()));
    let session = testkit::run(&script, &mut native);
    let req = script.request(6, "widget");
    let expected = bytes(
        &ContinuityEngine::for_model(model())
            .materialize(&session, &req)
            .unwrap(),
    );
    let mut root = supervisor.root_engine("root", &model()).unwrap();
    let same = |engine: &mut Box<dyn ContextEngine>| {
        bytes(&engine.materialize(&session, &req).unwrap()) == expected
    };
    assert!(same(&mut root), "the configured root engine");
    let mut child = supervisor.child_engine("child", &model()).unwrap();
    assert!(same(&mut child), "the configured child engine");
    let mut built = default.create("other", &model()).unwrap();
    assert!(same(&mut built), "the default factory's engine");
}

#[test]
fn port_pin_a_non_default_root_without_child_policy_refuses_child_spawn() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("[engine]\ncomponent = {:?}\n", latch_tests::WINDOW_WASM);
    let config = Config::parse(&text, &dir.path().join("config.toml")).unwrap();
    let supervisor = Supervisor::from_config(&config, dir.path()).unwrap();
    assert!(supervisor.root_engine("root", &model()).is_ok());
    let err = match supervisor.child_engine("child", &model()) {
        Err(e) => e,
        Ok(_) => panic!("a child was spawned without a child policy"),
    };
    assert!(
        matches!(err, SupervisorError::NoChildPolicy { .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(message.contains("[engine.child_policy]"), "{message}");
    assert!(message.contains("latch_window_engine"), "{message}");
}
