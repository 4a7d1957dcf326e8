//! A session written out, for a person or for a program:
//!
//! * [`markdown`] — the transcript as Markdown a person can read: user and
//!   assistant turns as text, every tool call folded in a `<details>` block
//!   with its output, edits shown as ```` ```diff ```` blocks, validations,
//!   notifications, re-grounds and epoch dividers as short lines;
//! * [`json`] — the durable events as stored (`{seq, time_ms, event}` with
//!   `event` as `{"kind", "data"}`), under a versioned envelope. Opaque
//!   provider state (signed thinking, encrypted reasoning) is reduced to
//!   the fact that it was reported, as the web does.
//!
//! Both are pure functions of the session's record and its own events, so
//! `latch export` and an `/export` slash command write the same thing.

use crate::transcript::{DiffLine, DividerKind, Item, ToolStatus, Transcript};
use latch_kernel::{EventKind, StoredEvent};
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt::Write;

/// The `format` of a JSON export.
pub const JSON_FORMAT: &str = "latch-session";
/// The version of the JSON export's envelope.
pub const JSON_VERSION: u32 = 1;

/// What an export says about the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionHeader {
    /// The session id.
    pub id: String,
    /// Its parent, for a child agent.
    pub parent: Option<String>,
    /// Its workspace.
    pub workspace: String,
    /// Its provider.
    pub provider: String,
    /// Its model.
    pub model: String,
    /// When it was created (milliseconds since the Unix epoch).
    pub created_ms: u64,
}

/// `ms` since the Unix epoch as `YYYY-MM-DD HH:MM UTC`.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let (h, m) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{m:02} UTC")
}

/// A code fence longer than any run of backticks in `text`.
fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat(longest.max(2) + 1)
}

/// `text` in a fenced code block of `lang`.
fn code(out: &mut String, lang: &str, text: &str) {
    let f = fence(text);
    let _ = writeln!(out, "{f}{lang}\n{}\n{f}\n", text.trim_end_matches('\n'));
}

