//! Interrupts and steering in the agent loop, against the real store, the
//! embedded ContinuityEngine and the local wire-format server: an interrupt
//! drops the provider stream at once and leaves a protocol-safe log; one
//! between tool calls answers the rest as interrupted; one while a command
//! runs kills its process group at once and answers its call as
//! interrupted; a message typed
//! while a turn runs is appended at the next safe boundary and reaches the
//! next request.

use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentError, AgentEvent, AgentOptions};
use latch_engine_sdk::types::*;
use latch_kernel::EventKind;
use latch_provider::fake::{Script, ScriptStep, ScriptedTurn};
use std::time::{Duration, Instant};

use super::common::SessionRig;

/// The shared session rig, with this module's agent.
struct Rig(SessionRig);

impl std::ops::Deref for Rig {
    type Target = SessionRig;
    fn deref(&self) -> &SessionRig {
        &self.0
    }
}

fn rig(script: Script) -> Rig {
    Rig(SessionRig::new("alpha\nbeta\n", |_| script))
}

impl Rig {
    fn agent(&self) -> Agent {
        self.0.agent_with(
            Box::new(StandardTools::new(self.tool_context())),
            AgentOptions::default(),
        )
    }

    fn assert_protocol_safe(&self) {
        let open = self
            .store
            .with_kernel(&self.session.id, |k| k.unfinished().clone())
            .unwrap();
        assert!(!open.open_run && open.open_calls.is_empty(), "{open:?}");
    }
}

fn read(name: &str) -> (String, String) {
    ("read_file".to_string(), format!(r#"{{"path":"{name}"}}"#))
}

#[test]
fn an_interrupt_drops_the_stream_in_flight_at_once() {
    let (tool, args) = read("notes.txt");
    // The second request stalls like a slow model.
    let rig = rig(
        Script::new([ScriptedTurn::text("Reading.").with_tool_call(tool, args)]).with_responder(
            |_| {
                std::thread::sleep(Duration::from_secs(30));
                ScriptStep::Turn(ScriptedTurn::text("too late"))
            },
        ),
    );
    let mut agent = rig.agent();
    let control = agent.control();
    let mut interrupted_at = None;
    let mut observer = |e: AgentEvent| {
        if let AgentEvent::Committed {
            event: EventKind::ToolResult(_),
            ..
        } = e
        {
            // The next request is about to be sent: interrupt it shortly.
            let control = control.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                control.interrupt();
            });
            interrupted_at = Some(Instant::now());
        }
    };
    let result = agent.run_turn("what do the notes say?", &mut observer);
    let waited = interrupted_at.unwrap().elapsed();
    assert!(matches!(result, Err(AgentError::Interrupted)), "{result:?}");
    assert!(
        waited < Duration::from_secs(5),
        "the turn ended {waited:?} after the interrupt; the stalled request was not dropped"
    );
    assert_eq!(
        rig.server.requests().len(),
        2,
        "the second request was in flight"
    );
    let events = rig.events();
    assert!(matches!(
        events.last(),
        Some(EventKind::RunInterrupted { reason }) if reason == "interrupted by the user"
    ));
    rig.assert_protocol_safe();
    drop(agent);
}

