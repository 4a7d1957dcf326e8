//! [`StoreSessionView`]: the contract's read-only `session-view` over the
//! store, for one session. Engines get this and nothing else: bounded pages of
//! events, search, canonical state from the cached reducers, artifact metadata
//! and session facts.
//!
//! A view made [`StoreSessionView::for_engine`] shows an engine only the
//! kernel-context entries it wrote itself since the last entry of any other
//! engine: switching engines starts a fresh epoch from the log, and no
//! engine's text reaches another as authoritative. `info` still counts every
//! entry, so a new engine's entries rise above all of them.
//!
//! Every event read through the view has session-unique tool-call ids: a
//! log written by an older Latch that repeated a provider's id (`call_0` in
//! every response) is repaired as it is read (see
//! [`crate::state::call_ids`]), never rewritten.

use crate::event::{EventKind, StoredEvent};
use crate::store::{Result, SessionRecord, Store};
use latch_engine_sdk::types::{
    CanonicalState, EstimatorProfile, Event, MediaRef, OutlinedEvent, SearchHit, SessionInfo,
};
use latch_engine_sdk::{MAX_PAGE, MAX_SEARCH, SessionView, outline};
use std::sync::Arc;

/// A read-only view of one session of a [`Store`].
///
/// The fallible `try_*` methods report store errors; the [`SessionView`]
/// implementation panics on them with a clear message (the contract's methods
/// cannot fail: a broken store is a host failure, surfaced as a trap).
#[derive(Clone, Debug)]
pub struct StoreSessionView {
    store: Arc<Store>,
    record: SessionRecord,
    /// Kernel-context events with `seq <= hidden_through` are left out (0:
    /// none is).
    hidden_through: u64,
}

impl StoreSessionView {
    /// A view of `session` (tombstoned sessions included: the host decides
    /// what it resumes).
    pub fn new(store: Arc<Store>, session: &str) -> Result<Self> {
        let record = store.session(session)?;
        Ok(StoreSessionView {
            store,
            record,
            hidden_through: 0,
        })
    }

    /// The view `engine` (its configured name) is given: kernel-context
    /// entries written before the last entry of another engine, and that
    /// entry, are left out of every read.
    pub fn for_engine(store: Arc<Store>, session: &str, engine: &str) -> Result<Self> {
        let hidden_through = store.foreign_kernel_context_through(session, engine)?;
        let mut view = Self::new(store, session)?;
        view.hidden_through = hidden_through;
        Ok(view)
    }

    /// True when `event` is kernel context this view leaves out.
    fn hidden(&self, event: &StoredEvent) -> bool {
        event.seq <= self.hidden_through && matches!(event.kind, EventKind::KernelContext(_))
    }

    /// Read pages with `read(cursor, limit)` until `limit` visible events are
    /// found or the store has no more; `next` moves the cursor past a page.
    fn visible(
        &self,
        mut cursor: u64,
        limit: u32,
        read: impl Fn(u64, u32) -> Result<Vec<StoredEvent>>,
        next: impl Fn(u64) -> Option<u64>,
    ) -> Result<Vec<StoredEvent>> {
        let limit = limit.min(MAX_PAGE);
        let mut out = Vec::new();
        loop {
            let rows = read(cursor, limit)?;
            let full = rows.len() >= limit as usize;
            let last = rows.last().map(|e| e.seq);
            out.extend(rows.into_iter().filter(|e| !self.hidden(e)));
            match (full, last.and_then(&next)) {
                (true, Some(c)) if out.len() < limit as usize && self.hidden_through > 0 => {
                    cursor = c
                }
                _ => break,
            }
        }
        out.truncate(limit as usize);
        Ok(out)
    }

    /// `rows` as they read: repeated tool-call ids of an older log repaired.
    fn repaired(&self, mut rows: Vec<StoredEvent>) -> Result<Vec<StoredEvent>> {
        self.store.with_kernel(&self.record.id, |k| {
            let ids = k.call_ids();
            if ids.needs_repair() {
                for e in rows.iter_mut().filter(|e| e.session == self.record.id) {
                    ids.repair(e);
                }
            }
        })?;
        Ok(rows)
    }

    /// The session's stored record.
    pub fn record(&self) -> &SessionRecord {
        &self.record
    }

    /// The store behind the view.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Facts about the session, with the current workspace generation and
    /// event count.
    pub fn try_info(&self) -> Result<SessionInfo> {
        let (workspace_generation, event_count, state_revision, (context_gen, context_rev)) =
            self.store.with_kernel(&self.record.id, |k| {
                (
                    k.generation(),
                    k.own_event_count(),
                    k.revision(),
                    k.kernel_context_high(),
                )
            })?;
        Ok(SessionInfo {
            id: self.record.id.clone(),
            parent_id: self.record.parent.clone(),
            workspace: self.record.workspace.clone(),
            workspace_generation,
            model: self.record.model.clone(),
            event_count,
            state_revision,
            kernel_context_generation: context_gen,
            kernel_context_revision: context_rev,
        })
    }

