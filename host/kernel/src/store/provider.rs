//! Reads for the provider side of the host: the opaque provider state of
//! assistant messages (replayed to the provider, never shown) and the
//! recent usage reports calibration is reduced from.

use super::events::{decode, read_event};
use super::{Result, Store};
use crate::event::{EventKind, OpaqueState, StoredEvent};
use rusqlite::params;
use std::collections::BTreeMap;

impl Store {
    /// The opaque provider state of the assistant messages `assistant_seqs`
    /// of `session`, by the assistant message's sequence number. The state
    /// is the `provider_state` event committed right after its message in
    /// the same batch; messages without one are absent from the map.
    pub fn provider_states(
        &self,
        session: &str,
        assistant_seqs: &[u64],
    ) -> Result<BTreeMap<u64, OpaqueState>> {
        let mut raw = Vec::new();
        {
            let conn = self.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT seq, session, kind, body, time_ms FROM events
                 WHERE seq = ?1 AND session = ?2 AND kind = 'provider_state'",
            )?;
            for &seq in assistant_seqs {
                let next = seq.saturating_add(1).min(i64::MAX as u64);
                let mut rows = stmt.query_map(params![next, session], read_event)?;
                if let Some(row) = rows.next() {
                    raw.push((seq, row?));
                }
            }
        }
        let mut out = BTreeMap::new();
        for (seq, row) in raw {
            if let EventKind::ProviderState(state) = decode(row)?.kind {
                out.insert(seq, state);
            }
        }
        Ok(out)
    }

    /// The newest `limit` usage reports of the whole store, newest first
    /// (every session: calibration is per provider and model, not per
    /// session).
    pub fn recent_usage(&self, limit: u32) -> Result<Vec<StoredEvent>> {
        let rows = {
            let conn = self.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT seq, session, kind, body, time_ms FROM events
                 WHERE kind = 'provider_usage' ORDER BY seq DESC LIMIT ?1",
            )?;
            stmt.query_map([limit], read_event)?
                .collect::<rusqlite::Result<Vec<_>>>()?
        };
        rows.into_iter().map(decode).collect()
    }
}
