//! The replay report as text: one column for the recording and one per
//! engine, the approximation note, and each request's tokens.

use super::kept::Share;
use super::report::{
    APPROXIMATION, EngineReplay, EngineSummary, Outcome, ProviderReport, REDACTED_NOTE,
    ReplayReport,
};
use crate::compare::report::heading;
use std::fmt::Write;

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
    use crate::compare::replay::kept::{Kept, Reuse, Standing};
    use crate::compare::replay::pricing::Priced;
    use crate::compare::replay::report::{
        ExtraRequest, RecordedRequest, ReplayedRequest, RereferenceOutcome, SessionLine,
    };

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
