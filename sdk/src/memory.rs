//! [`MemorySession`]: an in-memory [`SessionView`] for native tests, benchmarks
//! and the conformance suite's generated sessions.

use crate::engine::SessionView;
use crate::text::{event_search_text, tokenize_words};
use crate::types::*;

/// An in-memory session: a list of events plus the facts a view reports.
///
/// Search follows the store's rules: every query word must occur in the
/// event's indexed text; rows come newest first.
#[derive(Clone, Debug)]
pub struct MemorySession {
    /// Session facts; `event_count` is kept in step with `events`, and
    /// [`SessionView::info`] reports `state.revision` as `state_revision`.
    pub info: SessionInfo,
    /// Events in ascending sequence order.
    pub events: Vec<Event>,
    /// The canonical state returned by [`SessionView::canonical_state`].
    pub state: CanonicalState,
    /// Artifact metadata.
    pub artifacts: Vec<MediaRef>,
    next_seq: u64,
    clock_ms: u64,
}

impl MemorySession {
    /// An empty session for `model` in workspace `/workspace`.
    pub fn new(id: &str, model: ModelProfile) -> Self {
        MemorySession {
            info: SessionInfo {
                id: id.to_string(),
                parent_id: None,
                workspace: "/workspace".to_string(),
                workspace_generation: 0,
                model,
                event_count: 0,
                state_revision: 0,
                kernel_context_generation: 0,
                kernel_context_revision: 0,
            },
            events: Vec::new(),
            state: CanonicalState::empty(),
            artifacts: Vec::new(),
            next_seq: 1,
            clock_ms: 1_700_000_000_000,
        }
    }

    /// Append an event with the next sequence number; returns that number.
    pub fn push(&mut self, body: EventBody) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.clock_ms += 1000;
        if let EventBody::KernelContext(k) = &body {
            let info = &mut self.info;
            info.kernel_context_generation = info.kernel_context_generation.max(k.generation);
            info.kernel_context_revision = info.kernel_context_revision.max(k.revision);
        }
        if let EventBody::Kernel(note) = &body
            && matches!(
                note.kind,
                KernelNoteKind::Mutation | KernelNoteKind::ExternalChange
            )
        {
            self.info.workspace_generation += 1;
        }
        self.events.push(Event {
            seq,
            time_ms: self.clock_ms,
            body,
        });
        self.info.event_count = self.events.len() as u64;
        seq
    }

    /// Keep only the first `len` events (a prefix of the log, as it was
    /// earlier), with the facts the view reports recomputed.
    pub fn truncate(&mut self, len: usize) {
        self.events.truncate(len);
        let info = &mut self.info;
        info.event_count = self.events.len() as u64;
        info.workspace_generation = 0;
        info.kernel_context_generation = 0;
        info.kernel_context_revision = 0;
        for e in &self.events {
            match &e.body {
                EventBody::KernelContext(k) => {
                    info.kernel_context_generation =
                        info.kernel_context_generation.max(k.generation);
                    info.kernel_context_revision = info.kernel_context_revision.max(k.revision);
                }
                EventBody::Kernel(note)
                    if matches!(
                        note.kind,
                        KernelNoteKind::Mutation | KernelNoteKind::ExternalChange
                    ) =>
                {
                    info.workspace_generation += 1;
                }
                _ => {}
            }
        }
    }

    /// Place the session: its workspace, and the time (milliseconds since
    /// the Unix epoch) just before its next event.
    pub fn set_origin(&mut self, workspace: &str, clock_ms: u64) {
        self.info.workspace = workspace.to_string();
        self.clock_ms = clock_ms;
    }

    /// Skip sequence numbers (other sessions' events in a shared store).
    pub fn skip_seqs(&mut self, n: u64) {
        self.next_seq += n;
    }

    /// Append a user text message.
    pub fn user(&mut self, text: &str) -> u64 {
        self.push(EventBody::UserMessage(vec![Part::Text(text.to_string())]))
    }

    /// Append an assistant text message.
    pub fn assistant(&mut self, text: &str) -> u64 {
        self.push(EventBody::AssistantMessage(vec![Part::Text(
            text.to_string(),
        )]))
    }

    /// Append an assistant tool call and its result (one unit).
    pub fn tool_exchange(&mut self, id: &str, name: &str, args: &str, result: &str) -> u64 {
        self.push(EventBody::AssistantMessage(vec![Part::ToolCall(
            ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                arguments_json: args.to_string(),
            },
        )]));
        self.push(EventBody::ToolResult(ToolResult {
            call_id: id.to_string(),
            name: name.to_string(),
            content: result.to_string(),
            is_error: false,
            images: vec![],
        }))
    }

    /// Persist kernel-context entries as the host does before sending a view.
    pub fn persist(&mut self, entries: &[KernelContextEntry]) {
        for e in entries {
            self.push(EventBody::KernelContext(e.clone()));
        }
    }

    fn clamp(limit: u32, max: u32) -> usize {
        limit.min(max) as usize
    }
}

