//! Sessions: creation with short sortable ids, the session tree, history
//! listing, resume selectors and tombstones.
//!
//! A tombstoned session and every descendant of it are hidden from listing and
//! resume; their events, children and artifacts stay in the store.

use super::{Result, Store, StoreError, now_ms};
use crate::event::EventKind;
use latch_engine_sdk::types::ModelProfile;
use rusqlite::{OptionalExtension, Row};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// A session as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionRecord {
    /// Short, sortable, unique id.
    pub id: String,
    /// The parent session, for child agents.
    pub parent: Option<String>,
    /// Absolute workspace path.
    pub workspace: String,
    /// The model profile the session was created with.
    pub model: ModelProfile,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: u64,
}

/// Lower-case Crockford base32: sortable, no ambiguous letters.
const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// A new session id: 10 base32 characters of the creation time in
/// milliseconds (so ids sort by creation) and 4 random ones.
pub fn new_session_id(time_ms: u64) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u64(time_ms);
    h.write_u32(std::process::id());
    let random = h.finish();
    let mut id = String::with_capacity(14);
    for i in (0..10).rev() {
        id.push(ALPHABET[((time_ms >> (i * 5)) & 31) as usize] as char);
    }
    for i in 0..4 {
        id.push(ALPHABET[((random >> (i * 5)) & 31) as usize] as char);
    }
    id
}

const SESSION_COLUMNS: &str = "id, parent, workspace, model_json, created_ms";

/// Ids of tombstoned sessions and all their descendants.
const HIDDEN_CTE: &str = "WITH RECURSIVE hidden(id) AS (
        SELECT DISTINCT session FROM events WHERE kind = 'tombstone'
        UNION SELECT s.id FROM sessions s JOIN hidden h ON s.parent = h.id
    )";

/// A session row before its model profile JSON is decoded.
type RawSession = (String, Option<String>, String, String, u64);

