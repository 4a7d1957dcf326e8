//! The comparison's report: one block per session and window, one column
//! per engine, as a text table or JSON.

use super::facts::FACTS;
use super::metrics::RunFigures;
use super::sessions::SessionKind;
use serde::Serialize;
use std::fmt::Write;

/// One engine's run of one session at one window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineRun {
    /// The engine as given on the command line.
    pub engine: String,
    /// What the run measured.
    pub figures: RunFigures,
}

/// Every engine's run of one session at one window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionBlock {
    /// The session.
    pub session: SessionKind,
    /// Its tool steps.
    pub steps: usize,
    /// The context window in tokens.
    pub window_tokens: u64,
    /// The reserve in tokens.
    pub reserve_tokens: u64,
    /// One run per engine, in command-line order.
    pub runs: Vec<EngineRun>,
}

/// The whole comparison.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CompareReport {
    /// One block per session and window.
    pub blocks: Vec<SessionBlock>,
}

/// `32000` as `32k`, `1500` as `1.5k`, small numbers as they are.
pub fn short_tokens(n: u64) -> String {
    if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else if n >= 1000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}

fn row(out: &mut String, label: &str, cells: impl Iterator<Item = String>, widths: &[usize]) {
    let _ = write!(out, "{label:<28}");
    for (c, width) in cells.zip(widths) {
        let _ = write!(out, " {c:>width$}");
    }
    out.push('\n');
}

/// An engine's column heading: a component path shows its file name.
pub fn heading(engine: &str) -> &str {
    match engine.rsplit_once(['/', '\\']) {
        Some((_, name)) if !name.is_empty() => name,
        _ => engine,
    }
}

/// A row of the table: its label and how a run's figures fill its cell.
type Row = (&'static str, fn(&RunFigures) -> String);

/// The rows before the facts.
const ROWS: &[Row] = &[
    ("requests", |x| x.requests.to_string()),
    ("extra model calls", |x| x.extra_model_calls.to_string()),
    ("cost/step OpenAI-style", |x| {
        format!("{:.0}", x.cost_per_step.openai_style)
    }),
    ("cost/step Anthropic-style", |x| {
        format!("{:.0}", x.cost_per_step.anthropic_style)
    }),
    ("prefix ratio mean", |x| {
        format!("{:.3}", x.prefix_ratio_mean)
    }),
    ("prefix ratio p10", |x| format!("{:.3}", x.prefix_ratio_p10)),
    ("peak request tokens", |x| x.peak_request_tokens.to_string()),
    ("rotations", |x| x.rotations.to_string()),
    ("tool errors", |x| x.tool_errors.to_string()),
];

impl SessionBlock {
    /// The block as a text table: a header line, the engines, one row per
    /// figure and fact, the time, and why a run stopped early.
    pub fn table(&self) -> String {
        let widths: Vec<usize> = self
            .runs
            .iter()
            .map(|r| heading(&r.engine).chars().count().max(10))
            .collect();
        let width = widths.as_slice();
        let mut out = format!(
            "session {} ({} steps) · window {} · reserve {}\n",
            self.session.name(),
            self.steps,
            short_tokens(self.window_tokens),
            short_tokens(self.reserve_tokens)
        );
        let runs = &self.runs;
        let headings = runs.iter().map(|r| heading(&r.engine).to_string());
        row(&mut out, "", headings, width);
        for (label, cell) in ROWS {
            row(
                &mut out,
                label,
                runs.iter().map(|r| cell(&r.figures)),
                width,
            );
        }
        for (i, fact) in FACTS.iter().enumerate() {
            let cells = runs.iter().map(|r| {
                r.figures
                    .facts
                    .get(i)
                    .map_or("-".to_string(), |(_, s)| s.word().to_string())
            });
            row(&mut out, &format!("fact: {}", fact.label), cells, width);
        }
        let times = runs.iter().map(|r| format!("{:.1} s", r.figures.seconds));
        row(&mut out, "time", times, width);
        for r in runs {
            if let Some(e) = &r.figures.error {
                let _ = writeln!(out, "{}: stopped early: {e}", r.engine);
            }
        }
        out
    }
}

impl CompareReport {
    /// Every block as a text table, separated by blank lines.
    pub fn table(&self) -> String {
        self.blocks
            .iter()
            .map(SessionBlock::table)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// True when no run stopped early.
    pub fn complete(&self) -> bool {
        self.blocks
            .iter()
            .flat_map(|b| &b.runs)
            .all(|r| r.figures.error.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::facts::{FactId, Survival};
    use crate::compare::metrics::Cost;

    fn figures(extra: usize, error: Option<&str>) -> RunFigures {
        RunFigures {
            requests: 10 + extra,
            agent_requests: 10,
            extra_model_calls: extra,
            cost_per_step: Cost {
                openai_style: 1234.4,
                anthropic_style: 2345.6,
            },
            prefix_ratio_mean: 0.9512,
            prefix_ratio_p10: 0.5,
            peak_request_tokens: 20_000,
            rotations: 2,
            tool_errors: 0,
            facts: vec![
                (FactId::Constraint, Survival::Visible),
                (FactId::CodeWord, Survival::Recalled),
                (FactId::Diagnostic, Survival::Lost),
                (FactId::RejectedHypothesis, Survival::Active),
            ],
            seconds: 1.25,
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn the_table_puts_engines_side_by_side() {
        let block = SessionBlock {
            session: SessionKind::Steps80,
            steps: 80,
            window_tokens: 32_000,
            reserve_tokens: 8_500,
            runs: vec![
                EngineRun {
                    engine: "builtin:continuity".into(),
                    figures: figures(0, None),
                },
                EngineRun {
                    engine: "baseline:summarize".into(),
                    figures: figures(3, Some("provider down")),
                },
            ],
        };
        let t = block.table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "session steps80 (80 steps) · window 32k · reserve 8.5k"
        );
        assert!(lines[1].trim_start().starts_with("builtin:continuity"));
        let extra = lines
            .iter()
            .find(|l| l.starts_with("extra model calls"))
            .unwrap();
        assert_eq!(
            extra.split_whitespace().collect::<Vec<_>>()[3..],
            ["0", "3"]
        );
        let cost = lines
            .iter()
            .find(|l| l.starts_with("cost/step OpenAI"))
            .unwrap();
        assert!(cost.ends_with("1234"), "{cost}");
        let errors = lines.iter().find(|l| l.starts_with("tool errors")).unwrap();
        assert_eq!(
            errors.split_whitespace().collect::<Vec<_>>()[2..],
            ["0", "0"]
        );
        let facts: Vec<&&str> = lines.iter().filter(|l| l.starts_with("fact: ")).collect();
        assert_eq!(facts.len(), 4);
        assert!(facts[3].contains("ACTIVE") && facts[1].contains("recalled"));
        assert!(t.contains("baseline:summarize: stopped early: provider down"));
        let report = CompareReport {
            blocks: vec![block],
        };
        assert!(!report.complete());
        assert_eq!(short_tokens(256_000), "256k");
        assert_eq!(short_tokens(999), "999");
        assert_eq!(heading("/a/b/window.wasm"), "window.wasm");
        assert_eq!(heading("builtin:continuity"), "builtin:continuity");
    }
}
