//! Deterministic full-text recall over SQLite FTS5.
//!
//! Every event's [`latch_engine_sdk::event_search_text`] is indexed (the same
//! text the SDK's in-memory session searches, so both agree). Queries are plain
//! words: each word is quoted, so FTS syntax in a query can neither fail nor
//! inject operators, and all words must match (AND). Rows come newest first.

use super::events::{decode, read_event};
use super::{Result, Store};
use crate::event::StoredEvent;
use latch_engine_sdk::{event_search_text, tokenize_words};
use rusqlite::params;

/// Most characters of a search snippet.
pub const SNIPPET_CHARS: usize = 400;

/// One search hit.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchRow {
    /// The matching event.
    pub event: StoredEvent,
    /// The indexed text around the first match, at most [`SNIPPET_CHARS`]
    /// characters.
    pub snippet: String,
}

/// The FTS5 expression for a plain-words query: every word quoted, joined by
/// spaces (AND). `None` when the query has no words (it matches nothing).
pub fn fts_query(query: &str) -> Option<String> {
    let words = tokenize_words(query);
    if words.is_empty() {
        return None;
    }
    let mut seen = std::collections::BTreeSet::new();
    let quoted: Vec<String> = words
        .into_iter()
        .filter(|w| seen.insert(w.clone()))
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    Some(quoted.join(" "))
}

/// The indexed text around the first word of `words` it contains, at most
/// [`SNIPPET_CHARS`] characters: the snippet of a search hit.
pub fn snippet(text: &str, words: &[String]) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= SNIPPET_CHARS {
        return text.to_string();
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut hit = 0usize;
    let mut i = 0usize;
    while i < chars.len() {
        if !is_word(chars[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_word(chars[i]) {
            i += 1;
        }
        let word = chars[start..i].iter().collect::<String>().to_lowercase();
        if words.contains(&word) {
            hit = start;
            break;
        }
    }
    let begin = hit
        .saturating_sub(SNIPPET_CHARS / 4)
        .min(chars.len() - SNIPPET_CHARS);
    chars[begin..begin + SNIPPET_CHARS].iter().collect()
}

impl Store {
    /// Full-text search over `session`'s events: every query word must occur;
    /// newest first; at most `limit` rows. An empty query returns nothing.
    pub fn search(&self, session: &str, query: &str, limit: u32) -> Result<Vec<SearchRow>> {
        self.search_before(session, query, u64::MAX, limit)
    }

    /// [`Store::search`] over the events with `seq < before` only.
    pub fn search_before(
        &self,
        session: &str,
        query: &str,
        before: u64,
        limit: u32,
    ) -> Result<Vec<SearchRow>> {
        let before = before.min(i64::MAX as u64);
        let Some(expr) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let words = tokenize_words(query);
        let rows = {
            let conn = self.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT e.seq, e.session, e.kind, e.body, e.time_ms
                 FROM events_fts f JOIN events e ON e.seq = f.rowid
                 WHERE events_fts MATCH ?1 AND e.session = ?2 AND f.rowid < ?4
                 ORDER BY f.rowid DESC LIMIT ?3",
            )?;
            stmt.query_map(params![expr, session, limit, before], read_event)?
                .collect::<rusqlite::Result<Vec<_>>>()?
        };
        rows.into_iter()
            .map(|raw| {
                let event = decode(raw)?;
                let text = event_search_text(&event.kind.to_sdk_body());
                Ok(SearchRow {
                    snippet: snippet(&text, &words),
                    event,
                })
            })
            .collect()
    }

    /// Bounded recall: select the newest `limit` matching events (a later
    /// revision wins over an older turn repeating a term), then return them in
    /// chronological order.
    pub fn recall(&self, session: &str, query: &str, limit: u32) -> Result<Vec<StoredEvent>> {
        let mut events: Vec<StoredEvent> = self
            .search(session, query, limit)?
            .into_iter()
            .map(|r| r.event)
            .collect();
        events.sort_by_key(|e| e.seq);
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_quote_every_word() {
        assert_eq!(fts_query("  "), None);
        assert_eq!(fts_query("*** -- ()"), None);
        assert_eq!(
            fts_query("E0425 OR NOT \"x\" NEAR(a b)"),
            Some(r#""e0425" "or" "not" "x" "near" "a" "b""#.to_string())
        );
        assert_eq!(fts_query("a a A"), Some(r#""a""#.to_string()));
    }

    #[test]
    fn snippets_center_on_the_match() {
        let text = format!("{} needle {}", "x ".repeat(500), "y ".repeat(500));
        let s = snippet(&text, &["needle".to_string()]);
        assert_eq!(s.chars().count(), SNIPPET_CHARS);
        assert!(s.contains("needle"));
        assert_eq!(snippet("short", &[]), "short");
    }
}
