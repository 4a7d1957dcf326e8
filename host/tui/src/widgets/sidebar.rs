//! The sidebar: canonical task state (goal, constraints, decisions,
//! hypotheses with rejected ones struck, evidence with stale marks, failure
//! lineages, disproofs), context figures, usage, child agents and the GROUP
//! block.

use super::wrap::wrap;
use crate::state::UiState;
use latch_engine_sdk::types::{HypothesisStatus, ValidationOutcome};
use latch_surface::children::ChildStatus;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Draw the sidebar into `area`.
pub fn render(frame: &mut Frame, area: Rect, state: &UiState) {
    let width = area.width.saturating_sub(1) as usize;
    let lines = lines(state, width);
    frame.render_widget(
        Paragraph::new(lines),
        Rect {
            x: area.x + 1,
            width: area.width.saturating_sub(1),
            ..area
        },
    );
}

/// A section heading, wrapped (never cut) at `width`.
fn heading(out: &mut Vec<Line<'static>>, text: &str, width: usize) {
    if !out.is_empty() {
        out.push(Line::raw(""));
    }
    let style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
    out.extend(super::wrap::wrap(
        ratatui::text::Span::raw(""),
        text,
        style,
        2,
        width,
    ));
}

/// How a figure the provider did not report shows: never as 0.
pub const UNKNOWN: &str = "–";

/// A reported figure, or [`UNKNOWN`].
fn known(n: Option<u64>) -> String {
    n.map_or_else(|| UNKNOWN.to_string(), |n| n.to_string())
}

/// Most entries of one kind the sidebar lists (the newest).
pub const MAX_ENTRIES: usize = 6;

/// The newest [`MAX_ENTRIES`] of `items`, after a line that counts the
/// earlier ones.
fn newest<'a, T>(out: &mut Vec<Line<'static>>, items: &'a [T], what: &str) -> &'a [T] {
    let skip = items.len().saturating_sub(MAX_ENTRIES);
    if skip > 0 {
        out.push(Line::styled(
            format!("… {skip} earlier {what}"),
            Style::new().fg(Color::DarkGray),
        ));
    }
    &items[skip..]
}

fn entry(out: &mut Vec<Line<'static>>, mark: &str, text: &str, style: Style, width: usize) {
    out.extend(wrap(
        Span::styled(format!("{mark} "), style),
        text,
        style,
        2,
        width,
    ));
}

