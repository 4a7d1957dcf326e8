//! The transcript pane: each [`Item`] as lines for a width, tool output
//! folded to its first lines (Ctrl-O expands), edits as unified diffs, the
//! streaming message last, scrolled from the bottom.

use super::wrap::wrap;
use crate::state::UiState;
use latch_surface::{DiffLine, DividerKind, Item, ToolRow, ToolStatus};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

/// Lines of tool output shown while folded.
pub const FOLDED_OUTPUT_LINES: usize = 2;
/// Lines of a diff shown while folded.
pub const FOLDED_DIFF_LINES: usize = 12;

/// Draw the transcript into `area`.
pub fn render(frame: &mut Frame, area: Rect, state: &UiState) {
    let block = Block::default()
        .borders(Borders::RIGHT)
        .border_style(Style::new().fg(Color::DarkGray));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let lines = visible(state, inner.width as usize, inner.height as usize);
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The lines the pane shows at `width` × `height`: the end of the
/// transcript, moved up by the scroll offset. Only the items that reach
/// into view are laid out, so a frame costs what is visible, not the
/// session's length.
pub fn visible(state: &UiState, width: usize, height: usize) -> Vec<Line<'static>> {
    // Lay out a little past what shows, so the clamp knows there is more.
    let need = height + state.scroll as usize + LOOKAHEAD;
    let mut chunks = vec![streaming_lines(state, width)];
    let mut count = chunks[0].len();
    for item in state.surface.durable().transcript.items().iter().rev() {
        if count >= need {
            break;
        }
        let mut lines = Vec::new();
        item_lines(item, state.expanded, width, &mut lines);
        count += lines.len();
        chunks.push(lines);
    }
    let mut all: Vec<Line<'static>> = chunks.into_iter().rev().flatten().collect();
    if state.surface.durable().transcript.items().is_empty() && all.is_empty() {
        all = welcome_lines(state, width);
    }
    state
        .scroll_max
        .set(all.len().saturating_sub(height).min(u16::MAX as usize) as u16);
    let end = all
        .len()
        .saturating_sub(state.scroll as usize)
        .max(height.min(all.len()));
    let start = end.saturating_sub(height);
    all[start..end].to_vec()
}

/// Lines laid out past the top of the view (see [`visible`]).
const LOOKAHEAD: usize = 64;

/// The first screen: where you are and how to start.
fn welcome_lines(state: &UiState, width: usize) -> Vec<Line<'static>> {
    let mut out = vec![Line::raw("")];
    for (i, l) in state.welcome.iter().enumerate() {
        let style = if i == 0 {
            Style::new().add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        out.extend(wrap(Span::raw("  "), l, style, 2, width));
    }
    out
}

/// Every transcript line at `width`.
pub fn lines(state: &UiState, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for item in state.surface.durable().transcript.items() {
        item_lines(item, state.expanded, width, &mut out);
    }
    out.extend(streaming_lines(state, width));
    out
}

/// The message being streamed, not committed yet.
fn streaming_lines(state: &UiState, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let streaming = state.surface.streaming();
    if !streaming.is_empty() {
        out.push(Line::raw(""));
        for (i, l) in streaming.lines().enumerate() {
            let prefix = if i == 0 { "● " } else { "  " };
            out.extend(wrap(Span::raw(prefix), l, Style::new(), 2, width));
        }
    }
    for q in &state.queued {
        out.push(Line::raw(""));
        let style = dim();
        for (i, l) in q.lines().enumerate() {
            let prefix = if i == 0 { "› " } else { "  " };
            out.extend(wrap(Span::styled(prefix, style), l, style, 2, width));
        }
        out.push(Line::styled(
            "  queued: delivered at the next safe boundary",
            Style::new().fg(Color::Yellow),
        ));
    }
    if let Some(e) = &state.error {
        out.push(Line::raw(""));
        let style = Style::new().fg(Color::Red);
        for (i, l) in e.lines().enumerate() {
            let prefix = if i == 0 { "✗ " } else { "  " };
            out.extend(wrap(Span::styled(prefix, style), l, style, 2, width));
        }
    }
    out
}

fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

