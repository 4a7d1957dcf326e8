//! The SQLite group projection: tables of groups, members, tasks (the
//! `owner` of a claimed task is its claim), dependencies and pending
//! deliveries, maintained by the transaction that appends each group event
//! and rebuilt from the log at store open. A cache: it can be thrown away
//! at any time, and the tests pin it equal to `GroupState::replay` and to an
//! independent model of the rules.

use super::Result;
use super::events::{decode, read_event};
use crate::event::EventKind;
use crate::group::{GroupEvent, GroupSnapshot, Pending, Task, TaskStatus};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

/// Run one statement through the connection's statement cache: a rebuild
/// applies thousands of events with the same few statements.
fn run(tx: &Transaction<'_>, sql: &str, params: impl rusqlite::Params) -> Result<usize> {
    Ok(tx.prepare_cached(sql)?.execute(params)?)
}

/// Apply one committed group event of `root` (sequence `seq`, committed at
/// `time`) to the projection, inside the transaction that appends it.
pub(crate) fn apply(
    tx: &Transaction<'_>,
    root: &str,
    seq: u64,
    time: u64,
    event: &GroupEvent,
) -> Result<()> {
    run(
        tx,
        "UPDATE group_groups SET last_ms = MAX(last_ms, ?2) WHERE root = ?1",
        params![root, time],
    )?;
    let touch = |who: &str| -> Result<()> {
        run(
            tx,
            "UPDATE group_members SET last_ms = MAX(last_ms, ?3) WHERE root = ?1 AND member = ?2",
            params![root, who, time],
        )?;
        Ok(())
    };
    match event {
        GroupEvent::Created { lead } => {
            run(
                tx,
                "INSERT OR IGNORE INTO group_groups (root, lead, created_seq, delivered, last_ms)
                 VALUES (?1, ?2, ?3, 0, ?4)",
                params![root, lead, seq, time],
            )?;
        }
        GroupEvent::MemberJoined { member, role } => {
            run(tx,
                "INSERT INTO group_members (root, member, role, active, left_reason, joined_seq, last_ms)
                 VALUES (?1, ?2, ?3, 1, NULL, ?4, ?5)
                 ON CONFLICT (root, member) DO UPDATE SET role = excluded.role, active = 1,
                    left_reason = NULL, joined_seq = excluded.joined_seq,
                    last_ms = MAX(last_ms, excluded.last_ms)",
                params![root, member, role, seq, time],
            )?;
        }
        GroupEvent::MemberLeft { member, reason, .. } => {
            run(
                tx,
                "UPDATE group_members SET active = 0, left_reason = ?3 WHERE root = ?1 AND member = ?2",
                params![root, member, reason],
            )?;
            touch(member)?;
        }
        GroupEvent::TaskCreated {
            title,
            description,
            depends_on,
            key,
            by,
        } => {
            run(tx,
                "INSERT INTO group_tasks (root, id, title, description, idem_key, status, owner, result)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'open', NULL, NULL)",
                params![root, seq, title, description, key],
            )?;
            for dep in depends_on {
                run(
                    tx,
                    "INSERT OR IGNORE INTO group_task_deps (root, task, dep) VALUES (?1, ?2, ?3)",
                    params![root, seq, dep],
                )?;
            }
            touch(by)?;
        }
        GroupEvent::TaskClaimed { task, by, .. } => {
            run(
                tx,
                "UPDATE group_tasks SET status = 'claimed', owner = ?3
                 WHERE root = ?1 AND id = ?2 AND status = 'open'",
                params![root, task, by],
            )?;
            touch(by)?;
        }
        GroupEvent::TaskReleased { task, by, .. } => {
            run(
                tx,
                "UPDATE group_tasks SET status = 'open', owner = NULL
                 WHERE root = ?1 AND id = ?2 AND status = 'claimed'",
                params![root, task],
            )?;
            touch(by)?;
        }
        GroupEvent::TaskCompleted {
            task,
            by,
            ok,
            result,
        } => {
            let status = if *ok { "completed" } else { "failed" };
            run(
                tx,
                "UPDATE group_tasks SET status = ?3, owner = ?4, result = ?5
                 WHERE root = ?1 AND id = ?2 AND status = 'claimed'",
                params![root, task, status, by, result],
            )?;
            touch(by)?;
        }
        GroupEvent::MessageQueued {
            from,
            recipients,
            text,
            ..
        } => {
            for r in recipients {
                run(
                    tx,
                    "INSERT OR REPLACE INTO group_pending (root, recipient, message, sender, text)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![root, r, seq, from, text],
                )?;
            }
            touch(from)?;
        }
        GroupEvent::MessageDelivered { message, to } => {
            let removed = run(
                tx,
                "DELETE FROM group_pending WHERE root = ?1 AND recipient = ?2 AND message = ?3",
                params![root, to, message],
            )?;
            if removed > 0 {
                run(
                    tx,
                    "UPDATE group_groups SET delivered = delivered + 1 WHERE root = ?1",
                    [root],
                )?;
            }
        }
    }
    Ok(())
}

