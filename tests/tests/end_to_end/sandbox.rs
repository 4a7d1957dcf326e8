//! The engine runtime's sandbox, driven with the adversarial fixture engine:
//! each misbehaviour ends its call with the exact typed failure, the next call
//! succeeds on a rebuilt instance, and denials are observed from inside.

use latch::engine::runtime::EngineSource;
use latch::engine::{
    ComponentEngine, ComponentFactory, ContextEngine, EngineFailure, EngineRuntime, SandboxLimits,
    ViewRule, materialize_checked,
};
use latch_engine_sdk::types::*;
use latch_engine_sdk::{MemorySession, Part};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

fn runtime() -> &'static EngineRuntime {
    static RT: OnceLock<EngineRuntime> = OnceLock::new();
    RT.get_or_init(|| EngineRuntime::new(None).expect("runtime"))
}

fn fixture() -> Arc<latch::engine::LoadedComponent> {
    static LOADED: OnceLock<Arc<latch::engine::LoadedComponent>> = OnceLock::new();
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
    ModelProfile::with_defaults("openai", "test-model")
}

fn limits() -> SandboxLimits {
    SandboxLimits {
        deadline_ms: 300,
        memory_mib: 64,
        ..SandboxLimits::default()
    }
}

fn session() -> MemorySession {
    let mut s = MemorySession::new("session-1", model());
    s.user("hello");
    s.assistant("hi");
    s
}

fn request() -> ContextRequest {
    ContextRequest {
        system_prompt: "system".into(),
        session_context: SessionContext {
            workspace: "/w".into(),
            repository_instructions: String::new(),
            mode: "run".into(),
        },
        budget: ContextBudget {
            context_window_tokens: 4_000,
            reserve_tokens: 500,
            recent_tokens: 2_000,
            tools_tokens: 0,
            extension_tokens: 0,
        },
        query: String::new(),
        extensions: vec![],
    }
}