/// The sidebar's lines at `width`.
pub fn lines(state: &UiState, width: usize) -> Vec<Line<'static>> {
    let d = state.surface.durable();
    let t = &d.task;
    let mut out = Vec::new();
    let plain = Style::new();
    let dim = Style::new().fg(Color::DarkGray);

    if !d.checklist.is_empty() {
        heading(&mut out, "PLAN", width);
        for step in d.checklist.steps() {
            let done = step.status == latch_kernel::StepStatus::Completed;
            let style = if done {
                dim.add_modifier(Modifier::CROSSED_OUT)
            } else {
                plain
            };
            entry(
                &mut out,
                if done { "[x]" } else { "[ ]" },
                &step.text,
                style,
                width,
            );
        }
    }
    heading(&mut out, "TASK", width);
    match &t.goal {
        Some(g) => entry(&mut out, "goal", &g.text, plain, width),
        None => out.push(Line::styled("no goal recorded", dim)),
    }
    for c in newest(&mut out, &t.constraints, "constraints") {
        entry(&mut out, "!", &c.text, plain, width);
    }
    for c in newest(&mut out, &t.decisions, "decisions") {
        entry(&mut out, "→", &c.text, plain, width);
    }
    for h in newest(&mut out, &t.hypotheses, "hypotheses") {
        match h.status {
            HypothesisStatus::Rejected => entry(
                &mut out,
                "✗",
                &h.text,
                dim.add_modifier(Modifier::CROSSED_OUT),
                width,
            ),
            _ => entry(&mut out, "?", &h.text, plain, width),
        }
    }
    for e in newest(&mut out, &t.evidence, "evidence entries") {
        let (mark, color) = match e.outcome {
            ValidationOutcome::Passed => ("✓", Color::Green),
            ValidationOutcome::Failed => ("✗", Color::Red),
        };
        let stale = if e.stale { " (stale)" } else { "" };
        let style = if e.stale { dim } else { Style::new().fg(color) };
        entry(
            &mut out,
            mark,
            &format!("{}{stale} @gen {}", e.requirement, e.generation),
            style,
            width,
        );
    }
    // A denial is shown once, in the transcript, as a denial: not here as
    // a failed tool.
    let failures: Vec<_> = t
        .failures
        .iter()
        .filter(|f| !f.summary.contains(" failed: denied"))
        .collect();
    for f in newest(&mut out, &failures, "failure lineages") {
        entry(
            &mut out,
            &format!("⚠{}", f.count),
            &f.summary,
            Style::new().fg(Color::Yellow),
            width,
        );
    }
    for p in newest(&mut out, &t.disproofs, "disproofs") {
        entry(&mut out, "⊘", &p.text, dim, width);
    }

    heading(&mut out, "CONTEXT", width);
    match state.surface.report() {
        Some(r) => {
            out.push(Line::raw(format!(
                "≈{} of {} tokens",
                r.total_tokens, r.limit_tokens
            )));
            out.push(Line::raw(match r.epoch_generation {
                Some(g) => format!("epoch {g} · {} user turns", r.epoch_user_turns),
                None => "no cache epochs".to_string(),
            }));
            if r.request_tokens > 0 {
                out.push(Line::raw(format!(
                    "cacheable ≈{:.0}%",
                    100.0 * r.common_prefix_tokens as f64 / r.request_tokens as f64
                )));
            }
        }
        None => out.push(Line::styled("no report yet (/context)", dim)),
    }
    out.push(Line::raw(format!("workspace generation {}", d.generation)));

    heading(&mut out, "USAGE", width);
    let (input, output) = d.usage.reported_totals();
    out.push(Line::raw(format!(
        "{} requests · {} in · {} out",
        d.usage.requests().len(),
        known(input),
        known(output)
    )));
    if let Some(last) = d.usage.last() {
        out.push(Line::raw(format!(
            "last: {} in · {} out",
            known(last.input_tokens),
            known(last.output_tokens)
        )));
        let prefix = last
            .estimated_prefix_tokens
            .map(|p| format!("≈{p}"))
            .unwrap_or_else(|| UNKNOWN.into());
        out.push(Line::raw(format!(
            "prefix {prefix} · read {}",
            known(last.cache_read_tokens)
        )));
    }
    out.push(Line::raw(match d.usage.hit_rate() {
        Some(h) => format!("cache hit rate {:.1}%", h * 100.0),
        None => "cache hit rate unknown".into(),
    }));
    let cost = state.cost();
    out.push(Line::raw(format!("cost {}", cost.text())));
    if cost.priced > 0 {
        let usd = latch_surface::pricing::cost::usd;
        out.push(Line::raw(format!(
            "cache read {}",
            usd(cost.cache_read_usd)
        )));
        out.push(Line::raw(format!(
            "cache write {}",
            usd(cost.cache_write_usd)
        )));
    }

    if !d.children.all().is_empty() {
        heading(&mut out, "AGENTS", width);
        let live = state.surface.run_is_live() || state.running;
        let names = super::transcript::child_names(
            d.children
                .all()
                .iter()
                .map(|c| (c.id.as_str(), c.role.as_str())),
        );
        for c in d.children.all() {
            let name = names
                .iter()
                .find(|(id, _)| id == &c.id)
                .map_or(c.role.clone(), |(_, n)| n.clone());
            let label = match c.status {
                ChildStatus::Unfinished if live => "running",
                ChildStatus::Unfinished => "interrupted",
                ChildStatus::Finished => "finished",
                ChildStatus::Failed => "failed",
                ChildStatus::Cancelled => "cancelled",
            };
            entry(&mut out, "⑂", &format!("{name} · {label}"), plain, width);
        }
    }

    if let Some(g) = &d.group {
        heading(&mut out, &g.title, width);
        for l in &g.lines {
            entry(&mut out, "·", l, plain, width);
        }
    }
    out
}
