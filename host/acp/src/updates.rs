//! Latch's durable events as ACP `session/update`s: the model's tool calls
//! (a title, a kind, the files they touch, an edit's diff), their results,
//! and on `session/load` the whole conversation replayed from the store.
//!
//! The mapping reads only committed events, so what an editor shows is what
//! the session holds: a turn replayed after a restart shows the same calls
//! with the same ids as it did live.

use crate::wire::{
    ContentBlock, SessionUpdate, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolKind,
};
use latch_engine_sdk::types::{Part, ToolCall as ModelCall, ToolResult};
use latch_kernel::EventKind;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Most characters of a tool's output shown in the editor (the model's copy
/// is the host's bounded result; this only keeps editors responsive).
pub const MAX_SHOWN_OUTPUT: usize = 16 * 1024;

/// The update that reports `call` as a new tool call.
pub fn tool_call(call: &ModelCall, workspace: &Path) -> SessionUpdate {
    let args: Value = serde_json::from_str(&call.arguments_json).unwrap_or(Value::Null);
    let arg = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    let abs = |p: &str| -> PathBuf { workspace.join(p) };
    let (kind, title, content, locations) = match call.name.as_str() {
        "read_file" => {
            let line = args
                .get("offset")
                .and_then(Value::as_u64)
                .and_then(|l| u32::try_from(l).ok());
            (
                ToolKind::Read,
                format!("Read {}", arg("path")),
                vec![],
                vec![ToolCallLocation {
                    path: abs(arg("path")),
                    line,
                }],
            )
        }
        "write_file" => (
            ToolKind::Edit,
            format!("Write {}", arg("path")),
            vec![ToolCallContent::Diff {
                path: abs(arg("path")),
                old_text: None,
                new_text: arg("content").to_string(),
            }],
            vec![location(abs(arg("path")))],
        ),
        "edit_file" => (
            ToolKind::Edit,
            format!("Edit {}", arg("path")),
            vec![ToolCallContent::Diff {
                path: abs(arg("path")),
                old_text: Some(arg("old_string").to_string()),
                new_text: arg("new_string").to_string(),
            }],
            vec![location(abs(arg("path")))],
        ),
        "list_files" => (
            ToolKind::Search,
            format!("List {}", nonempty(arg("path"), ".")),
            vec![],
            vec![],
        ),
        "grep" => (
            ToolKind::Search,
            format!(
                "Search `{}` in {}",
                arg("pattern"),
                nonempty(arg("path"), ".")
            ),
            vec![],
            vec![],
        ),
        "shell" => (
            ToolKind::Execute,
            format!("Run `{}`", arg("command")),
            vec![],
            vec![],
        ),
        "validate" => (
            ToolKind::Execute,
            format!("Prove \"{}\": `{}`", arg("requirement"), arg("command")),
            vec![],
            vec![],
        ),
        "recall" | "read_artifact" | "process_output" | "process_status" => {
            (ToolKind::Read, call.name.clone(), vec![], vec![])
        }
        _ => (ToolKind::Other, call.name.clone(), vec![], vec![]),
    };
    SessionUpdate::ToolCall(ToolCall {
        tool_call_id: call.id.clone(),
        title,
        kind,
        status: ToolCallStatus::Pending,
        content,
        locations,
        raw_input: (!args.is_null()).then_some(args),
    })
}

fn location(path: PathBuf) -> ToolCallLocation {
    ToolCallLocation { path, line: None }
}

fn nonempty<'a>(s: &'a str, default: &'a str) -> &'a str {
    if s.is_empty() { default } else { s }
}

/// The update that reports `result`: completed or failed with the tool's
/// output; a successful edit keeps showing its diff.
pub fn tool_result(result: &ToolResult) -> SessionUpdate {
    let keeps_diff = !result.is_error && matches!(result.name.as_str(), "write_file" | "edit_file");
    let content = (!keeps_diff).then(|| {
        vec![ToolCallContent::Content {
            content: ContentBlock::text(shown(&result.content)),
        }]
    });
    SessionUpdate::ToolCallUpdate(ToolCallUpdate {
        tool_call_id: result.call_id.clone(),
        status: Some(if result.is_error {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        }),
        content,
        ..ToolCallUpdate::default()
    })
}

fn shown(text: &str) -> String {
    if text.len() <= MAX_SHOWN_OUTPUT {
        return text.to_string();
    }
    let mut cut = MAX_SHOWN_OUTPUT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[... {} more bytes; the model saw Latch's bounded result]",
        &text[..cut],
        text.len() - cut
    )
}

