//! Canonical text renderings shared by the host and engines: what full-text
//! search indexes for an event, and how words are split for lexical scoring.

use crate::estimate::estimate;
use crate::types::{EstimatorProfile, EventBody, KernelNoteKind, Part};

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

/// The name of the model-callable tool that recalls original events (the
/// host answers it through the engine's `recall`).
pub const RECALL_TOOL: &str = "recall";

/// The text full-text search indexes for an event body: user and assistant
/// text, tool names and arguments, tool results, notifications and kernel
/// diagnostics. Derived text is not indexed: kernel-context entries, and the
/// model's [`RECALL_TOOL`] calls and their results (copies of originals that
/// would otherwise outrank the originals they repeat, newest first).
pub fn event_search_text(body: &EventBody) -> String {
    match body {
        EventBody::UserMessage(parts) | EventBody::AssistantMessage(parts) => parts
            .iter()
            .filter(|p| !matches!(p, Part::ToolCall(c) if c.name == RECALL_TOOL))
            .map(render_part_text)
            .collect::<Vec<_>>()
            .join("\n"),
        EventBody::ToolResult(r) if r.name == RECALL_TOOL => String::new(),
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

/// A short label for an event, e.g. `user`, `tool result cargo_test`,
/// `tool result shell (error)`.
pub fn event_label(body: &EventBody) -> String {
    match body {
        EventBody::UserMessage(_) => "user".into(),
        EventBody::AssistantMessage(_) => "assistant".into(),
        EventBody::ToolResult(r) => {
            let status = if r.is_error { " (error)" } else { "" };
            format!("tool result {}{status}", one_line(&r.name, 60))
        }
        EventBody::Notification(_) => "notification".into(),
        EventBody::Kernel(n) => format!("kernel {}", kernel_note_label(n.kind)),
        EventBody::KernelContext(_) => "kernel context".into(),
        EventBody::ManualCompact => "manual compact".into(),
        EventBody::Extension(e) => format!("extension {}", one_line(&e.kind, 60)),
    }
}

/// `text` on one line (newlines and tabs as spaces), at most `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            count += 1;
            space = false;
        }
        if count >= max {
            out.push('…');
            break;
        }
        out.push(c);
        count += 1;
    }
    out
}

/// `text` cut so that it costs at most `max_tokens`, with a note saying how
/// much was left in the durable log.
pub fn truncate_tokens(profile: EstimatorProfile, text: &str, max_tokens: u64) -> String {
    if estimate(profile, text) as u64 <= max_tokens {
        return text.to_string();
    }
    const NOTE_TOKENS: u64 = 32;
    let budget = max_tokens.saturating_sub(NOTE_TOKENS) * 4;
    let mut used = 0u64;
    let mut end = 0usize;
    for (i, c) in text.char_indices() {
        let q = crate::estimate::char_quarters(profile, c);
        if used + q > budget {
            break;
        }
        used += q;
        end = i + c.len_utf8();
    }
    let rest = text[end..].chars().count();
    format!(
        "{}\n[cut: {rest} more characters in the durable log]",
        &text[..end]
    )
}