/// `text` safe inside HTML (a `<summary>`).
fn html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `text` as a Markdown block quote.
fn quote(text: &str) -> String {
    text.lines()
        .map(|l| format!("> {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn status(s: ToolStatus) -> &'static str {
    match s {
        ToolStatus::Pending => "no result",
        ToolStatus::Done => "done",
        ToolStatus::Failed => "failed",
        ToolStatus::Interrupted => "interrupted",
    }
}

/// The session as Markdown: a header, then the transcript of `events` (the
/// session's own events, in order).
pub fn markdown(header: &SessionHeader, events: &[StoredEvent]) -> String {
    let mut t = Transcript::default();
    for e in events.iter().filter(|e| e.session == header.id) {
        t.apply(e.seq, &e.kind);
    }
    let mut out = format!("# Latch session {}\n\n", header.id);
    let _ = writeln!(out, "- workspace: `{}`", header.workspace);
    let _ = writeln!(out, "- model: {} ({})", header.model, header.provider);
    let _ = writeln!(out, "- started: {}", utc(header.created_ms));
    if let Some(p) = &header.parent {
        let _ = writeln!(out, "- child of session {p}");
    }
    out.push('\n');
    for item in t.items() {
        match item {
            Item::User { text, .. } => {
                let _ = writeln!(out, "## User\n\n{}\n", text.trim());
            }
            Item::Assistant { text, .. } => {
                let _ = writeln!(out, "## Assistant\n\n{}\n", text.trim());
            }
            Item::Tool(row) => {
                let _ = writeln!(
                    out,
                    "**{}** `{}` — {}\n",
                    row.name,
                    row.summary.replace('`', "'"),
                    status(row.status)
                );
                if row.diff.len() > 1 {
                    let diff: Vec<String> = row
                        .diff
                        .iter()
                        .map(|l| match l {
                            DiffLine::Header(h) => h.clone(),
                            DiffLine::Removed(r) => format!("-{r}"),
                            DiffLine::Added(a) => format!("+{a}"),
                        })
                        .collect();
                    code(&mut out, "diff", &diff.join("\n"));
                }
                if !row.output.is_empty() {
                    let lines = row.output.lines().count();
                    let _ = writeln!(
                        out,
                        "<details>\n<summary>{} output ({} line{})</summary>\n",
                        html(&row.name),
                        lines,
                        if lines == 1 { "" } else { "s" }
                    );
                    code(&mut out, "text", &row.output);
                    out.push_str("</details>\n\n");
                }
            }
            Item::Notification { source, text, .. } => {
                let _ = writeln!(
                    out,
                    "{}\n",
                    quote(&format!("**{source}:** {}", text.trim()))
                );
            }
            Item::Denied { tool, reason, .. } => {
                let _ = writeln!(out, "{}\n", quote(&format!("**{tool} denied:** {reason}")));
            }
            Item::Validation {
                command,
                passed,
                requirements,
                ..
            } => {
                let _ = writeln!(
                    out,
                    "**validation {}** `{}` ({})\n",
                    if *passed { "passed" } else { "failed" },
                    command.replace('`', "'"),
                    requirements.join("; ")
                );
            }
            Item::Certification {
                certified,
                blockers,
                ..
            } => {
                if *certified {
                    out.push_str("**completion certified**\n\n");
                } else {
                    let _ = writeln!(out, "**completion refused:** {}\n", blockers.join("; "));
                }
            }
            Item::Reground { text, .. } => {
                let _ = writeln!(out, "*re-ground: {text}*\n");
            }
            Item::Child {
                child, role, task, ..
            } => {
                let _ = writeln!(out, "**child agent** {child} ({role}): {}\n", task.trim());
            }
            Item::Divider { kind, .. } => {
                let caption = match kind {
                    DividerKind::Compact => "working memory reset (/compact)".to_string(),
                    DividerKind::Epoch { generation } => {
                        format!("new cache epoch (generation {generation})")
                    }
                    DividerKind::Interrupted { reason } => format!("run interrupted: {reason}"),
                };
                let _ = writeln!(out, "---\n\n*{caption}*\n");
            }
        }
    }
    out
}

/// An event as the JSON export carries it: as stored, but for opaque
/// provider state, reduced to its wire and block count.
fn event_json(kind: &EventKind) -> Value {
    match kind {
        EventKind::ProviderState(state) => json!({
            "kind": kind.kind_name(),
            "data": {"wire": state.wire, "blocks": state.blocks.len(), "reasoning": "reported"},
        }),
        other => serde_json::to_value(other).unwrap_or(Value::Null),
    }
}

/// The JSON export: serialize it (fields in this order).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JsonExport {
    /// [`JSON_FORMAT`].
    pub format: &'static str,
    /// [`JSON_VERSION`].
    pub version: u32,
    /// The session.
    pub session: JsonSession,
    /// Its own events, in order.
    pub events: Vec<JsonEvent>,
}

/// The session of a JSON export.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JsonSession {
    /// Its id.
    pub id: String,
    /// Its parent, for a child agent.
    pub parent: Option<String>,
    /// Its workspace.
    pub workspace: String,
    /// Its provider.
    pub provider: String,
    /// Its model.
    pub model: String,
    /// When it was created (milliseconds since the Unix epoch).
    pub created_ms: u64,
}

/// One event of a JSON export.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JsonEvent {
    /// Its sequence number.
    pub seq: u64,
    /// When it was committed (milliseconds since the Unix epoch).
    pub time_ms: u64,
    /// The event as stored: `{"kind", "data"}`.
    pub event: Value,
}

