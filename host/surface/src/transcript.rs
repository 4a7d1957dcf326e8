//! The transcript: what was said and done in a session, as items a surface
//! renders in order.
//!
//! User turns, committed assistant text, tool calls with their results
//! (edits carry a unified diff), notifications, permission decisions (a
//! grant as a notification, a denial as a denied item), denials, validations,
//! certification attempts, re-grounds (the kernel telling the agent to step
//! back and re-read the task), child spawns, changes of the session's profile
//! (a resume with another model or a looser approval mode), and dividers for `/compact`,
//! cache-epoch rotations and interrupted runs. Bookkeeping events (kernel
//! context text, file observations, usage) are not transcript items.

use latch_engine_sdk::types::{Part, ToolCall, ToolResult};
use latch_kernel::{CertificationOutcome, EventKind, GrantScope, Outcome, REFUSALS_IN_A_ROW};
use std::collections::HashMap;

/// How a tool result that answers an interrupted call begins (the host's
/// repair writes it when a run stopped before the call finished).
pub const INTERRUPTED_PREFIX: &str = "interrupted:";

/// The source of the notification that shows a change of the session's
/// profile (provider, model, approval or sandbox mode).
pub const PROFILE_SOURCE: &str = "session";

/// One line of a unified diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiffLine {
    /// The hunk header (`@@ path @@`).
    Header(String),
    /// A removed line (without its `-`).
    Removed(String),
    /// An added line (without its `+`).
    Added(String),
}

/// Where a tool call stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolStatus {
    /// Called; no result committed yet.
    Pending,
    /// Its result committed without an error.
    Done,
    /// Its result is an error.
    Failed,
    /// Answered as interrupted (the run stopped before it finished).
    Interrupted,
}

/// A tool call and, once committed, its result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRow {
    /// Sequence number of the assistant message that made the call.
    pub seq: u64,
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// A one-line summary of the arguments (a command, a path, a query).
    pub summary: String,
    /// For edits and writes: the change as a unified diff.
    pub diff: Vec<DiffLine>,
    /// Where it stands.
    pub status: ToolStatus,
    /// The result's text (empty while pending).
    pub output: String,
}

/// What a divider marks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DividerKind {
    /// `/compact`: the user reset working memory.
    Compact,
    /// The engine started a new cache epoch (a rotation).
    Epoch {
        /// The new epoch's generation.
        generation: u64,
    },
    /// A run ended interrupted.
    Interrupted {
        /// Why.
        reason: String,
    },
}

/// One transcript item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// The user's message.
    User {
        /// Its sequence number.
        seq: u64,
        /// Its text (images as placeholders).
        text: String,
    },
    /// Committed assistant text.
    Assistant {
        /// Sequence number of the assistant message.
        seq: u64,
        /// The text.
        text: String,
    },
    /// A tool call and its result.
    Tool(ToolRow),
    /// A notification delivered at a safe boundary (a child's report, a
    /// message, a note from Latch).
    Notification {
        /// Its sequence number.
        seq: u64,
        /// Where it came from.
        source: String,
        /// Its text.
        text: String,
    },
    /// A tool call denied by policy.
    Denied {
        /// Its sequence number.
        seq: u64,
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// A validation the kernel recorded.
    Validation {
        /// Its sequence number.
        seq: u64,
        /// The proving command.
        command: String,
        /// True when it passed.
        passed: bool,
        /// The requirements it proves.
        requirements: Vec<String>,
    },
    /// A certification attempt (`complete`).
    Certification {
        /// Its sequence number.
        seq: u64,
        /// True when certified.
        certified: bool,
        /// Why it was refused.
        blockers: Vec<String>,
    },
    /// The kernel told the agent to step back and re-read the task
    /// (completion refused twice in a row, or a failure that repeated):
    /// one dim line, its text from [`reground_text`].
    Reground {
        /// Its sequence number.
        seq: u64,
        /// What repeated and what happens now.
        text: String,
    },
    /// A child agent was spawned.
    Child {
        /// Its sequence number.
        seq: u64,
        /// The child's session id.
        child: String,
        /// Its role.
        role: String,
        /// Its task.
        task: String,
    },
    /// A divider.
    Divider {
        /// Its sequence number.
        seq: u64,
        /// What it marks.
        kind: DividerKind,
    },
}

impl Item {
    /// The sequence number of the event behind the item.
    pub fn seq(&self) -> u64 {
        match self {
            Item::Tool(t) => t.seq,
            Item::User { seq, .. }
            | Item::Assistant { seq, .. }
            | Item::Notification { seq, .. }
            | Item::Denied { seq, .. }
            | Item::Validation { seq, .. }
            | Item::Certification { seq, .. }
            | Item::Reground { seq, .. }
            | Item::Child { seq, .. }
            | Item::Divider { seq, .. } => *seq,
        }
    }
}

