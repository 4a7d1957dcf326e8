//! The terminal UI's permission modal end to end, in process: the real
//! agent under `--approval untrusted` (real store, embedded ContinuityEngine,
//! real tools in the real sandbox, the local wire-format server) asks
//! through the TUI's approver; the screen state is fed the committed events
//! as the TUI's wiring feeds them, drawn on ratatui's test backend, and
//! answered with the modal's keys. `y`, `a` and `r` + a reason each leave
//! the durable permission events they name.

use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentEvent, AgentOptions, Permissions};
use latch::cli::tui_approve::{Answer, TuiApprover};
use latch_kernel::EventKind;
use latch_provider::fake::{Script, ScriptedTurn};
use latch_sandbox::{ApprovalMode, SandboxMode, SandboxPolicy};
use latch_surface::Surface;
use latch_tui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use latch_tui::keys::on_key;
use latch_tui::{Command, Input, UiState, snapshot};
use std::sync::Arc;
use std::sync::mpsc::Sender;
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
    /// An interactive agent under `untrusted`, whose port is the TUI's
    /// approver; the sender takes the screen's answers.
    fn agent(&self) -> (Agent, Sender<Answer>) {
        let mut agent = self.0.agent_with(
            Box::new(StandardTools::new(self.tool_context())),
            AgentOptions {
                mode: "interactive".into(),
                permissions: Some(Permissions {
                    approval: ApprovalMode::Untrusted,
                    sandbox: SandboxPolicy {
                        mode: SandboxMode::WorkspaceWrite,
                        ..SandboxPolicy::default()
                    },
                    port: None,
                }),
                ..AgentOptions::default()
            },
        );
        let (approver, answers) = TuiApprover::new(agent.control());
        assert!(agent.set_decision_port(Arc::new(approver)));
        (agent, answers)
    }
}

/// The screen side: the UI state, fed what the store committed.
struct Screen<'a> {
    rig: &'a Rig,
    state: UiState,
    answers: Sender<Answer>,
}

impl Screen<'_> {
    fn catch_up(&mut self) {
        let after = self.state.surface.durable().watermark;
        let events = self
            .rig
            .store
            .events(&self.rig.session.id, after, u64::MAX, 10_000)
            .unwrap();
        if !events.is_empty() {
            self.state.input(Input::Events(events));
        }
    }

    /// Wait until the modal is up; the screen's rows at 120×40.
    fn modal(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.state.modal().is_none() {
            assert!(Instant::now() < deadline, "no permission modal appeared");
            std::thread::sleep(Duration::from_millis(20));
            self.catch_up();
        }
        snapshot(&self.state, 120, 40).join("\n")
    }

    /// Press `keys`; answers go to the approver as the TUI's wiring sends
    /// them.
    fn press(&mut self, keys: &str, then_enter: bool) {
        let mut codes: Vec<KeyCode> = keys.chars().map(KeyCode::Char).collect();
        if then_enter {
            codes.push(KeyCode::Enter);
        }
        for code in codes {
            for c in on_key(&mut self.state, KeyEvent::new(code, KeyModifiers::NONE)) {
                if let Command::Permission { call_id, answer } = c {
                    self.answers.send((call_id, answer)).unwrap();
                }
            }
        }
    }
}

#[test]
fn the_modal_shows_the_diff_or_command_and_y_a_r_commit_their_decisions() {
    let echo = r#"{"command":"echo made >> made.txt"}"#;
    let r = rig(Script::new([
        ScriptedTurn::text("Reading, then editing.")
            .with_tool_call("read_file", r#"{"path":"notes.txt"}"#)
            .with_tool_call(
                "edit_file",
                r#"{"path":"notes.txt","old_string":"beta","new_string":"gamma"}"#,
            ),
        ScriptedTurn::tool_call("shell", echo),
        ScriptedTurn::tool_call("shell", echo),
        ScriptedTurn::tool_call("shell", r#"{"command":"rm notes.txt"}"#),
        ScriptedTurn::text("Done."),
    ]));
    let (mut agent, answers) = r.agent();
    let mut surface = Surface::replay(&r.session.id, &r.store.all_events(&r.session.id).unwrap());
    surface.go_live();
    let mut screen = Screen {
        rig: &r,
        state: UiState::new(surface, "test"),
        answers,
    };
    std::thread::scope(|scope| {
        let turn = scope.spawn(|| agent.run_turn("tidy the notes", &mut |_: AgentEvent| {}));

        let edit = screen.modal();
        assert!(edit.contains("edit_file wants to change:"), "{edit}");
        assert!(edit.contains("notes.txt"), "{edit}");
        assert!(edit.contains("-beta") && edit.contains("+gamma"), "{edit}");
        assert!(
            edit.contains("asked because approval mode `untrusted`"),
            "{edit}"
        );
        assert!(edit.contains("waiting for permission: edit_file"), "{edit}");
        screen.press("y", false);

        let command = screen.modal();
        assert!(command.contains("shell wants to run:"), "{command}");
        assert!(command.contains("echo made >> made.txt"), "{command}");
        screen.press("a", false);

        // The same command again runs on the session grant: no modal;
        // the next one asks.
        let rm = screen.modal();
        assert!(rm.contains("rm notes.txt"), "{rm}");
        screen.press("r", false);
        screen.press("keep the notes", true);

        let outcome = turn.join().unwrap().unwrap();
        assert_eq!(outcome.final_text, "Done.");
    });
    screen.catch_up();
    assert!(screen.state.modal().is_none(), "every modal closed");
    assert_eq!(
        std::fs::read_to_string(r.ws.join("notes.txt")).unwrap(),
        "alpha\ngamma\n",
        "the allowed edit ran, the denied rm did not"
    );
    assert_eq!(
        std::fs::read_to_string(r.ws.join("made.txt")).unwrap(),
        "made\nmade\n",
        "both echos ran"
    );
    let decisions: Vec<String> = r
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EventKind::PermissionGranted {
                subject,
                by,
                scope,
                key,
                ..
            } => Some(format!("granted {subject} by {by:?} {scope:?} {key}")),
            EventKind::PermissionDenied {
                subject,
                by,
                reason,
                ..
            } => Some(format!("denied {subject} by {by:?}: {reason}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        decisions,
        [
            "granted notes.txt by User Once ".to_string(),
            "granted echo made >> made.txt by User Session command:echo made >> made.txt"
                .to_string(),
            "granted echo made >> made.txt by SessionGrant Once ".to_string(),
            "denied rm notes.txt by User: keep the notes".to_string(),
        ]
    );
}