/// The updates a live turn sends for a committed event. Text the model
/// streamed was already sent as it arrived (`streamed` says whether any
/// was since the last assistant message); otherwise the committed text is
/// sent here, so a provider that does not stream still shows its answer.
pub fn live(event: &EventKind, streamed: bool, workspace: &Path) -> Vec<SessionUpdate> {
    match event {
        EventKind::AssistantMessage { parts } => parts
            .iter()
            .filter_map(|part| match part {
                Part::Text(t) if !streamed && !t.is_empty() => {
                    Some(SessionUpdate::AgentMessageChunk {
                        content: ContentBlock::text(t.clone()),
                    })
                }
                Part::ToolCall(call) => Some(tool_call(call, workspace)),
                _ => None,
            })
            .collect(),
        EventKind::ToolResult(result) => vec![tool_result(result)],
        EventKind::SessionProfile(p)
            if p.changes
                .iter()
                .any(|c| c.setting == "mode" || c.setting == "approval") =>
        {
            vec![SessionUpdate::CurrentModeUpdate {
                current_mode_id: mode_id(p),
            }]
        }
        EventKind::PermissionGranted { call_id, .. } => {
            vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                tool_call_id: call_id.clone(),
                status: Some(ToolCallStatus::InProgress),
                ..ToolCallUpdate::default()
            })]
        }
        _ => vec![],
    }
}

/// The ACP mode id of a session profile: `plan` in plan mode, else its
/// approval mode.
pub fn mode_id(p: &latch_kernel::SessionProfile) -> String {
    if p.mode.is_plan() {
        "plan".to_string()
    } else {
        p.approval.clone()
    }
}

/// The `plan` entries of a checklist.
pub fn plan_entries(list: &latch_kernel::Checklist) -> Vec<crate::wire::PlanEntry> {
    use crate::wire::{PlanEntry, PlanPriority, PlanStatus};
    list.steps()
        .iter()
        .map(|s| PlanEntry {
            content: s.text.clone(),
            priority: PlanPriority::Medium,
            status: match s.status {
                latch_kernel::StepStatus::Pending => PlanStatus::Pending,
                latch_kernel::StepStatus::Completed => PlanStatus::Completed,
            },
        })
        .collect()
}

/// The updates that replay a session's conversation for `session/load`:
/// the user's messages, the agent's answers and every tool call with its
/// outcome, in the order they were committed, then the plan (when the
/// session has one).
pub fn replay<'a>(
    events: impl IntoIterator<Item = &'a EventKind>,
    workspace: &Path,
) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    let events: Vec<&EventKind> = events.into_iter().collect();
    let events_for_plan = events.iter().copied();
    for event in events.iter().copied() {
        match event {
            EventKind::UserMessage { parts } => {
                updates.extend(parts.iter().filter_map(|part| match part {
                    Part::Text(t) => Some(SessionUpdate::UserMessageChunk {
                        content: ContentBlock::text(t.clone()),
                    }),
                    _ => None,
                }))
            }
            EventKind::AssistantMessage { .. } => {
                updates.extend(live(event, false, workspace));
            }
            EventKind::ToolResult(result) => updates.push(tool_result(result)),
            _ => {}
        }
    }
    let list = latch_kernel::Checklist::replay(events_for_plan);
    if !list.is_empty() {
        updates.push(SessionUpdate::Plan {
            entries: plan_entries(&list),
        });
    }
    updates
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ModelCall {
        ModelCall {
            id: "c1".into(),
            name: name.into(),
            arguments_json: args.into(),
        }
    }

    #[test]
    fn an_edit_is_reported_with_its_diff_and_file() {
        let update = tool_call(
            &call(
                "edit_file",
                r#"{"path":"src/a.rs","old_string":"x - y","new_string":"x + y"}"#,
            ),
            Path::new("/w"),
        );
        let SessionUpdate::ToolCall(c) = update else {
            panic!("not a tool call: {update:?}")
        };
        assert_eq!(c.kind, ToolKind::Edit);
        assert_eq!(c.title, "Edit src/a.rs");
        assert_eq!(
            c.content,
            vec![ToolCallContent::Diff {
                path: "/w/src/a.rs".into(),
                old_text: Some("x - y".into()),
                new_text: "x + y".into(),
            }]
        );
        assert_eq!(c.locations[0].path, PathBuf::from("/w/src/a.rs"));
    }

    #[test]
    fn results_complete_or_fail_and_edits_keep_their_diff() {
        let ok = ToolResult {
            call_id: "c1".into(),
            name: "edit_file".into(),
            content: "edited".into(),
            is_error: false,
            images: vec![],
        };
        let SessionUpdate::ToolCallUpdate(u) = tool_result(&ok) else {
            panic!()
        };
        assert_eq!(u.status, Some(ToolCallStatus::Completed));
        assert_eq!(u.content, None);
        let failed = ToolResult {
            name: "shell".into(),
            is_error: true,
            content: "denied by the user".into(),
            ..ok
        };
        let SessionUpdate::ToolCallUpdate(u) = tool_result(&failed) else {
            panic!()
        };
        assert_eq!(u.status, Some(ToolCallStatus::Failed));
        assert_eq!(
            u.content,
            Some(vec![ToolCallContent::Content {
                content: ContentBlock::text("denied by the user")
            }])
        );
    }
}