/// Throw the projection away and rebuild it from every group event of the
/// log, in one immediate transaction. Returns how many events it applied.
pub(crate) fn rebuild(conn: &mut Connection) -> Result<u64> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(
        "DELETE FROM group_pending; DELETE FROM group_task_deps; DELETE FROM group_tasks;
         DELETE FROM group_members; DELETE FROM group_groups;",
    )?;
    let rows = {
        let mut stmt = tx.prepare(
            "SELECT seq, session, kind, body, time_ms FROM events WHERE kind = 'group' ORDER BY seq",
        )?;
        stmt.query_map([], read_event)?
            .collect::<rusqlite::Result<Vec<_>>>()?
    };
    let n = rows.len() as u64;
    for raw in rows {
        let e = decode(raw)?;
        if let EventKind::Group(g) = &e.kind {
            apply(&tx, &e.session, e.seq, e.time_ms, g)?;
        }
    }
    tx.commit()?;
    Ok(n)
}

/// The projection of `root` as comparable data.
pub(crate) fn snapshot(conn: &Connection, root: &str) -> Result<GroupSnapshot> {
    let delivered: Option<u64> = conn
        .query_row(
            "SELECT delivered FROM group_groups WHERE root = ?1",
            [root],
            |r| r.get(0),
        )
        .optional()?;
    let mut snap = GroupSnapshot {
        created: delivered.is_some(),
        delivered: delivered.unwrap_or(0),
        ..GroupSnapshot::default()
    };
    let mut stmt =
        conn.prepare_cached("SELECT member, role, active FROM group_members WHERE root = ?1")?;
    for row in stmt.query_map([root], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(2)?))
    })? {
        let (id, role, active) = row?;
        snap.members.insert(id, (role, active));
    }
    let mut stmt = conn.prepare_cached(
        "SELECT id, title, description, idem_key, status, owner, result FROM group_tasks
         WHERE root = ?1 ORDER BY id",
    )?;
    let mut deps = conn.prepare_cached(
        "SELECT dep FROM group_task_deps WHERE root = ?1 AND task = ?2 ORDER BY dep",
    )?;
    let tasks = stmt
        .query_map([root], |r| {
            Ok((
                r.get::<_, u64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, Option<String>>(6)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for (id, title, description, key, status, owner, result) in tasks {
        let depends_on = deps
            .query_map(params![root, id], |r| r.get::<_, u64>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        snap.tasks.insert(
            id,
            Task {
                id,
                title,
                description,
                depends_on,
                key,
                status: TaskStatus::from_label(&status).unwrap_or(TaskStatus::Open),
                owner,
                result,
            },
        );
    }
    let mut stmt = conn.prepare_cached(
        "SELECT recipient, message, sender, text FROM group_pending WHERE root = ?1
         ORDER BY recipient, message",
    )?;
    snap.pending = stmt
        .query_map([root], |r| {
            Ok(Pending {
                to: r.get(0)?,
                message: r.get(1)?,
                from: r.get(2)?,
                text: r.get(3)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(snap)
}