    /// Sequence number of the session's latest event an engine can read,
    /// or 0 (child-lifecycle rows are not among them).
    pub fn try_latest_seq(&self) -> Result<u64> {
        self.store.latest_visible_seq(&self.record.id)
    }

    /// Events with `from <= seq < to`, ascending, at most `min(limit, 1000)`.
    pub fn try_events(&self, from: u64, to: u64, limit: u32) -> Result<Vec<Event>> {
        let rows = self.visible(
            from,
            limit,
            |from, limit| self.store.events(&self.record.id, from, to, limit),
            |last| last.checked_add(1),
        )?;
        let rows = self.repaired(rows)?;
        Ok(rows.iter().map(|e| e.to_sdk()).collect())
    }

    /// [`StoreSessionView::try_events`] as an outline priced under
    /// `profile` (kernel-context text is never decoded).
    pub fn try_events_outline(
        &self,
        from: u64,
        to: u64,
        limit: u32,
        profile: EstimatorProfile,
    ) -> Result<Vec<OutlinedEvent>> {
        let rows = self.visible(
            from,
            limit,
            |from, limit| self.store.events_outline(&self.record.id, from, to, limit),
            |last| last.checked_add(1),
        )?;
        let rows = self.repaired(rows)?;
        Ok(rows.iter().map(|e| outline(profile, &e.to_sdk())).collect())
    }

    /// Events with `seq < before`, newest first, at most `min(limit, 1000)`.
    pub fn try_events_before(&self, before: u64, limit: u32) -> Result<Vec<Event>> {
        let rows = self.visible(
            before,
            limit,
            |before, limit| self.store.events_before(&self.record.id, before, limit),
            Some,
        )?;
        let rows = self.repaired(rows)?;
        Ok(rows.iter().map(|e| e.to_sdk()).collect())
    }

    /// Full-text search over events with `seq < before`, newest first, at
    /// most `min(limit, 200)` rows.
    pub fn try_search(&self, query: &str, before: u64, limit: u32) -> Result<Vec<SearchHit>> {
        let rows =
            self.store
                .search_before(&self.record.id, query, before, limit.min(MAX_SEARCH))?;
        // Kernel context is not indexed; the filter keeps that true here.
        let (events, snippets): (Vec<StoredEvent>, Vec<String>) = rows
            .into_iter()
            .filter(|r| !self.hidden(&r.event))
            .map(|r| (r.event, r.snippet))
            .unzip();
        let events = self.repaired(events)?;
        Ok(events
            .into_iter()
            .zip(snippets)
            .map(|(event, snippet)| SearchHit {
                event: event.to_sdk(),
                snippet,
            })
            .collect())
    }

    /// The canonical task state as of the latest event.
    pub fn try_canonical_state(&self) -> Result<CanonicalState> {
        self.store.with_kernel(&self.record.id, |k| k.canonical())
    }

    /// Artifact metadata by SHA-256.
    pub fn try_artifact(&self, sha256: &str) -> Result<Option<MediaRef>> {
        self.store.artifact(sha256)
    }
}

fn broken<T>(what: &str, r: Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("the Latch store failed while serving `{what}` to an engine: {e}"))
}

impl SessionView for StoreSessionView {
    fn info(&self) -> SessionInfo {
        broken("info", self.try_info())
    }
    fn latest_seq(&self) -> u64 {
        broken("latest-seq", self.try_latest_seq())
    }
    fn events(&self, from: u64, to: u64, limit: u32) -> Vec<Event> {
        broken("events", self.try_events(from, to, limit))
    }
    fn events_before(&self, before: u64, limit: u32) -> Vec<Event> {
        broken("events-before", self.try_events_before(before, limit))
    }
    fn events_outline(
        &self,
        from: u64,
        to: u64,
        limit: u32,
        profile: EstimatorProfile,
    ) -> Vec<OutlinedEvent> {
        broken(
            "events-outline",
            self.try_events_outline(from, to, limit, profile),
        )
    }
    fn search(&self, query: &str, before: u64, limit: u32) -> Vec<SearchHit> {
        broken("search", self.try_search(query, before, limit))
    }
    fn canonical_state(&self) -> CanonicalState {
        broken("canonical-state", self.try_canonical_state())
    }
    fn artifact(&self, sha256: &str) -> Option<MediaRef> {
        broken("artifact", self.try_artifact(sha256))
    }
}
