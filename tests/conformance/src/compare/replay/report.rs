//! The replay's report: what the recorded session sent, then one column
//! per engine with what it would have sent and kept, as a text table or
//! JSON, and each request's figures for whoever wants them.

use super::kept::{Kept, Reuse, Share, Standing, Standings};
use super::pricing::Priced;
use crate::compare::report::heading;
use serde::Serialize;
use std::fmt::Write;

/// The sentence every replay prints: the model's answers are the recorded
/// ones, whatever each engine would have shown it.
pub const APPROXIMATION: &str = "The model's recorded responses are replayed as they were; \
each engine's view is what it would have sent, but the model would have seen a different view, \
so later turns are an approximation.";

/// The sentence a replay of a redacted source adds.
pub const REDACTED_NOTE: &str = "Redacted: output is placeholders, so `recall` cannot find \
it by its words and re-referenced results it would recall count as lost.";

/// What became of one request of the session for one engine.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// The engine returned a view the host accepts.
    Viewed {
        /// Its price.
        priced: Priced,
        /// Its price in dollars, where the model is priced.
        dollars: Option<f64>,
        /// The epoch generation it reported.
        generation: Option<u64>,
        /// What it kept.
        kept: Kept,
    },
    /// The host's view checks refused the view.
    Refused {
        /// The refusal, as the host words it.
        error: String,
    },
    /// The engine failed (an error of its own, a trap, a timeout).
    Failed {
        /// The failure.
        error: String,
    },
}

/// A model request an engine made of its own (a summary).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ExtraRequest {
    /// Its price.
    pub priced: Priced,
    /// In dollars, where the model is priced.
    pub dollars: Option<f64>,
}

/// One recorded request, replayed through one engine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayedRequest {
    /// The session (index into [`ReplayReport::sessions`]).
    pub session: usize,
    /// The request's index in its session.
    pub request: usize,
    /// What the engine did.
    pub outcome: Outcome,
    /// Requests the engine made of its own while building this view.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<ExtraRequest>,
}

/// Where one re-referenced result stood for one engine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RereferenceOutcome {
    /// The session (index into [`ReplayReport::sessions`]).
    pub session: usize,
    /// The request whose response came back to the result.
    pub request: usize,
    /// The result's sequence number in the recorded log.
    pub result_seq: u64,
    /// How the model came back to it.
    pub how: Reuse,
    /// Where it stood.
    pub standing: Standing,
}

/// One engine's replay of every session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineReplay {
    /// The engine as given.
    pub engine: String,
    /// Every request, in session order.
    pub requests: Vec<ReplayedRequest>,
    /// Every re-reference, in order.
    pub rereferences: Vec<RereferenceOutcome>,
    /// Wall-clock seconds of the replay (engine calls and the host's
    /// checks).
    pub seconds: f64,
}

/// What the provider reported for a recorded request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProviderReport {
    /// Input tokens, cached or not.
    pub input_tokens: Option<u64>,
    /// Of those, read from the prompt cache.
    pub cache_read_tokens: Option<u64>,
    /// Written to the prompt cache.
    pub cache_creation_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
}

impl ProviderReport {
    /// Uncached + 0.1 × cache reads, from the provider's counts.
    pub fn cost_units(&self) -> Option<f64> {
        let input = self.input_tokens?;
        let read = self.cache_read_tokens.unwrap_or(0);
        Some(input.saturating_sub(read) as f64 + 0.1 * read as f64)
    }
}

/// One request as it was recorded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecordedRequest {
    /// The session (index into [`ReplayReport::sessions`]).
    pub session: usize,
    /// The request's index in its session.
    pub request: usize,
    /// The engine that served it.
    pub engine: String,
    /// The recorded engine's own estimate of the request (its report's
    /// total), when recorded.
    pub estimated_tokens: Option<u64>,
    /// What the provider reported, when it answered.
    pub provider: Option<ProviderReport>,
    /// What it cost in dollars by the provider's counts, where priced.
    pub dollars: Option<f64>,
}

