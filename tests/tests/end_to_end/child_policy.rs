//! Child policies: a policy component picks each child's engine from the
//! parent's profile and the child's brief, or refuses with its reason; the
//! supervisor builds the child's engine from that choice and nothing else.

use latch::config::Config;
use latch::engine::policy::{Brief, ChildPolicyComponent, PolicyError};
use latch::engine::{EngineRuntime, SandboxLimits};
use latch::supervisor::{Supervisor, SupervisorError};
use latch_engine_sdk::types::ModelProfile;
use std::path::Path;

fn brief(role: &str) -> Brief {
    Brief {
        parent_session: "parent".into(),
        role: role.into(),
        task: "review the diff".into(),
        child_model: ModelProfile::with_defaults("anthropic", "child-model"),
    }
}

#[test]
fn policy_component_chooses_or_refuses() {
    let rt = EngineRuntime::new(None).unwrap();
    let bytes = std::fs::read(latch_tests::POLICY_WASM).unwrap();
    let policy =
        ChildPolicyComponent::load(&rt, "policy.wasm", &bytes, SandboxLimits::default()).unwrap();
    let parent = ModelProfile::with_defaults("anthropic", "parent-model");
    let reviewer = policy.choose(&parent, &brief("reviewer")).unwrap();
    assert_eq!(reviewer.engine, "builtin:continuity");
    assert_eq!(reviewer.config_json, r#"{"recent_tokens":4000}"#);
    match policy.choose(&parent, &brief("rogue")) {
        Err(PolicyError::Refused { reason, .. }) => assert!(reason.contains("rogue"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn an_engine_component_is_not_a_policy() {
    let rt = EngineRuntime::new(None).unwrap();
    let bytes = std::fs::read(latch_tests::WINDOW_WASM).unwrap();
    let err = ChildPolicyComponent::load(&rt, "window.wasm", &bytes, SandboxLimits::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("child-policy"), "{err}");
}

#[test]
fn supervisor_builds_children_through_the_configured_policy() {
    let text = format!(
        "[engine]\ncomponent = \"{}\"\n[engine.child_policy]\ncomponent = \"{}\"\n",
        latch_tests::WINDOW_WASM,
        latch_tests::POLICY_WASM
    );
    let config = Config::parse(&text, Path::new("config.toml")).unwrap();
    let supervisor = Supervisor::from_config(&config, Path::new("/")).unwrap();
    let parent = ModelProfile::with_defaults("anthropic", "parent-model");
    let root = supervisor.root_engine("root", &parent).unwrap();
    assert!(root.name().ends_with("latch_window_engine.wasm"));
    let mut child = supervisor
        .child_engine_for("child", &parent, &brief("reviewer"))
        .unwrap();
    assert_eq!(child.name(), "builtin:continuity");
    assert!(
        child.config().unwrap().contains("\"recent_tokens\":4000"),
        "the policy's config was applied"
    );
    let err = supervisor
        .child_engine_for("child-2", &parent, &brief("rogue"))
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            SupervisorError::ChildPolicy(PolicyError::Refused { .. })
        ),
        "{err}"
    );
}