fn read_record(row: &Row<'_>) -> rusqlite::Result<RawSession> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

fn finish(raw: RawSession) -> Result<SessionRecord> {
    let (id, parent, workspace, json, created_ms) = raw;
    let model = serde_json::from_str(&json).map_err(|source| StoreError::Json {
        what: "model profile",
        source,
    })?;
    Ok(SessionRecord {
        id,
        parent,
        workspace,
        model,
        created_ms,
    })
}

impl Store {
    /// Create a session in `workspace` (a child of `parent` when given).
    pub fn create_session(
        &self,
        workspace: &str,
        parent: Option<&str>,
        model: &ModelProfile,
    ) -> Result<SessionRecord> {
        let model_json = serde_json::to_string(model).map_err(|source| StoreError::Json {
            what: "model profile",
            source,
        })?;
        // Which repository Latch's own git uses, fixed now (see
        // `repository.rs`).
        let repository = match self.repository_for_new_session(workspace, parent) {
            Err(StoreError::UnknownSession(p)) => return Err(StoreError::UnknownSession(p)),
            other => other?,
        };
        let conn = self.conn();
        if let Some(p) = parent {
            let exists: bool = conn.query_row(
                "SELECT COUNT(*) > 0 FROM sessions WHERE id = ?1",
                [p],
                |r| r.get(0),
            )?;
            if !exists {
                return Err(StoreError::UnknownSession(p.to_string()));
            }
        }
        loop {
            let created_ms = now_ms();
            let id = new_session_id(created_ms);
            let inserted = conn.execute(
                "INSERT OR IGNORE INTO sessions
                     (id, parent, workspace, model_json, created_ms, git_repository)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params![id, parent, workspace, model_json, created_ms, repository],
            )?;
            if inserted == 1 {
                return Ok(SessionRecord {
                    id,
                    parent: parent.map(str::to_string),
                    workspace: workspace.to_string(),
                    model: model.clone(),
                    created_ms,
                });
            }
        }
    }

    /// The session with exactly this id (tombstoned or not).
    pub fn session(&self, id: &str) -> Result<SessionRecord> {
        let pair = self
            .conn()
            .query_row(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"),
                [id],
                read_record,
            )
            .optional()?;
        match pair {
            Some(p) => finish(p),
            None => Err(StoreError::UnknownSession(id.to_string())),
        }
    }

    /// The direct children of a session, oldest first (tombstoned or not).
    pub fn children(&self, id: &str) -> Result<Vec<SessionRecord>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE parent = ?1 ORDER BY created_ms, id"
        ))?;
        let rows = stmt.query_map([id], read_record)?;
        rows.map(|r| finish(r?)).collect()
    }

    /// History listing of a workspace, newest first: every session except
    /// tombstoned ones and their descendants.
    pub fn list_sessions(&self, workspace: &str) -> Result<Vec<SessionRecord>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "{HIDDEN_CTE} SELECT {SESSION_COLUMNS} FROM sessions
             WHERE workspace = ?1 AND id NOT IN (SELECT id FROM hidden)
             ORDER BY created_ms DESC, id DESC"
        ))?;
        let rows = stmt.query_map([workspace], read_record)?;
        rows.map(|r| finish(r?)).collect()
    }

    /// Every visible session in the store, of every workspace, newest first:
    /// what `latch sessions --store` lists.
    pub fn list_all_sessions(&self) -> Result<Vec<SessionRecord>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "{HIDDEN_CTE} SELECT {SESSION_COLUMNS} FROM sessions
             WHERE id NOT IN (SELECT id FROM hidden)
             ORDER BY created_ms DESC, id DESC"
        ))?;
        let rows = stmt.query_map([], read_record)?;
        rows.map(|r| finish(r?)).collect()
    }

    /// The newest visible root session (no parent) of a workspace: what a
    /// bare `--resume` continues.
    pub fn latest_root_session(&self, workspace: &str) -> Result<Option<SessionRecord>> {
        let pair = self
            .conn()
            .query_row(
                &format!(
                    "{HIDDEN_CTE} SELECT {SESSION_COLUMNS} FROM sessions
                     WHERE workspace = ?1 AND parent IS NULL
                       AND id NOT IN (SELECT id FROM hidden)
                     ORDER BY created_ms DESC, id DESC LIMIT 1"
                ),
                [workspace],
                read_record,
            )
            .optional()?;
        pair.map(finish).transpose()
    }

    /// Resolve a resume selector: a unique prefix of a visible session's id
    /// (case-insensitive). Tombstoned sessions and their descendants never
    /// match.
    pub fn resolve_session(&self, prefix: &str) -> Result<SessionRecord> {
        let prefix = prefix.trim().to_ascii_lowercase();
        if prefix.is_empty() || !prefix.bytes().all(|b| ALPHABET.contains(&b)) {
            return Err(StoreError::NoMatch(prefix));
        }
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "{HIDDEN_CTE} SELECT {SESSION_COLUMNS} FROM sessions
             WHERE substr(id, 1, length(?1)) = ?1 AND id NOT IN (SELECT id FROM hidden)
             ORDER BY id LIMIT 11"
        ))?;
        let mut found = stmt
            .query_map([&prefix], read_record)?
            .map(|r| finish(r?))
            .collect::<Result<Vec<_>>>()?;
        if let Some(exact) = found.iter().position(|r| r.id == prefix) {
            return Ok(found.swap_remove(exact));
        }
        match found.len() {
            0 => Err(StoreError::NoMatch(prefix)),
            1 => Ok(found.pop().expect("one")),
            _ => Err(StoreError::Ambiguous {
                prefix,
                candidates: found.into_iter().map(|r| r.id).collect(),
            }),
        }
    }

    /// True when the session or one of its ancestors is tombstoned.
    pub fn is_hidden(&self, id: &str) -> Result<bool> {
        Ok(self.conn().query_row(
            &format!("{HIDDEN_CTE} SELECT COUNT(*) > 0 FROM hidden WHERE id = ?1"),
            [id],
            |r| r.get(0),
        )?)
    }

    /// `latch history delete <session>`: append a tombstone. Listing and
    /// resume then omit the session and its descendants; events, children,
    /// artifacts and mutation evidence stay, and the workspace generation does
    /// not move. Returns the tombstone's sequence number.
    pub fn delete_session(&self, id: &str) -> Result<u64> {
        self.append(
            id,
            EventKind::Tombstone {
                session: id.to_string(),
            },
        )
    }
}
