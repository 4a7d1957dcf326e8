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
    let block = Block::bordered()
        .title(title)
        .border_style(Style::new().fg(Color::DarkGray));
    let inner = block.inner(area);
    let lines: Vec<Line> = text.split('\n').map(|l| Line::raw(l.to_string())).collect();
    // Keep the cursor's line in view.
    let before = &text[..state.composer.cursor()];
    let row = before.matches('\n').count() as u16;
    let col = before.rsplit('\n').next().unwrap_or("").width() as u16;
    let top = row.saturating_sub(inner.height.saturating_sub(1));
    frame.render_widget(Paragraph::new(lines).block(block).scroll((top, 0)), area);
    if state.popup.is_none() && state.modal().is_none() {
        frame.set_cursor_position(Position {
            x: inner.x + col.min(inner.width.saturating_sub(1)),
            y: inner.y + row - top,
        });
    }
}

/// The status line's text: activity, notice, session.
pub fn status_text(state: &UiState) -> (String, Color) {
    let activity = state.surface.activity();
    let color = match activity {
        Activity::Idle => Color::Green,
        Activity::Interrupted(_) => Color::Yellow,
        Activity::Retrying { .. } | Activity::AwaitingPermission(_) => Color::Magenta,
        _ => Color::Cyan,
    };
    let mut text = match (&activity, state.running) {
        // The turn was submitted and nothing is committed yet.
        (Activity::Idle, true) => "waiting for the model".to_string(),
        (a, _) => a.label(),
    };
    if let Some(n) = &state.notice {
        text.push_str(" · ");
        text.push_str(n);
    }
    (text, color)
}

/// Draw the status line.
pub fn render_status(frame: &mut Frame, area: Rect, state: &UiState) {
    let (text, color) = status_text(state);
    let right = format!(" {} ", state.title);
    let keys = if state.quit_on_q && !state.running {
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
