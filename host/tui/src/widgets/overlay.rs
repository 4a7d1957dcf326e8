//! Overlays on the transcript: a popup (the `/context` table, recall
//! results, help) and the permission modal with its command or diff.

use crate::state::UiState;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

/// Draw whichever overlay is open over `area`.
pub fn render(frame: &mut Frame, area: Rect, state: &UiState) {
    if let Some(p) = state.modal() {
        let heading = if p.action.is_empty() {
            format!("{} wants to run:", p.tool)
        } else {
            p.action.clone()
        };
        let mut lines = vec![
            Line::styled(heading, Style::new().add_modifier(Modifier::BOLD)),
            Line::raw(p.subject.clone()),
            Line::raw(""),
        ];
        lines.extend(p.detail.iter().map(|l| {
            let color = if l.starts_with("+++") || l.starts_with("---") || l.starts_with("@@") {
                Color::Cyan
            } else if l.starts_with('+') {
                Color::Green
            } else if l.starts_with('-') {
                Color::Red
            } else {
                Color::Reset
            };
            Line::styled(l.clone(), Style::new().fg(color))
        }));
        if !p.detail.is_empty() {
            lines.push(Line::raw(""));
        }
        if !p.reason.is_empty() {
            lines.push(Line::styled(
                format!("asked because {}", p.reason),
                Style::new().fg(Color::DarkGray),
            ));
        }
        let keys = match &state.deny_reason {
            Some(reason) => vec![
                Line::styled(
                    format!("deny — reason for the model: {reason}▏"),
                    Style::new().fg(Color::Yellow),
                ),
                Line::styled(
                    "Enter denies · Esc goes back",
                    Style::new().fg(Color::Yellow),
                ),
            ],
            None => vec![Line::styled(
                if state.modal_is_plan() {
                    crate::keys::PLAN_HELP
                } else {
                    crate::keys::MODAL_HELP
                },
                Style::new().fg(Color::Yellow),
            )],
        };
        let title = if state.modal_is_plan() {
            " plan "
        } else {
            " permission "
        };
        boxed(frame, area, title, lines, keys, state);
    } else if let Some(p) = &state.popup {
        let lines: Vec<Line> = p.lines.iter().map(|l| Line::raw(l.clone())).collect();
        let keys = vec![Line::styled(
            "Esc closes · Up, Down, PgUp, PgDn scroll",
            Style::new().fg(Color::DarkGray),
        )];
        boxed(frame, area, &format!(" {} ", p.title), lines, keys, state);
    }
}

/// A bordered box over `area`: `lines` wrapped and scrolled by the
/// state's popup scroll, `keys` pinned to its last rows (always in view).
fn boxed(
    frame: &mut Frame,
    area: Rect,
    title: &str,
    lines: Vec<Line<'static>>,
    keys: Vec<Line<'static>>,
    state: &UiState,
) {
    let width = area.width.saturating_sub(4).min(100);
    let inner_width = width.saturating_sub(2);
    let body = Paragraph::new(lines).wrap(Wrap { trim: false });
    let keys = Paragraph::new(keys).wrap(Wrap { trim: false });
    let body_rows = body.line_count(inner_width) as u16;
    let key_rows = keys.line_count(inner_width) as u16;
    let height = (body_rows + key_rows + 2).min(area.height.saturating_sub(1));
    let rect = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + area.height.saturating_sub(height).min(1),
        width,
        height,
    };
    let block = Block::bordered().title(title.to_string());
    let inner = block.inner(rect);
    let key_rows = key_rows.min(inner.height);
    let view = inner.height - key_rows;
    let max = body_rows.saturating_sub(view);
    state.popup_max.set(max);
    let top = state.popup_scroll.min(max);
    let mut title_right = String::new();
    if max > 0 {
        title_right = format!(" {}–{} of {} ", top + 1, top + view, body_rows);
    }
    frame.render_widget(Clear, rect);
    frame.render_widget(
        block.title_top(Line::raw(title_right).right_aligned()),
        rect,
    );
    frame.render_widget(
        body.scroll((top, 0)),
        Rect {
            height: view,
            ..inner
        },
    );
    frame.render_widget(
        keys,
        Rect {
            y: inner.y + view,
            height: key_rows,
            ..inner
        },
    );
}
