//! Keys and paste: how the user's input changes the UI state and which
//! [`Command`]s it emits. Pure: no terminal, no session.

use crate::event::{Command, PermissionAnswer};
use crate::state::{Popup, UiState};
use latch_surface::{SLASH_COMMANDS, Slash, complete_slash};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Lines one PageUp/PageDown scrolls.
const PAGE: u16 = 10;

/// The key help `/help` shows.
pub const KEY_HELP: &[&str] = &[
    "Enter          send (while a turn runs: queue it for the next safe boundary)",
    "Alt-Enter, Ctrl-J  new line",
    "Esc, Ctrl-C    stop the running turn",
    "Ctrl-C twice   leave (on an idle, empty prompt)",
    "Up, Down       message history",
    "PgUp, PgDn     scroll the transcript",
    "Ctrl-O         expand or fold tool output",
    "Ctrl-B         show or hide the sidebar",
    "Tab            complete a slash command",
];

/// The permission modal's keys (see [`MODAL_HELP`]).
pub const MODAL_HELP: &str =
    "y allow once · a always (this session) · n deny · r deny with a reason";

/// Handle a pasted text.
pub fn on_paste(state: &mut UiState, text: &str) {
    if state.modal().is_some()
        && let Some(reason) = state.deny_reason.as_mut()
    {
        reason.push_str(&text.replace('\n', " "));
    } else {
        state.composer.insert(text);
    }
}

/// A key while the permission modal of `call_id` is up: `y`, `a`, `n` (or
/// Esc) answer; `r` opens a reason line for a denial (Enter sends it, Esc
/// goes back).
fn modal_key(state: &mut UiState, call_id: String, code: KeyCode) -> Vec<Command> {
    let answer = match state.deny_reason.as_mut() {
        Some(reason) => match code {
            KeyCode::Enter => {
                let reason = state.deny_reason.take().unwrap_or_default();
                let reason = reason.trim();
                Some(PermissionAnswer::Deny(
                    (!reason.is_empty()).then(|| reason.to_string()),
                ))
            }
            KeyCode::Esc => {
                state.deny_reason = None;
                None
            }
            KeyCode::Backspace => {
                reason.pop();
                None
            }
            KeyCode::Char(c) => {
                reason.push(c);
                None
            }
            _ => None,
        },
        None => match code {
            KeyCode::Char('y') => Some(PermissionAnswer::Allow),
            KeyCode::Char('a') => Some(PermissionAnswer::Always),
            KeyCode::Char('n') | KeyCode::Esc => Some(PermissionAnswer::Deny(None)),
            KeyCode::Char('r') => {
                state.deny_reason = Some(String::new());
                None
            }
            _ => None,
        },
    };
    match answer {
        Some(answer) => {
            state.answered = Some(call_id.clone());
            state.deny_reason = None;
            vec![Command::Permission { call_id, answer }]
        }
        None => Vec::new(),
    }
}

/// Handle a key; the commands it emits, in order.
pub fn on_key(state: &mut UiState, key: KeyEvent) -> Vec<Command> {
    if key.kind == KeyEventKind::Release {
        return Vec::new();
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    if !(ctrl && key.code == KeyCode::Char('c')) {
        state.exit_armed = false;
    }
    if let Some(call_id) = state.modal().map(|p| p.call_id.clone())
        && !(ctrl && key.code == KeyCode::Char('c'))
    {
        // The modal takes every key but Ctrl-C, which interrupts the turn
        // (the waiting request is then denied as interrupted).
        return modal_key(state, call_id, key.code);
    }
    if state.popup.is_some() && !ctrl {
        if matches!(key.code, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q')) {
            state.popup = None;
        }
        return Vec::new();
    }
    match key.code {
        KeyCode::Esc => {
            if state.running {
                state.notice = Some("interrupting…".into());
                return vec![Command::Interrupt];
            }
            state.popup = None;
        }
        KeyCode::Char('c') if ctrl => return ctrl_c(state),
        KeyCode::Char('o') if ctrl => state.expanded = !state.expanded,
        KeyCode::Char('b') if ctrl => state.sidebar_toggled = !state.sidebar_toggled,
        KeyCode::Char('j') if ctrl => state.composer.insert("\n"),
        KeyCode::Enter if alt || key.modifiers.contains(KeyModifiers::SHIFT) => {
            state.composer.insert("\n")
        }
        KeyCode::Enter => return submit(state),
        KeyCode::Tab => {
            let text = state.composer.text().to_string();
            if let [only] = complete_slash(&text)[..] {
                state.composer.set(format!("{only} "));
            }
        }
        KeyCode::Char('q') if state.quit_on_q && state.composer.is_empty() && !state.running => {
            state.quit = true;
            return vec![Command::Exit];
        }
        KeyCode::Char(c) if !ctrl => state.composer.insert(c.encode_utf8(&mut [0; 4])),
        KeyCode::Backspace => state.composer.backspace(),
        KeyCode::Delete => state.composer.delete(),
        KeyCode::Left => state.composer.left(),
        KeyCode::Right => state.composer.right(),
        KeyCode::Home => state.composer.home(),
        KeyCode::End => state.composer.end(),
        KeyCode::Up if state.composer.on_first_line() => state.composer.history_prev(),
        KeyCode::Down if state.composer.on_last_line() => state.composer.history_next(),
        KeyCode::PageUp => state.scroll = state.scroll.saturating_add(PAGE),
        KeyCode::PageDown => state.scroll = state.scroll.saturating_sub(PAGE),
        _ => {}
    }
    Vec::new()
}

fn ctrl_c(state: &mut UiState) -> Vec<Command> {
    if state.running {
        state.notice = Some("interrupting…".into());
        return vec![Command::Interrupt];
    }
    if !state.composer.is_empty() {
        state.composer.clear();
        return Vec::new();
    }
    if state.exit_armed {
        state.quit = true;
        return vec![Command::Exit];
    }
    state.exit_armed = true;
    state.notice = Some("press Ctrl-C again to leave".into());
    Vec::new()
}

fn submit(state: &mut UiState) -> Vec<Command> {
    if state.composer.text().trim().is_empty() {
        return Vec::new();
    }
    let text = state.composer.take();
    state.scroll = 0;
    state.notice = None;
    match Slash::parse(&text) {
        None if state.running => {
            state.queued.push(text.clone());
            vec![Command::Steer(text)]
        }
        None => {
            state.running = true;
            vec![Command::Submit(text)]
        }
        Some(Err(e)) => {
            state.notice = Some(e.to_string());
            Vec::new()
        }
        Some(Ok(slash)) => match slash {
            Slash::Context => vec![Command::Context],
            Slash::Compact => vec![Command::Compact],
            Slash::Recall(q) => vec![Command::Recall(q)],
            Slash::Group => vec![Command::Group],
            Slash::Rewind(seq) => vec![Command::Rewind(seq)],
            Slash::Image(path) => vec![Command::Image(path)],
            Slash::Sessions => vec![Command::Sessions],
            Slash::Exit => {
                state.quit = true;
                vec![Command::Exit]
            }
            Slash::Help => {
                let mut lines: Vec<String> = SLASH_COMMANDS
                    .iter()
                    .map(|(n, h)| format!("{n:<14} {h}"))
                    .collect();
                lines.push(String::new());
                lines.extend(KEY_HELP.iter().map(|s| s.to_string()));
                state.popup = Some(Popup {
                    title: "help".into(),
                    lines,
                });
                Vec::new()
            }
        },
    }
}
