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
    keywords(query, MAX_QUERY_WORDS)
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

/// An archival event a search selected, rendered for recall.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Its sequence number.
    pub seq: u64,
    /// The recall entry's text.
    pub text: String,
    /// The entry's canonical price.
    pub tokens: u64,
}

/// Most search strings the memo keeps before it starts over.
const MAX_MEMO_SEARCHES: usize = 64;

/// The current epoch's searches and what they selected, rendered, so that
/// a request repeats neither a search nor the rendering of its hits.
///
/// Searches are bounded by the epoch start (`before`), and events appended
/// later are never older than it, so within an epoch the archival selection
/// of a search never changes: an answer from the memo is exactly what a
/// fresh instance searching again finds. A new epoch start forgets it.
#[derive(Clone, Debug, Default)]
pub struct SearchMemo {
    /// The epoch start the memo is for.
    before: u64,
    /// The archival selection (`limit` newest, newest first) of each search
    /// string.
    seen: BTreeMap<String, Vec<Candidate>>,
    /// The last query and its search strings (a query usually stays the
    /// same for every request of a user turn).
    query: Option<(String, Vec<String>)>,
}

impl SearchMemo {
    /// The newest `limit` archival events (`seq < before`) matching `query`,
    /// newest first and rendered by `render`, minus those in `exclude`. The
    /// query's searches are tried in turn; the first that selects anything
    /// answers (with nothing when all it selects is excluded).
    pub fn archival_hits(
        &mut self,
        session: &dyn SessionView,
        query: &str,
        (before, limit): (u64, u32),
        exclude: &BTreeSet<u64>,
        render: impl Fn(&Event) -> Candidate,
    ) -> Vec<&Candidate> {
        if limit == 0 {
            return Vec::new();
        }
        if self.before != before || self.seen.len() >= MAX_MEMO_SEARCHES {
            self.before = before;
            self.seen.clear();
        }
        if self.query.as_ref().is_none_or(|(q, _)| q != query) {
            self.query = Some((query.to_string(), searches(&query_words(query))));
        }
        let strings = self
            .query
            .as_ref()
            .map(|(_, s)| s.as_slice())
            .unwrap_or(&[]);
        let mut answer = None;
        for q in strings {
            if !self.seen.contains_key(q) {
                let selected: Vec<Candidate> = session
                    .search(q, before, limit)
                    .into_iter()
                    .map(|h| h.event)
                    .filter(|e| e.seq < before && recallable(&e.body))
                    .take(limit as usize)
                    .map(|e| render(&e))
                    .collect();
                self.seen.insert(q.clone(), selected);
            }
            if self.seen.get(q).is_some_and(|s| !s.is_empty()) {
                answer = Some(q);
                break;
            }
        }
        // The newest `limit` matches are the selection; those already shown
        // in the epoch are not repeated (and older matches do not move up).
        answer
            .and_then(|q| self.seen.get(q))
            .map(|selected| {
                selected
                    .iter()
                    .filter(|c| !exclude.contains(&c.seq))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The port's `recall`: the newest `limit` original events of the whole log
/// matching `query`, in chronological order. The query's searches are tried
/// in turn as for [`SearchMemo::archival_hits`] (all content words, then the
/// three longest, then the longest), so a model's wordy query still finds
/// the event that carries its rarest word.
pub fn search_log(session: &dyn SessionView, query: &str, limit: u32) -> Vec<Event> {
    if limit == 0 {
        return Vec::new();
    }
    for q in searches(&query_words(query)) {
        let mut found: Vec<Event> = session
            .search(&q, u64::MAX, limit)
            .into_iter()
            .map(|h| h.event)
            .filter(|e| recallable(&e.body))
            .take(limit as usize)
            .collect();
        if !found.is_empty() {
            found.sort_by_key(|e| e.seq);
            return found;
        }
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

    fn render(e: &Event) -> Candidate {
        Candidate {
            seq: e.seq,
            text: format!("event {}", e.seq),
            tokens: 1,
        }
    }

    #[test]
    fn repeated_searches_are_answered_from_the_memo() {
        let mut s = MemorySession::new("s", ModelProfile::with_defaults("openai", "m"));
        s.user("the parser panics on empty input");
        s.user("the lexer drops the last token");
        let before = s.latest_seq() + 1;
        let query = "widget parser";
        let mut memo = SearchMemo::default();
        let mut shown = BTreeSet::new();
        let check = |memo: &mut SearchMemo, s: &MemorySession, shown: &BTreeSet<u64>| {
            let counting = Counting(s, Cell::new(0));
            let rendered = Cell::new(0);
            let got: Vec<u64> = memo
                .archival_hits(&counting, query, (before, 8), shown, |e| {
                    rendered.set(rendered.get() + 1);
                    render(e)
                })
                .iter()
                .map(|c| c.seq)
                .collect();
            let fresh: Vec<u64> = SearchMemo::default()
                .archival_hits(s, query, (before, 8), shown, render)
                .iter()
                .map(|c| c.seq)
                .collect();
            assert_eq!(got, fresh, "the memo answers as a fresh search does");
            (got, counting.1.get(), rendered.get())
        };
        // "widget parser" selects nothing; "parser" selects the first turn.
        assert_eq!(check(&mut memo, &s, &shown), (vec![1], 2, 1));
        // The same query again: no search, no rendering, the same answer.
        assert_eq!(check(&mut memo, &s, &shown), (vec![1], 0, 0));
        shown.insert(1);
        // Everything selected is shown: nothing new, still without a search,
        // also as the epoch grows.
        assert_eq!(check(&mut memo, &s, &shown), (vec![], 0, 0));
        s.user("the widget parser, once more");
        assert_eq!(check(&mut memo, &s, &shown), (vec![], 0, 0));
        // A new epoch start forgets the memo.
        let counting = Counting(&s, Cell::new(0));
        let later = memo
            .archival_hits(&counting, query, (before + 5, 8), &shown, render)
            .len();
        assert_eq!((later, counting.1.get()), (1, 1));
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