/// The session's durable events as JSON: `{format, version, session,
/// events: [{seq, time_ms, event}]}`.
pub fn json(header: &SessionHeader, events: &[StoredEvent]) -> JsonExport {
    JsonExport {
        format: JSON_FORMAT,
        version: JSON_VERSION,
        session: JsonSession {
            id: header.id.clone(),
            parent: header.parent.clone(),
            workspace: header.workspace.clone(),
            provider: header.provider.clone(),
            model: header.model.clone(),
            created_ms: header.created_ms,
        },
        events: events
            .iter()
            .filter(|e| e.session == header.id)
            .map(|e| JsonEvent {
                seq: e.seq,
                time_ms: e.time_ms,
                event: event_json(&e.kind),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::{Part, ToolCall, ToolResult};
    use latch_kernel::{OpaqueBlock, OpaqueState};

    fn header() -> SessionHeader {
        SessionHeader {
            id: "01s".into(),
            parent: None,
            workspace: "/w".into(),
            provider: "anthropic".into(),
            model: "claude-sonnet-4-5".into(),
            created_ms: 1_764_756_120_000,
        }
    }

    fn log() -> Vec<StoredEvent> {
        let call = |id: &str, name: &str, args: &str| {
            Part::ToolCall(ToolCall {
                id: id.into(),
                name: name.into(),
                arguments_json: args.into(),
            })
        };
        let result = |id: &str, name: &str, content: &str| {
            EventKind::ToolResult(ToolResult {
                call_id: id.into(),
                name: name.into(),
                content: content.into(),
                is_error: false,
                images: vec![],
            })
        };
        let kinds = vec![
            EventKind::user_text("Fix the `add` test."),
            EventKind::AssistantMessage {
                parts: vec![
                    Part::Text("Running the tests.".into()),
                    call("c1", "shell", r#"{"command":"cargo test"}"#),
                ],
            },
            EventKind::ProviderState(OpaqueState {
                wire: "anthropic".into(),
                blocks: vec![OpaqueBlock {
                    before_part: 0,
                    json: r#"{"type":"thinking","thinking":"SECRET"}"#.into(),
                }],
                call_ids: vec![],
            }),
            result("c1", "shell", "test add ... FAILED\n```nested fence```"),
            EventKind::AssistantMessage {
                parts: vec![call(
                    "c2",
                    "edit_file",
                    r#"{"path":"src/lib.rs","old_string":"a - b","new_string":"a + b"}"#,
                )],
            },
            result("c2", "edit_file", "edited src/lib.rs"),
            EventKind::assistant_text("Fixed: `add` now adds."),
        ];
        kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| StoredEvent {
                seq: i as u64 + 1,
                session: "01s".into(),
                time_ms: 0,
                kind,
            })
            .collect()
    }

    #[test]
    fn markdown_reads_as_a_transcript_with_folded_tools_and_diffs() {
        let md = markdown(&header(), &log());
        assert!(md.starts_with("# Latch session 01s\n\n- workspace: `/w`\n- model: claude-sonnet-4-5 (anthropic)\n- started: 2025-12-03 10:02 UTC\n"), "{md}");
        assert!(md.contains("## User\n\nFix the `add` test.\n"));
        assert!(md.contains("## Assistant\n\nRunning the tests.\n"));
        assert!(md.contains("**shell** `cargo test` — done\n\n<details>\n<summary>shell output (2 lines)</summary>\n\n````text\ntest add ... FAILED\n```nested fence```\n````\n\n</details>\n"), "{md}");
        assert!(md.contains("**edit_file** `src/lib.rs` — done\n\n```diff\n@@ src/lib.rs @@\n-a - b\n+a + b\n```\n"), "{md}");
        assert!(md.contains("## Assistant\n\nFixed: `add` now adds.\n"));
        assert!(!md.contains("SECRET"));
    }

    #[test]
    fn json_carries_every_event_as_stored_but_opaque_state() {
        let text = serde_json::to_string_pretty(&json(&header(), &log())).unwrap();
        assert!(
            text.starts_with("{\n  \"format\": \"latch-session\",\n  \"version\": 1,"),
            "{text}"
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["session"]["model"], "claude-sonnet-4-5");
        let events = v["events"].as_array().unwrap();
        assert_eq!(events.len(), 7);
        assert_eq!(events[0]["seq"], 1);
        let back: EventKind = serde_json::from_value(events[3]["event"].clone()).unwrap();
        assert_eq!(back, log()[3].kind, "an event reads back as stored");
        assert_eq!(events[2]["event"]["data"]["blocks"], 1);
        assert!(!text.contains("SECRET"));
    }

    #[test]
    fn utc_dates_are_civil() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00 UTC");
        assert_eq!(utc(4_107_542_399_000), "2100-02-28 23:59 UTC");
    }
}
