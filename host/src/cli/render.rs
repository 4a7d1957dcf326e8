//! Plain-text rendering of durable events, recalled events and the `/context`
//! report for the terminal.

pub use crate::engine::display::{MAX_PRINTED_CHARS, terminal_safe};
use latch_engine_sdk::types::*;
use latch_kernel::EventKind;

/// An error for the terminal: each of its lines escaped (it may carry an
/// engine's or a provider's words) and the whole cut to `max_chars`, with
/// the line breaks kept real so a multi-line message reads as written.
pub fn error_text(text: &str, max_chars: usize) -> String {
    let text = text.trim_end();
    let mut left = max_chars;
    let mut lines = Vec::new();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let n = line.chars().count();
        if n > left {
            let kept: String = line.chars().take(left).collect();
            let shown: usize = max_chars + lines.len();
            let rest = text.chars().count().saturating_sub(shown);
            lines.push(format!(
                "{}… [cut: {rest} more characters]",
                terminal_safe(&kept, left)
            ));
            break;
        }
        left -= n;
        lines.push(terminal_safe(line, n));
    }
    lines.join("\n")
}

/// What an assistant message with neither text nor tool calls shows.
pub const EMPTY_ANSWER: &str = "● (the model returned an empty answer)";

/// One transcript line for a committed event, or none for bookkeeping the
/// user does not need to see.
pub fn event_line(event: &EventKind) -> Option<String> {
    match event {
        EventKind::UserMessage { parts } => Some(format!("\n› {}", parts_text(parts))),
        EventKind::AssistantMessage { parts } => {
            let mut lines = Vec::new();
            for p in parts {
                match p {
                    Part::Text(t) if !t.trim().is_empty() => lines.push(format!("● {}", t.trim())),
                    Part::ToolCall(c) => {
                        lines.push(format!("  ↳ {} {}", c.name, clip(&c.arguments_json, 160)))
                    }
                    _ => {}
                }
            }
            // Said, not left as silence that looks like a hang or a bug.
            if lines.is_empty() {
                lines.push(EMPTY_ANSWER.to_string());
            }
            Some(lines.join("\n"))
        }
        EventKind::ToolResult(r) => {
            let first = r.content.lines().next().unwrap_or("");
            let mark = if r.is_error { "✗" } else { "✓" };
            Some(format!("    {mark} {}: {}", r.name, clip(first, 160)))
        }
        EventKind::CertificationAttempt {
            outcome, blockers, ..
        } => Some(format!(
            "  ◆ certification {:?}{}",
            outcome,
            if blockers.is_empty() {
                String::new()
            } else {
                format!(": {}", blockers.join("; "))
            }
        )),
        EventKind::RunInterrupted { reason } => Some(format!(
            "  ! run interrupted: {}",
            terminal_safe(reason, 4 * MAX_PRINTED_CHARS)
        )),
        EventKind::ManualCompact => Some("  ◇ working memory reset (/compact)".into()),
        EventKind::HookRan { .. } => Some(format!(
            "  ◇ hook {}",
            terminal_safe(&latch_surface::hook_text(event), MAX_PRINTED_CHARS)
        )),
        EventKind::Reground { .. } => latch_surface::reground_text(event)
            .map(|s| format!("  ↺ re-ground: {}", terminal_safe(&s, MAX_PRINTED_CHARS))),
        EventKind::Rewound { .. } => latch_kernel::rewound_summary(event)
            .map(|s| format!("  ◇ {}", terminal_safe(&s, 4 * MAX_PRINTED_CHARS))),
        EventKind::SessionProfile(p) => p.change_text().map(|text| {
            format!(
                "  {} {}",
                if p.loosens() { "!" } else { "◇" },
                terminal_safe(&text, 4 * MAX_PRINTED_CHARS)
            )
        }),
        EventKind::PermissionGranted {
            subject, by, scope, ..
        } => Some(format!(
            "    ✓ allowed by {}{}: {}",
            by.label(),
            if *scope == latch_kernel::GrantScope::Session {
                " (always, this session)"
            } else {
                ""
            },
            clip(&terminal_safe(subject, MAX_PRINTED_CHARS), 160)
        )),
        EventKind::PermissionDenied {
            subject,
            by,
            reason,
            ..
        } => Some(format!(
            "    ✗ denied by {}: {} ({})",
            by.label(),
            clip(&terminal_safe(subject, MAX_PRINTED_CHARS), 160),
            clip(&terminal_safe(reason, MAX_PRINTED_CHARS), 200)
        )),
        _ => None,
    }
}

