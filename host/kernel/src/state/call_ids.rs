//! Tool-call ids that are unique in their session, whatever the provider
//! sent.
//!
//! Some OpenAI-compatible servers number calls per response (`call_0` in
//! every response) or send no id at all. Engines, the protocol checks and
//! tool results all pair a result with its call by id, so one repeated id
//! would make every later view break the duplicate-call rule. The rule here
//! is one deterministic function of the session's log:
//!
//! * a call keeps the id it was stored with when that id is non-empty and
//!   not used by an earlier call of the session (or an earlier call of the
//!   same message);
//! * otherwise it gets `call_latch_N` (`N` numbers the session's calls from
//!   1), with `_K` appended while that too is taken.
//!
//! The host applies it before it commits an assistant message
//! ([`CallIds::assign`]), so sessions written by this build hold unique ids
//! (and the provider's own id in the message's provider state, for the
//! wire). A log written by an older build may hold duplicates: the same
//! rule repairs it on read ([`CallIds::repair`]), renaming a repeated call
//! and the results that answer it, without rewriting history. A log that
//! never repeated an id reads exactly as stored.

use crate::event::{EventKind, StoredEvent};
use latch_engine_sdk::types::Part;
use std::collections::{BTreeMap, BTreeSet};

/// Prefix of the ids Latch gives calls whose provider id was missing or
/// already used in the session.
pub const GENERATED_PREFIX: &str = "call_latch_";

/// The tool-call ids of one session, folded from its own events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallIds {
    /// Every call id of the session, as read (repaired).
    used: BTreeSet<String>,
    /// Calls seen so far: numbers generated ids.
    calls: u64,
    /// Calls stored with an id that had to be replaced on read: by
    /// `(seq, part index)`, the id as read and the id as stored.
    renamed_calls: BTreeMap<(u64, usize), (String, String)>,
    /// Results stored with the id of a renamed call: by seq, the id as read.
    renamed_results: BTreeMap<u64, String>,
    /// The provider's own id of each call whose id was chosen by Latch:
    /// by the call's session id, `(wire, provider id)` — from the
    /// `provider_state` beside the message (this build), or the stored id
    /// of a call a read renamed (an older build; any wire).
    provider: BTreeMap<String, (Option<String>, String)>,
    /// The latest assistant message's unanswered calls: (id as stored, id
    /// as read).
    open: Vec<(String, String)>,
}

impl CallIds {
    /// Session-unique ids for the calls of the next assistant message, in
    /// order, given the ids the provider sent (`""` when it sent none): the
    /// provider's own where it is usable, a generated one otherwise.
    pub fn assign(&self, provider_ids: &[&str]) -> Vec<String> {
        let mut taken: BTreeSet<String> = BTreeSet::new();
        let mut out = Vec::with_capacity(provider_ids.len());
        for (k, id) in provider_ids.iter().enumerate() {
            let fresh = |taken: &BTreeSet<String>| {
                let n = self.calls + k as u64 + 1;
                let base = format!("{GENERATED_PREFIX}{n}");
                let mut candidate = base.clone();
                let mut suffix = 1;
                while self.used.contains(&candidate) || taken.contains(&candidate) {
                    candidate = format!("{base}_{suffix}");
                    suffix += 1;
                }
                candidate
            };
            let chosen = if !id.is_empty() && !self.used.contains(*id) && !taken.contains(*id) {
                (*id).to_string()
            } else {
                fresh(&taken)
            };
            taken.insert(chosen.clone());
            out.push(chosen);
        }
        out
    }

    /// True when `id` is a call id of the session.
    pub fn contains(&self, id: &str) -> bool {
        self.used.contains(id)
    }

    /// True when the stored log repeats or omits an id somewhere, so reads
    /// are repaired.
    pub fn needs_repair(&self) -> bool {
        !self.renamed_calls.is_empty() || !self.renamed_results.is_empty()
    }

    /// The calls whose stored id is replaced on read, as `(id as read, id
    /// as stored)`: the stored one is what the provider sent.
    pub fn renamed(&self) -> impl Iterator<Item = (&str, &str)> {
        self.renamed_calls
            .values()
            .map(|(read, stored)| (read.as_str(), stored.as_str()))
    }