/// One replayed session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionLine {
    /// Its id.
    pub id: String,
    /// Its parent, for a child agent.
    pub parent: Option<String>,
    /// The model it talked to.
    pub model: String,
    /// Its recorded model requests.
    pub requests: usize,
    /// The context window of its first request.
    pub window_tokens: u64,
    /// The reserve of its first request.
    pub reserve_tokens: u64,
}

/// The whole replay.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayReport {
    /// What was replayed (`store PATH` or `trace FILE`).
    pub source: String,
    /// True when the source was redacted (file contents and command output
    /// replaced by same-length placeholders).
    pub redacted: bool,
    /// [`APPROXIMATION`].
    pub note: &'static str,
    /// The sessions, the root first.
    pub sessions: Vec<SessionLine>,
    /// Every recorded request, in the engines' order.
    pub recorded: Vec<RecordedRequest>,
    /// Re-references found in the recorded log.
    pub rereferences: usize,
    /// One replay per engine, in the order given.
    pub engines: Vec<EngineReplay>,
}

/// An engine's replay summed up.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EngineSummary {
    /// Requests with a view.
    pub viewed: usize,
    /// Views the host refused.
    pub refused: usize,
    /// Requests the engine failed.
    pub failed: usize,
    /// Model requests the engine made of its own.
    pub extra_calls: usize,
    /// Mean canonical tokens of a viewed request.
    pub mean_tokens: f64,
    /// The largest request (extra requests included).
    pub peak_tokens: u64,
    /// Cached share of all tokens sent (extra requests included).
    pub cached_share: f64,
    /// Uncached tokens per recorded request (extra requests included).
    pub uncached_per_request: f64,
    /// Cost units per recorded request (extra requests included).
    pub cost_units_per_request: f64,
    /// Dollars in all, when every request is priced.
    pub dollars: Option<f64>,
    /// How often the epoch generation changed between views.
    pub rotations: usize,
    /// What the views kept, summed over requests.
    pub kept: Kept,
    /// Where the re-referenced results stood.
    pub standings: Standings,
    /// Milliseconds per request.
    pub ms_per_request: f64,
}

impl EngineReplay {
    /// The replay summed up.
    pub fn summary(&self) -> EngineSummary {
        let mut s = EngineSummary::default();
        let (mut tokens, mut prefix, mut uncached, mut units) = (0u64, 0u64, 0u64, 0f64);
        let mut viewed_tokens = 0u64;
        let mut dollars = Some(0.0);
        let mut last_generation: Option<(usize, u64)> = None;
        let mut add = |p: &Priced, d: Option<f64>, s: &mut EngineSummary| {
            tokens += p.tokens;
            prefix += p.prefix_tokens;
            uncached += p.uncached();
            units += p.cost_units();
            s.peak_tokens = s.peak_tokens.max(p.tokens);
            dollars = dollars.zip(d).map(|(a, b)| a + b);
        };
        for r in &self.requests {
            s.extra_calls += r.extra.len();
            for x in &r.extra {
                add(&x.priced, x.dollars, &mut s);
            }
            match &r.outcome {
                Outcome::Viewed {
                    priced,
                    dollars: d,
                    generation,
                    kept,
                } => {
                    s.viewed += 1;
                    viewed_tokens += priced.tokens;
                    add(priced, *d, &mut s);
                    s.kept.add(kept);
                    if let Some(g) = generation {
                        if matches!(last_generation, Some((session, last)) if session == r.session && last != *g)
                        {
                            s.rotations += 1;
                        }
                        last_generation = Some((r.session, *g));
                    }
                }
                Outcome::Refused { .. } => s.refused += 1,
                Outcome::Failed { .. } => s.failed += 1,
            }
        }
        let n = self.requests.len().max(1) as f64;
        s.mean_tokens = viewed_tokens as f64 / s.viewed.max(1) as f64;
        s.cached_share = if tokens == 0 {
            0.0
        } else {
            prefix as f64 / tokens as f64
        };
        s.uncached_per_request = uncached as f64 / n;
        s.cost_units_per_request = units / n;
        s.dollars = dollars;
        for r in &self.rereferences {
            s.standings.add(r.standing);
        }
        s.ms_per_request = self.seconds * 1000.0 / n;
        s
    }
}

fn percent(share: Share) -> String {
    match share.percent() {
        Some(p) => format!("{p:.0}%"),
        None => "-".into(),
    }
}