/// Only the tool calls of an assistant message (its text was streamed).
pub fn tool_calls_line(parts: &[Part]) -> Option<String> {
    let lines: Vec<String> = parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall(c) => Some(format!("  ↳ {} {}", c.name, clip(&c.arguments_json, 160))),
            _ => None,
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

fn parts_text(parts: &[Part]) -> String {
    parts.iter().map(render_part).collect::<Vec<_>>().join(" ")
}

fn render_part(p: &Part) -> String {
    latch_engine_sdk::render_part_text(p)
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// Recalled events, chronological (an engine's answer: escaped).
pub fn recalled(events: &[Event]) -> String {
    if events.is_empty() {
        return "no matching events\n".into();
    }
    let mut out = String::new();
    for e in events {
        let text = latch_engine_sdk::event_search_text(&e.body);
        out.push_str(&format!(
            "#{:<6} {}\n",
            e.seq,
            terminal_safe(&text.replace('\n', " ⏎ "), 200)
        ));
    }
    out
}

/// A millisecond timestamp as UTC `YYYY-MM-DD HH:MM`.
pub fn time(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let (h, m) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if mo <= 2 { 1 } else { 0 };
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{m:02}")
}

fn pct(v: Option<f64>) -> String {
    match v {
        Some(v) => format!("{:.1}%", v * 100.0),
        None => "unknown".into(),
    }
}

/// The `/context` report as a table. Every figure is an estimate (≈) except
/// the provider-reported rates.
pub fn report_table(r: &ContextReport) -> String {
    let mut s = String::new();
    let row = |s: &mut String, k: &str, v: String| s.push_str(&format!("  {k:<34} {v}\n"));
    s.push_str(&format!(
        "context report · {} · status {}\n",
        terminal_safe(&r.engine, 200),
        terminal_safe(&r.status, 200)
    ));
    row(
        &mut s,
        "instructions",
        format!("≈{}", r.instructions_tokens),
    );
    row(&mut s, "canonical state", format!("≈{}", r.state_tokens));
    row(
        &mut s,
        "recent working memory",
        format!(
            "≈{} (images {} ≈{})",
            r.recent_tokens, r.image_count, r.image_tokens
        ),
    );
    row(
        &mut s,
        "recall (incl. episode index)",
        format!("≈{} (index ≈{})", r.recall_tokens, r.episode_tokens),
    );
    row(&mut s, "tool schemas", format!("≈{}", r.tools_tokens));
    row(&mut s, "extensions", format!("≈{}", r.extension_tokens));
    row(
        &mut s,
        "total",
        format!(
            "≈{} of {} (reserve {}, headroom ≈{})",
            r.total_tokens, r.limit_tokens, r.reserve_tokens, r.headroom_tokens
        ),
    );
    row(
        &mut s,
        "first retained event",
        r.first_retained_seq
            .map(|v| format!("#{v}"))
            .unwrap_or("none".into()),
    );
    row(
        &mut s,
        "left working memory since last",
        format!("≈{}", r.evicted_tokens),
    );
    row(
        &mut s,
        "events / episodes (shown)",
        format!(
            "{} / {} ({})",
            r.event_count, r.episode_count, r.episodes_shown
        ),
    );
    row(
        &mut s,
        "cache epoch",
        match r.epoch_generation {
            Some(g) => format!(
                "generation {g}, {} user turns, last rotation: {} (≈{} retained)",
                r.epoch_user_turns,
                terminal_safe(r.rotation_reason.as_deref().unwrap_or("none"), 400),
                r.retained_after_rotation_tokens
            ),
            None => "not kept by this engine".into(),
        },
    );
    let cacheability = if r.request_tokens > 0 {
        Some(r.common_prefix_tokens as f64 / r.request_tokens as f64)
    } else {
        None
    };
    row(
        &mut s,
        "estimated cacheability",
        format!(
            "{} (≈{} of ≈{} tokens)",
            pct(cacheability),
            r.common_prefix_tokens,
            r.request_tokens
        ),
    );
    row(
        &mut s,
        "provider prefix utilization",
        pct(r.provider_prefix_utilization),
    );
    row(
        &mut s,
        "measured provider cache hit rate",
        pct(r.measured_hit_rate),
    );
    s
}

/// The provider's side of `/context`: what it reported for the last
/// request (every figure labelled, "unknown" when it did not say), Latch's
/// estimate of that same request, and the calibration ratio.
pub fn provider_table(f: &crate::agent::ProviderFigures) -> String {
    let mut s = String::new();
    let row = |s: &mut String, k: &str, v: String| s.push_str(&format!("  {k:<34} {v}\n"));
    let n = |v: Option<u64>| v.map_or("unknown".to_string(), |v| v.to_string());
    s.push_str(&format!(
        "provider figures · {} · {}{}\n",
        terminal_safe(&f.provider, 100),
        terminal_safe(&f.model, 200),
        if f.base_url.is_empty() {
            String::new()
        } else {
            format!(" · {}", terminal_safe(&f.base_url, 200))
        }
    ));
    let reported_nothing = f.last.is_some_and(|u| {
        u.input_tokens.is_none()
            && u.output_tokens.is_none()
            && u.cache_read_tokens.is_none()
            && u.cache_creation_tokens.is_none()
            && u.reasoning_tokens.is_none()
    });
    match &f.last {
        None => row(&mut s, "last request (provider)", "none yet".into()),
        // Said once, not as a column of "unknown" that looks like a bug.
        Some(_) if reported_nothing => row(
            &mut s,
            "last request (provider)",
            format!(
                "the server reported no usage (Latch estimated ≈{}); figures and \
                 calibration come only from servers that send `usage` while streaming",
                n(f.last_estimated_input_tokens)
            ),
        ),
        Some(u) => {
            row(
                &mut s,
                "last request input (provider)",
                format!(
                    "{} (Latch estimated ≈{})",
                    n(u.input_tokens),
                    n(f.last_estimated_input_tokens)
                ),
            );
            row(&mut s, "last request output", n(u.output_tokens));
            row(&mut s, "last request cache read", n(u.cache_read_tokens));
            row(
                &mut s,
                "last request cache write",
                n(u.cache_creation_tokens),
            );
            row(&mut s, "last request reasoning", n(u.reasoning_tokens));
        }
    }
    row(
        &mut s,
        "calibration (provider ÷ estimate)",
        match f.calibration {
            Some(c) => format!(
                "{:.3} over {} requests{}",
                c.ratio,
                c.samples,
                if c.ratio > 1.0 {
                    " (budget tightened)"
                } else {
                    " (estimator kept)"
                }
            ),
            None if reported_nothing => "none (no usage reported)".into(),
            None => "unknown".into(),
        },
    );
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn provider_figures_label_every_figure_and_say_unknown() {
        use crate::agent::ProviderFigures;
        use crate::agent::calibration::Calibration;
        let none = super::provider_table(&ProviderFigures {
            provider: "openai".into(),
            model: "gpt-test".into(),
            ..ProviderFigures::default()
        });
        assert!(
            none.contains("none yet") && none.contains("calibration"),
            "{none}"
        );
        assert!(none.lines().last().unwrap().ends_with("unknown"), "{none}");
        let some = super::provider_table(&ProviderFigures {
            provider: "anthropic".into(),
            model: "m".into(),
            last: Some(latch_provider::Usage {
                input_tokens: Some(1300),
                output_tokens: Some(20),
                cache_read_tokens: None,
                cache_creation_tokens: None,
                cache_miss_tokens: None,
                reasoning_tokens: Some(7),
            }),
            last_estimated_input_tokens: Some(1000),
            calibration: Some(Calibration {
                ratio: 1.3,
                samples: 4,
            }),
            base_url: "https://api.anthropic.com".into(),
        });
        assert!(
            some.starts_with("provider figures · anthropic · m · https://api.anthropic.com"),
            "{some}"
        );
        assert!(some.contains("1300 (Latch estimated ≈1000)"), "{some}");
        assert!(
            some.lines()
                .any(|l| l.contains("cache read") && l.ends_with("unknown")),
            "{some}"
        );
        assert!(
            some.lines()
                .any(|l| l.contains("reasoning") && l.ends_with(" 7"))
        );
        assert!(
            some.contains("1.300 over 4 requests (budget tightened)"),
            "{some}"
        );
    }

    #[test]
    fn an_empty_answer_says_so() {
        use latch_engine_sdk::types::Part;
        use latch_kernel::EventKind;
        for parts in [vec![], vec![Part::Text("  \n".into())]] {
            assert_eq!(
                super::event_line(&EventKind::AssistantMessage { parts }).as_deref(),
                Some(super::EMPTY_ANSWER)
            );
        }
    }

    #[test]
    fn a_server_that_reports_no_usage_is_said_once() {
        use crate::agent::ProviderFigures;
        let silent = super::provider_table(&ProviderFigures {
            provider: "openai-compatible".into(),
            model: "gemma".into(),
            last: Some(latch_provider::Usage::default()),
            last_estimated_input_tokens: Some(812),
            ..ProviderFigures::default()
        });
        assert!(
            silent.contains("the server reported no usage (Latch estimated ≈812)"),
            "{silent}"
        );
        assert!(!silent.contains("unknown"), "{silent}");
        assert!(silent.contains("none (no usage reported)"), "{silent}");
    }

    #[test]
    fn a_reground_is_one_line_and_a_pending_mutation_none() {
        use latch_kernel::{EventKind, REFUSALS_IN_A_ROW};
        let line = |lineage: &str, count: u32| {
            super::event_line(&EventKind::Reground {
                reason: "for the model".into(),
                lineage: lineage.into(),
                count,
            })
        };
        assert_eq!(
            line(REFUSALS_IN_A_ROW, 2).as_deref(),
            Some("  ↺ re-ground: completion refused twice in a row — the agent re-reads the task")
        );
        assert_eq!(
            line("validation:sh test.sh", 3).as_deref(),
            Some("  ↺ re-ground: validation `sh test.sh` failed again (3×)")
        );
        // A lineage names what the model ran: escaped for the terminal.
        let hostile = line("validation:echo \u{1b}[2J", 2).unwrap();
        assert!(!hostile.contains('\u{1b}'), "{hostile:?}");
        assert_eq!(
            super::event_line(&EventKind::MutationPending {
                source: "shell".into(),
                command: Some("make".into()),
                snapshot: None,
            }),
            None
        );
    }

    #[test]
    fn time_formats_utc() {
        assert_eq!(super::time(0), "1970-01-01 00:00");
        assert_eq!(super::time(1_700_000_000_000), "2023-11-14 22:13");
    }
}