    /// The id the provider itself issued for the call with session id
    /// `id`, when it issued one and it differs, for a request over `wire`
    /// (a `Wire` name: `openai-chat`, ...): an id recorded for another wire
    /// means nothing to this one.
    pub fn provider_id(&self, id: &str, wire: &str) -> Option<&str> {
        let (recorded_for, own) = self.provider.get(id)?;
        match recorded_for {
            Some(w) if w != wire => None,
            _ => Some(own.as_str()).filter(|o| !o.is_empty()),
        }
    }

    /// Folds the provider state committed beside an assistant message: the
    /// provider's own ids of its calls that got session ids.
    pub(crate) fn provider_state(&mut self, wire: &str, ids: &[crate::event::ProviderCallId]) {
        for c in ids {
            self.provider
                .insert(c.call.clone(), (Some(wire.to_string()), c.provider.clone()));
        }
    }

    /// Rewrites `event` (of this session, already folded) as it reads:
    /// a renamed call or a result answering one gets its session-unique id.
    /// Returns true when something changed.
    pub fn repair(&self, event: &mut StoredEvent) -> bool {
        if !self.needs_repair() {
            return false;
        }
        let seq = event.seq;
        match &mut event.kind {
            EventKind::AssistantMessage { parts } => {
                let mut changed = false;
                for (i, p) in parts.iter_mut().enumerate() {
                    if let Part::ToolCall(c) = p
                        && let Some((read, _)) = self.renamed_calls.get(&(seq, i))
                    {
                        c.id = read.clone();
                        changed = true;
                    }
                }
                changed
            }
            EventKind::ToolResult(r) => match self.renamed_results.get(&seq) {
                Some(read) => {
                    r.call_id = read.clone();
                    true
                }
                None => false,
            },
            _ => false,
        }
    }

