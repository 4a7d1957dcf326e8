//! One recorded session made ready for every engine's replay of it: its
//! moments, the re-references its responses make, the recorded content of
//! its tool results, and the pricing helpers.

use crate::compare::CompareError;
use crate::compare::recording::{Moment, RecordedSession, moments};
use latch_conformance::compare::replay::{InputPrice, Rereference, rereferences};
use latch_engine_sdk::types::Event;
use latch_kernel::EventKind;
use latch_surface::PriceTable;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// One recorded session, with what every engine's replay of it needs.
pub(super) struct Prepared<'a> {
    pub(super) session: &'a RecordedSession,
    pub(super) moments: Vec<Moment>,
    /// Re-references by request index.
    pub(super) rereferences: HashMap<usize, Vec<Rereference>>,
    /// The content of every tool result, by recorded sequence number.
    pub(super) results: HashMap<u64, (String, String)>,
}

pub(super) fn prepare(session: &RecordedSession) -> Result<Prepared<'_>, CompareError> {
    let moments = moments(session)?;
    let events: Vec<Event> = session
        .own_events()
        .filter(|(_, e)| !e.hidden_from_engines())
        .map(|(l, e)| Event {
            seq: l.seq,
            time_ms: l.time_ms,
            body: e.to_sdk_body(),
        })
        .collect();
    let responses: HashMap<u64, usize> = moments
        .iter()
        .filter_map(|m| match m {
            Moment::Request(r) => r.response_seq.map(|s| (s, r.index)),
            Moment::Compact(_) => None,
        })
        .collect();
    let mut by_request: HashMap<usize, Vec<Rereference>> = HashMap::new();
    for r in rereferences(&events, &responses) {
        by_request.entry(r.request).or_default().push(r);
    }
    let results = session
        .own_events()
        .filter_map(|(l, e)| match e {
            EventKind::ToolResult(r) => Some((l.seq, (r.call_id.clone(), r.content.clone()))),
            _ => None,
        })
        .collect();
    Ok(Prepared {
        session,
        moments,
        rereferences: by_request,
        results,
    })
}

pub(super) fn input_price(prices: Option<&PriceTable>, model: &str) -> Option<InputPrice> {
    prices.and_then(|t| t.price(model)).map(|p| InputPrice {
        input: p.input,
        cache_read: p.cache_read,
    })
}

pub(super) fn tools_key(tools: &[serde_json::Value]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(tools)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}
