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
        match &state.deny_reason {
            Some(reason) => {
                lines.push(Line::styled(
                    format!("deny — reason for the model: {reason}▏"),
                    Style::new().fg(Color::Yellow),
                ));
                lines.push(Line::styled(
                    "Enter denies · Esc goes back",
                    Style::new().fg(Color::Yellow),
                ));
            }
            None => lines.push(Line::styled(
                crate::keys::MODAL_HELP,
                Style::new().fg(Color::Yellow),
            )),
        }
        boxed(frame, area, " permission ", lines);
    } else if let Some(p) = &state.popup {
        let mut lines: Vec<Line> = p.lines.iter().map(|l| Line::raw(l.clone())).collect();
        lines.push(Line::styled("Esc closes", Style::new().fg(Color::DarkGray)));
        boxed(frame, area, &format!(" {} ", p.title), lines);
    }
}

fn boxed(frame: &mut Frame, area: Rect, title: &str, lines: Vec<Line<'static>>) {
    let width = area.width.saturating_sub(4).min(100);
    let height = (lines.len() as u16 + 2).min(area.height.saturating_sub(2));
    let rect = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + 1,
        width,
        height,
    };
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(title.to_string())),
        rect,
    );
}
