//! Host-produced re-ground notes, end to end over real HTTP: a session
//! whose `complete` is refused twice in a row, or whose validation fails
//! the same way twice, gets a durable `reground` event; the continuity
//! engine turns it into its re-ground instruction in the very next model
//! request and marks the episode `reground`, and a resumed session shows the
//! same.

use crate::core_loop::rig;
use latch_continuity::episodes;
use latch_engine_sdk::SessionView;
use latch_engine_sdk::types::{EstimatorProfile, KernelContextKind, Part};
use latch_kernel::{EventKind, REFUSALS_IN_A_ROW};
use latch_provider::fake::{Script, ScriptedTurn};

const INSTRUCTION: &str = "The kernel reports repeated failure:";

fn regrounds(events: &[EventKind]) -> Vec<(String, u32, String)> {
    events
        .iter()
        .filter_map(|k| match k {
            EventKind::Reground {
                lineage,
                count,
                reason,
            } => Some((lineage.clone(), *count, reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn complete_refused_twice_reaches_the_next_request_as_a_reground_and_survives_resume() {
    let r = rig(Script::new([
        ScriptedTurn::tool_call("require_validation", r#"{"requirement":"tests pass"}"#),
        ScriptedTurn::tool_call("complete", r#"{"summary":"done?"}"#),
        ScriptedTurn::tool_call("complete", r#"{"summary":"done now?"}"#),
        ScriptedTurn::text("I will re-read the state and prove the tests first."),
    ]));
    let mut agent = r.agent("run");
    agent.run_turn("Finish the task.", &mut |_| {}).unwrap();
    let requests = r.server.requests();
    assert_eq!(requests.len(), 4);
    let body = |i: usize| requests[i].body.to_string();
    // Nothing before the second refusal; the instruction right after it,
    // framed as kernel context of kind `reground`.
    for i in 0..3 {
        assert!(!body(i).contains(INSTRUCTION), "request {i}: {}", body(i));
    }
    let last = body(3);
    assert!(
        last.contains(r#"<latch-kernel-context kind=\"reground\""#),
        "{last}"
    );
    assert!(
        last.contains(
            "completion was refused 2 times in a row; the latest blockers: no evidence: tests pass"
        ),
        "{last}"
    );
    // Durable: one `reground` event, and the engine's entry persisted.
    let events = r.events();
    let notes = regrounds(&events);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!((notes[0].0.as_str(), notes[0].1), (REFUSALS_IN_A_ROW, 2));
    assert!(events.iter().any(|k| matches!(
        k,
        EventKind::KernelContext(c) if c.entry.kind == KernelContextKind::Reground
    )));
    // The engine's episode carries the `reground` marker.
    let view = latch_kernel::StoreSessionView::new(r.store.clone(), &r.session.id).unwrap();
    let seen = view.events(0, u64::MAX, 10_000);
    let episodes = episodes::build(EstimatorProfile::Anthropic, &seen, 8_000);
    assert!(
        episodes
            .iter()
            .any(|e| e.markers.contains(&episodes::Marker::Reground)),
        "{episodes:?}"
    );
    drop(agent);

    // A new process resumes: its engine shows the same instruction, and no
    // second note is due.
    let mut again = r.agent("run");
    again.resume(&mut |_| {}).unwrap();
    let (_, view) = again.materialize("Finish the task.").unwrap();
    let shown: Vec<String> = view
        .messages
        .iter()
        .filter(|m| {
            m.kernel
                .is_some_and(|k| k.kind == KernelContextKind::Reground)
        })
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].contains("completion was refused 2 times in a row"));
    assert!(
        r.store
            .with_kernel(&r.session.id, |k| k.reground_due())
            .unwrap()
            .is_empty()
    );
    drop(again);
    r.finish();
}

#[test]
fn a_validation_failing_the_same_way_twice_is_a_reground() {
    let r = rig(Script::new([
        ScriptedTurn::tool_call(
            "validate",
            r#"{"command":"echo boom >&2; exit 3","requirement":"builds"}"#,
        ),
        ScriptedTurn::tool_call(
            "validate",
            r#"{"command":"echo boom >&2; exit 3","requirement":"builds"}"#,
        ),
        ScriptedTurn::text("Same failure twice; changing approach."),
    ]));
    let mut agent = r.agent("run");
    agent.run_turn("Make it build.", &mut |_| {}).unwrap();
    let requests = r.server.requests();
    assert_eq!(requests.len(), 3);
    assert!(!requests[1].body.to_string().contains(INSTRUCTION));
    let last = requests[2].body.to_string();
    assert!(last.contains(INSTRUCTION), "{last}");
    assert!(
        last.contains("validation failed: `echo boom >&2; exit 3`: boom (2 times in a row)"),
        "{last}"
    );
    let notes = regrounds(&r.events());
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].0, "validation:echo boom >&2; exit 3");
    drop(agent);
    r.finish();
}