fn dollars(d: Option<f64>) -> String {
    match d {
        Some(d) if d < 10.0 => format!("${d:.4}"),
        Some(d) => format!("${d:.2}"),
        None => "unpriced".into(),
    }
}

const LABEL: usize = 36;

fn row(out: &mut String, label: &str, cells: &[String], widths: &[usize]) {
    let _ = write!(out, "{label:<LABEL$}");
    for (c, width) in cells.iter().zip(widths) {
        let _ = write!(out, " {c:>width$}");
    }
    out.push('\n');
}

impl ReplayReport {
    /// The recorded column's figures: requests, the recorded engine's own
    /// estimates, and what the provider reported.
    fn recorded_cells(&self) -> RecordedCells {
        let n = self.recorded.len();
        let estimates: Vec<u64> = self
            .recorded
            .iter()
            .filter_map(|r| r.estimated_tokens)
            .collect();
        let reports: Vec<&ProviderReport> = self
            .recorded
            .iter()
            .filter_map(|r| r.provider.as_ref())
            .collect();
        let input: u64 = reports.iter().filter_map(|p| p.input_tokens).sum();
        let read: u64 = reports.iter().filter_map(|p| p.cache_read_tokens).sum();
        let units: Option<f64> = reports.iter().map(|p| p.cost_units()).sum();
        let dollars: Option<f64> = self.recorded.iter().map(|r| r.dollars).sum();
        RecordedCells {
            requests: n.to_string(),
            mean: if estimates.is_empty() {
                "-".into()
            } else {
                format!(
                    "{:.0}",
                    estimates.iter().sum::<u64>() as f64 / estimates.len() as f64
                )
            },
            peak: estimates.iter().max().map_or("-".into(), |p| p.to_string()),
            cached: if input == 0 {
                "-".into()
            } else {
                format!("{:.3}", read as f64 / input as f64)
            },
            units: units
                .filter(|_| !reports.is_empty())
                .map_or("-".into(), |u| format!("{:.0}", u / n.max(1) as f64)),
            dollars: if reports.is_empty() {
                "-".into()
            } else {
                self::dollars(dollars)
            },
        }
    }

