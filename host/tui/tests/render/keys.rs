//! Keys assert the commands they emit and what the screen then shows.

use super::{demo_state, screen};
use latch_surface::PermissionPrompt;
use latch_tui::keys::on_key;
use latch_tui::{Command, Input, PermissionAnswer};
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};

pub fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

pub fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn typed(state: &mut latch_tui::UiState, text: &str) {
    for c in text.chars() {
        on_key(state, key(KeyCode::Char(c)));
    }
}

#[test]
fn enter_submits_then_queues_while_running_and_esc_interrupts() {
    let mut state = demo_state();
    typed(&mut state, "add a test for sub");
    assert_eq!(
        on_key(&mut state, key(KeyCode::Enter)),
        [Command::Submit("add a test for sub".into())]
    );
    assert!(state.running);
    typed(&mut state, "also check mul");
    assert_eq!(
        on_key(&mut state, key(KeyCode::Enter)),
        [Command::Steer("also check mul".into())]
    );
    let rows = screen(&state, 120, 40);
    assert!(
        rows[36].contains("1 queued for the next safe boundary"),
        "{}",
        rows[36]
    );
    assert_eq!(on_key(&mut state, key(KeyCode::Esc)), [Command::Interrupt]);
    assert_eq!(on_key(&mut state, ctrl('c')), [Command::Interrupt]);
    // The interrupt left the queued message undelivered: back to the box.
    state.input(Input::TurnEnded {
        error: Some("interrupted by the user".into()),
    });
    state.input(Input::Unsent(vec!["also check mul".into()]));
    assert_eq!(state.composer.text(), "also check mul");
    assert!(state.queued.is_empty() && !state.running);
}

#[test]
fn ctrl_c_twice_on_an_idle_empty_prompt_exits() {
    let mut state = demo_state();
    typed(&mut state, "draft");
    assert!(
        on_key(&mut state, ctrl('c')).is_empty(),
        "first clears the draft"
    );
    assert!(state.composer.is_empty());
    assert!(on_key(&mut state, ctrl('c')).is_empty(), "then arms");
    assert!(screen(&state, 80, 24)[23].contains("press Ctrl-C again to leave"));
    assert_eq!(on_key(&mut state, ctrl('c')), [Command::Exit]);
    assert!(state.quit);
}

#[test]
fn slash_commands_complete_parse_and_explain_mistakes() {
    let mut state = demo_state();
    typed(&mut state, "/rec");
    on_key(&mut state, key(KeyCode::Tab));
    assert_eq!(state.composer.text(), "/recall ");
    typed(&mut state, "E0599");
    assert_eq!(
        on_key(&mut state, key(KeyCode::Enter)),
        [Command::Recall("E0599".into())]
    );
    typed(&mut state, "/teleport");
    assert!(on_key(&mut state, key(KeyCode::Enter)).is_empty());
    assert!(
        state
            .notice
            .as_deref()
            .unwrap()
            .contains("unknown command /teleport")
    );
    typed(&mut state, "/help");
    on_key(&mut state, key(KeyCode::Enter));
    let rows = screen(&state, 120, 40);
    assert!(
        rows.iter().any(|r| r.contains("/compact")),
        "{}",
        rows.join("\n")
    );
    on_key(&mut state, key(KeyCode::Esc));
    assert!(state.popup.is_none());
}

#[test]
fn a_permission_prompt_is_a_modal_with_the_command() {
    let mut state = demo_state();
    state.input(Input::Permission(Some(PermissionPrompt {
        tool: "shell".into(),
        subject: "rm -rf target".into(),
        detail: vec!["-old line".into(), "+new line".into()],
        reason: "writes outside the workspace".into(),
        call_id: "k9".into(),
        ..PermissionPrompt::default()
    })));
    let rows = screen(&state, 120, 40);
    let all = rows.join("\n");
    assert!(
        all.contains("shell wants to run:") && all.contains("rm -rf target"),
        "{all}"
    );
    assert!(all.contains(latch_tui::keys::MODAL_HELP), "{all}");
    assert!(
        rows[39].contains("waiting for permission: shell"),
        "{}",
        rows[39]
    );
    // Typing goes to the modal, not the composer.
    assert!(on_key(&mut state, key(KeyCode::Char('x'))).is_empty());
    assert!(state.composer.is_empty());
    assert_eq!(
        on_key(&mut state, key(KeyCode::Char('y'))),
        [Command::Permission {
            call_id: "k9".into(),
            answer: PermissionAnswer::Allow
        }]
    );
    assert!(!screen(&state, 120, 40).join("\n").contains("wants to run"));
    // Answered: keys go to the composer again.
    on_key(&mut state, key(KeyCode::Char('y')));
    assert_eq!(state.composer.text(), "y");
}

