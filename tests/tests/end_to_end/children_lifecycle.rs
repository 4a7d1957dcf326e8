//! A child's life around its parent's interrupts and resumes, over real
//! HTTP to the scripted provider: an interrupt ends the parent's
//! end-of-turn wait for its children at once while they keep running (or
//! cancels them with the turn under `[agents] on_interrupt = "cancel"`),
//! and a resumed child gets the engine configuration its spawn recorded,
//! not the one configured since.

use super::children::{Team, team};
use latch::agent::AgentError;
use latch::config::Config;
use latch::supervisor::Supervisor;
use latch::supervisor::children::{ChildSettings, child_engine_from_profile};
use latch_kernel::{ChildState, EventKind, ReportOutcome};
use latch_provider::fake::{CapturedRequest, Script, ScriptStep, ScriptedTurn, WireFormat};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The phrase only a child's brief carries.
const BRIEF: &str = "You are a child agent of session";

fn messages(r: &CapturedRequest) -> String {
    r.body["messages"].to_string()
}

/// The parent spawns one child and then `then` (its next step); the child
/// runs `sleep {sleep_s}` in a shell command and reports. The parent's
/// next turn says whether the child's report reached it.
fn script(sleep_s: u32, then: ScriptedTurn) -> Script {
    Script::default().with_responder(move |r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if m.contains(BRIEF) {
            if !m.contains("tool_call_id") {
                return ScriptedTurn::tool_call(
                    "shell",
                    format!(r#"{{"command":"sleep {sleep_s}; echo slept > child.txt"}}"#),
                )
                .into();
            }
            return ScriptedTurn::text("CHILD-DONE: slept").into();
        }
        if m.contains("how is the child") {
            return ScriptedTurn::text(if m.contains("CHILD-DONE") {
                "The child reported."
            } else {
                "No report yet."
            })
            .into();
        }
        if !m.contains("tool_call_id") {
            return ScriptedTurn::tool_call("spawn_agent", r#"{"role":"sleeper","task":"sleep"}"#)
                .into();
        }
        then.clone().into()
    })
}

/// Interrupt the parent as soon as its child is out and it is waiting.
fn interrupt_when_waiting(
    t: &Team,
    control: latch::agent::TurnControl,
) -> Arc<std::sync::Mutex<Option<Instant>>> {
    let at = Arc::new(std::sync::Mutex::new(None));
    let (store, parent, at2) = (t.store.clone(), t.parent.id.clone(), at.clone());
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while store
            .agent_tree(&parent)
            .unwrap()
            .children()
            .next()
            .is_none()
        {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(400));
        *at2.lock().unwrap() = Some(Instant::now());
        control.interrupt();
    });
    at
}

fn child_of(t: &Team) -> latch_kernel::agents::ChildEntry {
    t.store
        .agent_tree(&t.parent.id)
        .unwrap()
        .children()
        .next()
        .unwrap()
        .clone()
}

