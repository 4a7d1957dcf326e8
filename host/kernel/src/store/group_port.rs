//! The SQLite implementation of [`GroupPort`]: it loads the facts of the
//! kernel's one commit check ([`crate::group::check`]), and the check and
//! the append happen in one immediate transaction, so two agents (threads or
//! processes) racing for one task cannot both win, and a delivery appends
//! the recipient's event and the root's marker together or not at all. A
//! commit's id is recorded with its events (`group_commits`), so a retry
//! returns the first result; members are fenced by their epoch as on any
//! store. One machine needs no member leases: the supervisor knows which
//! members run.

use super::events::{decode, insert_in, read_event};
use super::{Store, StoreError, group_projection, now_ms};
use crate::event::{EventKind, StoredEvent};
use crate::group::check::{self, Facts, MemberRow};
use crate::group::{
    Commit, Committed, GroupError, GroupEvent, GroupPort, GroupSnapshot, PendingMessage,
    TaskStatus, delivery_text,
};
use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params};

type Refused<T> = std::result::Result<T, GroupError>;

fn sql(e: rusqlite::Error) -> GroupError {
    GroupError::Store(StoreError::Sqlite(e))
}

/// The members of `root`: `(id, active)`.
fn members(tx: &Transaction<'_>, root: &str) -> Refused<Vec<(String, bool)>> {
    let mut stmt = tx
        .prepare_cached("SELECT member, active FROM group_members WHERE root = ?1 ORDER BY member")
        .map_err(sql)?;
    let rows = stmt
        .query_map([root], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(sql)?;
    rows.collect::<rusqlite::Result<_>>().map_err(sql)
}

fn task_ids(tx: &Transaction<'_>, root: &str) -> Refused<Vec<u64>> {
    let mut stmt = tx
        .prepare_cached("SELECT id FROM group_tasks WHERE root = ?1 ORDER BY id")
        .map_err(sql)?;
    let rows = stmt.query_map([root], |r| r.get(0)).map_err(sql)?;
    rows.collect::<rusqlite::Result<_>>().map_err(sql)
}

/// Load what [`check::needs`] asks for checking `event` from the
/// projection (and, for a joining member, the sessions table: members are
/// the root and its children).
fn facts(
    tx: &Transaction<'_>,
    root: &str,
    event: &GroupEvent,
    epoch: Option<u64>,
) -> Refused<Facts> {
    let needs = check::needs(event, epoch);
    let mut f = Facts::default();
    if needs.group {
        f.created = tx
            .query_row(
                "SELECT created_seq FROM group_groups WHERE root = ?1",
                [root],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql)?;
    }
    if needs.members {
        f.members = members(tx, root)?;
    }
    if let Some(member) = &needs.member {
        let parent: Option<Option<String>> = tx
            .query_row("SELECT parent FROM sessions WHERE id = ?1", [member], |r| {
                r.get(0)
            })
            .optional()
            .map_err(sql)?;
        f.belongs = member == root || parent.flatten().as_deref() == Some(root);
        f.joining = tx
            .query_row(
                "SELECT role, active, joined_seq FROM group_members WHERE root = ?1 AND member = ?2",
                params![root, member],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(sql)?;
    }
    if let Some(actor) = &needs.actor {
        f.actor = tx
            .query_row(
                "SELECT active, joined_seq, left_reason FROM group_members
                 WHERE root = ?1 AND member = ?2",
                params![root, actor],
                |r| {
                    Ok(MemberRow {
                        active: r.get(0)?,
                        epoch: r.get(1)?,
                        left_reason: r.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(sql)?;
    }
    if let Some(id) = needs.task {
        let found: Option<(String, Option<String>)> = tx
            .query_row(
                "SELECT status, owner FROM group_tasks WHERE root = ?1 AND id = ?2",
                params![root, id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(sql)?;
        f.task = found.map(|(status, owner)| {
            (
                TaskStatus::from_label(&status).unwrap_or(TaskStatus::Open),
                owner,
            )
        });
    }
    if needs.task_ids_given(f.task.is_some()) {
        f.task_ids = task_ids(tx, root)?;
    }
    if let Some(key) = &needs.key {
        f.keyed = tx
            .query_row(
                "SELECT id FROM group_tasks WHERE root = ?1 AND idem_key = ?2",
                params![root, key],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql)?;
    }
    if let Some(id) = needs.waiting.filter(|_| f.task.is_some()) {
        let mut stmt = tx
            .prepare_cached(
                "SELECT t.id, t.status FROM group_task_deps d
                 JOIN group_tasks t ON t.root = d.root AND t.id = d.dep
                 WHERE d.root = ?1 AND d.task = ?2 AND t.status <> 'completed' ORDER BY t.id",
            )
            .map_err(sql)?;
        f.waiting = stmt
            .query_map(params![root, id], |r| {
                Ok((r.get::<_, u64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(sql)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(sql)?
            .into_iter()
            .map(|(d, s)| (d, TaskStatus::from_label(&s).unwrap_or(TaskStatus::Open)))
            .collect();
    }
    Ok(f)
}

impl GroupPort for Store {
    fn submit(&self, root: &str, commit: Commit) -> Result<Committed, GroupError> {
        let Commit {
            mut event,
            epoch,
            id,
        } = commit;
        let fences = self.fences();
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        if let Some(id) = &id
            && let Some(seq) = tx
                .query_row(
                    "SELECT seq FROM group_commits WHERE root = ?1 AND commit_id = ?2",
                    params![root, id],
                    |r| r.get::<_, u64>(0),
                )
                .optional()
                .map_err(sql)?
        {
            // Applied before: the first result, nothing appended again.
            return Ok(Committed { seq, fresh: true });
        }
        let facts = facts(&tx, root, &event, epoch)?;
        if let Some(done) = check::check(root, &mut event, epoch, &facts)? {
            return Ok(done);
        }
        let mut entries = vec![(root.to_string(), EventKind::Group(event.clone()))];
        if let GroupEvent::MemberLeft { member, .. } = &event {
            // The claims of a member that no longer runs go back to the
            // list with the same commit.
            let mut stmt = tx
                .prepare_cached(
                    "SELECT id FROM group_tasks WHERE root = ?1 AND owner = ?2 AND status = 'claimed'
                     ORDER BY id",
                )
                .map_err(sql)?;
            let held = stmt
                .query_map(params![root, member], |r| r.get::<_, u64>(0))
                .map_err(sql)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(sql)?;
            drop(stmt);
            entries.extend(
                check::leaving(&event, &held)
                    .into_iter()
                    .map(|e| (root.to_string(), EventKind::Group(e))),
            );
        }
        let seqs = insert_in(&tx, &fences, &entries, now_ms())?;
        if let Some(id) = &id {
            tx.execute(
                "INSERT INTO group_commits (root, commit_id, seq) VALUES (?1, ?2, ?3)",
                params![root, id, seqs[0]],
            )
            .map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        Ok(Committed {
            seq: seqs[0],
            fresh: true,
        })
    }

    fn deliver(&self, root: &str, recipient: &str) -> Result<Vec<(u64, EventKind)>, GroupError> {
        let fences = self.fences();
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let waiting = {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT p.message, p.sender, COALESCE(m.role, ''), p.text FROM group_pending p
                     LEFT JOIN group_members m ON m.root = p.root AND m.member = p.sender
                     WHERE p.root = ?1 AND p.recipient = ?2 ORDER BY p.message",
                )
                .map_err(sql)?;
            stmt.query_map(params![root, recipient], |r| {
                Ok((
                    r.get::<_, u64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(sql)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(sql)?
        };
        if waiting.is_empty() {
            return Ok(Vec::new());
        }
        let mut entries = Vec::with_capacity(2 * waiting.len());
        for (message, from, role, text) in waiting {
            entries.push((
                recipient.to_string(),
                EventKind::GroupMessageDelivered {
                    message_seq: message,
                    from: from.clone(),
                    text: delivery_text(&from, &role, &text),
                },
            ));
            entries.push((
                root.to_string(),
                EventKind::Group(GroupEvent::MessageDelivered {
                    message,
                    to: recipient.to_string(),
                }),
            ));
        }
        let seqs = insert_in(&tx, &fences, &entries, now_ms())?;
        tx.commit().map_err(sql)?;
        Ok(seqs
            .into_iter()
            .zip(entries)
            .filter(|(_, (session, _))| session == recipient)
            .filter(|(_, (_, e))| matches!(e, EventKind::GroupMessageDelivered { .. }))
            .map(|(seq, (_, e))| (seq, e))
            .collect())
    }

    fn pending(&self, root: &str, recipient: &str) -> Result<Vec<PendingMessage>, GroupError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT message, sender, text FROM group_pending
                 WHERE root = ?1 AND recipient = ?2 ORDER BY message",
            )
            .map_err(sql)?;
        let rows = stmt
            .query_map(params![root, recipient], |r| {
                Ok(PendingMessage {
                    message: r.get(0)?,
                    from: r.get(1)?,
                    text: r.get(2)?,
                })
            })
            .map_err(sql)?;
        rows.collect::<rusqlite::Result<_>>().map_err(sql)
    }

    fn group_log(&self, root: &str, after: u64) -> Result<Vec<StoredEvent>, GroupError> {
        let raw = {
            let conn = self.conn();
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, session, kind, body, time_ms FROM events
                     WHERE session = ?1 AND kind = 'group' AND seq > ?2 ORDER BY seq",
                )
                .map_err(sql)?;
            stmt.query_map(params![root, after.min(i64::MAX as u64)], read_event)
                .map_err(sql)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(sql)?
        };
        self.count_decoded(raw.len());
        Ok(raw.into_iter().map(decode).collect::<Result<_, _>>()?)
    }

    fn projection(&self, root: &str) -> Result<GroupSnapshot, GroupError> {
        Ok(group_projection::snapshot(&self.conn(), root)?)
    }
}

impl Store {
    /// Throw the group projection away and rebuild it from the log (what
    /// [`Store::open`] does). Returns how many group events it applied.
    pub fn rebuild_group_projection(&self) -> Result<u64, StoreError> {
        group_projection::rebuild(&mut self.conn())
    }
}
