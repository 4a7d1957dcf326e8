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

fn row(out: &mut String, label: &str, cells: impl Iterator<Item = String>, width: usize) {
    let _ = write!(out, "{label:<28}");
    for c in cells {
        let _ = write!(out, " {c:>width$}");
    }
    out.push('\n');
}

impl SessionBlock {
    /// The block as a text table.
    pub fn table(&self) -> String {
        let width = self
            .runs
            .iter()
            .map(|r| r.engine.chars().count())
            .max()
            .unwrap_or(0)
            .max(12);
        let mut out = format!(
            "session {} ({} steps) · window {} · reserve {}\n",
            self.session.name(),
            self.steps,
            short_tokens(self.window_tokens),
            short_tokens(self.reserve_tokens)
        );
        let runs = &self.runs;
        row(&mut out, "", runs.iter().map(|r| r.engine.clone()), width);
        let f = |g: &dyn Fn(&RunFigures) -> String| {
            runs.iter()
                .map(move |r| g(&r.figures))
                .collect::<Vec<_>>()
                .into_iter()
        };
        row(&mut out, "requests", f(&|x| x.requests.to_string()), width);
        row(
            &mut out,
            "extra model calls",
            f(&|x| x.extra_model_calls.to_string()),
            width,
        );
        row(
            &mut out,
            "cost/step OpenAI-style",
            f(&|x| format!("{:.0}", x.cost_per_step.openai_style)),
            width,
        );
        row(
            &mut out,
            "cost/step Anthropic-style",
            f(&|x| format!("{:.0}", x.cost_per_step.anthropic_style)),
            width,
        );
        row(
            &mut out,
            "prefix ratio mean",
            f(&|x| format!("{:.3}", x.prefix_ratio_mean)),
            width,
        );
        row(
            &mut out,
            "prefix ratio p10",
            f(&|x| format!("{:.3}", x.prefix_ratio_p10)),
            width,
        );
        row(
            &mut out,
            "peak request tokens",
            f(&|x| x.peak_request_tokens.to_string()),
            width,
        );
        row(
            &mut out,
            "rotations",
            f(&|x| x.rotations.to_string()),
            width,
        );
        for (i, fact) in FACTS.iter().enumerate() {
            row(
                &mut out,
                &format!("fact: {}", fact.label),
                f(&|x| {
                    x.facts
                        .get(i)
                        .map_or("-".into(), |(_, s)| s.word().to_string())
                }),
                width,
            );
        }
        row(
            &mut out,
            "time",
            f(&|x| format!("{:.1} s", x.seconds)),
            width,
        );
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
