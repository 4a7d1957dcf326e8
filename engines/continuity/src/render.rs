//! Provider-visible text: the session-context message, conversation messages,
//! kernel-context messages and the one-line headers the engine reads back.
//!
//! Every kernel-context entry begins with an engine-written header line. The
//! engine parses only that line when it reads its own entries back from the
//! log, so the epoch's bookkeeping (where working memory starts, which state
//! revision was rendered, which events were recalled) is reconstructible from
//! durable events alone.

use latch_engine_sdk::event_search_text;
use latch_engine_sdk::types::*;
pub use latch_engine_sdk::validate::{kernel_message, session_context_message};
pub use latch_engine_sdk::{event_label, one_line, truncate_tokens};

/// Separator between header fields.
pub const SEP: &str = " · ";
/// First words of a snapshot header.
pub const SNAPSHOT_TITLE: &str = "Latch context snapshot";
/// First words of a state-update header.
pub const STATE_UPDATE_TITLE: &str = "Task state update";
/// First words of a recalled-original header.
pub const RECALL_TITLE: &str = "Recalled original";
/// First words of an episode-index header.
pub const INDEX_TITLE: &str = "Episode index";
/// First words of a re-ground header.
pub const REGROUND_TITLE: &str = "Re-ground instruction";
/// Text of the extension entry when there are no extension sources.
pub const NO_EXTENSIONS: &str = "Extension sources\n\n(none)";

/// What a snapshot records about its epoch, on its first line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// Conversation events with `seq >= start` belong to the epoch.
    pub start: u64,
    /// The canonical state revision the snapshot renders.
    pub state_revision: u64,
    /// Conversation tokens retained when the epoch started.
    pub retained: u64,
    /// Conversation tokens that left working memory when it started.
    pub evicted: u64,
    /// Episodes of the archive (before `start`) when the epoch started.
    pub archived_episodes: u64,
    /// Why the epoch started: `None` for the session's first epoch.
    pub reason: Option<String>,
}

impl SnapshotHeader {
    /// The header line for an epoch of `generation`.
    pub fn line(&self, generation: u64) -> String {
        format!(
            "{SNAPSHOT_TITLE}{SEP}epoch {generation}{SEP}working memory from event {}{SEP}state revision {}{SEP}retained {} tokens{SEP}evicted {} tokens{SEP}archived episodes {}{SEP}reason: {}",
            self.start,
            self.state_revision,
            self.retained,
            self.evicted,
            self.archived_episodes,
            self.reason.as_deref().unwrap_or("none")
        )
    }

    /// Parse a snapshot's text; `None` when it was not written by this engine.
    pub fn parse(text: &str) -> Option<SnapshotHeader> {
        let line = first_line(text);
        if !line.starts_with(SNAPSHOT_TITLE) {
            return None;
        }
        let reason = field(line, "reason: ")?;
        Some(SnapshotHeader {
            start: field(line, "working memory from event ")?.parse().ok()?,
            state_revision: field(line, "state revision ")?.parse().ok()?,
            retained: tokens_field(line, "retained ")?,
            evicted: tokens_field(line, "evicted ")?,
            archived_episodes: field(line, "archived episodes ")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            reason: (reason != "none").then(|| reason.to_string()),
        })
    }
}

/// The header line of a state update.
pub fn state_update_line(state_revision: u64) -> String {
    format!("{STATE_UPDATE_TITLE}{SEP}state revision {state_revision}")
}

/// The state revision a state update renders.
pub fn parse_state_update(text: &str) -> Option<u64> {
    let line = first_line(text);
    if !line.starts_with(STATE_UPDATE_TITLE) {
        return None;
    }
    field(line, "state revision ")?.parse().ok()
}

/// The event a recalled-original entry carries.
pub fn parse_recall(text: &str) -> Option<u64> {
    let line = first_line(text);
    if !line.starts_with(RECALL_TITLE) {
        return None;
    }
    field(line, "event ")?.parse().ok()
}

/// How many episodes an index entry shows.
pub fn parse_index_shown(text: &str) -> Option<u32> {
    let line = first_line(text);
    if !line.starts_with(INDEX_TITLE) {
        return None;
    }
    let shown = line.split(SEP).nth(1)?;
    shown.split(' ').next()?.parse().ok()
}

fn first_line(text: &str) -> &str {
    text.split('\n').next().unwrap_or("")
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(SEP).find_map(|seg| seg.strip_prefix(key))
}

fn tokens_field(line: &str, key: &str) -> Option<u64> {
    field(line, key)?.strip_suffix(" tokens")?.parse().ok()
}

/// The recalled-original entry text for an event, cut at `max_tokens`.
pub fn recall_text(profile: EstimatorProfile, event: &Event, max_tokens: u64) -> String {
    let body = event_search_text(&event.body);
    format!(
        "{RECALL_TITLE}{SEP}event {}{SEP}{}\n\n{}",
        event.seq,
        event_label(&event.body),
        truncate_tokens(profile, &body, max_tokens)
    )
}

/// The extension-sources entry text (stable for an unchanged list).
pub fn extensions_text(sources: &[ExtensionSource]) -> String {
    if sources.is_empty() {
        return NO_EXTENSIONS.to_string();
    }
    let mut text = String::from("Extension sources");
    for s in sources {
        text.push_str("\n\n## ");
        text.push_str(&one_line(&s.name, 200));
        text.push('\n');
        text.push_str(&s.text);
    }
    text
}

/// The re-ground entry text for the kernel note at `seq`.
pub fn reground_text(seq: u64, summary: &str) -> String {
    format!(
        "{REGROUND_TITLE}{SEP}kernel note at event {seq}\n\nThe kernel reports repeated failure: {}\nStop repeating the failing step. Re-read the files involved and the task state above, check the active failure lineages, then choose a different approach.",
        one_line(summary, 2_000)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::estimate;

    #[test]
    fn headers_round_trip() {
        let h = SnapshotHeader {
            start: 1234,
            state_revision: 7,
            retained: 4800,
            evicted: 1600,
            archived_episodes: 12,
            reason: Some("working memory 6400 tokens exceeded 6000".into()),
        };
        let text = format!("{}\n\nbody", h.line(3));
        assert_eq!(SnapshotHeader::parse(&text), Some(h.clone()));
        let first = SnapshotHeader { reason: None, ..h };
        assert_eq!(SnapshotHeader::parse(&first.line(1)), Some(first));
        assert_eq!(
            parse_state_update(&format!("{}\n\nx", state_update_line(42))),
            Some(42)
        );
        assert_eq!(SnapshotHeader::parse("garbage"), None);
        assert_eq!(
            parse_state_update("Task state update · state revision x"),
            None
        );
        assert_eq!(
            parse_index_shown("Episode index · 12 of 40 episodes · archive before event 9"),
            Some(12)
        );
    }

    #[test]
    fn truncation_respects_the_budget() {
        for p in [EstimatorProfile::Openai, EstimatorProfile::CjkOptimized] {
            let text = "word, 日本語 ".repeat(500);
            let cut = truncate_tokens(p, &text, 200);
            assert!(estimate(p, &cut) as u64 <= 200, "{}", estimate(p, &cut));
            assert!(cut.contains("more characters in the durable log"));
            assert_eq!(truncate_tokens(p, "short", 200), "short");
        }
    }
}
