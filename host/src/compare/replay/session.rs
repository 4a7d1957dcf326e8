//! [`ReplaySession`]: the read-only session one engine is given during a
//! replay — the recorded log as it stood at a request, with this engine's
//! own kernel-context entries in place of the recorded engine's.
//!
//! It answers every `session-view` call the way the store's view
//! (`StoreSessionView::for_engine`) answers it: engine-hidden kinds left
//! out of reads and search, search by the store's rules (every word,
//! newest first, the store's snippets), canonical state and workspace
//! generation from the kernel's own reducer over the session's workspace
//! log, the event count with every own event. Sequence numbers are the
//! recording's, moved up where this engine persisted more entries than the
//! recorded one had room for (later events shift; none the engine has seen
//! moves).

use super::super::recording::{Logged, Recorded};
use latch_engine_sdk::types::*;
use latch_engine_sdk::{
    MAX_PAGE, MAX_SEARCH, SessionView, event_search_text, outline, tokenize_words,
};
use latch_kernel::{EventKind, KernelState, StoredEvent};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One engine's session during a replay.
pub struct ReplaySession {
    id: String,
    parent: Option<String>,
    workspace: String,
    model: ModelProfile,
    /// Own events an engine can read, ascending by (replayed) sequence
    /// number.
    visible: Vec<Event>,
    /// Replayed sequence number of each recorded visible event, by its
    /// recording's number.
    replayed: HashMap<u64, u64>,
    /// Word → indexes into `visible` of the events whose search text has it.
    postings: HashMap<String, Vec<u32>>,
    /// The kernel's reducer over the workspace log as replayed.
    reducer: KernelState,
    /// Own events so far, hidden kinds included.
    own_events: u64,
    /// The session's user messages so far: replayed sequence number, text.
    users: Vec<(u64, String)>,
    artifacts: Arc<BTreeMap<String, MediaRef>>,
}

impl ReplaySession {
    /// An empty session `id` of `workspace`.
    pub fn new(
        id: &str,
        parent: Option<String>,
        workspace: &str,
        model: ModelProfile,
        artifacts: Arc<BTreeMap<String, MediaRef>>,
    ) -> Self {
        ReplaySession {
            id: id.to_string(),
            parent,
            workspace: workspace.to_string(),
            model,
            visible: Vec::new(),
            replayed: HashMap::new(),
            postings: HashMap::new(),
            reducer: KernelState::new(id),
            own_events: 0,
            users: Vec::new(),
            artifacts,
        }
    }

    /// Append the recorded event `logged` at replayed sequence number `seq`.
    pub fn push(&mut self, logged: &Logged, seq: u64) {
        let own = logged.session == self.id;
        if own {
            self.own_events += 1;
        }
        let Recorded::Event(kind) = &logged.event else {
            return;
        };
        let stored = StoredEvent {
            seq,
            session: logged.session.clone(),
            time_ms: logged.time_ms,
            kind: kind.clone(),
        };
        self.reducer.apply(&stored);
        if own && !kind.hidden_from_engines() {
            if let EventKind::UserMessage { parts } = kind {
                let text: Vec<&str> = parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Text(t) => Some(t.as_str()),
                        _ => None,
                    })
                    .collect();
                self.users.push((seq, text.join("\n")));
            }
            self.replayed.insert(logged.seq, seq);
            self.add_visible(stored.to_sdk());
        }
    }

    /// Append this engine's own kernel-context entry at `seq`.
    pub fn push_entry(&mut self, engine: &str, entry: KernelContextEntry, seq: u64, time_ms: u64) {
        self.own_events += 1;
        let stored = StoredEvent {
            seq,
            session: self.id.clone(),
            time_ms,
            kind: EventKind::kernel_context(engine, entry),
        };
        self.reducer.apply(&stored);
        self.add_visible(stored.to_sdk());
    }

    fn add_visible(&mut self, event: Event) {
        let idx = self.visible.len() as u32;
        let mut words = tokenize_words(&event_search_text(&event.body));
        words.sort_unstable();
        words.dedup();
        for w in words {
            self.postings.entry(w).or_default().push(idx);
        }
        self.visible.push(event);
    }

    /// The replayed sequence number of the visible event recorded at
    /// `recorded_seq`, once it is in the session.
    pub fn replayed_seq(&self, recorded_seq: u64) -> Option<u64> {
        self.replayed.get(&recorded_seq).copied()
    }

    /// The session's user messages so far: replayed sequence number, text.
    pub fn user_messages(&self) -> &[(u64, String)] {
        &self.users
    }

    /// The kernel's reducer as of the latest event.
    pub fn reducer(&self) -> &KernelState {
        &self.reducer
    }

    fn start_of(&self, seq: u64) -> usize {
        self.visible.partition_point(|e| e.seq < seq)
    }
}