#[test]
fn r_in_the_modal_denies_with_a_reason_the_user_types() {
    let mut state = demo_state();
    state.input(Input::Permission(Some(PermissionPrompt {
        tool: "shell".into(),
        subject: "make deploy".into(),
        call_id: "k1".into(),
        ..PermissionPrompt::default()
    })));
    assert!(on_key(&mut state, key(KeyCode::Char('r'))).is_empty());
    typed(&mut state, "not on a friday");
    on_key(&mut state, key(KeyCode::Backspace));
    typed(&mut state, "y");
    let all = screen(&state, 80, 24).join("\n");
    assert!(
        all.contains("reason for the model: not on a friday"),
        "{all}"
    );
    // Esc leaves the reason line, not the modal.
    on_key(&mut state, key(KeyCode::Esc));
    assert!(state.deny_reason.is_none() && state.modal().is_some());
    on_key(&mut state, key(KeyCode::Char('r')));
    typed(&mut state, "use the staging target");
    assert_eq!(
        on_key(&mut state, key(KeyCode::Enter)),
        [Command::Permission {
            call_id: "k1".into(),
            answer: PermissionAnswer::Deny(Some("use the staging target".into()))
        }]
    );
    assert!(state.modal().is_none() && state.composer.is_empty());
}

#[test]
fn the_finished_demo_quits_on_q() {
    let mut state = demo_state();
    state.quit_on_q = true;
    assert!(screen(&state, 80, 24)[23].contains("q quits"));
    assert_eq!(on_key(&mut state, key(KeyCode::Char('q'))), [Command::Exit]);
}

#[test]
fn ctrl_v_and_alt_v_ask_for_the_clipboards_image_and_chips_show_until_sent() {
    let mut state = demo_state();
    assert_eq!(on_key(&mut state, ctrl('v')), [Command::PasteImage]);
    assert_eq!(
        on_key(
            &mut state,
            KeyEvent::new(KeyCode::Char('v'), KeyModifiers::ALT)
        ),
        [Command::PasteImage]
    );
    assert!(state.composer.is_empty(), "{:?}", state.composer.text());
    // Not while a turn runs (steering carries no images).
    state.running = true;
    assert!(on_key(&mut state, ctrl('v')).is_empty());
    assert!(
        state
            .notice
            .as_deref()
            .unwrap()
            .contains("once the turn ends"),
        "{:?}",
        state.notice
    );
    state.running = false;
    state.input(Input::Attachments(vec![
        "[image 1: 800×600 png]".into(),
        "[image 2: 10×10 jpeg]".into(),
    ]));
    let rows = screen(&state, 120, 40);
    assert!(
        rows[38].contains("[image 1: 800×600 png] [image 2: 10×10 jpeg]"),
        "{rows:#?}"
    );
    typed(&mut state, "what is this");
    assert_eq!(
        on_key(&mut state, key(KeyCode::Enter)),
        [Command::Submit("what is this".into())]
    );
    let rows = screen(&state, 120, 40);
    assert!(!rows.join("\n").contains("[image 1"), "{rows:#?}");
}

/// Keys a test scripts: those typed before a question was drawn, and those
/// typed after. Discarding drops the first.
struct Typed {
    before: std::collections::VecDeque<Event>,
    after: std::collections::VecDeque<Event>,
    discarded: usize,
}

impl latch_tui::KeySource for Typed {
    fn next(&mut self, _: std::time::Duration) -> std::io::Result<Option<Event>> {
        match self.before.pop_front().or_else(|| self.after.pop_front()) {
            Some(ev) => Ok(Some(ev)),
            // Out of keys: end the loop.
            None => Err(std::io::Error::other("no more keys")),
        }
    }

    fn discard_pending(&mut self) -> std::io::Result<()> {
        self.discarded += self.before.len();
        self.before.clear();
        Ok(())
    }
}

#[test]
fn a_key_typed_before_the_permission_modal_appeared_does_not_answer_it() {
    let mut state = demo_state();
    let (tx, rx) = std::sync::mpsc::channel();
    tx.send(Input::Permission(Some(PermissionPrompt {
        tool: "shell".into(),
        subject: "git push".into(),
        reason: "leaves the sandbox".into(),
        call_id: "c7".into(),
        ..PermissionPrompt::default()
    })))
    .unwrap();
    let mut typed = Typed {
        before: [Event::Key(key(KeyCode::Char('y')))].into(),
        after: [Event::Key(key(KeyCode::Char('n')))].into(),
        discarded: 0,
    };
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 40)).unwrap();
    let mut sent = Vec::new();
    let end = latch_tui::run_loop(&mut terminal, &mut typed, &mut state, &rx, &mut |c| {
        sent.push(c)
    });
    assert!(end.is_err(), "the script ran out of keys");
    assert_eq!(typed.discarded, 1, "the early `y` was dropped");
    assert_eq!(
        sent,
        [Command::Permission {
            call_id: "c7".into(),
            answer: PermissionAnswer::Deny(None)
        }],
        "only the `n` typed after the modal answered it"
    );
    // A modal already shown is not a new question: nothing more is dropped.
    let mut q = latch_tui::Questions::default();
    assert!(q.drawn(Some("c7")));
    assert!(!q.drawn(Some("c7")));
    assert!(!q.drawn(None));
    assert!(q.drawn(Some("c8")));
}
