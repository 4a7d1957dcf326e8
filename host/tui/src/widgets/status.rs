//! The input box and the status line.

use crate::state::UiState;
use latch_surface::{Activity, complete_slash};
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use unicode_width::UnicodeWidthStr;

/// Draw the input box (and place the cursor in it).
pub fn render_input(frame: &mut Frame, area: Rect, state: &UiState) {
    let text = state.composer.text();
    let title = if state.running {
        if state.queued.is_empty() {
            " steer: Enter queues for the next safe boundary · Esc stops ".to_string()
        } else {
            format!(" {} queued for the next safe boundary ", state.queued.len())
        }
    } else {
        let hints = complete_slash(text);
        if hints.is_empty() || text.contains(' ') {
            " message · /help ".to_string()
        } else {
            format!(" {} (Tab) ", hints.join(" "))
        }
    };
    let mut block = Block::bordered()
        .title(title)
        .border_style(Style::new().fg(Color::DarkGray));
    if !state.attachments.is_empty() {
        // The images that go with the next message, on the bottom border.
        block = block.title_bottom(Span::styled(
            format!(" {} ", state.attachments.join(" ")),
            Style::new().fg(Color::Cyan),
        ));
    }
    let inner = block.inner(area);
    let lines: Vec<Line> = text.split('\n').map(|l| Line::raw(l.to_string())).collect();
    // Keep the cursor's line in view.
    let before = &text[..state.composer.cursor()];
    let row = before.matches('\n').count() as u16;
    let col = before.rsplit('\n').next().unwrap_or("").width() as u16;
    let top = row.saturating_sub(inner.height.saturating_sub(1));
    // A line longer than the box scrolls sideways to keep the cursor in it.
    let left = col.saturating_sub(inner.width.saturating_sub(1));
    frame.render_widget(Paragraph::new(lines).block(block).scroll((top, left)), area);
    if state.popup.is_none() && state.modal().is_none() {
        frame.set_cursor_position(Position {
            x: inner.x + (col - left).min(inner.width.saturating_sub(1)),
            y: inner.y + row - top,
        });
    }
}

/// Most characters of one part of the status line (the activity, the
/// latest warning): what follows it stays in view.
const STATUS_MAX: usize = 72;

/// Cut `text` to `max` characters, with an ellipsis.
fn cut(text: &mut String, max: usize) {
    if let Some((i, _)) = text.char_indices().nth(max) {
        text.truncate(i);
        text.push('…');
    }
}

/// The spinner's frames.
pub const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// `secs` as the status line shows it: `7 s`, `2 min 05 s`.
pub fn elapsed_text(secs: u64) -> String {
    if secs < 60 {
        format!("{secs} s")
    } else {
        format!("{} min {:02} s", secs / 60, secs % 60)
    }
}

/// The status line's text: activity, notice, session.
pub fn status_text(state: &UiState) -> (String, Color) {
    let activity = state.surface.activity();
    let color = match activity {
        _ if state.warning.is_some() && state.running => Color::Magenta,
        Activity::Idle => Color::Green,
        Activity::Interrupted(_) => Color::Yellow,
        Activity::Retrying { .. } | Activity::AwaitingPermission(_) => Color::Magenta,
        _ => Color::Cyan,
    };
    let warning = state.warning.as_ref().filter(|_| state.running);
    let mut text = match (&activity, state.running, warning) {
        // A retry reads as the log put it: "retrying in 6 s: …, attempt 5".
        (Activity::Retrying { .. }, _, Some(w)) => w.clone(),
        // The turn was submitted and nothing is committed yet.
        (Activity::Idle, true, _) => "waiting for the model".to_string(),
        (a, _, _) => a.label(),
    };
    cut(&mut text, STATUS_MAX);
    if let Some(started) = state.started.filter(|_| state.running) {
        let elapsed = started.elapsed();
        let frame = SPINNER[(elapsed.as_millis() / 100) as usize % SPINNER.len()];
        text = format!("{frame} {text} · {}", elapsed_text(elapsed.as_secs()));
    }
    if let Some(w) = warning.filter(|_| !matches!(activity, Activity::Retrying { .. })) {
        let mut w = w.clone();
        cut(&mut w, STATUS_MAX);
        text.push_str(" · ");
        text.push_str(&w);
    }
    if let Some(n) = &state.notice {
        text.push_str(" · ");
        text.push_str(n);
    }
    (text, color)
}

/// Draw the status line.
pub fn render_status(frame: &mut Frame, area: Rect, state: &UiState) {
    let (text, color) = status_text(state);
    let mode = &state.surface.durable().mode;
    let right = if mode.is_empty() {
        format!(" {} ", state.title)
    } else {
        format!(" ⏵ {mode} (Shift+Tab) · {} ", state.title)
    };
    let keys = if state.scroll > 0 {
        " ↑ scrolled back · End returns to live "
    } else if state.quit_on_q && !state.running {
        " q quits "
    } else if area.width >= 100 {
        " Ctrl-B sidebar · Ctrl-O expand · Esc stops "
    } else {
        " Ctrl-B sidebar "
    };
    let line = Line::from(vec![
        Span::styled(
            format!(" {text} "),
            Style::new().fg(color).add_modifier(Modifier::BOLD),
        ),
        Span::styled(keys, Style::new().fg(Color::DarkGray)),
        Span::styled(right, Style::new().fg(Color::DarkGray)),
    ]);
    frame.render_widget(Paragraph::new(line), area);
}
