//! The SQLite implementation of [`GroupPort`]: every check and its append
//! happen in one immediate transaction, so two agents (threads or
//! processes) racing for one task cannot both win, and a delivery appends
//! the recipient's event and the root's marker together or not at all.

use super::events::{decode, insert_in, read_event};
use super::{Store, StoreError, group_projection, now_ms};
use crate::event::{EventKind, StoredEvent};
use crate::group::{
    ALL, Committed, GroupError, GroupEvent, GroupPort, GroupRefusal, GroupSnapshot, PendingMessage,
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

fn require_group(tx: &Transaction<'_>, root: &str) -> Refused<()> {
    let exists: bool = tx
        .query_row(
            "SELECT COUNT(*) > 0 FROM group_groups WHERE root = ?1",
            [root],
            |r| r.get(0),
        )
        .map_err(sql)?;
    if exists {
        Ok(())
    } else {
        Err(GroupRefusal::NoGroup { root: root.into() }.into())
    }
}

/// Refuse unless `who` is an active member.
fn require_active(tx: &Transaction<'_>, root: &str, who: &str) -> Refused<()> {
    let all = members(tx, root)?;
    if all.iter().any(|(id, active)| id == who && *active) {
        return Ok(());
    }
    Err(GroupRefusal::NotMember {
        who: who.into(),
        members: all
            .into_iter()
            .filter(|(_, a)| *a)
            .map(|(id, _)| id)
            .collect(),
    }
    .into())
}

fn task_ids(tx: &Transaction<'_>, root: &str) -> Refused<Vec<u64>> {
    let mut stmt = tx
        .prepare_cached("SELECT id FROM group_tasks WHERE root = ?1 ORDER BY id")
        .map_err(sql)?;
    let rows = stmt.query_map([root], |r| r.get(0)).map_err(sql)?;
    rows.collect::<rusqlite::Result<_>>().map_err(sql)
}

/// `(status, owner)` of a task, or the refusal naming the tasks that exist.
fn task(tx: &Transaction<'_>, root: &str, id: u64) -> Refused<(TaskStatus, Option<String>)> {
    let found: Option<(String, Option<String>)> = tx
        .query_row(
            "SELECT status, owner FROM group_tasks WHERE root = ?1 AND id = ?2",
            params![root, id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sql)?;
    match found {
        Some((status, owner)) => Ok((
            TaskStatus::from_label(&status).unwrap_or(TaskStatus::Open),
            owner,
        )),
        None => Err(GroupRefusal::UnknownTask {
            task: id,
            known: task_ids(tx, root)?,
        }
        .into()),
    }
}

/// Refuse unless `by` holds `id`.
fn require_holder(tx: &Transaction<'_>, root: &str, id: u64, by: &str) -> Refused<()> {
    match task(tx, root, id)? {
        (TaskStatus::Claimed, Some(holder)) if holder == by => Ok(()),
        (TaskStatus::Claimed, holder) => Err(GroupRefusal::NotHolder { task: id, holder }.into()),
        _ => Err(GroupRefusal::NotHolder {
            task: id,
            holder: None,
        }
        .into()),
    }
}

/// Check `event` against the projection; `Ok(Some(c))` when the log
/// already says it (nothing to append).
fn check(tx: &Transaction<'_>, root: &str, event: &mut GroupEvent) -> Refused<Option<Committed>> {
    let same = |seq: u64| Some(Committed { seq, fresh: false });
    match event {
        GroupEvent::Created { lead } => {
            if lead != root {
                return Err(GroupRefusal::Invalid(format!(
                    "a group is created in its lead's own session: {lead} is not {root}"
                ))
                .into());
            }
            let seq: Option<u64> = tx
                .query_row(
                    "SELECT created_seq FROM group_groups WHERE root = ?1",
                    [root],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql)?;
            Ok(seq.and_then(same))
        }
        GroupEvent::MemberJoined { member, role } => {
            require_group(tx, root)?;
            let parent: Option<Option<String>> = tx
                .query_row(
                    "SELECT parent FROM sessions WHERE id = ?1",
                    [&*member],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql)?;
            let belongs = member == root || parent.flatten().as_deref() == Some(root);
            if !belongs {
                return Err(GroupRefusal::Invalid(format!(
                    "session {member} cannot join the group of {root}: members are the root \
                     session and its child agents"
                ))
                .into());
            }
            let current: Option<(String, bool, u64)> = tx
                .query_row(
                    "SELECT role, active, joined_seq FROM group_members WHERE root = ?1 AND member = ?2",
                    params![root, &*member],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()
                .map_err(sql)?;
            Ok(match current {
                Some((r, true, seq)) if r == *role => same(seq),
                _ => None,
            })
        }
        GroupEvent::MemberLeft { member, .. } => {
            require_group(tx, root)?;
            let active = members(tx, root)?
                .into_iter()
                .any(|(id, a)| id == *member && a);
            Ok(if active { None } else { same(0) })
        }
        GroupEvent::TaskCreated {
            title,
            depends_on,
            key,
            by,
            ..
        } => {
            require_group(tx, root)?;
            require_active(tx, root, by)?;
            if title.trim().is_empty() {
                return Err(
                    GroupRefusal::Invalid("a task needs a non-empty title".to_string()).into(),
                );
            }
            if let Some(k) = key {
                let existing: Option<u64> = tx
                    .query_row(
                        "SELECT id FROM group_tasks WHERE root = ?1 AND idem_key = ?2",
                        params![root, &*k],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql)?;
                if let Some(id) = existing {
                    return Ok(same(id));
                }
            }
            let known = task_ids(tx, root)?;
            depends_on.sort_unstable();
            depends_on.dedup();
            if let Some(dep) = depends_on.iter().find(|d| !known.contains(d)) {
                return Err(GroupRefusal::UnknownDependency { dep: *dep, known }.into());
            }
            Ok(None)
        }
        GroupEvent::TaskClaimed { task: id, by } => {
            require_active(tx, root, by)?;
            let id = *id;
            match task(tx, root, id)? {
                (TaskStatus::Claimed, Some(holder)) if holder == *by => return Ok(same(id)),
                (TaskStatus::Claimed, holder) => {
                    return Err(GroupRefusal::Held {
                        task: id,
                        holder: holder.unwrap_or_default(),
                    }
                    .into());
                }
                (status @ (TaskStatus::Completed | TaskStatus::Failed), owner) => {
                    return Err(GroupRefusal::Closed {
                        task: id,
                        status,
                        by: owner.unwrap_or_default(),
                    }
                    .into());
                }
                (TaskStatus::Open, _) => {}
            }
            let mut stmt = tx
                .prepare_cached(
                    "SELECT t.id, t.status FROM group_task_deps d
                     JOIN group_tasks t ON t.root = d.root AND t.id = d.dep
                     WHERE d.root = ?1 AND d.task = ?2 AND t.status <> 'completed' ORDER BY t.id",
                )
                .map_err(sql)?;
            let waiting = stmt
                .query_map(params![root, id], |r| {
                    Ok((r.get::<_, u64>(0)?, r.get::<_, String>(1)?))
                })
                .map_err(sql)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(sql)?;
            if !waiting.is_empty() {
                return Err(GroupRefusal::Blocked {
                    task: id,
                    waiting: waiting
                        .into_iter()
                        .map(|(d, s)| (d, TaskStatus::from_label(&s).unwrap_or(TaskStatus::Open)))
                        .collect(),
                }
                .into());
            }
            Ok(None)
        }
        GroupEvent::TaskReleased { task: id, by, .. } => {
            require_holder(tx, root, *id, by)?;
            Ok(None)
        }
        GroupEvent::TaskCompleted {
            task: id,
            by,
            result,
            ..
        } => {
            require_holder(tx, root, *id, by)?;
            if result.trim().is_empty() {
                return Err(GroupRefusal::Invalid(
                    "say in `result` what was done (or why it failed)".to_string(),
                )
                .into());
            }
            Ok(None)
        }
        GroupEvent::MessageQueued {
            from,
            to,
            recipients,
            text,
        } => {
            require_group(tx, root)?;
            require_active(tx, root, from)?;
            if text.trim().is_empty() {
                return Err(GroupRefusal::Invalid("a message needs text".to_string()).into());
            }
            let all = members(tx, root)?;
            *recipients = if to == ALL {
                let others: Vec<String> = all
                    .into_iter()
                    .filter(|(id, active)| *active && id != from)
                    .map(|(id, _)| id)
                    .collect();
                if others.is_empty() {
                    return Err(GroupRefusal::NobodyElse.into());
                }
                others
            } else if all.iter().any(|(id, _)| id == to) {
                vec![to.clone()]
            } else {
                return Err(GroupRefusal::NotMember {
                    who: to.clone(),
                    members: all.into_iter().map(|(id, _)| id).collect(),
                }
                .into());
            };
            Ok(None)
        }
        GroupEvent::MessageDelivered { .. } => Err(GroupRefusal::Invalid(
            "deliveries are made at the recipient's safe boundary, not committed directly"
                .to_string(),
        )
        .into()),
    }
}

impl GroupPort for Store {
    fn commit(&self, root: &str, mut event: GroupEvent) -> Result<Committed, GroupError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        if let Some(done) = check(&tx, root, &mut event)? {
            return Ok(done);
        }
        let mut entries = vec![(root.to_string(), EventKind::Group(event.clone()))];
        if let GroupEvent::MemberLeft { member, reason } = &event {
            // The supervisor's release: the claims of a member that no
            // longer runs go back to the list with the same commit.
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
            for task in held {
                entries.push((
                    root.to_string(),
                    EventKind::Group(GroupEvent::TaskReleased {
                        task,
                        by: member.clone(),
                        reason: format!("its holder {reason}"),
                    }),
                ));
            }
        }
        let seqs = insert_in(&tx, &entries, now_ms())?;
        tx.commit().map_err(sql)?;
        Ok(Committed {
            seq: seqs[0],
            fresh: true,
        })
    }

    fn deliver(&self, root: &str, recipient: &str) -> Result<Vec<(u64, EventKind)>, GroupError> {
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
        let seqs = insert_in(&tx, &entries, now_ms())?;
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
