//! `--redact`: file contents and command output replaced by same-length
//! placeholders, so a trace can be shared without its secrets while every
//! size an engine decides by stays exactly what it was.
//!
//! A placeholder keeps each character's class under the canonical
//! estimator (ASCII letters and digits become `x`, other ASCII punctuation
//! `#`, narrow non-ASCII `·`, wide characters `〇`) and keeps whitespace,
//! quotes and backslashes, so line structure and the JSON escaping of the
//! text are unchanged: a redacted text costs exactly the tokens of the
//! original and is as long in characters. The same text always becomes the
//! same placeholder.
//!
//! Replaced: tool results, file contents in `write_file` / `edit_file`
//! arguments (`content`, `old_string`, `new_string`), validation and
//! process output, re-ground reasons and lineages (they quote errors), the
//! diff of an edit awaiting approval, and kernel-context text (engines
//! restate outputs there). Kept: what people and the model said, commands,
//! paths, task state, and every sequence number, id and count.

use latch_engine_sdk::estimate::is_wide;
use latch_engine_sdk::types::Part;
use latch_kernel::EventKind;

/// Argument keys of the file tools whose string values are file contents.
pub const CONTENT_KEYS: [&str; 3] = ["content", "old_string", "new_string"];

/// `text` as a same-length, same-price placeholder.
pub fn placeholder(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            c if c.is_ascii_alphanumeric() => 'x',
            c if c.is_ascii_whitespace() || c == '"' || c == '\\' => c,
            c if c.is_ascii_punctuation() => '#',
            c if c.is_ascii() => c,
            c if is_wide(c) => '〇',
            _ => '·',
        })
        .collect()
}

/// A tool call's arguments with the file contents they carry replaced,
/// edited in place in the JSON text (so nothing else of it moves).
fn redact_arguments(arguments: &str) -> String {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(arguments)
    else {
        return arguments.to_string();
    };
    let mut out = arguments.to_string();
    let mut rebuilt = map.clone();
    let mut in_place = true;
    for key in CONTENT_KEYS {
        let Some(serde_json::Value::String(value)) = map.get(key) else {
            continue;
        };
        let quoted = serde_json::to_string(value).unwrap_or_default();
        let replaced = serde_json::to_string(&placeholder(value)).unwrap_or_default();
        let name = serde_json::to_string(key).unwrap_or_default();
        let found = out
            .find(&name)
            .and_then(|k| out[k..].find(&quoted).map(|v| k + v));
        match found {
            Some(at) => out.replace_range(at..at + quoted.len(), &replaced),
            // Written with other escapes: rebuilt, never left in the clear.
            None => in_place = false,
        }
        rebuilt.insert(
            key.to_string(),
            serde_json::Value::String(placeholder(value)),
        );
    }
    if in_place {
        out
    } else {
        serde_json::Value::Object(rebuilt).to_string()
    }
}

fn redact_parts(parts: &mut [Part]) {
    for p in parts {
        match p {
            Part::ToolCall(c) => c.arguments_json = redact_arguments(&c.arguments_json),
            Part::ToolResult(r) => r.content = placeholder(&r.content),
            Part::Text(_) | Part::Image(_) => {}
        }
    }
}

/// `event` with its file contents and command output replaced.
pub fn redact(event: &EventKind) -> EventKind {
    let mut e = event.clone();
    match &mut e {
        EventKind::AssistantMessage { parts } => redact_parts(parts),
        EventKind::UserMessage { parts } => redact_parts(parts),
        EventKind::ToolResult(r) => r.content = placeholder(&r.content),
        EventKind::KernelContext(k) => k.entry.text = placeholder(&k.entry.text),
        EventKind::Validation { output, .. } => *output = placeholder(output),
        EventKind::ProcessExited { output_tail, .. } => *output_tail = placeholder(output_tail),
        EventKind::Reground {
            reason, lineage, ..
        } => {
            *reason = placeholder(reason);
            *lineage = placeholder(lineage);
        }
        EventKind::PermissionRequested(p) => {
            if let Some(d) = &mut p.diff {
                *d = placeholder(d);
            }
        }
        _ => {}
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::estimate;
    use latch_engine_sdk::types::{EstimatorProfile, ToolCall, ToolResult};

    #[test]
    fn placeholders_keep_length_price_and_line_structure() {
        let secret = "API_KEY=sk-live-4242 \"quoted\" \\path\n  ünïcode 東京 🙂\ttab";
        let p = placeholder(secret);
        assert_eq!(p.chars().count(), secret.chars().count());
        for profile in [
            EstimatorProfile::Openai,
            EstimatorProfile::Anthropic,
            EstimatorProfile::CjkOptimized,
        ] {
            assert_eq!(estimate(profile, &p), estimate(profile, secret));
        }
        assert_eq!(p.lines().count(), secret.lines().count());
        assert_eq!(
            serde_json::to_string(&p).unwrap().len() - p.len(),
            serde_json::to_string(secret).unwrap().len() - secret.len()
        );
        assert!(!p.contains("sk") && !p.contains("4242") && !p.contains("東京"));
        assert_eq!(p, placeholder(secret), "deterministic");
        assert!(
            p.starts_with("xxx#xxx#xx#xxxx#xxxx \"xxxxxx\" \\xxxx\n  "),
            "{p}"
        );
    }

    #[test]
    fn file_contents_in_arguments_and_outputs_are_replaced_in_place() {
        let args = r#"{"path": "src/secret.rs", "old_string": "let key = \"hunter2\";", "new_string": "let key = env();"}"#;
        let call = EventKind::AssistantMessage {
            parts: vec![
                Part::Text("I will edit src/secret.rs".into()),
                Part::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "edit_file".into(),
                    arguments_json: args.into(),
                }),
            ],
        };
        let EventKind::AssistantMessage { parts } = redact(&call) else {
            panic!()
        };
        assert_eq!(
            parts[0],
            Part::Text("I will edit src/secret.rs".into()),
            "what the model said stays"
        );
        let Part::ToolCall(c) = &parts[1] else {
            panic!()
        };
        assert_eq!(c.arguments_json.len(), args.len());
        assert!(
            c.arguments_json.starts_with(
                r##"{"path": "src/secret.rs", "old_string": "xxx xxx # \"xxxxxxx\"#""##
            ),
            "{}",
            c.arguments_json
        );
        assert!(!c.arguments_json.contains("hunter2") && !c.arguments_json.contains("env()"));
        let v: serde_json::Value = serde_json::from_str(&c.arguments_json).unwrap();
        assert_eq!(v["path"], "src/secret.rs");

        let result = EventKind::ToolResult(ToolResult {
            call_id: "c1".into(),
            name: "shell".into(),
            content: "password: hunter2\n".into(),
            is_error: true,
            images: vec![],
        });
        let EventKind::ToolResult(r) = redact(&result) else {
            panic!()
        };
        assert_eq!(
            (r.content.as_str(), r.is_error, r.call_id.as_str()),
            ("xxxxxxxx# xxxxxxx\n", true, "c1")
        );
        let kept = EventKind::user_text("my token is in .env");
        assert_eq!(redact(&kept), kept, "the user's words stay");
    }
}