    /// The report as a text table: a header, the approximation note, one
    /// column for the recording and one per engine.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let root = self.sessions.first();
        let requests: usize = self.sessions.iter().map(|s| s.requests).sum();
        let _ = writeln!(
            out,
            "replay of {}{} · {} session{} · {} requests · {} · window {} · reserve {}",
            self.source,
            if self.redacted { " (redacted)" } else { "" },
            self.sessions.len(),
            if self.sessions.len() == 1 { "" } else { "s" },
            requests,
            root.map_or("-", |s| s.model.as_str()),
            root.map_or("-".into(), |s| crate::compare::report::short_tokens(
                s.window_tokens
            )),
            root.map_or("-".into(), |s| crate::compare::report::short_tokens(
                s.reserve_tokens
            )),
        );
        let _ = writeln!(out, "{APPROXIMATION}");
        if self.redacted {
            let _ = writeln!(out, "{REDACTED_NOTE}");
        }
        out.push('\n');
        let summaries: Vec<EngineSummary> =
            self.engines.iter().map(EngineReplay::summary).collect();
        let mut headings = vec!["recorded".to_string()];
        headings.extend(self.engines.iter().map(|e| heading(&e.engine).to_string()));
        let widths: Vec<usize> = headings.iter().map(|h| h.chars().count().max(10)).collect();
        let rec = self.recorded_cells();
        row(&mut out, "", &headings, &widths);
        let line = |out: &mut String,
                    label: &str,
                    recorded: String,
                    f: &dyn Fn(&EngineSummary) -> String| {
            let mut cells = vec![recorded];
            cells.extend(summaries.iter().map(f));
            row(out, label, &cells, &widths);
        };
        line(&mut out, "requests", rec.requests.clone(), &|s| {
            s.viewed.to_string()
        });
        line(&mut out, "extra model calls", "-".into(), &|s| {
            s.extra_calls.to_string()
        });
        line(&mut out, "request tokens mean", rec.mean.clone(), &|s| {
            format!("{:.0}", s.mean_tokens)
        });
        line(&mut out, "peak request tokens", rec.peak.clone(), &|s| {
            s.peak_tokens.to_string()
        });
        line(&mut out, "cached share", rec.cached.clone(), &|s| {
            format!("{:.3}", s.cached_share)
        });
        line(&mut out, "uncached tokens/request", "-".into(), &|s| {
            format!("{:.0}", s.uncached_per_request)
        });
        line(&mut out, "cost units/request", rec.units.clone(), &|s| {
            format!("{:.0}", s.cost_units_per_request)
        });
        line(&mut out, "input cost", rec.dollars.clone(), &|s| {
            dollars(s.dollars)
        });
        line(&mut out, "rotations", "-".into(), &|s| {
            s.rotations.to_string()
        });
        line(&mut out, "refused views", "-".into(), &|s| {
            s.refused.to_string()
        });
        line(&mut out, "engine failures", "-".into(), &|s| {
            s.failed.to_string()
        });
        line(&mut out, "user messages in view", "-".into(), &|s| {
            percent(s.kept.user_messages)
        });
        line(&mut out, "constraints in view", "-".into(), &|s| {
            percent(s.kept.constraints)
        });
        line(&mut out, "decisions in view", "-".into(), &|s| {
            percent(s.kept.decisions)
        });
        let _ = writeln!(out, "re-referenced results ({}):", self.rereferences);
        line(&mut out, "  in view", "-".into(), &|s| {
            s.standings.in_view.to_string()
        });
        line(&mut out, "  only recallable", "-".into(), &|s| {
            s.standings.recallable.to_string()
        });
        line(&mut out, "  lost", "-".into(), &|s| {
            s.standings.lost.to_string()
        });
        line(&mut out, "time/request", "-".into(), &|s| {
            format!("{:.1} ms", s.ms_per_request)
        });
        for e in &self.engines {
            let first = e.requests.iter().find_map(|r| match &r.outcome {
                Outcome::Refused { error } | Outcome::Failed { error } => {
                    Some((r.session, r.request, error))
                }
                Outcome::Viewed { .. } => None,
            });
            if let Some((session, request, error)) = first {
                let _ = writeln!(
                    out,
                    "{}: first refusal or failure at session {session} request {request}: {error}",
                    e.engine
                );
            }
        }
        out
    }

    /// Each request's canonical tokens, one row per request: the recorded
    /// engine's own estimate, then each engine's (`refused`, `failed`).
    pub fn per_request_table(&self) -> String {
        let mut out = String::new();
        let mut headings = vec!["recorded".to_string()];
        headings.extend(self.engines.iter().map(|e| heading(&e.engine).to_string()));
        let widths: Vec<usize> = headings.iter().map(|h| h.chars().count().max(10)).collect();
        row(&mut out, "session/request", &headings, &widths);
        for (i, r) in self.recorded.iter().enumerate() {
            let mut cells = vec![r.estimated_tokens.map_or("-".into(), |t| t.to_string())];
            for e in &self.engines {
                cells.push(match e.requests.get(i).map(|x| &x.outcome) {
                    Some(Outcome::Viewed { priced, .. }) => {
                        format!("{} ({:.0}%)", priced.tokens, 100.0 * priced.prefix_ratio())
                    }
                    Some(Outcome::Refused { .. }) => "refused".into(),
                    Some(Outcome::Failed { .. }) => "failed".into(),
                    None => "-".into(),
                });
            }
            row(
                &mut out,
                &format!("{}/{}", r.session, r.request),
                &cells,
                &widths,
            );
        }
        out
    }
}

struct RecordedCells {
    requests: String,
    mean: String,
    peak: String,
    cached: String,
    units: String,
    dollars: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn viewed(tokens: u64, prefix: u64, generation: u64, users: (u64, u64)) -> Outcome {
        Outcome::Viewed {
            priced: Priced {
                tokens,
                prefix_tokens: prefix,
            },
            dollars: Some(0.01),
            generation: Some(generation),
            kept: Kept {
                user_messages: Share {
                    visible: users.0,
                    total: users.1,
                },
                ..Kept::default()
            },
        }
    }