    /// Folds a committed assistant message.
    pub(crate) fn assistant(&mut self, seq: u64, parts: &[Part]) {
        let calls: Vec<(usize, &str)> = parts
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match p {
                Part::ToolCall(c) => Some((i, c.id.as_str())),
                _ => None,
            })
            .collect();
        let stored: Vec<&str> = calls.iter().map(|(_, id)| *id).collect();
        let read = self.assign(&stored);
        self.open.clear();
        for ((part, stored), read) in calls.into_iter().zip(read) {
            if read != stored {
                self.renamed_calls
                    .insert((seq, part), (read.clone(), stored.to_string()));
                self.provider
                    .insert(read.clone(), (None, stored.to_string()));
            }
            self.used.insert(read.clone());
            self.open.push((stored.to_string(), read));
        }
        self.calls += stored.len() as u64;
    }

    /// Folds a committed tool result: it answers the first open call
    /// stored with its id.
    pub(crate) fn result(&mut self, seq: u64, call_id: &str) {
        if let Some(at) = self.open.iter().position(|(stored, _)| stored == call_id) {
            let (_, read) = self.open.remove(at);
            if read != call_id {
                self.renamed_results.insert(seq, read);
            }
        }
    }

    /// New user input: calls left unanswered are no longer open.
    pub(crate) fn user(&mut self) {
        self.open.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::{ToolCall, ToolResult};

    fn call(id: &str) -> Part {
        Part::ToolCall(ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments_json: "{}".into(),
        })
    }

    fn result_event(seq: u64, id: &str) -> StoredEvent {
        StoredEvent {
            seq,
            session: "s".into(),
            time_ms: 0,
            kind: EventKind::ToolResult(ToolResult {
                call_id: id.into(),
                name: "read_file".into(),
                content: "ok".into(),
                is_error: false,
                images: vec![],
            }),
        }
    }

    fn assistant_event(seq: u64, ids: &[&str]) -> StoredEvent {
        StoredEvent {
            seq,
            session: "s".into(),
            time_ms: 0,
            kind: EventKind::AssistantMessage {
                parts: ids.iter().map(|id| call(id)).collect(),
            },
        }
    }

    fn ids(e: &StoredEvent) -> Vec<String> {
        match &e.kind {
            EventKind::AssistantMessage { parts } => parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall(c) => Some(c.id.clone()),
                    _ => None,
                })
                .collect(),
            EventKind::ToolResult(r) => vec![r.call_id.clone()],
            _ => vec![],
        }
    }

    /// Folds `log` and reads it back repaired.
    fn read(log: &[StoredEvent]) -> (CallIds, Vec<Vec<String>>) {
        let mut c = CallIds::default();
        for e in log {
            match &e.kind {
                EventKind::AssistantMessage { parts } => c.assistant(e.seq, parts),
                EventKind::ToolResult(r) => c.result(e.seq, &r.call_id),
                _ => {}
            }
        }
        let out = log
            .iter()
            .map(|e| {
                let mut e = e.clone();
                c.repair(&mut e);
                ids(&e)
            })
            .collect();
        (c, out)
    }

    #[test]
    fn unique_provider_ids_are_kept_and_repeated_or_missing_ones_replaced() {
        let c = CallIds::default();
        assert_eq!(c.assign(&["toolu_1", "toolu_2"]), ["toolu_1", "toolu_2"]);
        // Twice in one response, and none at all.
        assert_eq!(
            c.assign(&["call_0", "call_0", ""]),
            ["call_0", "call_latch_2", "call_latch_3"]
        );
        let mut c = CallIds::default();
        c.assistant(1, &[call("call_0")]);
        assert_eq!(c.assign(&["call_0"]), ["call_latch_2"]);
        // A provider that happens to send an id Latch generated.
        c.assistant(3, &[call("call_latch_2")]);
        assert_eq!(c.assign(&["call_0", "x"]), ["call_latch_3", "x"]);
        c.assistant(5, &[call("call_latch_3"), call("call_latch_3")]);
        assert_eq!(
            c.renamed().collect::<Vec<_>>(),
            [("call_latch_4", "call_latch_3")]
        );
        // An older log's repeat: its stored id is the provider's, for any wire.
        assert_eq!(
            c.provider_id("call_latch_4", "anthropic"),
            Some("call_latch_3")
        );
        assert_eq!(c.provider_id("call_latch_3", "anthropic"), None);
        // This build records the provider's id beside the message, for the
        // wire that issued it; a missing one records nothing to send back.
        c.provider_state(
            "openai-chat",
            &[
                crate::event::ProviderCallId {
                    call: "call_latch_9".into(),
                    provider: "call_0".into(),
                },
                crate::event::ProviderCallId {
                    call: "call_latch_10".into(),
                    provider: "".into(),
                },
            ],
        );
        assert_eq!(c.provider_id("call_latch_9", "openai-chat"), Some("call_0"));
        assert_eq!(c.provider_id("call_latch_9", "anthropic"), None);
        assert_eq!(c.provider_id("call_latch_10", "openai-chat"), None);
    }

    #[test]
    fn a_log_with_repeated_ids_reads_unique_and_results_follow_their_call() {
        let log = [
            assistant_event(1, &["call_0"]),
            result_event(2, "call_0"),
            assistant_event(3, &["call_0", ""]),
            result_event(4, ""),
            result_event(5, "call_0"),
            assistant_event(6, &["call_0"]),
            result_event(7, "call_0"),
        ];
        let (c, read) = read(&log);
        assert!(c.needs_repair());
        assert_eq!(
            read,
            [
                vec!["call_0"],
                vec!["call_0"],
                vec!["call_latch_2", "call_latch_3"],
                vec!["call_latch_3"],
                vec!["call_latch_2"],
                vec!["call_latch_4"],
                vec!["call_latch_4"],
            ]
        );
        // What the host assigns now is what a read of the same log gives:
        // writing assigned ids and repairing stored ones agree.
        let mut written = CallIds::default();
        let mut log2 = Vec::new();
        for e in &log {
            let mut e = e.clone();
            let stored: Vec<String> = ids(&e);
            if let EventKind::AssistantMessage { parts } = &mut e.kind {
                let refs: Vec<&str> = stored.iter().map(String::as_str).collect();
                let assigned = written.assign(&refs);
                let mut k = 0;
                for p in parts.iter_mut() {
                    if let Part::ToolCall(call) = p {
                        call.id = assigned[k].clone();
                        k += 1;
                    }
                }
                written.assistant(e.seq, parts);
            }
            log2.push(e);
        }
        assert!(!written.needs_repair(), "assigned ids need no repair");
        for i in [0, 2, 5] {
            assert_eq!(read[i], ids(&log2[i]), "assistant message at {i}");
        }
    }

    #[test]
    fn a_clean_log_reads_as_stored() {
        let log = [
            assistant_event(1, &["a", "b"]),
            result_event(2, "b"),
            result_event(3, "a"),
        ];
        let (c, read) = read(&log);
        assert!(!c.needs_repair());
        assert_eq!(read, [vec!["a", "b"], vec!["b"], vec!["a"]]);
    }
}
