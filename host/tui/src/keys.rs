//! Keys and paste: how the user's input changes the UI state and which
//! [`Command`]s it emits. Pure: no terminal, no session.

use crate::event::{Command, PermissionAnswer};
use crate::state::{Popup, UiState};
use latch_surface::Slash;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Lines one PageUp/PageDown scrolls.
const PAGE: u16 = 10;

/// The key help `/help` shows.
pub const KEY_HELP: &[&str] = &[
    "Enter          send (while a turn runs: queue it for the next safe boundary)",
    "Alt-Enter, Ctrl-J  new line",
    "Esc, Ctrl-C    stop the running turn",
    "Ctrl-C twice   leave (on an idle, empty prompt)",
    "Up, Down       message history (in a multi-line draft: move the cursor)",
    "Ctrl-A, Ctrl-E start, end of the line",
    "Ctrl-U, Ctrl-K delete to the start, to the end of the line",
    "Ctrl-W, Alt-Backspace  delete the word before the cursor",
    "PgUp, PgDn, mouse wheel  scroll the transcript",
    "End            back to live (when scrolled back)",
    "Ctrl-O         expand or fold tool output",
    "Ctrl-B         show or hide the sidebar",
    "Tab            complete a slash command",
    "Ctrl-V, Alt-V  attach the image on the clipboard",
];

/// What typing to the finished demo says.
pub const SCRIPTED: &str = "The demo's model is scripted: it played its one task and has no \
     replies for new messages. Run `latch` in a project with a provider configured (an \
     ANTHROPIC_API_KEY or OPENAI_API_KEY, or --base-url for a local server) to work on your \
     own tasks. q quits.";

/// The plan modal's keys (a plan to approve, from `propose_plan`).
pub const PLAN_HELP: &str = "y approve · e approve, edit freely · a approve, auto · n keep planning · r keep planning, say why";

/// The permission modal's keys.
pub const MODAL_HELP: &str =
    "y allow once · a always (this session) · n deny · r deny with a reason";

/// Lines one mouse-wheel notch scrolls.
pub const WHEEL: u16 = 3;

/// Scroll the transcript back by `lines` (clamped at its top), or the
/// open popup or modal up.
pub fn scroll_up(state: &mut UiState, lines: u16) {
    if state.popup.is_some() || state.modal().is_some() {
        state.popup_scroll = state.popup_scroll.saturating_sub(lines);
    } else {
        state.scroll = state
            .scroll
            .saturating_add(lines)
            .min(state.scroll_max.get());
    }
}

