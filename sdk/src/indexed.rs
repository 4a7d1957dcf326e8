//! [`IndexedSession`]: a [`MemorySession`] with an inverted word index, so
//! search costs what a real full-text index costs, for benchmarks and
//! generated sessions of 100k events.

use crate::engine::SessionView;
use crate::memory::MemorySession;
use crate::text::{event_search_text, tokenize_words};
use crate::types::*;
use std::collections::BTreeMap;

/// An in-memory session whose search follows [`MemorySession`]'s rules (every
/// query word must match; newest first) through a word index. Append with
/// [`IndexedSession::push`] so the index stays complete.
#[derive(Clone, Debug)]
pub struct IndexedSession {
    inner: MemorySession,
    postings: BTreeMap<String, Vec<u32>>,
}

impl IndexedSession {
    /// An empty session for `model`.
    pub fn new(id: &str, model: ModelProfile) -> Self {
        IndexedSession {
            inner: MemorySession::new(id, model),
            postings: BTreeMap::new(),
        }
    }

    /// The underlying in-memory session.
    pub fn memory(&self) -> &MemorySession {
        &self.inner
    }

    /// The event with sequence number `seq`, if the session has it.
    pub fn event(&self, seq: u64) -> Option<&Event> {
        let events = &self.inner.events;
        events
            .binary_search_by_key(&seq, |e| e.seq)
            .ok()
            .map(|i| &events[i])
    }

    /// The canonical state returned to engines, for callers to change.
    pub fn state_mut(&mut self) -> &mut CanonicalState {
        &mut self.inner.state
    }

    /// Place the session (see [`MemorySession::set_origin`]).
    pub fn set_origin(&mut self, workspace: &str, clock_ms: u64) {
        self.inner.set_origin(workspace, clock_ms);
    }

    /// Skip sequence numbers (other sessions' events in a shared store).
    pub fn skip_seqs(&mut self, n: u64) {
        self.inner.skip_seqs(n);
    }

    /// Append an event and index its words; returns its sequence number.
    pub fn push(&mut self, body: EventBody) -> u64 {
        let seq = self.inner.push(body);
        let idx = (self.inner.events.len() - 1) as u32;
        if let Some(e) = self.inner.events.last() {
            let mut words = tokenize_words(&event_search_text(&e.body));
            words.sort_unstable();
            words.dedup();
            for w in words {
                self.postings.entry(w).or_default().push(idx);
            }
        }
        seq
    }

    /// Persist kernel-context entries as the host does before a request.
    pub fn persist(&mut self, entries: &[KernelContextEntry]) {
        for e in entries {
            self.push(EventBody::KernelContext(e.clone()));
        }
    }
}

impl SessionView for IndexedSession {
    fn info(&self) -> SessionInfo {
        self.inner.info()
    }
    fn latest_seq(&self) -> u64 {
        self.inner.latest_seq()
    }
    fn events(&self, from: u64, to: u64, limit: u32) -> Vec<Event> {
        self.inner.events(from, to, limit)
    }
    fn events_before(&self, before: u64, limit: u32) -> Vec<Event> {
        self.inner.events_before(before, limit)
    }
    fn events_outline(
        &self,
        from: u64,
        to: u64,
        limit: u32,
        profile: EstimatorProfile,
    ) -> Vec<OutlinedEvent> {
        self.inner.events_outline(from, to, limit, profile)
    }
    fn search(&self, query: &str, before: u64, limit: u32) -> Vec<SearchHit> {
        let words = tokenize_words(query);
        if words.is_empty() {
            return Vec::new();
        }
        let mut lists: Vec<&Vec<u32>> = Vec::new();
        for w in &words {
            match self.postings.get(w) {
                Some(l) => lists.push(l),
                None => return Vec::new(),
            }
        }
        lists.sort_by_key(|l| l.len());
        let max = limit.min(crate::MAX_SEARCH) as usize;
        let events = &self.inner.events;
        let end = events.partition_point(|e| e.seq < before) as u32;
        let shortest = lists[0];
        let below = shortest.partition_point(|idx| *idx < end);
        shortest[..below]
            .iter()
            .rev()
            .filter(|idx| lists[1..].iter().all(|l| l.binary_search(idx).is_ok()))
            .take(max)
            .map(|&idx| {
                let e = &self.inner.events[idx as usize];
                let text = event_search_text(&e.body);
                SearchHit {
                    event: e.clone(),
                    snippet: text.chars().take(400).collect(),
                }
            })
            .collect()
    }
    fn canonical_state(&self) -> CanonicalState {
        self.inner.canonical_state()
    }
    fn artifact(&self, sha256: &str) -> Option<MediaRef> {
        self.inner.artifact(sha256)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexed_search_equals_memory_search() {
        let model = ModelProfile::with_defaults("openai", "m");
        let mut indexed = IndexedSession::new("s", model.clone());
        let mut plain = MemorySession::new("s", model);
        for i in 0..300 {
            let text = format!("turn {i} error E{} in src/file{}.rs", i % 7, i % 5);
            indexed.push(EventBody::UserMessage(vec![Part::Text(text.clone())]));
            plain.push(EventBody::UserMessage(vec![Part::Text(text)]));
        }
        for (q, limit) in [
            ("E3 file2", 5),
            ("error", 200),
            ("turn 17", 3),
            ("missing", 10),
            ("", 10),
        ] {
            for before in [u64::MAX, 150, 1] {
                let a: Vec<u64> = indexed
                    .search(q, before, limit)
                    .iter()
                    .map(|h| h.event.seq)
                    .collect();
                let b: Vec<u64> = plain
                    .search(q, before, limit)
                    .iter()
                    .map(|h| h.event.seq)
                    .collect();
                assert_eq!(a, b, "query {q:?} before {before}");
            }
        }
    }
}
