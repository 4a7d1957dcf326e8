//! Canonical text renderings shared by the host and engines: what full-text
//! search indexes for an event, and how words are split for lexical scoring.

use crate::types::{EventBody, KernelNoteKind, Part};

/// The text of a part as a human reads it (tool calls and results included).
pub fn render_part_text(part: &Part) -> String {
    match part {
        Part::Text(t) => t.clone(),
        Part::Image(m) => format!("[image {} {}]", m.mime_type, short_hash(&m.sha256)),
        Part::ToolCall(c) => format!("[tool call {} {}]", c.name, c.arguments_json),
        Part::ToolResult(r) => {
            let status = if r.is_error { "error" } else { "ok" };
            format!("[tool result {} {}] {}", r.name, status, r.content)
        }
    }
}

fn short_hash(h: &str) -> &str {
    &h[..h.len().min(12)]
}

/// The text full-text search indexes for an event body: user and assistant
/// text, tool names and arguments, tool results, notifications and kernel
/// diagnostics. Kernel-context entries are not indexed (they are derived).
pub fn event_search_text(body: &EventBody) -> String {
    match body {
        EventBody::UserMessage(parts) | EventBody::AssistantMessage(parts) => parts
            .iter()
            .map(render_part_text)
            .collect::<Vec<_>>()
            .join("\n"),
        EventBody::ToolResult(r) => render_part_text(&Part::ToolResult(r.clone())),
        EventBody::Notification(t) => t.clone(),
        EventBody::Kernel(n) => {
            let kind = kernel_note_label(n.kind);
            if n.files.is_empty() {
                format!("[{kind}] {}", n.summary)
            } else {
                format!("[{kind}] {} ({})", n.summary, n.files.join(", "))
            }
        }
        EventBody::KernelContext(_) | EventBody::ManualCompact => String::new(),
        EventBody::Extension(e) => format!("[{}] {}", e.kind, e.json),
    }
}

/// A stable lower-case label for a kernel note kind.
pub fn kernel_note_label(kind: KernelNoteKind) -> &'static str {
    match kind {
        KernelNoteKind::StateUpdate => "state-update",
        KernelNoteKind::Mutation => "mutation",
        KernelNoteKind::ValidationPassed => "validation-passed",
        KernelNoteKind::ValidationFailed => "validation-failed",
        KernelNoteKind::Evidence => "evidence",
        KernelNoteKind::Failure => "failure",
        KernelNoteKind::Reground => "reground",
        KernelNoteKind::ExternalChange => "external-change",
        KernelNoteKind::Process => "process",
        KernelNoteKind::Other => "other",
    }
}

/// Lower-case alphanumeric words (with `_`), as FTS5's default tokenizer splits
/// them for ASCII text. Used for lexical scoring and the in-memory search.
pub fn tokenize_words(text: &str) -> Vec<String> {
    words(text).collect()
}

/// The words of [`tokenize_words`], one at a time (to stop early).
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
}
