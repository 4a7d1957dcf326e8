//! Appending and reading events. Appends are the only writes to the `events`
//! table; each append (or batch) is one immediate transaction that also
//! indexes the event's search text.

use super::{Result, Store, StoreError, now_ms};
use crate::event::{EventKind, StoredEvent};
use crate::state::KernelState;
use latch_engine_sdk::event_search_text;
use latch_engine_sdk::types::SessionContext;
use rusqlite::{Row, TransactionBehavior, params};
use std::collections::HashMap;

/// Events read per query while catching a reducer up.
const CATCH_UP_PAGE: u32 = 5000;

const EVENT_COLUMNS: &str = "seq, session, kind, body, time_ms";

/// Decode one `events` row selected with [`EVENT_COLUMNS`].
pub(crate) fn read_event(row: &Row<'_>) -> rusqlite::Result<(u64, String, String, String, u64)> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

/// Finish decoding a row: parse the body.
pub(crate) fn decode(raw: (u64, String, String, String, u64)) -> Result<StoredEvent> {
    let (seq, session, kind, body, time_ms) = raw;
    let kind = EventKind::from_row(seq, &kind, &body)?;
    Ok(StoredEvent {
        seq,
        session,
        time_ms,
        kind,
    })
}

/// Insert `entries` inside the caller's transaction, committed at `time`:
/// each event's row, its search text, and (for group events) the group
/// projection, so the cache never disagrees with a committed log.
pub(crate) fn insert_in(
    tx: &rusqlite::Transaction<'_>,
    fences: &HashMap<String, String>,
    entries: &[(String, EventKind)],
    time: u64,
) -> Result<Vec<u64>> {
    let mut seqs = Vec::with_capacity(entries.len());
    let mut exists = tx.prepare_cached("SELECT COUNT(*) > 0 FROM sessions WHERE id = ?1")?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO events (session, kind, body, time_ms, wide, author) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut index = tx.prepare_cached("INSERT INTO events_fts (rowid, text) VALUES (?1, ?2)")?;
    let mut checked: Option<&str> = None;
    for (session, event) in entries {
        if checked != Some(session.as_str()) {
            let ok: bool = exists.query_row([session], |r| r.get(0))?;
            if !ok {
                return Err(StoreError::UnknownSession(session.clone()));
            }
            super::lease::check_fence(tx, fences, session)?;
            checked = Some(session.as_str());
        }
        insert.execute(params![
            session,
            event.kind_name(),
            event.to_json(),
            time,
            event.is_workspace_wide() as i64,
            event.author()
        ])?;
        let seq = tx.last_insert_rowid() as u64;
        let text = event_search_text(&event.to_sdk_body());
        if !text.trim().is_empty() && !event.hidden_from_engines() {
            index.execute(params![seq, text])?;
        }
        if let EventKind::Group(g) = event {
            super::group_projection::apply(tx, session, seq, time, g)?;
        }
        seqs.push(seq);
    }
    Ok(seqs)
}

fn query_events(
    store: &Store,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<StoredEvent>> {
    let conn = store.conn();
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, read_event)?;
    let events: Vec<StoredEvent> = rows.map(|r| decode(r?)).collect::<Result<_>>()?;
    store.count_decoded(events.len());
    Ok(events)
}

impl Store {
    /// Append one event to `session`; returns its sequence number.
    pub fn append(&self, session: &str, event: EventKind) -> Result<u64> {
        Ok(self.append_batch(session, vec![event])?[0])
    }

    /// Append events that belong together (an assistant tool-call turn and its
    /// results, a mutation and its observation) in one immediate transaction:
    /// all of them are committed, or none. Returns their sequence numbers.
    pub fn append_batch(&self, session: &str, events: Vec<EventKind>) -> Result<Vec<u64>> {
        self.append_across(
            events
                .into_iter()
                .map(|e| (session.to_string(), e))
                .collect(),
        )
    }

    /// Append events to several sessions in one immediate transaction (a
    /// delivery into a recipient's session together with its marker).
    pub fn append_across(&self, entries: Vec<(String, EventKind)>) -> Result<Vec<u64>> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let seqs = insert_in(&tx, &self.fences(), &entries, now_ms())?;
        tx.commit()?;
        Ok(seqs)
    }

    /// Events of `session` with `from <= seq < to`, ascending, at most
    /// `limit`. Child-lifecycle events are left out (engines never see
    /// them; [`Store::agent_log`] reads them).
    pub fn events(
        &self,
        session: &str,
        from: u64,
        to: u64,
        limit: u32,
    ) -> Result<Vec<StoredEvent>> {
        self.events_in_range(EVENT_COLUMNS, session, from, to, limit)
    }

    /// [`Store::events`] with the text of every kernel-context entry left
    /// out by SQLite itself, so the bytes of old snapshots are never decoded
    /// (the contract's `events-outline`).
    pub fn events_outline(
        &self,
        session: &str,
        from: u64,
        to: u64,
        limit: u32,
    ) -> Result<Vec<StoredEvent>> {
        const OUTLINE_COLUMNS: &str = "seq, session, kind,
            CASE WHEN kind = 'kernel_context'
                 THEN json_set(body, '$.data.text', '') ELSE body END,
            time_ms";
        self.events_in_range(OUTLINE_COLUMNS, session, from, to, limit)
    }

    /// `columns` (in [`EVENT_COLUMNS`] order) of the events of `session`
    /// with `from <= seq < to`, ascending, at most `limit`.
    fn events_in_range(
        &self,
        columns: &str,
        session: &str,
        from: u64,
        to: u64,
        limit: u32,
    ) -> Result<Vec<StoredEvent>> {
        let to = to.min(i64::MAX as u64);
        let from = from.min(i64::MAX as u64);
        query_events(
            self,
            &format!(
                "SELECT {columns} FROM events
                 WHERE session = ?1 AND seq >= ?2 AND seq < ?3 AND {visible}
                 ORDER BY seq LIMIT ?4",
                visible = super::agents::visible_to_engines("kind"),
            ),
            params![session, from, to, limit],
        )
    }

    /// Events of `session` with `seq < before`, newest first, at most
    /// `limit`; child-lifecycle events are left out.
    pub fn events_before(
        &self,
        session: &str,
        before: u64,
        limit: u32,
    ) -> Result<Vec<StoredEvent>> {
        let before = before.min(i64::MAX as u64);
        query_events(
            self,
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events
                 WHERE session = ?1 AND seq < ?2 AND {visible}
                 ORDER BY seq DESC LIMIT ?3",
                visible = super::agents::visible_to_engines("kind"),
            ),
            params![session, before, limit],
        )
    }

    /// Sequence number of the latest kernel-context entry of `session` that
    /// `engine` did not write (entries stored before engines were recorded
    /// count as another engine's), or 0. Read from an index of the entries'
    /// authors: no event body is decoded.
    pub fn foreign_kernel_context_through(&self, session: &str, engine: &str) -> Result<u64> {
        Ok(self.conn().query_row(
            "SELECT COALESCE(MAX(seq), 0) FROM events
             WHERE session = ?1 AND kind = 'kernel_context'
               AND (author IS NULL OR author <> ?2)",
            params![session, engine],
            |r| r.get(0),
        )?)
    }

    /// One event by sequence number.
    pub fn event(&self, seq: u64) -> Result<Option<StoredEvent>> {
        let mut found = query_events(
            self,
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE seq = ?1"),
            [seq.min(i64::MAX as u64)],
        )?;
        Ok(found.pop())
    }

    /// Number of events of `session` (tombstoned sessions included).
    pub fn event_count(&self, session: &str) -> Result<u64> {
        Ok(self.conn().query_row(
            "SELECT COUNT(*) FROM events WHERE session = ?1",
            [session],
            |r| r.get(0),
        )?)
    }

    /// Number of events in the whole store.
    pub fn total_event_count(&self) -> Result<u64> {
        Ok(self
            .conn()
            .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))?)
    }

    /// Sequence number of the session's latest event, or 0.
    pub fn latest_seq(&self, session: &str) -> Result<u64> {
        Ok(self.conn().query_row(
            "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session = ?1",
            [session],
            |r| r.get(0),
        )?)
    }

    /// The session contexts recorded with the session's runs (see
    /// [`EventKind::RunStarted`]): the first one and the latest one, or
    /// `None` when no run recorded one. SQLite filters the rows; only the two
    /// events found are decoded.
    pub fn session_contexts(
        &self,
        session: &str,
    ) -> Result<Option<(SessionContext, SessionContext)>> {
        let pick = |order: &str| -> Result<Option<SessionContext>> {
            let found = query_events(
                self,
                &format!(
                    "SELECT {EVENT_COLUMNS} FROM events
                     WHERE session = ?1 AND kind = 'run_started'
                       AND json_extract(body, '$.data.context') IS NOT NULL
                     ORDER BY seq {order} LIMIT 1"
                ),
                [session],
            )?;
            Ok(found.into_iter().find_map(|e| match e.kind {
                EventKind::RunStarted { context, .. } => context,
                _ => None,
            }))
        };
        Ok(match (pick("ASC")?, pick("DESC")?) {
            (Some(first), Some(latest)) => Some((first, latest)),
            _ => None,
        })
    }

    /// The reducer input after `after`: the session's own events and the
    /// workspace-wide events of the other sessions of `workspace`, ascending,
    /// at most `limit`.
    pub fn workspace_log(
        &self,
        session: &str,
        workspace: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<StoredEvent>> {
        query_events(
            self,
            &format!(
                "SELECT {EVENT_COLUMNS} FROM (
                    SELECT {EVENT_COLUMNS} FROM events WHERE session = ?1 AND seq > ?3
                    UNION ALL
                    SELECT e.seq, e.session, e.kind, e.body, e.time_ms
                    FROM events e JOIN sessions s ON s.id = e.session
                    WHERE e.wide = 1 AND e.seq > ?3 AND s.workspace = ?2 AND e.session <> ?1
                 ) ORDER BY seq LIMIT ?4"
            ),
            params![session, workspace, after.min(i64::MAX as u64), limit],
        )
    }

    /// Apply to `state` every event of its workspace log past its watermark.
    pub(crate) fn catch_up(&self, workspace: &str, state: &mut KernelState) -> Result<()> {
        loop {
            let page =
                self.workspace_log(state.session(), workspace, state.watermark(), CATCH_UP_PAGE)?;
            for e in &page {
                state.apply(e);
            }
            if page.len() < CATCH_UP_PAGE as usize {
                return Ok(());
            }
        }
    }
}