/// The transcript reducer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transcript {
    items: Vec<Item>,
    /// Index of each call's row, by call id.
    calls: HashMap<String, usize>,
    /// Highest kernel-context generation seen.
    generation: u64,
}

impl Transcript {
    /// The items, oldest first.
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// Apply one of the session's own events.
    pub fn apply(&mut self, seq: u64, event: &EventKind) {
        match event {
            EventKind::UserMessage { parts } => self.items.push(Item::User {
                seq,
                text: parts_text(parts),
            }),
            EventKind::AssistantMessage { parts } => self.assistant(seq, parts),
            EventKind::ToolResult(r) => self.result(r),
            EventKind::NotificationDelivered { source, text } => {
                self.items.push(Item::Notification {
                    seq,
                    source: source.clone(),
                    text: text.clone(),
                })
            }
            EventKind::AgentNotificationDelivered { child, text, .. } => {
                self.items.push(Item::Notification {
                    seq,
                    source: child.clone(),
                    text: text.clone(),
                })
            }
            EventKind::AgentMessageDelivered { text, .. } => self.items.push(Item::Notification {
                seq,
                source: "parent".into(),
                text: text.clone(),
            }),
            EventKind::ManualCompact => self.items.push(Item::Divider {
                seq,
                kind: DividerKind::Compact,
            }),
            EventKind::KernelContext(k) if k.generation > self.generation => {
                if self.generation > 0 {
                    self.items.push(Item::Divider {
                        seq,
                        kind: DividerKind::Epoch {
                            generation: k.generation,
                        },
                    });
                }
                self.generation = k.generation;
            }
            EventKind::HookRan { .. } => self.items.push(Item::Notification {
                seq,
                source: "hook".into(),
                text: hook_text(event),
            }),
            EventKind::ToolDenied { tool, reason, .. } => self.items.push(Item::Denied {
                seq,
                tool: tool.clone(),
                reason: reason.clone(),
            }),
            EventKind::Validation {
                requirements,
                command,
                outcome,
                ..
            } => self.items.push(Item::Validation {
                seq,
                command: command.clone(),
                passed: *outcome == Outcome::Passed,
                requirements: requirements.clone(),
            }),
            EventKind::CertificationAttempt {
                outcome, blockers, ..
            } => self.items.push(Item::Certification {
                seq,
                certified: *outcome == CertificationOutcome::Certified,
                blockers: blockers.clone(),
            }),
            EventKind::Reground { .. } => self.items.push(Item::Reground {
                seq,
                text: reground_text(event).unwrap_or_default(),
            }),
            EventKind::ChildSpawned {
                child, role, task, ..
            } => self.items.push(Item::Child {
                seq,
                child: child.clone(),
                role: role.clone(),
                task: task.clone(),
            }),
            EventKind::PermissionGranted {
                subject, by, scope, ..
            } => self.items.push(Item::Notification {
                seq,
                source: "permission".into(),
                text: format!(
                    "allowed `{subject}` {} (by {})",
                    match scope {
                        GrantScope::Once => "once",
                        GrantScope::Session => "for this session",
                    },
                    by.label()
                ),
            }),
            EventKind::PermissionDenied {
                tool,
                subject,
                by,
                reason,
                ..
            } => self.items.push(Item::Denied {
                seq,
                tool: tool.clone(),
                reason: format!("`{subject}` denied by {}: {reason}", by.label()),
            }),
            // A run that changed what the session runs with (a resume with
            // another model, or a looser approval mode) says so.
            EventKind::SessionProfile(p) => {
                if let Some(text) = p.change_text() {
                    self.items.push(Item::Notification {
                        seq,
                        source: PROFILE_SOURCE.into(),
                        text,
                    });
                }
            }
            EventKind::Rewound { .. } => self.items.push(Item::Notification {
                seq,
                source: "rewind".into(),
                text: latch_kernel::rewound_summary(event).unwrap_or_default(),
            }),
            EventKind::RunInterrupted { reason } => self.items.push(Item::Divider {
                seq,
                kind: DividerKind::Interrupted {
                    reason: reason.clone(),
                },
            }),
            // Bookkeeping: shown in the sidebar or not at all.
            _ => {}
        }
    }