fn wait_finished(t: &Team, child: &str, within: Duration) -> latch_kernel::agents::ChildEntry {
    let deadline = Instant::now() + within;
    loop {
        let c = t
            .store
            .agent_tree(&t.parent.id)
            .unwrap()
            .child(child)
            .unwrap()
            .clone();
        if c.state != ChildState::Unfinished {
            return c;
        }
        assert!(Instant::now() < deadline, "the child never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The parent ends its turn while its child sleeps, so the turn waits for
/// the child's report; an interrupt ends that wait at once. The child
/// keeps running, finishes, and its report reaches the parent's next turn.
#[test]
fn an_interrupt_ends_the_end_of_turn_wait_and_the_child_keeps_running() {
    let t = team(
        WireFormat::OpenAi,
        script(3, ScriptedTurn::text("The child works; I wait for it.")),
    );
    let (mut agent, _rt) = t.parent_agent(&Config::default(), 4);
    let at = interrupt_when_waiting(&t, agent.control());
    let result = agent.run_turn("delegate", &mut |_| {});
    let took = at.lock().unwrap().unwrap().elapsed();
    assert!(matches!(result, Err(AgentError::Interrupted)), "{result:?}");
    assert!(
        took < Duration::from_secs(2),
        "the wait ended {took:?} after the interrupt"
    );
    let child = child_of(&t);
    assert_eq!(
        child.state,
        ChildState::Unfinished,
        "the child keeps running"
    );
    let open = t
        .store
        .with_kernel(&t.parent.id, |k| k.unfinished().clone())
        .unwrap();
    assert!(!open.open_run && open.open_calls.is_empty(), "{open:?}");
    let done = wait_finished(&t, &child.id, Duration::from_secs(30));
    assert_eq!(
        done.latest_report().unwrap().1.outcome,
        ReportOutcome::Completed
    );
    let outcome = agent.run_turn("how is the child?", &mut |_| {}).unwrap();
    assert_eq!(outcome.final_text, "The child reported.");
}

/// With `[agents] on_interrupt = "cancel"` the parent's interrupt cancels
/// its running children with the turn: the child's command is killed, its
/// report says cancelled, and its log stays protocol-safe.
#[test]
fn on_interrupt_cancel_cancels_the_children_with_the_turn() {
    let t = team(
        WireFormat::OpenAi,
        script(
            30,
            ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s":600}"#),
        ),
    );
    let config = Config::parse(
        "[agents]\non_interrupt = \"cancel\"\n",
        &t.ws.join("c.toml"),
    )
    .unwrap();
    let supervisor = Arc::new(Supervisor::from_config(&config, &t.ws).unwrap());
    let (mut agent, _rt) = t.parent_agent_settings(supervisor, ChildSettings::from_config(&config));
    let at = interrupt_when_waiting(&t, agent.control());
    let result = agent.run_turn("delegate", &mut |_| {});
    assert!(matches!(result, Err(AgentError::Interrupted)), "{result:?}");
    let child = child_of(&t);
    let ended = wait_finished(&t, &child.id, Duration::from_secs(10));
    let took = at.lock().unwrap().unwrap().elapsed();
    assert!(
        took < Duration::from_secs(5),
        "cancelled {took:?} after the interrupt"
    );
    assert_eq!(
        ended.latest_report().unwrap().1.outcome,
        ReportOutcome::Cancelled
    );
    assert!(!t.ws.join("child.txt").exists(), "its command was killed");
    let open = t
        .store
        .with_kernel(&child.id, |k| k.unfinished().clone())
        .unwrap();
    assert!(!open.open_run && open.open_calls.is_empty(), "{open:?}");
    assert!(
        t.store.all_events(&child.id).unwrap().iter().any(|e| matches!(
            &e.kind,
            EventKind::RunInterrupted { reason } if reason.contains("the parent cancelled this child")
        )),
        "the child's run says it was cancelled"
    );
    let answered = t
        .store
        .all_events(&t.parent.id)
        .unwrap()
        .into_iter()
        .any(|e| matches!(e.kind, EventKind::ToolResult(r) if r.name == "wait_agents" && r.content.starts_with("interrupted:")));
    assert!(answered);
}

/// A resumed child is rebuilt from its durable profile: the engine
/// configuration its spawn recorded, even after the configuration changed.
#[test]
fn a_resumed_child_gets_the_engine_configuration_its_spawn_recorded() {
    let t = team(
        WireFormat::OpenAi,
        Script::default().with_responder(|r: &CapturedRequest| -> ScriptStep {
            let m = messages(r);
            if m.contains(BRIEF) {
                return ScriptedTurn::text("done").into();
            }
            if !m.contains("tool_call_id") {
                return ScriptedTurn::tool_call("spawn_agent", r#"{"role":"r","task":"t"}"#).into();
            }
            if !m.contains(r#""name":"wait_agents""#) {
                return ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s":60}"#).into();
            }
            ScriptedTurn::text("ok").into()
        }),
    );
    let spawned_with =
        Config::parse("[engine.config]\nrecall_limit = 7\n", &t.ws.join("a.toml")).unwrap();
    let (mut agent, rt) = t.parent_agent(&spawned_with, 4);
    agent.run_turn("delegate", &mut |_| {}).unwrap();
    assert!(rt.wait_idle(Duration::from_secs(20)));
    let child = child_of(&t);
    let recorded: serde_json::Value = serde_json::from_str(&child.engine_config).unwrap();
    assert_eq!(recorded["recall_limit"], 7, "{recorded}");
    // The configuration changes; the child resumes as it was spawned.
    let now = Config::parse("[engine.config]\nrecall_limit = 3\n", &t.ws.join("b.toml")).unwrap();
    let supervisor = Supervisor::from_config(&now, &t.ws).unwrap();
    let record = t.store.session(&child.id).unwrap();
    let mut engine = child_engine_from_profile(&supervisor, &t.store, &record).unwrap();
    let config: serde_json::Value = serde_json::from_str(&engine.config().unwrap()).unwrap();
    assert_eq!(config, recorded);
    // A new spawn takes the configuration as it is now.
    let mut fresh = supervisor.root_engine("fresh", &record.model).unwrap();
    let fresh: serde_json::Value = serde_json::from_str(&fresh.config().unwrap()).unwrap();
    assert_eq!(fresh["recall_limit"], 3);
}
