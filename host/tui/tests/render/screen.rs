//! The issue-27 screen behaviours on ratatui's test backend: editing keys,
//! scrolling that clamps and says so, wrapped errors, modals whose key line
//! stays in view, the first screen, queued messages, the spinner, ✗ for a
//! failed validation, one row per denial, children by role, the GROUP
//! heading whole, tool rows without raw JSON, a re-ground's dim line, and
//! the log sink.

use super::keys::{ctrl, key};
use super::{demo_state, has, screen};
use latch_engine_sdk::types::{Part, ToolCall, ToolResult};
use latch_kernel::{EventKind, StoredEvent};
use latch_surface::{GroupView, PermissionPrompt, Surface};
use latch_tui::keys::on_key;
use latch_tui::{Input, UiState};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn typed(state: &mut UiState, text: &str) {
    for c in text.chars() {
        on_key(state, key(KeyCode::Char(c)));
    }
}

fn alt(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::ALT)
}

/// A surface replayed from these event kinds, in order.
fn state_of(kinds: Vec<EventKind>) -> UiState {
    let events: Vec<StoredEvent> = kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| StoredEvent {
            seq: i as u64 + 1,
            session: "s1".into(),
            time_ms: 1_000 + i as u64,
            kind,
        })
        .collect();
    UiState::new(Surface::replay("s1", &events), "s1 · m · e")
}

fn started() -> EventKind {
    EventKind::UserMessage {
        parts: vec![Part::Text("start".into())],
    }
}

fn call(id: &str, name: &str, args: &str) -> EventKind {
    EventKind::AssistantMessage {
        parts: vec![Part::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments_json: args.into(),
        })],
    }
}

fn result(id: &str, name: &str, content: &str, is_error: bool) -> EventKind {
    EventKind::ToolResult(ToolResult {
        call_id: id.into(),
        name: name.into(),
        content: content.into(),
        is_error,
        images: vec![],
    })
}

#[test]
fn editing_keys_move_and_delete_in_the_input() {
    let mut s = demo_state();
    typed(&mut s, "fix the flaky test");
    on_key(&mut s, ctrl('w'));
    assert_eq!(s.composer.text(), "fix the flaky ");
    on_key(&mut s, alt(KeyCode::Backspace));
    assert_eq!(s.composer.text(), "fix the ");
    on_key(&mut s, ctrl('a'));
    assert_eq!(s.composer.cursor(), 0);
    on_key(&mut s, ctrl('k'));
    assert_eq!(s.composer.text(), "");
    typed(&mut s, "abc def");
    on_key(&mut s, key(KeyCode::Left));
    on_key(&mut s, key(KeyCode::Left));
    on_key(&mut s, ctrl('u'));
    assert_eq!(s.composer.text(), "ef");
    on_key(&mut s, ctrl('e'));
    assert_eq!(s.composer.cursor(), 2);
}

#[test]
fn up_in_a_multi_line_draft_moves_the_cursor_not_the_draft() {
    let mut s = demo_state();
    typed(&mut s, "an earlier message");
    on_key(&mut s, key(KeyCode::Enter));
    s.running = false;
    typed(&mut s, "first line");
    on_key(&mut s, ctrl('j'));
    typed(&mut s, "second");
    on_key(&mut s, key(KeyCode::Up));
    assert_eq!(s.composer.text(), "first line\nsecond", "the draft stays");
    assert_eq!(s.composer.cursor(), "second".len(), "column kept on line 1");
    on_key(&mut s, key(KeyCode::Down));
    assert_eq!(s.composer.cursor(), "first line\nsecond".len());
    // A one-line draft still walks the history.
    s.composer.clear();
    on_key(&mut s, key(KeyCode::Up));
    assert_eq!(s.composer.text(), "an earlier message");
}

#[test]
fn a_long_input_line_scrolls_to_keep_the_cursor_in_view() {
    let mut s = demo_state();
    let long = format!("{}END", "x".repeat(150));
    typed(&mut s, &long);
    let rows = screen(&s, 80, 24);
    assert!(has(&rows, "xxEND"), "{}", rows.join("\n"));
}

#[test]
fn scrolling_clamps_says_so_and_end_returns_to_live() {
    let mut s = demo_state();
    screen(&s, 80, 24);
    for _ in 0..200 {
        on_key(&mut s, key(KeyCode::PageUp));
        screen(&s, 80, 24);
    }
    let max = s.scroll_max.get();
    assert!(
        max > 0 && s.scroll == max,
        "clamped at the top: {} of {max}",
        s.scroll
    );
    // One PageDown moves at once (no overshoot to unwind).
    on_key(&mut s, key(KeyCode::PageDown));
    assert_eq!(s.scroll, max - 10);
    let rows = screen(&s, 80, 24);
    assert!(
        has(&rows, "scrolled back · End returns to live"),
        "{}",
        rows.join("\n")
    );
    on_key(&mut s, key(KeyCode::End));
    assert_eq!(s.scroll, 0);
    let rows = screen(&s, 80, 24);
    assert!(!has(&rows, "scrolled back"), "{}", rows.join("\n"));
    // The mouse wheel scrolls the same way.
    latch_tui::keys::scroll_up(&mut s, latch_tui::keys::WHEEL);
    assert_eq!(s.scroll, latch_tui::keys::WHEEL);
    latch_tui::keys::scroll_down(&mut s, 100);
    assert_eq!(s.scroll, 0);
}