    fn assistant(&mut self, seq: u64, parts: &[Part]) {
        let text: Vec<&str> = parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) if !t.trim().is_empty() => Some(t.trim()),
                _ => None,
            })
            .collect();
        if !text.is_empty() {
            self.items.push(Item::Assistant {
                seq,
                text: text.join("\n"),
            });
        }
        for p in parts {
            if let Part::ToolCall(call) = p {
                self.calls.insert(call.id.clone(), self.items.len());
                self.items.push(Item::Tool(tool_row(seq, call)));
            }
        }
    }

    fn result(&mut self, r: &ToolResult) {
        let Some(Item::Tool(row)) = self
            .calls
            .get(&r.call_id)
            .and_then(|i| self.items.get_mut(*i))
        else {
            return;
        };
        row.status = if r.is_error && r.content.starts_with(INTERRUPTED_PREFIX) {
            ToolStatus::Interrupted
        } else if r.is_error {
            ToolStatus::Failed
        } else {
            ToolStatus::Done
        };
        row.output = r.content.clone();
    }
}

/// The text of message parts (images as a placeholder).
pub fn parts_text(parts: &[Part]) -> String {
    parts
        .iter()
        .map(latch_engine_sdk::render_part_text)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The line a `hook_ran` event shows: which hook, the command, how it
/// ended and the first line of its output; empty for other kinds.
pub fn hook_text(event: &EventKind) -> String {
    let EventKind::HookRan {
        hook,
        command,
        tool,
        exit_code,
        output,
        denied,
        ..
    } = event
    else {
        return String::new();
    };
    let on = tool
        .as_deref()
        .map(|t| format!(" ({t})"))
        .unwrap_or_default();
    let how = match (exit_code, denied) {
        (_, true) => "denied the call".to_string(),
        (Some(0), _) => "ok".to_string(),
        (Some(c), _) => format!("exit {c}"),
        (None, _) => "did not finish".to_string(),
    };
    let first = output.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let first: String = first.chars().take(160).collect();
    if first.is_empty() {
        format!("{hook}{on} `{command}`: {how}")
    } else {
        format!("{hook}{on} `{command}`: {how}: {first}")
    }
}

/// Characters of a lineage's label a re-ground line keeps.
const LABEL_CHARS: usize = 100;

/// The line a `reground` event shows, after `re-ground: `: what repeated
/// and, for refused completions, what happens now (`completion refused
/// twice in a row — the agent re-reads the task`, `` validation `sh t.sh`
/// failed again (3×) ``); none for other kinds.
pub fn reground_text(event: &EventKind) -> Option<String> {
    let EventKind::Reground { lineage, count, .. } = event else {
        return None;
    };
    if lineage == REFUSALS_IN_A_ROW {
        let times = match count {
            2 => "twice".to_string(),
            n => format!("{n} times"),
        };
        return Some(format!(
            "completion refused {times} in a row — the agent re-reads the task"
        ));
    }
    let label = latch_kernel::lineage_label(lineage);
    let label = if label.chars().count() > LABEL_CHARS {
        format!("{}…", label.chars().take(LABEL_CHARS).collect::<String>())
    } else {
        label
    };
    Some(format!("{label} failed again ({count}×)"))
}

fn tool_row(seq: u64, call: &ToolCall) -> ToolRow {
    let args: serde_json::Value =
        serde_json::from_str(&call.arguments_json).unwrap_or(serde_json::Value::Null);
    let field = |k: &str| args.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let path = field("path");
    let (summary, diff) = match call.name.as_str() {
        "edit_file" => (
            path.to_string(),
            edit_diff(path, field("old_string"), field("new_string")),
        ),
        "write_file" => (path.to_string(), edit_diff(path, "", field("content"))),
        _ => (summarize(&args, &call.arguments_json), Vec::new()),
    };
    ToolRow {
        seq,
        call_id: call.id.clone(),
        name: call.name.clone(),
        summary,
        diff,
        status: ToolStatus::Pending,
        output: String::new(),
    }
}

/// The most telling argument of a call, on one line.
fn summarize(args: &serde_json::Value, raw: &str) -> String {
    let pick = [
        "command",
        "path",
        "query",
        "text",
        "requirement",
        "summary",
        "task",
        "pattern",
    ]
    .iter()
    .find_map(|k| args.get(*k).and_then(|v| v.as_str()));
    let text = match (pick, args) {
        (Some(v), _) => v.to_string(),
        // Never raw JSON: the arguments as `key: value` pairs.
        (None, serde_json::Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}: {s}"),
                other => format!("{k}: {other}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        (None, serde_json::Value::Null) => raw.to_string(),
        (None, other) => other.to_string(),
    };
    text.replace('\n', " ⏎ ")
}

/// An edit as a unified diff hunk: the old lines removed, the new ones added.
pub fn edit_diff(path: &str, old: &str, new: &str) -> Vec<DiffLine> {
    let mut lines = vec![DiffLine::Header(format!("@@ {path} @@"))];
    lines.extend(old.lines().map(|l| DiffLine::Removed(l.to_string())));
    lines.extend(new.lines().map(|l| DiffLine::Added(l.to_string())));
    lines
}