impl SessionView for MemorySession {
    fn info(&self) -> SessionInfo {
        SessionInfo {
            state_revision: self.state.revision,
            ..self.info.clone()
        }
    }

    fn latest_seq(&self) -> u64 {
        self.events.last().map(|e| e.seq).unwrap_or(0)
    }

    fn events(&self, from: u64, to: u64, limit: u32) -> Vec<Event> {
        let start = self.events.partition_point(|e| e.seq < from);
        self.events[start..]
            .iter()
            .take_while(|e| e.seq < to)
            .take(Self::clamp(limit, crate::MAX_PAGE))
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
        let start = self.events.partition_point(|e| e.seq < from);
        self.events[start..]
            .iter()
            .take_while(|e| e.seq < to)
            .take(Self::clamp(limit, crate::MAX_PAGE))
            .map(|e| crate::engine::outline(profile, e))
            .collect()
    }

    fn events_before(&self, before: u64, limit: u32) -> Vec<Event> {
        let end = self.events.partition_point(|e| e.seq < before);
        self.events[..end]
            .iter()
            .rev()
            .take(Self::clamp(limit, crate::MAX_PAGE))
            .cloned()
            .collect()
    }

    fn search(&self, query: &str, before: u64, limit: u32) -> Vec<SearchHit> {
        let words = tokenize_words(query);
        if words.is_empty() {
            return Vec::new();
        }
        let end = self.events.partition_point(|e| e.seq < before);
        self.events[..end]
            .iter()
            .rev()
            .filter_map(|e| {
                let text = event_search_text(&e.body);
                let have = tokenize_words(&text);
                words
                    .iter()
                    .all(|w| have.iter().any(|h| h == w))
                    .then(|| SearchHit {
                        event: e.clone(),
                        snippet: text.chars().take(400).collect(),
                    })
            })
            .take(Self::clamp(limit, crate::MAX_SEARCH))
            .collect()
    }

    fn canonical_state(&self) -> CanonicalState {
        self.state.clone()
    }

    fn artifact(&self, sha256: &str) -> Option<MediaRef> {
        self.artifacts.iter().find(|m| m.sha256 == sha256).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> MemorySession {
        MemorySession::new("s", ModelProfile::with_defaults("openai", "m"))
    }

    #[test]
    fn events_page_by_range_and_limit() {
        let mut s = session();
        for i in 0..10 {
            s.user(&format!("message {i}"));
        }
        let page = s.events(3, 8, 2);
        assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![3, 4]);
        let back = s.events_before(5, 10);
        assert_eq!(
            back.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![4, 3, 2, 1]
        );
        assert_eq!(s.events_from(9).len(), 2);
    }

    #[test]
    fn the_outline_drops_bulky_bodies_and_keeps_the_whole_price() {
        let mut s = session();
        s.user("read the parser");
        s.tool_exchange(
            "c1",
            "read_file",
            "{\"path\":\"src/parser.rs\"}",
            &"fn parse() {}\n".repeat(50),
        );
        s.persist(&[KernelContextEntry {
            generation: 1,
            revision: 1,
            kind: KernelContextKind::Snapshot,
            epoch_start: Some(1),
            text: "# Snapshot\n".repeat(40),
        }]);
        s.push(EventBody::ManualCompact);
        for p in [EstimatorProfile::Openai, EstimatorProfile::CjkOptimized] {
            let outline = s.events_outline(0, u64::MAX, 100, p);
            assert_eq!(outline.len(), s.events.len());
            for (o, e) in outline.iter().zip(&s.events) {
                let price = e
                    .to_message()
                    .map(|m| crate::estimate::message_tokens(p, &m))
                    .unwrap_or(0);
                assert_eq!(o.tokens, price, "event {}", e.seq);
                match &o.event.body {
                    EventBody::ToolResult(r) => assert!(r.content.is_empty()),
                    EventBody::KernelContext(k) => {
                        assert!(k.text.is_empty());
                        assert_eq!(k.epoch_start, Some(1));
                    }
                    body => assert_eq!(body, &e.body),
                }
            }
        }
    }

    #[test]
    fn search_is_newest_first_and_requires_every_word() {
        let mut s = session();
        s.user("the build failed with E0425");
        s.user("unrelated");
        s.user("build failed again E0425");
        let hits = s.search("E0425 failed", u64::MAX, 10);
        assert_eq!(
            hits.iter().map(|h| h.event.seq).collect::<Vec<_>>(),
            vec![3, 1]
        );
        let older = s.search("E0425 failed", 3, 10);
        assert_eq!(
            older.iter().map(|h| h.event.seq).collect::<Vec<_>>(),
            vec![1],
            "only events before the bound match"
        );
        let recalled = crate::default_recall(&s, "E0425", 1);
        assert_eq!(recalled.len(), 1);
        assert_eq!(recalled[0].seq, 3, "newest match is selected");
        assert!(s.search("  ", u64::MAX, 10).is_empty());
    }
}