#[test]
fn an_error_is_shown_in_full_wrapped() {
    let mut s = demo_state();
    let error = format!(
        "provider error 400: {} the tail of the message\nsecond line: check the model name",
        "word ".repeat(40)
    );
    s.input(Input::TurnEnded { error: Some(error) });
    let rows = screen(&s, 80, 24);
    let all = rows.join("\n");
    assert!(has(&rows, "✗ provider error 400"), "{all}");
    assert!(has(&rows, "tail of the message"), "{all}");
    assert!(has(&rows, "second line: check the model name"), "{all}");
}

#[test]
fn the_modal_key_line_stays_in_view_and_its_body_scrolls() {
    let mut s = demo_state();
    s.surface.set_permission(Some(PermissionPrompt {
        call_id: "c1".into(),
        tool: "write_file".into(),
        action: String::new(),
        subject: "big.txt".into(),
        detail: (0..60).map(|i| format!("+line {i}")).collect(),
        reason: "it writes a file".into(),
        seq: 0,
    }));
    let rows = screen(&s, 80, 24);
    let all = rows.join("\n");
    assert!(has(&rows, "y allow once"), "{all}");
    assert!(has(&rows, "+line 0"), "{all}");
    assert!(!has(&rows, "+line 59"), "{all}");
    for _ in 0..80 {
        on_key(&mut s, key(KeyCode::Down));
    }
    let rows = screen(&s, 80, 24);
    let all = rows.join("\n");
    assert!(
        has(&rows, "+line 59") && has(&rows, "asked because"),
        "{all}"
    );
    assert!(has(&rows, "y allow once"), "{all}");
}

#[test]
fn a_popup_wraps_and_scrolls_with_esc_in_view() {
    let mut s = demo_state();
    let mut lines: Vec<String> = (0..50).map(|i| format!("hit {i}")).collect();
    lines[0] = format!("{} LONG-END", "a ".repeat(60));
    s.input(Input::Popup {
        title: "/recall x".into(),
        lines,
    });
    let rows = screen(&s, 80, 24);
    let all = rows.join("\n");
    assert!(has(&rows, "LONG-END"), "wrapped: {all}");
    assert!(has(&rows, "Esc closes"), "{all}");
    on_key(&mut s, key(KeyCode::End));
    let rows = screen(&s, 80, 24);
    assert!(
        has(&rows, "hit 49") && has(&rows, "Esc closes"),
        "{}",
        rows.join("\n")
    );
}

#[test]
fn the_first_screen_says_where_you_are_and_how_to_start() {
    let mut s = state_of(vec![]);
    s.welcome = vec![
        "Latch".into(),
        "workspace  /home/me/project".into(),
        "provider   anthropic".into(),
        "model      claude-x".into(),
        "engine     builtin:continuity".into(),
        "Type a task and press Enter.".into(),
    ];
    let rows = screen(&s, 120, 40);
    let all = rows.join("\n");
    for needle in [
        "/home/me/project",
        "anthropic",
        "claude-x",
        "builtin:continuity",
        "Type a task and press Enter.",
    ] {
        assert!(has(&rows, needle), "{needle}: {all}");
    }
}

#[test]
fn a_queued_message_is_shown_as_queued() {
    let mut s = demo_state();
    s.running = true;
    typed(&mut s, "also update the docs");
    on_key(&mut s, key(KeyCode::Enter));
    let rows = screen(&s, 120, 40);
    let all = rows.join("\n");
    assert!(has(&rows, "› also update the docs"), "{all}");
    assert!(
        has(&rows, "queued: delivered at the next safe boundary"),
        "{all}"
    );
}

#[test]
fn a_running_turn_shows_a_spinner_and_its_elapsed_time() {
    let mut s = demo_state();
    typed(&mut s, "go");
    on_key(&mut s, key(KeyCode::Enter));
    s.started = Some(std::time::Instant::now() - std::time::Duration::from_secs(75));
    let rows = screen(&s, 120, 40);
    let status = &rows[39];
    assert!(status.contains("1 min 15 s"), "{status}");
    assert!(
        latch_tui::widgets::status::SPINNER
            .iter()
            .any(|f| status.contains(f)),
        "{status}"
    );
}

