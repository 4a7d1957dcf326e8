//! The summary `baseline:summarize` gets during a replay. A recorded
//! session holds no answer to a summary request the recorded engine never
//! made, so replay answers with an extractive stand-in, written the way the
//! compared sessions' scripted model writes one and as generous: the tool
//! calls so far (the latest twenty, one line each), every constraint,
//! decision and hypothesis the summarized history states through the task
//! tools, word for word (and whatever an earlier summary in it kept), and
//! the latest thing the assistant said.

use super::super::baseline::SummaryRequest;
use latch_engine_sdk::one_line;
use latch_engine_sdk::types::{Part, Role};
use serde_json::Value;

/// Tool calls listed in the summary.
pub const LISTED_CALLS: usize = 20;

/// The task tools whose `text` the summary keeps, with the label it gets.
const KEPT: [(&str, &str); 6] = [
    ("add_constraint", "constraint"),
    ("record_decision", "decision"),
    ("revise_decision", "decision"),
    ("add_hypothesis", "hypothesis"),
    ("reject_hypothesis", "rejected hypothesis"),
    ("set_goal", "goal"),
];

/// The stand-in summary of `request`.
pub fn extractive_summary(request: &SummaryRequest) -> String {
    let mut calls = Vec::new();
    let mut keep = Vec::new();
    let mut said = None;
    for m in &request.messages {
        for p in &m.parts {
            match p {
                Part::ToolCall(c) => {
                    calls.push(one_line(&format!("{} {}", c.name, c.arguments_json), 160));
                    if let Some((_, label)) = KEPT.iter().find(|(t, _)| *t == c.name) {
                        let args: Value =
                            serde_json::from_str(&c.arguments_json).unwrap_or_default();
                        if let Some(text) = args["text"].as_str() {
                            let line = match args["reason"].as_str() {
                                Some(r) => format!("- {label}: {text} (because {r})"),
                                None => format!("- {label}: {text}"),
                            };
                            if !keep.contains(&line) {
                                keep.push(line);
                            }
                        }
                    }
                }
                Part::Text(t) if m.role == Role::Assistant && m.kernel.is_none() => {
                    said = Some(one_line(t, 600));
                }
                // An earlier summary: what it kept is kept again.
                Part::Text(t) if m.kernel.is_some() => {
                    let kept = t
                        .lines()
                        .skip_while(|l| l.trim() != "## To keep")
                        .skip(1)
                        .take_while(|l| l.starts_with("- "));
                    for line in kept {
                        if !keep.iter().any(|k| k == line) {
                            keep.push(line.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = format!(
        "## Progress\n{} tool calls in the summarized history; the latest:\n",
        calls.len()
    );
    for c in calls.iter().rev().take(LISTED_CALLS).rev() {
        out.push_str(&format!("- {c}\n"));
    }
    if let Some(s) = said {
        out.push_str(&format!("\n## Latest status\n{s}\n"));
    }
    if !keep.is_empty() {
        out.push_str("\n## To keep\n");
        for line in keep {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::{Message, ToolCall};

    fn calls(items: &[(&str, &str)]) -> Message {
        Message {
            role: Role::Assistant,
            parts: items
                .iter()
                .enumerate()
                .map(|(i, (n, a))| {
                    Part::ToolCall(ToolCall {
                        id: format!("c{i}"),
                        name: n.to_string(),
                        arguments_json: a.to_string(),
                    })
                })
                .collect(),
            kernel: None,
            source_seqs: vec![1],
        }
    }

    #[test]
    fn the_summary_lists_calls_and_keeps_stated_state_word_for_word() {
        let mut messages = vec![Message::text(Role::User, "fix it")];
        for i in 0..25 {
            messages.push(calls(&[("shell", &format!(r#"{{"command":"step {i}"}}"#))]));
        }
        messages.push(calls(&[
            ("record_decision", r#"{"text":"keep the xor checksum"}"#),
            (
                "reject_hypothesis",
                r#"{"text":"the parser","reason":"no quotes"}"#,
            ),
        ]));
        messages.push(Message::text(Role::Assistant, "Half way there."));
        let s = extractive_summary(&SummaryRequest {
            system: "sys".into(),
            messages: messages.clone(),
        });
        assert!(s.starts_with("## Progress\n27 tool calls"), "{s}");
        assert!(!s.contains("step 6\"") && s.contains("step 7\"") && s.contains("step 24"));
        assert!(s.contains("- decision: keep the xor checksum\n"));
        assert!(s.contains("- rejected hypothesis: the parser (because no quotes)\n"));
        assert!(s.contains("## Latest status\nHalf way there."));

        // The next summary keeps what this one kept.
        let earlier = Message {
            role: Role::User,
            parts: vec![Part::Text(format!("An earlier model...\n\n{s}"))],
            kernel: Some(latch_engine_sdk::types::KernelTag {
                generation: 1,
                revision: 1,
                kind: latch_engine_sdk::types::KernelContextKind::Snapshot,
                seq: Some(9),
            }),
            source_seqs: vec![],
        };
        let next = extractive_summary(&SummaryRequest {
            system: "sys".into(),
            messages: vec![earlier, calls(&[("shell", r#"{"command":"ls"}"#)])],
        });
        assert!(
            next.contains("- decision: keep the xor checksum\n"),
            "{next}"
        );
        assert_eq!(next.matches("keep the xor checksum").count(), 1);
    }
}