/// Scroll the transcript forward by `lines` (0 is live), or the open
/// popup or modal down.
pub fn scroll_down(state: &mut UiState, lines: u16) {
    if state.popup.is_some() || state.modal().is_some() {
        state.popup_scroll = (state.popup_scroll + lines).min(state.popup_max.get());
    } else {
        state.scroll = state.scroll.saturating_sub(lines);
    }
}

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
            KeyCode::PageUp | KeyCode::Up => {
                state.popup_scroll = state.popup_scroll.saturating_sub(1);
                None
            }
            KeyCode::PageDown | KeyCode::Down => {
                state.popup_scroll = (state.popup_scroll + 1).min(state.popup_max.get());
                None
            }
            KeyCode::Char('e') if state.modal_is_plan() => {
                Some(PermissionAnswer::Approve("edits".into()))
            }
            KeyCode::Char('a') if state.modal_is_plan() => {
                Some(PermissionAnswer::Approve("on-request".into()))
            }
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
            state.popup_scroll = 0;
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
        let max = state.popup_max.get();
        match key.code {
            KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q') => {
                state.popup = None;
                state.popup_scroll = 0;
            }
            KeyCode::Up => state.popup_scroll = state.popup_scroll.saturating_sub(1),
            KeyCode::Down => state.popup_scroll = (state.popup_scroll + 1).min(max),
            KeyCode::PageUp => state.popup_scroll = state.popup_scroll.saturating_sub(PAGE),
            KeyCode::PageDown => state.popup_scroll = (state.popup_scroll + PAGE).min(max),
            KeyCode::Home => state.popup_scroll = 0,
            KeyCode::End => state.popup_scroll = max,
            _ => {}
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
        // Terminals paste text, never image bytes: the session reads the
        // system clipboard (Alt-V where the terminal keeps Ctrl-V).
        // An image goes with a new message, never with steering.
        KeyCode::Char('v') if (ctrl || alt) && state.running => {
            state.notice =
                Some("paste the image once the turn ends: it goes with the next message".into());
        }
        KeyCode::Char('v') if ctrl || alt => {
            state.notice = Some("reading the clipboard…".into());
            return vec![Command::PasteImage];
        }
        KeyCode::Enter if alt || key.modifiers.contains(KeyModifiers::SHIFT) => {
            state.composer.insert("\n")
        }
        KeyCode::Enter => return submit(state),
        KeyCode::BackTab => {
            state.notice = Some(if state.running {
                "the mode changes when the turn ends".into()
            } else {
                "changing the mode…".into()
            });
            return vec![Command::CycleMode];
        }
        KeyCode::Tab => {
            let text = state.composer.text().to_string();
            let found = state.commands.complete(&text);
            match &found[..] {
                [] => {}
                [only] => state.composer.set(format!("{only} ")),
                many => {
                    // As far as they agree, and the choices on the status line.
                    let common = many.iter().skip(1).fold(many[0].clone(), |acc, n| {
                        acc.chars()
                            .zip(n.chars())
                            .take_while(|(a, b)| a == b)
                            .map(|(a, _)| a)
                            .collect()
                    });
                    if common.len() > text.len() {
                        state.composer.set(common);
                    }
                    state.notice = Some(many.join("  "));
                }
            }
        }
        KeyCode::Char('q') if state.quit_on_q && state.composer.is_empty() && !state.running => {
            state.quit = true;
            return vec![Command::Exit];
        }
        KeyCode::Char('a') if ctrl => state.composer.home(),
        KeyCode::Char('e') if ctrl => state.composer.end(),
        KeyCode::Char('u') if ctrl => state.composer.kill_to_start(),
        KeyCode::Char('k') if ctrl => state.composer.kill_to_end(),
        KeyCode::Char('w') if ctrl => state.composer.delete_word(),
        KeyCode::Backspace if alt || ctrl => state.composer.delete_word(),
        KeyCode::Char('h') if ctrl => state.composer.backspace(),
        KeyCode::Char(c) if !ctrl => state.composer.insert(c.encode_utf8(&mut [0; 4])),
        KeyCode::Backspace => state.composer.backspace(),
        KeyCode::Delete => state.composer.delete(),
        KeyCode::Left => state.composer.left(),
        KeyCode::Right => state.composer.right(),
        KeyCode::Home => state.composer.home(),
        // Scrolled back, End returns to live; otherwise it ends the line.
        KeyCode::End if state.scroll > 0 => state.scroll = 0,
        KeyCode::End => state.composer.end(),
        // A multi-line draft keeps its place: Up and Down move the cursor
        // (history is walked from a one-line draft, or while walking it).
        KeyCode::Up if state.composer.multi_line() && !state.composer.browsing() => {
            state.composer.up()
        }
        KeyCode::Down if state.composer.multi_line() && !state.composer.browsing() => {
            state.composer.down()
        }
        KeyCode::Up => state.composer.history_prev(),
        KeyCode::Down => state.composer.history_next(),
        KeyCode::PageUp => scroll_up(state, PAGE),
        KeyCode::PageDown => scroll_down(state, PAGE),
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
    if state.scripted && !state.running && Slash::parse(state.composer.text()).is_none() {
        state.error = Some(SCRIPTED.to_string());
        return Vec::new();
    }
    let text = state.composer.take();
    state.scroll = 0;
    state.notice = None;
    match Slash::parse_with(&text, &state.commands) {
        None if state.running => {
            state.queued.push(text.clone());
            vec![Command::Steer(text)]
        }
        None => {
            state.running = true;
            state.started = Some(std::time::Instant::now());
            state.error = None;
            // The attached images go with this message.
            state.attachments.clear();
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
            Slash::Export(path) => vec![Command::Export(path)],
            Slash::Sessions => vec![Command::Sessions],
            Slash::Agents => vec![Command::Agents],
            Slash::Plan => vec![Command::TogglePlan],
            Slash::Exit => {
                state.quit = true;
                vec![Command::Exit]
            }
            Slash::Custom(prompt) if state.running => {
                state.queued.push(prompt.clone());
                vec![Command::Steer(prompt)]
            }
            Slash::Custom(prompt) => {
                state.running = true;
                state.attachments.clear();
                vec![Command::Submit(prompt)]
            }
            Slash::Help => {
                let mut lines: Vec<String> = state
                    .commands
                    .help_lines()
                    .into_iter()
                    .map(|(n, h)| format!("{n:<14} {h}"))
                    .collect();
                lines.push(String::new());
                lines.extend(KEY_HELP.iter().map(|s| s.to_string()));
                state.popup = Some(Popup {
                    title: "help".into(),
                    lines,
                });
                state.popup_scroll = 0;
                Vec::new()
            }
        },
    }
}
