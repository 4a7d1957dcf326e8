//! Targeted recall of original events through the host's full-text search.
//!
//! The query's content words are searched together first; when nothing in
//! the archival region matches, the three longest words, then the longest
//! one alone. Rows come newest first, so later revisions win when older
//! turns repeat a term. Only archival events (older than the epoch's first
//! retained conversation event) are eligible: the rest is already visible.

use std::collections::BTreeSet;

use latch_engine_sdk::SessionView;
use latch_engine_sdk::types::*;

use crate::episodes::keywords;

/// Most words of a query used for search.
const MAX_QUERY_WORDS: usize = 8;

/// The content words of a recall query, in first-seen order.
pub fn query_words(query: &str) -> Vec<String> {
    keywords(query).into_iter().take(MAX_QUERY_WORDS).collect()
}

/// The word set used for lexical scoring.
pub fn query_set(query: &str) -> BTreeSet<String> {
    query_words(query).into_iter().collect()
}

/// The successive searches tried for `words`.
fn searches(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    if words.is_empty() {
        return out;
    }
    out.push(words.join(" "));
    let mut longest: Vec<&String> = words.iter().collect();
    longest.sort_by(|a, b| b.chars().count().cmp(&a.chars().count()).then(a.cmp(b)));
    if words.len() > 3 {
        let mut three: Vec<&str> = longest.iter().take(3).map(|s| s.as_str()).collect();
        three.sort_unstable();
        out.push(three.join(" "));
    }
    if words.len() > 1
        && let Some(first) = longest.first()
    {
        out.push(first.to_string());
    }
    out
}

/// The newest `limit` archival events (`seq < before`) matching `query`,
/// newest first, minus those in `exclude`.
pub fn archival_hits(
    session: &dyn SessionView,
    query: &str,
    before: u64,
    limit: u32,
    exclude: &BTreeSet<u64>,
) -> Vec<Event> {
    if limit == 0 {
        return Vec::new();
    }
    let words = query_words(query);
    for q in searches(&words) {
        let hits: Vec<Event> = session
            .search(&q, latch_engine_sdk::MAX_SEARCH)
            .into_iter()
            .map(|h| h.event)
            .filter(|e| e.seq < before && recallable(&e.body))
            .collect();
        if hits.is_empty() {
            continue;
        }
        // The newest `limit` matches are the selection; those already shown
        // in the epoch are not repeated (and older matches do not move up).
        return hits
            .into_iter()
            .take(limit as usize)
            .filter(|e| !exclude.contains(&e.seq))
            .collect();
    }
    Vec::new()
}

/// True for events whose original text recall may show.
fn recallable(body: &EventBody) -> bool {
    !matches!(body, EventBody::KernelContext(_) | EventBody::ManualCompact)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_fall_back_to_the_longest_words() {
        let words = query_words("please fix the frobnicate_widget error in parser module quickly");
        assert_eq!(words[0], "fix");
        let s = searches(&words);
        assert_eq!(s.len(), 3);
        assert_eq!(s[2], "frobnicate_widget");
        assert!(searches(&[]).is_empty());
    }
}