impl SessionView for ReplaySession {
    fn info(&self) -> SessionInfo {
        let (generation, revision) = self.reducer.kernel_context_high();
        SessionInfo {
            id: self.id.clone(),
            parent_id: self.parent.clone(),
            workspace: self.workspace.clone(),
            workspace_generation: self.reducer.generation(),
            model: self.model.clone(),
            event_count: self.own_events,
            state_revision: self.reducer.revision(),
            kernel_context_generation: generation,
            kernel_context_revision: revision,
        }
    }

    fn latest_seq(&self) -> u64 {
        self.visible.last().map_or(0, |e| e.seq)
    }

    fn events(&self, from: u64, to: u64, limit: u32) -> Vec<Event> {
        self.visible[self.start_of(from)..]
            .iter()
            .take_while(|e| e.seq < to)
            .take(limit.min(MAX_PAGE) as usize)
            .cloned()
            .collect()
    }

    fn events_outline(
        &self,
        from: u64,
        to: u64,
        limit: u32,
        profile: EstimatorProfile,
    ) -> Vec<OutlinedEvent> {
        self.visible[self.start_of(from)..]
            .iter()
            .take_while(|e| e.seq < to)
            .take(limit.min(MAX_PAGE) as usize)
            .map(|e| outline(profile, e))
            .collect()
    }

    fn events_before(&self, before: u64, limit: u32) -> Vec<Event> {
        self.visible[..self.start_of(before)]
            .iter()
            .rev()
            .take(limit.min(MAX_PAGE) as usize)
            .cloned()
            .collect()
    }

    fn search(&self, query: &str, before: u64, limit: u32) -> Vec<SearchHit> {
        let mut words = tokenize_words(query);
        words.sort_unstable();
        words.dedup();
        if words.is_empty() {
            return Vec::new();
        }
        let mut lists: Vec<&Vec<u32>> = Vec::with_capacity(words.len());
        for w in &words {
            match self.postings.get(w) {
                Some(l) => lists.push(l),
                None => return Vec::new(),
            }
        }
        lists.sort_by_key(|l| l.len());
        let end = self.start_of(before) as u32;
        let shortest = lists[0];
        let below = shortest.partition_point(|i| *i < end);
        shortest[..below]
            .iter()
            .rev()
            .filter(|i| lists[1..].iter().all(|l| l.binary_search(i).is_ok()))
            .map(|&i| &self.visible[i as usize])
            .filter(|e| !event_search_text(&e.body).trim().is_empty())
            .take(limit.min(MAX_SEARCH) as usize)
            .map(|e| SearchHit {
                event: e.clone(),
                snippet: latch_kernel::store::snippet(&event_search_text(&e.body), &words),
            })
            .collect()
    }

    fn canonical_state(&self) -> CanonicalState {
        self.reducer.canonical()
    }

    fn artifact(&self, sha256: &str) -> Option<MediaRef> {
        self.artifacts.get(sha256).cloned()
    }
}
