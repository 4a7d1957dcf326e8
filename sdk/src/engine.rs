//! The two traits of the contract: [`Engine`] (what an engine implements) and
//! [`SessionView`] (the read-only session it is given).

use crate::types::*;

/// Read-only access to one session's durable history. The host implements it
/// from its event store; [`crate::MemorySession`] implements it in memory.
pub trait SessionView {
    /// Facts about the session.
    fn info(&self) -> SessionInfo;
    /// Sequence number of the latest event, or 0 when empty.
    fn latest_seq(&self) -> u64;
    /// Events with `from <= seq < to`, ascending, at most `min(limit, MAX_PAGE)`.
    fn events(&self, from: u64, to: u64, limit: u32) -> Vec<Event>;
    /// Events with `seq < before`, newest first, at most `min(limit, MAX_PAGE)`.
    fn events_before(&self, before: u64, limit: u32) -> Vec<Event>;
    /// [`SessionView::events`] as an outline priced under `profile`:
    /// kernel-context text and tool-result content left out, each event's
    /// canonical price attached (see the contract's `events-outline` and
    /// [`outline`]). The default reads whole events; a view that can skip
    /// the bytes should.
    fn events_outline(
        &self,
        from: u64,
        to: u64,
        limit: u32,
        profile: EstimatorProfile,
    ) -> Vec<OutlinedEvent> {
        self.events(from, to, limit)
            .iter()
            .map(|e| outline(profile, e))
            .collect()
    }
    /// Full-text search over events with `seq < before`, newest first, at
    /// most `min(limit, MAX_SEARCH)` rows.
    fn search(&self, query: &str, before: u64, limit: u32) -> Vec<SearchHit>;
    /// The canonical task state as of the latest event.
    fn canonical_state(&self) -> CanonicalState;
    /// Artifact metadata by SHA-256.
    fn artifact(&self, sha256: &str) -> Option<MediaRef>;

    /// Every event with `seq >= from`, ascending, paging as needed.
    fn events_from(&self, from: u64) -> Vec<Event> {
        let mut out = Vec::new();
        self.for_each_event(from, u64::MAX, &mut |e| out.push(e));
        out
    }

    /// Call `f` with every event with `from <= seq < to`, ascending, one
    /// page at a time.
    fn for_each_event(&self, from: u64, to: u64, f: &mut dyn FnMut(Event)) {
        let mut next = from;
        while next < to {
            let page = self.events(next, to, crate::MAX_PAGE);
            let Some(last) = page.last() else { break };
            next = last.seq.saturating_add(1);
            let short = page.len() < crate::MAX_PAGE as usize;
            page.into_iter().for_each(&mut *f);
            if short {
                break;
            }
        }
    }

    /// Call `f` with the outline of every event with `from <= seq < to`
    /// under `profile`, ascending, one page at a time.
    fn for_each_outlined(
        &self,
        from: u64,
        to: u64,
        profile: EstimatorProfile,
        f: &mut dyn FnMut(OutlinedEvent),
    ) {
        let mut next = from;
        while next < to {
            let page = self.events_outline(next, to, crate::MAX_PAGE, profile);
            let Some(last) = page.last() else { break };
            next = last.event.seq.saturating_add(1);
            let short = page.len() < crate::MAX_PAGE as usize;
            page.into_iter().for_each(&mut *f);
            if short {
                break;
            }
        }
    }
}

/// The outline of `event` under `profile`: a copy without kernel-context
/// text and tool-result content, with the canonical price of the whole
/// event's message ([`crate::estimate::event_tokens`]).
pub fn outline(profile: EstimatorProfile, event: &Event) -> OutlinedEvent {
    let body = match &event.body {
        EventBody::KernelContext(k) => EventBody::KernelContext(KernelContextEntry {
            generation: k.generation,
            revision: k.revision,
            kind: k.kind,
            epoch_start: k.epoch_start,
            text: String::new(),
        }),
        EventBody::ToolResult(r) => EventBody::ToolResult(ToolResult {
            call_id: r.call_id.clone(),
            name: r.name.clone(),
            content: String::new(),
            is_error: r.is_error,
            images: r.images.clone(),
        }),
        other => other.clone(),
    };
    OutlinedEvent {
        event: Event {
            seq: event.seq,
            time_ms: event.time_ms,
            body,
        },
        tokens: crate::estimate::event_tokens(profile, &event.body),
    }
}

/// A context engine: answers "what should the model see now?".
///
/// Only [`Engine::new`] and [`Engine::materialize`] are required; the rest have
/// the defaults the contract allows. An engine may keep caches between calls but
/// must return the same view as a fresh instance given the same log.
pub trait Engine: 'static {
    /// Create an engine for a model.
    fn new(model: ModelProfile) -> Self
    where
        Self: Sized;

    /// The current configuration as a JSON object. Default: `{}`.
    fn config(&self) -> String {
        "{}".to_string()
    }

    /// Apply configuration keys from a JSON object. Default: accept only `{}`
    /// and refuse any key as unknown.
    fn set_config(&mut self, json: &str) -> Result<(), ConfigError> {
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| ConfigError::Malformed(e.to_string()))?;
        let Some(map) = value.as_object() else {
            return Err(ConfigError::Malformed(format!(
                "expected an object, got {value}"
            )));
        };
        match map.keys().next() {
            Some(key) => Err(ConfigError::UnknownKey(key.clone())),
            None => Ok(()),
        }
    }

    /// Choose the estimator profile. Default: ignored.
    fn set_estimator(&mut self, _profile: EstimatorProfile) {}

    /// The budget used when the host supplies none. Default: the model's
    /// window and reserve with the default working-memory mark.
    fn default_budget(&self) -> ContextBudget;

    /// Materialize the view for the next model request.
    ///
    /// The view may continue the previous one: `kept_messages` leading
    /// messages of the view this instance last returned successfully, then
    /// `messages` (see [`crate::ViewAssembler`]). Returning 0 and the whole
    /// list is always correct.
    fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, EngineError>;

    /// `/compact`: entries for a fresh epoch. Default: none (the engine keeps
    /// no epochs).
    fn manual_compact(
        &mut self,
        _session: &dyn SessionView,
    ) -> Result<Vec<KernelContextEntry>, EngineError> {
        Ok(Vec::new())
    }

    /// Recall original events: newest matches selected, chronological order.
    fn recall(
        &mut self,
        session: &dyn SessionView,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Event>, EngineError> {
        Ok(default_recall(session, query, limit))
    }
}

/// The contract's recall rule over the host's search: take the newest `limit`
/// matching rows, then present them in chronological order. The query is
/// first cut to what `search` accepts ([`crate::bounded_query`]).
pub fn default_recall(session: &dyn SessionView, query: &str, limit: u32) -> Vec<Event> {
    let mut events: Vec<Event> = session
        .search(&crate::bounded_query(query), u64::MAX, limit)
        .into_iter()
        .map(|hit| hit.event)
        .take(limit as usize)
        .collect();
    events.sort_by_key(|e| e.seq);
    events
}
