//! The model's `recall` tool, end to end: a diagnostic that appeared only in
//! an early tool output rotates out of working memory, and the model gets it
//! back verbatim by calling `recall`, answered by the session's engine.

use crate::agent::harness_with;
use latch::agent::AgentOptions;
use latch::engine::runtime::EngineSource;
use latch_kernel::EventKind;
use latch_provider::fake::{Script, ScriptedTurn, WireFormat};

const DIAGNOSTIC: &str = "error[E0599]: no method named `frobnicate_v2` found for struct `Parser`";

#[test]
fn the_model_recalls_an_early_diagnostic_after_several_rotations() {
    let mut steps = vec![ScriptedTurn::tool_call(
        "shell",
        format!(r#"{{"command":"echo '{DIAGNOSTIC}'"}}"#),
    )];
    for _ in 0..14 {
        steps.push(ScriptedTurn::tool_call(
            "shell",
            r#"{"command":"seq 1 700"}"#,
        ));
    }
    steps.push(ScriptedTurn::tool_call(
        "recall",
        r#"{"query":"frobnicate_v2 E0599","limit":3}"#,
    ));
    steps.push(ScriptedTurn::text("Found it."));
    let mut h = harness_with(
        WireFormat::OpenAi,
        EngineSource::Builtin("continuity".into()),
        Script::new(steps),
        |_| {},
        AgentOptions {
            mode: "run".into(),
            recent_tokens: Some(3_000),
            ..AgentOptions::default()
        },
    );
    let outcome = h.agent.run_turn("Run the steps.", &mut |_| {}).unwrap();
    assert_eq!(outcome.final_text, "Found it.");

    let requests = h.server.as_ref().unwrap().requests();
    let bodies: Vec<String> = requests.iter().map(|r| r.body.to_string()).collect();
    let recall_request = bodies.len() - 2;
    // The diagnostic was visible early on, then rotated out.
    assert!(bodies[1].contains("frobnicate_v2"));
    assert!(
        !bodies[recall_request].contains("frobnicate_v2"),
        "the diagnostic is no longer in the request that calls recall"
    );
    // The model's recall brought the original back, verbatim.
    let last = &bodies[bodies.len() - 1];
    assert!(last.contains("no method named `frobnicate_v2` found for struct `Parser`"));
    let events = h.store.events(&h.session, 0, u64::MAX, 100_000).unwrap();
    let generations: std::collections::BTreeSet<u64> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::KernelContext(k) => Some(k.generation),
            _ => None,
        })
        .collect();
    assert!(generations.len() >= 4, "{} epochs", generations.len());
    // The answer is an ordinary durable tool result.
    let answer = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult(r) if r.name == "recall" => Some(r.clone()),
            _ => None,
        })
        .expect("a recall tool result");
    assert!(!answer.is_error);
    assert!(answer.content.contains(DIAGNOSTIC), "{}", answer.content);
    // A later recall finds the original, not this copy of it.
    let again = h.agent.recall("frobnicate_v2", 5).unwrap();
    assert!(
        again
            .iter()
            .all(|e| !matches!(&e.body, latch_engine_sdk::types::EventBody::ToolResult(r) if r.name == "recall")),
        "recall answers are not indexed"
    );
    h.io.block_on(h.server.take().unwrap().shutdown());
}
