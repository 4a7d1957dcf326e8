//! The agent log of a parent session: what [`crate::AgentTree`] reduces.
//! Also the SQL condition that keeps child-lifecycle events away from
//! engines.

use super::events::{decode, read_event};
use super::{Result, Store};
use crate::agents::AgentTree;
use crate::event::{ENGINE_HIDDEN_KINDS, StoredEvent};
use rusqlite::{OptionalExtension, params};

/// The parent-side kinds of the agent log.
const PARENT_KINDS: &str = "'child_spawned', 'agent_resumed', 'agent_notification_delivered', \
     'agent_report_received', 'agent_message_queued'";
/// The child-side kinds of the agent log.
const CHILD_KINDS: &str = "'agent_report', 'agent_message_delivered'";

/// An SQL condition on the kind column `column` that is true for the events
/// engines may see.
pub(crate) fn visible_to_engines(column: &str) -> String {
    let kinds: Vec<String> = ENGINE_HIDDEN_KINDS
        .iter()
        .map(|k| format!("'{k}'"))
        .collect();
    format!("{column} NOT IN ({})", kinds.join(", "))
}

impl Store {
    /// The agent log of `parent` after `after`, ascending: its own
    /// child-lifecycle events and its children's reports and message
    /// deliveries. The input of [`AgentTree`].
    pub fn agent_log(&self, parent: &str, after: u64) -> Result<Vec<StoredEvent>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT seq, session, kind, body, time_ms FROM events
             WHERE seq > ?2 AND (
                (session = ?1 AND kind IN ({PARENT_KINDS}))
                OR (kind IN ({CHILD_KINDS})
                    AND session IN (SELECT id FROM sessions WHERE parent = ?1)))
             ORDER BY seq"
        ))?;
        let rows = stmt
            .query_map(params![parent, after.min(i64::MAX as u64)], read_event)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        drop(stmt);
        drop(conn);
        rows.into_iter().map(decode).collect()
    }

    /// Sequence number of the latest event of `session` that engines may
    /// see, or 0: the `latest-seq` of an engine's view. Counting the hidden
    /// child-lifecycle rows would announce an event the engine can never
    /// read, and an engine that caches by watermark would look for it on
    /// every request. Walks the session's index from the top and stops at
    /// the first visible row.
    pub fn latest_visible_seq(&self, session: &str) -> Result<u64> {
        let found = self
            .conn()
            .query_row(
                &format!(
                    "SELECT seq FROM events WHERE session = ?1 AND {}
                     ORDER BY seq DESC LIMIT 1",
                    visible_to_engines("kind")
                ),
                [session],
                |r| r.get::<_, u64>(0),
            )
            .optional()?;
        Ok(found.unwrap_or(0))
    }

    /// The agent tree of `parent`, replayed from its agent log.
    pub fn agent_tree(&self, parent: &str) -> Result<AgentTree> {
        Ok(AgentTree::replay(&self.agent_log(parent, 0)?))
    }

    /// Every event of `session`, hidden kinds included, ascending (for the
    /// host's own reductions, such as a child's report).
    pub fn all_events(&self, session: &str) -> Result<Vec<StoredEvent>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, session, kind, body, time_ms FROM events WHERE session = ?1 ORDER BY seq",
        )?;
        let rows = stmt
            .query_map([session], read_event)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        drop(stmt);
        drop(conn);
        rows.into_iter().map(decode).collect()
    }
}