#[test]
fn a_failed_validation_shows_a_cross_and_a_denial_shows_once() {
    let s = state_of(vec![
        started(),
        call(
            "v1",
            "validate",
            r#"{"requirement":"tests pass","command":"sh t.sh"}"#,
        ),
        result(
            "v1",
            "validate",
            "validation FAILED at workspace generation 1: tests pass\ncommand: sh t.sh (exit 1)",
            false,
        ),
        call("d1", "shell", r#"{"command":"rm -rf build"}"#),
        EventKind::ToolDenied {
            tool: "shell".into(),
            call_id: Some("d1".into()),
            reason: "`rm -rf build` denied by the user: not now".into(),
        },
        result(
            "d1",
            "shell",
            "denied by the user: `rm -rf build` was not run",
            true,
        ),
    ]);
    let rows = screen(&s, 120, 40);
    let all = rows.join("\n");
    assert!(has(&rows, "✗ validate sh t.sh"), "{all}");
    assert!(!has(&rows, "✓ validate"), "{all}");
    assert!(
        has(&rows, "⊘ denied shell: `rm -rf build` denied by the user"),
        "{all}"
    );
    assert!(!all.contains("shell failed"), "{all}");
    assert_eq!(
        rows.iter().filter(|r| r.contains("rm -rf build")).count(),
        1,
        "one row for the denial, not a failed shell too: {all}"
    );
}

#[test]
fn tool_rows_never_show_raw_json() {
    let s = state_of(vec![
        started(),
        call("m1", "mcp__everything__add", r#"{"a":2,"b":3}"#),
    ]);
    let rows = screen(&s, 120, 40);
    let all = rows.join("\n");
    assert!(has(&rows, "mcp__everything__add a: 2, b: 3"), "{all}");
    assert!(!all.contains("{\"a\""), "{all}");
}

#[test]
fn children_are_named_by_role_and_the_group_heading_wraps() {
    assert_eq!(
        latch_tui::widgets::transcript::child_names(
            [("01J1", "tester"), ("01J2", "tester"), ("01J3", "writer")].into_iter()
        ),
        vec![
            ("01J1".to_string(), "tester".to_string()),
            ("01J2".to_string(), "tester 2".to_string()),
            ("01J3".to_string(), "writer".to_string()),
        ]
    );
    let mut s = demo_state();
    s.surface.set_group(Some(GroupView {
        title: "GROUP fix-the-build (3 members, 2 tasks open) END".into(),
        lines: vec!["tester holds t1".into()],
    }));
    let rows = screen(&s, 120, 60);
    let right: Vec<String> = rows.iter().map(|r| r.chars().skip(82).collect()).collect();
    let all = right.join("\n");
    assert!(has(&right, "GROUP fix-the-build"), "{all}");
    assert!(has(&right, "END"), "the heading is wrapped, not cut: {all}");
}

#[test]
fn typing_to_the_finished_demo_explains_the_scripted_model() {
    let mut s = demo_state();
    s.scripted = true;
    s.quit_on_q = true;
    typed(&mut s, "hello");
    let sent = on_key(&mut s, key(KeyCode::Enter));
    assert!(sent.is_empty(), "nothing is sent to the scripted model");
    let rows = screen(&s, 120, 40);
    assert!(has(&rows, "model is scripted"), "{}", rows.join("\n"));
}

/// A re-ground is one dim line in the transcript, rebuilt from the log as a
/// resumed screen shows it; a pending mutation shows nothing.
#[test]
fn a_reground_is_one_dim_line_and_a_pending_mutation_nothing() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::style::Color;
    let s = state_of(vec![
        started(),
        EventKind::MutationPending {
            source: "shell".into(),
            command: Some("make".into()),
            snapshot: None,
        },
        EventKind::Reground {
            reason: "completion was refused 2 times in a row".into(),
            lineage: latch_kernel::REFUSALS_IN_A_ROW.into(),
            count: 2,
        },
    ]);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    terminal.draw(|f| latch_tui::draw(f, &s)).unwrap();
    let buf = terminal.backend().buffer();
    let rows: Vec<String> = (0..40)
        .map(|y| (0..120).map(|x| buf[(x, y)].symbol()).collect())
        .collect();
    let all = rows.join("\n");
    let line = "↺ re-ground: completion refused twice in a row — the agent re-reads the task";
    let y = rows
        .iter()
        .position(|r| r.contains(line))
        .unwrap_or_else(|| panic!("no re-ground line: {all}"));
    let x = rows[y].chars().position(|c| c == '↺').unwrap() as u16;
    assert_eq!(buf[(x, y as u16)].fg, Color::DarkGray, "dim: {all}");
    assert!(
        !all.contains("make"),
        "a pending mutation shows nothing: {all}"
    );
}