fn item_lines(item: &Item, expanded: bool, width: usize, out: &mut Vec<Line<'static>>) {
    match item {
        Item::User { text, .. } => {
            out.push(Line::raw(""));
            let style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
            for (i, l) in text.lines().enumerate() {
                let prefix = if i == 0 { "› " } else { "  " };
                out.extend(wrap(Span::styled(prefix, style), l, style, 2, width));
            }
        }
        Item::Assistant { text, .. } => {
            out.push(Line::raw(""));
            for (i, l) in text.lines().enumerate() {
                let prefix = if i == 0 { "● " } else { "  " };
                out.extend(wrap(Span::raw(prefix), l, Style::new(), 2, width));
            }
        }
        Item::Tool(row) => tool_lines(row, expanded, width, out),
        Item::Notification { source, text, .. } => {
            for (i, l) in text.lines().enumerate() {
                let prefix = if i == 0 {
                    format!("◇ {source}: ")
                } else {
                    "  ".into()
                };
                out.extend(wrap(Span::styled(prefix, dim()), l, dim(), 2, width));
            }
        }
        Item::Denied { tool, reason, .. } => out.extend(wrap(
            Span::styled("  ⊘ denied ", Style::new().fg(Color::Red)),
            &format!("{tool}: {reason}"),
            Style::new().fg(Color::Red),
            4,
            width,
        )),
        Item::Validation {
            command, passed, ..
        } => {
            let (mark, color) = if *passed {
                ("◆ validation passed: ", Color::Green)
            } else {
                ("◆ validation failed: ", Color::Red)
            };
            out.push(Line::from(vec![
                Span::styled(format!("  {mark}"), Style::new().fg(color)),
                Span::raw(command.clone()),
            ]));
        }
        Item::Certification {
            certified,
            blockers,
            ..
        } => {
            if *certified {
                out.push(Line::styled(
                    "  ◆ completion certified",
                    Style::new().fg(Color::Green),
                ));
            } else {
                out.extend(wrap(
                    Span::styled("  ◆ completion refused: ", Style::new().fg(Color::Yellow)),
                    &blockers.join("; "),
                    Style::new(),
                    4,
                    width,
                ));
            }
        }
        Item::Reground { text, .. } => out.extend(wrap(
            Span::styled("  ↺ re-ground: ", dim()),
            text,
            dim(),
            4,
            width,
        )),
        Item::Child { role, task, .. } => out.extend(wrap(
            Span::styled(format!("  ⑂ {role}: "), Style::new().fg(Color::Magenta)),
            task,
            Style::new(),
            4,
            width,
        )),
        Item::Divider { kind, .. } => {
            let (text, color) = match kind {
                DividerKind::Compact => {
                    ("working memory reset (/compact)".to_string(), Color::Blue)
                }
                DividerKind::Epoch { generation } => {
                    (format!("cache epoch {generation}"), Color::Blue)
                }
                DividerKind::Interrupted { reason } => {
                    (format!("! run interrupted: {reason}"), Color::Yellow)
                }
            };
            let fill = width.saturating_sub(text.chars().count() + 6) / 2;
            let bar = "─".repeat(fill.max(2));
            out.push(Line::raw(""));
            out.push(Line::styled(
                format!("{bar} {text} {bar}"),
                Style::new().fg(color),
            ));
        }
    }
}

/// True when `row` is a call the user or the approval mode denied: the
/// denial row says so once, the call's row is not shown as a failure.
pub fn is_denial(row: &ToolRow) -> bool {
    row.status == ToolStatus::Failed && row.output.starts_with("denied")
}

/// True when `row` is a `validate` call whose check failed (the tool
/// itself succeeded: a failed validation is evidence).
pub fn failed_validation(row: &ToolRow) -> bool {
    row.name == "validate" && row.output.starts_with("validation FAILED")
}

fn tool_lines(row: &ToolRow, expanded: bool, width: usize, out: &mut Vec<Line<'static>>) {
    if is_denial(row) {
        return;
    }
    let (mark, color) = match row.status {
        ToolStatus::Pending => ("…", Color::Yellow),
        ToolStatus::Done if failed_validation(row) => ("✗", Color::Red),
        ToolStatus::Done => ("✓", Color::Green),
        ToolStatus::Failed => ("✗", Color::Red),
        ToolStatus::Interrupted => ("!", Color::Yellow),
    };
    out.extend(wrap(
        Span::styled(format!("  {mark} "), Style::new().fg(color)),
        &format!("{} {}", row.name, row.summary),
        Style::new().add_modifier(Modifier::BOLD),
        4,
        width,
    ));
    if !row.diff.is_empty() {
        let shown = if expanded {
            row.diff.len()
        } else {
            FOLDED_DIFF_LINES
        };
        for d in row.diff.iter().take(shown) {
            let (text, style) = match d {
                DiffLine::Header(h) => (h.clone(), Style::new().fg(Color::Cyan)),
                DiffLine::Removed(l) => (format!("-{l}"), Style::new().fg(Color::Red)),
                DiffLine::Added(l) => (format!("+{l}"), Style::new().fg(Color::Green)),
            };
            out.extend(wrap(Span::styled("    ", style), &text, style, 5, width));
        }
        more(row.diff.len(), shown, out);
    }
    if row.status == ToolStatus::Pending || row.output.is_empty() {
        return;
    }
    let output: Vec<&str> = row.output.lines().collect();
    let shown = if expanded {
        output.len()
    } else {
        FOLDED_OUTPUT_LINES
    };
    for l in output.iter().take(shown) {
        // Tabs (line-numbered file reads) would not occupy a cell.
        let l = l.replace('\t', "    ");
        out.extend(wrap(Span::styled("    │ ", dim()), &l, dim(), 6, width));
    }
    more(output.len(), shown, out);
}

fn more(total: usize, shown: usize, out: &mut Vec<Line<'static>>) {
    if total > shown {
        out.push(Line::styled(
            format!("    … {} more lines (Ctrl-O expands)", total - shown),
            dim(),
        ));
    }
}

/// The first characters of a session id.
pub fn short_id(id: &str) -> &str {
    &id[..id.len().min(10)]
}

/// Names that tell children apart: each child's role, numbered when two
/// share one (`tester`, `tester 2`), in the order given.
pub fn child_names<'a>(
    children: impl Iterator<Item = (&'a str, &'a str)>,
) -> Vec<(String, String)> {
    let children: Vec<(&str, &str)> = children.collect();
    let mut out = Vec::new();
    for (i, (id, role)) in children.iter().enumerate() {
        let total = children.iter().filter(|(_, r)| r == role).count();
        let nth = children[..=i].iter().filter(|(_, r)| r == role).count();
        let name = if total > 1 && nth > 1 {
            format!("{role} {nth}")
        } else {
            role.to_string()
        };
        out.push((id.to_string(), name));
    }
    out
}
