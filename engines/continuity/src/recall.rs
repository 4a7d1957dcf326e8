//! Targeted recall of original events through the host's full-text search.
//!
//! The query's content words are searched together first; when nothing in
//! the archival region matches, the three longest words, then the longest
//! one alone. Rows come newest first, so later revisions win when older
//! turns repeat a term. Only archival events (older than the epoch's first
//! retained conversation event) are eligible: the rest is already visible.

use std::collections::{BTreeMap, BTreeSet};

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

/// What earlier searches of the current epoch proved, so that a request does
/// not repeat searches that cannot recall anything new.
///
/// Searches are bounded by the epoch start (`before`), and events appended
/// later are never older than it, so within an epoch the archival selection
/// of a search never changes. When every search of a query once selected
/// only events that are now all shown (or nothing), the query recalls nothing
/// new now either, exactly as a fresh instance searching again would find.
#[derive(Clone, Debug, Default)]
pub struct SearchMemo {
    /// The epoch start the memo is for.
    before: u64,
    /// The archival selection (`limit` newest) each search string once had.
    seen: BTreeMap<String, Vec<u64>>,
}

impl SearchMemo {
    /// The newest `limit` archival events (`seq < before`) matching `query`,
    /// newest first, minus those in `exclude`; the searches are skipped when
    /// the memo proves that they select nothing new.
    pub fn archival_hits(
        &mut self,
        session: &dyn SessionView,
        query: &str,
        before: u64,
        limit: u32,
        exclude: &BTreeSet<u64>,
    ) -> Vec<Event> {
        if limit == 0 {
            return Vec::new();
        }
        if self.before != before {
            self.before = before;
            self.seen.clear();
        }
        let words = query_words(query);
        let searches = searches(&words);
        let spent = |seen: &BTreeMap<String, Vec<u64>>, q: &String| {
            seen.get(q)
                .is_some_and(|s| s.iter().all(|seq| exclude.contains(seq)))
        };
        if searches.iter().all(|q| spent(&self.seen, q)) {
            return Vec::new();
        }
        let mut result = None;
        for q in &searches {
            if result.is_some() && spent(&self.seen, q) {
                continue;
            }
            let hits: Vec<Event> = session
                .search(q, before, limit)
                .into_iter()
                .map(|h| h.event)
                .filter(|e| e.seq < before && recallable(&e.body))
                .take(limit as usize)
                .collect();
            self.seen
                .insert(q.clone(), hits.iter().map(|e| e.seq).collect());
            match &result {
                // Searched only to complete the memo: the answer is known.
                Some(_) => continue,
                None if hits.is_empty() => continue,
                None => {}
            }
            // The newest `limit` matches are the selection; those already
            // shown in the epoch are not repeated (and older matches do not
            // move up).
            let fresh: Vec<Event> = hits
                .into_iter()
                .filter(|e| !exclude.contains(&e.seq))
                .collect();
            if !fresh.is_empty() {
                return fresh;
            }
            // Nothing new: the later searches are run once, to learn that
            // they are spent too.
            result = Some(());
        }
        Vec::new()
    }
}

/// True for events whose original text recall may show.
fn recallable(body: &EventBody) -> bool {
    !matches!(body, EventBody::KernelContext(_) | EventBody::ManualCompact)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::MemorySession;
    use std::cell::Cell;

    /// A session that counts searches.
    struct Counting<'a>(&'a MemorySession, Cell<usize>);

    impl SessionView for Counting<'_> {
        fn info(&self) -> SessionInfo {
            self.0.info()
        }
        fn latest_seq(&self) -> u64 {
            self.0.latest_seq()
        }
        fn events(&self, from: u64, to: u64, limit: u32) -> Vec<Event> {
            self.0.events(from, to, limit)
        }
        fn events_before(&self, before: u64, limit: u32) -> Vec<Event> {
            self.0.events_before(before, limit)
        }
        fn search(&self, query: &str, before: u64, limit: u32) -> Vec<SearchHit> {
            self.1.set(self.1.get() + 1);
            self.0.search(query, before, limit)
        }
        fn canonical_state(&self) -> CanonicalState {
            self.0.canonical_state()
        }
        fn artifact(&self, sha256: &str) -> Option<MediaRef> {
            self.0.artifact(sha256)
        }
    }

    #[test]
    fn spent_searches_are_skipped_with_the_same_answer() {
        let mut s = MemorySession::new("s", ModelProfile::with_defaults("openai", "m"));
        s.user("the parser panics on empty input");
        s.user("the lexer drops the last token");
        let before = s.latest_seq() + 1;
        let query = "widget parser";
        let mut memo = SearchMemo::default();
        let mut shown = BTreeSet::new();
        let check = |memo: &mut SearchMemo, s: &MemorySession, shown: &BTreeSet<u64>| {
            let counting = Counting(s, Cell::new(0));
            let got = memo.archival_hits(&counting, query, before, 8, shown);
            let fresh = SearchMemo::default().archival_hits(s, query, before, 8, shown);
            let seqs = |v: &[Event]| v.iter().map(|e| e.seq).collect::<Vec<_>>();
            assert_eq!(seqs(&got), seqs(&fresh));
            (seqs(&got), counting.1.get())
        };
        let (first, searched) = check(&mut memo, &s, &shown);
        assert_eq!(first, vec![1], "the longest word recalls the parser turn");
        assert_eq!(searched, 2);
        shown.extend(first);
        // Everything selected is shown: the searches are skipped, also as
        // the epoch grows.
        assert_eq!(check(&mut memo, &s, &shown), (vec![], 0));
        s.user("the widget parser, once more");
        assert_eq!(check(&mut memo, &s, &shown), (vec![], 0));
        // A new epoch start forgets the memo.
        let (later, searched) = {
            let counting = Counting(&s, Cell::new(0));
            let got = memo.archival_hits(&counting, query, before + 5, 8, &shown);
            (got.len(), counting.1.get())
        };
        assert_eq!((later, searched), (1, 1));
    }

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