fn engine_in_mode(mode: &str) -> ComponentEngine {
    let mut engine = ComponentEngine::new(fixture(), limits(), "session-1", model());
    engine
        .set_config(&format!(r#"{{"mode":"{mode}"}}"#))
        .expect("config accepted");
    engine
}

/// What the fixture observed (it reports in the status; its messages are
/// the honest view).
fn text_of(view: &ContextView) -> String {
    assert!(
        matches!(&view.messages[0].parts[0], Part::Text(t) if t.starts_with("# Session")),
        "the fixture's view starts with the session context"
    );
    view.report.status.clone()
}

/// After a failure, switching to `ok` must work on a rebuilt instance.
fn assert_recovers(engine: &mut ComponentEngine, before: u64) {
    engine
        .set_config(r#"{"mode":"ok"}"#)
        .expect("reconfigure after failure");
    let view = engine
        .materialize(&session(), &request())
        .expect("next call succeeds");
    assert!(text_of(&view).starts_with("ok:"));
    assert!(
        engine.instantiations() > before,
        "the failed instance was replaced"
    );
}

#[test]
fn infinite_loop_times_out() {
    let mut engine = engine_in_mode("loop");
    let before = engine.instantiations();
    let err = engine.materialize(&session(), &request()).unwrap_err();
    assert!(
        matches!(err, EngineFailure::Timeout { ref engine, deadline_ms: 300, elapsed_ms } if engine.ends_with(".wasm") && elapsed_ms >= 300),
        "{err}"
    );
    assert!(err.to_string().contains("deadline"), "{err}");
    assert_recovers(&mut engine, before);
}

#[test]
fn huge_allocation_is_out_of_memory() {
    let mut engine = engine_in_mode("allocate");
    let before = engine.instantiations();
    let err = engine.materialize(&session(), &request()).unwrap_err();
    assert!(
        matches!(err, EngineFailure::OutOfMemory { limit_mib: 64, .. }),
        "{err}"
    );
    assert_recovers(&mut engine, before);
}

/// A view that continues a previous view the instance never returned is
/// refused by name; the store and the next whole view are unaffected.
#[test]
fn a_continuation_without_a_previous_view_is_refused() {
    let mut engine = engine_in_mode("keep-too-many");
    let err = engine.materialize(&session(), &request()).unwrap_err();
    match &err {
        EngineFailure::Rejected { rule, detail, .. } => {
            assert_eq!(*rule, ViewRule::Continuation);
            assert!(
                detail.contains("keeps 5 messages of a previous view that had 0"),
                "{detail}"
            );
        }
        other => panic!("expected a rejected view, got {other:?}"),
    }
    assert!(err.to_string().contains("view continuation"), "{err}");
    engine.set_config(r#"{"mode":"ok"}"#).expect("reconfigure");
    let view = engine
        .materialize(&session(), &request())
        .expect("a whole view is accepted");
    assert!(text_of(&view).starts_with("ok:"));
}

#[test]
fn panic_is_reported_with_its_message() {
    let mut engine = engine_in_mode("panic");
    let before = engine.instantiations();
    let err = engine.materialize(&session(), &request()).unwrap_err();
    match &err {
        EngineFailure::Panic { message, .. } => {
            assert!(
                message.contains("fixture engine panicked on purpose"),
                "{message}"
            )
        }
        other => panic!("expected a panic failure, got {other:?}"),
    }
    assert_recovers(&mut engine, before);
}

#[test]
fn over_budget_view_is_rejected_by_the_host() {
    let mut engine = engine_in_mode("over-budget");
    let err = materialize_checked(
        &mut engine,
        &session(),
        &request(),
        EstimatorProfile::Openai,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            EngineFailure::Rejected {
                rule: ViewRule::HardBudget,
                ..
            }
        ),
        "{err}"
    );
    // Not a trap: the same instance keeps serving.
    let before = engine.instantiations();
    assert_recovers(&mut engine, before - 1);
}

#[test]
fn orphan_tool_result_is_rejected_by_the_host() {
    let mut engine = engine_in_mode("orphan");
    let err = materialize_checked(
        &mut engine,
        &session(),
        &request(),
        EstimatorProfile::Openai,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            EngineFailure::Rejected {
                rule: ViewRule::OrphanToolResult,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn sandbox_denials_are_observed_from_inside() {
    for (mode, expect) in [
        ("read-file", "read-file denied"),
        ("env", "env denied"),
        ("socket", "socket denied"),
    ] {
        let mut engine = engine_in_mode(mode);
        let view = engine
            .materialize(&session(), &request())
            .expect("the call itself succeeds");
        let text = text_of(&view);
        assert!(
            text.starts_with(expect),
            "{mode}: the guest reported `{text}`"
        );
    }
}

#[test]
fn clocks_and_randomness_are_deterministic() {
    let s = session();
    let latest = s.events.last().unwrap().time_ms;
    let a = text_of(&engine_in_mode("clock").materialize(&s, &request()).unwrap());
    let b = text_of(&engine_in_mode("clock").materialize(&s, &request()).unwrap());
    assert_eq!(
        a, b,
        "fresh instances on the same session see the same clock and randomness"
    );
    assert!(
        a.starts_with(&format!("clock: {latest} ")),
        "wall clock is the latest event's time: {a}"
    );
}

#[test]
fn factory_applies_config_and_unknown_keys_are_typed_errors() {
    let factory = ComponentFactory::new(fixture(), limits(), Some(r#"{"mode":"env"}"#.into()));
    let mut engine = factory.create_component("s", &model()).unwrap();
    assert_eq!(engine.config().unwrap(), r#"{"mode":"env"}"#);
    let err = engine.set_config(r#"{"nope":1}"#).unwrap_err();
    assert!(
        matches!(err, EngineFailure::Config { error: ConfigError::UnknownKey(ref k), .. } if k == "nope"),
        "{err}"
    );
}