#[test]
fn an_interrupt_between_tool_calls_answers_the_rest_as_interrupted() {
    let (tool, args) = read("notes.txt");
    let rig = rig(Script::new([ScriptedTurn::text("Reading twice.")
        .with_tool_call(tool.clone(), args.clone())
        .with_tool_call(tool, args)]));
    let mut agent = rig.agent();
    let control = agent.control();
    let mut observer = |e: AgentEvent| {
        if let AgentEvent::Committed {
            event: EventKind::ToolResult(_),
            ..
        } = e
        {
            control.interrupt();
        }
    };
    let result = agent.run_turn("read the notes twice", &mut observer);
    assert!(matches!(result, Err(AgentError::Interrupted)), "{result:?}");
    let results: Vec<ToolResult> = rig
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EventKind::ToolResult(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(!results[0].is_error && results[0].content.contains("alpha"));
    assert!(results[1].is_error && results[1].content.starts_with("interrupted:"));
    assert_eq!(
        rig.server.requests().len(),
        1,
        "no request after the interrupt"
    );
    rig.assert_protocol_safe();
    // The next turn starts clean: the old interrupt does not stop it.
    drop(agent);
}

#[test]
fn steering_is_appended_at_the_next_safe_boundary() {
    let (tool, args) = read("notes.txt");
    let rig = rig(Script::new([
        ScriptedTurn::text("Reading.").with_tool_call(tool, args),
        ScriptedTurn::text("Both checked."),
    ]));
    let mut agent = rig.agent();
    let control = agent.control();
    let mut steered = false;
    let mut observer = |e: AgentEvent| {
        // Typed once, while the first answer's tool call runs.
        if let AgentEvent::Committed {
            event: EventKind::AssistantMessage { .. },
            ..
        } = e
            && !steered
        {
            steered = true;
            control.steer("also check beta");
        }
    };
    let outcome = agent.run_turn("check alpha", &mut observer).unwrap();
    assert_eq!(outcome.final_text, "Both checked.");
    let events = rig.events();
    let at = |pred: &dyn Fn(&EventKind) -> bool| events.iter().position(pred).unwrap();
    let result = at(&|e| matches!(e, EventKind::ToolResult(_)));
    let steered = at(
        &|e| matches!(e, EventKind::UserMessage { parts } if parts == &vec![Part::Text("also check beta".into())]),
    );
    assert_eq!(steered, result + 1, "delivered right after the unit closed");
    let second = rig.server.requests()[1].body.to_string();
    assert!(second.contains("also check beta"), "{second}");
    assert!(control.take_steering().is_empty(), "delivered once");
    rig.assert_protocol_safe();
    drop(agent);
}

/// True while a process group `pgid` has a process in it.
fn group_alive(pgid: &str) -> bool {
    std::process::Command::new("kill")
        .args(["-0", "--", &format!("-{pgid}")])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn an_interrupt_kills_a_running_command_and_answers_its_call_as_interrupted() {
    // The command writes its process group (its shell's pid leads it),
    // says it started, and would then run for half a minute.
    let rig = rig(Script::new([
        ScriptedTurn::text("Waiting.").with_tool_call(
            "shell",
            r#"{"command":"echo $$ > pgid.txt; echo started; sleep 30; echo never"}"#,
        ),
        ScriptedTurn::text("too late"),
    ]));
    let mut agent = rig.agent();
    let control = agent.control();
    let pgid_file = rig.ws.join("pgid.txt");
    let interrupted_at = std::sync::Arc::new(std::sync::Mutex::new(None));
    let at = interrupted_at.clone();
    let mut observer = |e: AgentEvent| {
        if let AgentEvent::Committed {
            event: EventKind::AssistantMessage { .. },
            ..
        } = e
        {
            // Interrupt once the command runs.
            let (control, at, file) = (control.clone(), at.clone(), pgid_file.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(20);
                while !file.exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                std::thread::sleep(Duration::from_millis(200));
                *at.lock().unwrap() = Some(Instant::now());
                control.interrupt();
            });
        }
    };
    let result = agent.run_turn("wait for it", &mut observer);
    let waited = interrupted_at
        .lock()
        .unwrap()
        .expect("interrupted")
        .elapsed();
    assert!(matches!(result, Err(AgentError::Interrupted)), "{result:?}");
    assert!(
        waited < Duration::from_secs(3),
        "the turn ended {waited:?} after the interrupt; the running command was not stopped"
    );
    let pgid = std::fs::read_to_string(rig.ws.join("pgid.txt")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while group_alive(pgid.trim()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !group_alive(pgid.trim()),
        "the command's process group was killed"
    );
    let results: Vec<ToolResult> = rig
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EventKind::ToolResult(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    let r = &results[0];
    assert!(
        r.is_error
            && r.content
                .starts_with("interrupted: the user stopped the turn"),
        "{r:?}"
    );
    assert!(
        r.content.contains("started") && !r.content.contains("never"),
        "{r:?}"
    );
    // Every surface shows the call as interrupted.
    let surface = latch_surface::Surface::replay(
        &rig.session.id,
        &rig.store.all_events(&rig.session.id).unwrap(),
    );
    assert!(
        surface
            .durable()
            .transcript
            .items()
            .iter()
            .any(|i| matches!(
                i,
                latch_surface::Item::Tool(t) if t.status == latch_surface::ToolStatus::Interrupted
            ))
    );
    assert_eq!(
        rig.server.requests().len(),
        1,
        "no request after the interrupt"
    );
    assert!(matches!(
        rig.events().last(),
        Some(EventKind::RunInterrupted { .. })
    ));
    rig.assert_protocol_safe();
    drop(agent);
}