    fn request(i: usize, outcome: Outcome) -> ReplayedRequest {
        ReplayedRequest {
            session: 0,
            request: i,
            outcome,
            extra: vec![],
        }
    }

    #[test]
    fn the_summary_adds_up_requests_extra_calls_and_survival() {
        let mut e = EngineReplay {
            engine: "engines/window.wasm".into(),
            requests: vec![
                request(0, viewed(1000, 0, 0, (1, 1))),
                request(1, viewed(1500, 1000, 0, (1, 1))),
                request(2, viewed(800, 200, 1, (1, 2))),
                request(
                    3,
                    Outcome::Refused {
                        error: "hard budget".into(),
                    },
                ),
            ],
            rereferences: vec![RereferenceOutcome {
                session: 0,
                request: 2,
                result_seq: 7,
                how: Reuse::Repeated,
                standing: Standing::Recallable,
            }],
            seconds: 0.004,
        };
        e.requests[2].extra.push(ExtraRequest {
            priced: Priced {
                tokens: 2000,
                prefix_tokens: 1500,
            },
            dollars: None,
        });
        let s = e.summary();
        assert_eq!((s.viewed, s.refused, s.failed, s.extra_calls), (3, 1, 0, 1));
        assert_eq!(s.peak_tokens, 2000);
        assert_eq!(s.mean_tokens, 1100.0);
        assert_eq!(s.rotations, 1);
        assert!((s.cached_share - 2700.0 / 5300.0).abs() < 1e-12);
        assert_eq!(
            s.uncached_per_request,
            (1000 + 500 + 600 + 500) as f64 / 4.0
        );
        assert_eq!(
            s.dollars, None,
            "one unpriced request makes the total unknown"
        );
        assert_eq!(
            s.kept.user_messages,
            Share {
                visible: 3,
                total: 4
            }
        );
        assert_eq!(s.standings.recallable, 1);
        assert_eq!(s.ms_per_request, 1.0);

        let report = ReplayReport {
            source: "trace steps80.jsonl".into(),
            redacted: false,
            note: APPROXIMATION,
            sessions: vec![SessionLine {
                id: "s1".into(),
                parent: None,
                model: "claude-sonnet-4-5".into(),
                requests: 4,
                window_tokens: 32_000,
                reserve_tokens: 8_000,
            }],
            recorded: (0..4)
                .map(|i| RecordedRequest {
                    session: 0,
                    request: i,
                    engine: "builtin:continuity".into(),
                    estimated_tokens: Some(1000 + i as u64),
                    provider: Some(ProviderReport {
                        input_tokens: Some(1000),
                        cache_read_tokens: Some(500),
                        ..ProviderReport::default()
                    }),
                    dollars: Some(0.001),
                })
                .collect(),
            rereferences: 1,
            engines: vec![e],
        };
        let t = report.table();
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("replay of trace steps80.jsonl · 1 session · 4 requests"),
            "{t}"
        );
        assert_eq!(lines[1], APPROXIMATION);
        let cells = |label: &str| -> Vec<String> {
            let l = lines.iter().find(|l| l.starts_with(label)).unwrap();
            l[LABEL..].split_whitespace().map(str::to_string).collect()
        };
        assert_eq!(cells("requests"), ["4", "3"]);
        assert_eq!(cells("peak request tokens"), ["1003", "2000"]);
        assert_eq!(cells("cached share"), ["0.500", "0.509"]);
        assert_eq!(cells("cost units/request"), ["550", "718"]);
        assert_eq!(cells("user messages in view"), ["-", "75%"]);
        assert_eq!(cells("  only recallable"), ["-", "1"]);
        assert!(t.contains(
            "engines/window.wasm: first refusal or failure at session 0 request 3: hard budget"
        ));
        assert!(!t.contains(REDACTED_NOTE));
        let mut redacted = report.clone();
        redacted.redacted = true;
        let r = redacted.table();
        assert!(r.lines().next().unwrap().contains("(redacted)"));
        assert_eq!(r.lines().nth(2), Some(REDACTED_NOTE));
        let per = report.per_request_table();
        assert!(per.lines().nth(2).unwrap().ends_with("1500 (67%)"), "{per}");
        assert!(per.lines().nth(4).unwrap().ends_with("refused"), "{per}");
    }
}
