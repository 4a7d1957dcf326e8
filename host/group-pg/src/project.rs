//! The PostgreSQL group projection: appending one event to the shared log
//! and applying it to the tables in the same transaction (the same rules as
//! the SQLite projection), and reading the projection back as a
//! [`GroupSnapshot`].

use crate::cached;
use deadpool_postgres::Transaction;
use latch_kernel::group::{GroupEvent, GroupSnapshot, Pending, Task, TaskStatus};
use tokio_postgres::{Client, Error};

/// Append `event` to `root`'s log (under `commit_id` when it is the first
/// event of a commit that has one) and apply it; returns its sequence
/// number.
pub(crate) async fn append(
    tx: &Transaction<'_>,
    root: &str,
    time: u64,
    host: &str,
    event: &GroupEvent,
    commit_id: Option<&str>,
) -> Result<u64, Error> {
    let body = serde_json::to_string(event).expect("group events serialize");
    let time = time as i64;
    let seq: i64 = cached::query_one(
        tx,
        "INSERT INTO latch_group_events (root, body, time_ms, host, commit_id)
             VALUES ($1, $2, $3, $4, $5) RETURNING seq",
        &[&root, &body, &time, &host, &commit_id],
    )
    .await?
    .get(0);
    cached::execute(
        tx,
        "UPDATE latch_groups SET last_ms = GREATEST(last_ms, $2) WHERE root = $1",
        &[&root, &time],
    )
    .await?;
    let touch = |who: String| async move {
        cached::execute(
            tx,
            "UPDATE latch_group_members SET last_ms = GREATEST(last_ms, $3)
             WHERE root = $1 AND member = $2",
            &[&root, &who, &time],
        )
        .await
    };
    match event {
        GroupEvent::Created { lead } => {
            cached::execute(
                tx,
                "INSERT INTO latch_groups (root, lead, created_seq, delivered, last_ms)
                 VALUES ($1, $2, $3, 0, $4) ON CONFLICT DO NOTHING",
                &[&root, lead, &seq, &time],
            )
            .await?;
        }
        GroupEvent::MemberJoined { member, role } => {
            cached::execute(
                tx,
                "INSERT INTO latch_group_members
                    (root, member, role, active, left_reason, joined_seq, last_ms, host)
                 VALUES ($1, $2, $3, TRUE, NULL, $4, $5, $6)
                 ON CONFLICT (root, member) DO UPDATE SET role = excluded.role, active = TRUE,
                    left_reason = NULL, joined_seq = excluded.joined_seq, host = excluded.host,
                    last_ms = GREATEST(latch_group_members.last_ms, excluded.last_ms)",
                &[&root, member, role, &seq, &time, &host],
            )
            .await?;
        }
        GroupEvent::MemberLeft { member, reason, .. } => {
            cached::execute(
                tx,
                "UPDATE latch_group_members SET active = FALSE, left_reason = $3
                 WHERE root = $1 AND member = $2",
                &[&root, member, reason],
            )
            .await?;
            // A member that left holds no lease: its heartbeat finds it gone.
            cached::execute(
                tx,
                "DELETE FROM latch_group_leases WHERE root = $1 AND member = $2",
                &[&root, member],
            )
            .await?;
            touch(member.clone()).await?;
        }
        GroupEvent::TaskCreated {
            title,
            description,
            depends_on,
            key,
            by,
        } => {
            cached::execute(
                tx,
                "INSERT INTO latch_group_tasks
                    (root, id, title, description, idem_key, status, owner, result)
                 VALUES ($1, $2, $3, $4, $5, 'open', NULL, NULL)",
                &[&root, &seq, title, description, key],
            )
            .await?;
            for dep in depends_on {
                cached::execute(
                    tx,
                    "INSERT INTO latch_group_task_deps (root, task, dep) VALUES ($1, $2, $3)
                     ON CONFLICT DO NOTHING",
                    &[&root, &seq, &(*dep as i64)],
                )
                .await?;
            }
            touch(by.clone()).await?;
        }
        GroupEvent::TaskClaimed { task, by, .. } => {
            let task = *task as i64;
            let claimed = cached::execute(
                tx,
                "UPDATE latch_group_tasks SET status = 'claimed', owner = $3
                     WHERE root = $1 AND id = $2 AND status = 'open'",
                &[&root, &task, by],
            )
            .await?;
            if claimed > 0 {
                // One holder per task, whatever happens above: the primary
                // key refuses a second claim row.
                cached::execute(
                    tx,
                    "INSERT INTO latch_group_claims (root, task, holder) VALUES ($1, $2, $3)",
                    &[&root, &task, by],
                )
                .await?;
            }
            touch(by.clone()).await?;
        }
        GroupEvent::TaskReleased { task, by, .. } => {
            let task = *task as i64;
            cached::execute(
                tx,
                "UPDATE latch_group_tasks SET status = 'open', owner = NULL
                 WHERE root = $1 AND id = $2 AND status = 'claimed'",
                &[&root, &task],
            )
            .await?;
            cached::execute(
                tx,
                "DELETE FROM latch_group_claims WHERE root = $1 AND task = $2",
                &[&root, &task],
            )
            .await?;
            touch(by.clone()).await?;
        }
        GroupEvent::TaskCompleted {
            task,
            by,
            ok,
            result,
        } => {
            let task = *task as i64;
            let status = if *ok { "completed" } else { "failed" };
            cached::execute(
                tx,
                "UPDATE latch_group_tasks SET status = $3, owner = $4, result = $5
                 WHERE root = $1 AND id = $2 AND status = 'claimed'",
                &[&root, &task, &status, by, result],
            )
            .await?;
            cached::execute(
                tx,
                "DELETE FROM latch_group_claims WHERE root = $1 AND task = $2",
                &[&root, &task],
            )
            .await?;
            touch(by.clone()).await?;
        }
        GroupEvent::MessageQueued {
            from,
            recipients,
            text,
            ..
        } => {
            for r in recipients {
                cached::execute(
                    tx,
                    "INSERT INTO latch_group_pending (root, recipient, message, sender, text)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (root, recipient, message) DO UPDATE
                     SET sender = excluded.sender, text = excluded.text",
                    &[&root, r, &seq, from, text],
                )
                .await?;
            }
            touch(from.clone()).await?;
        }
        GroupEvent::MessageDelivered { message, to } => {
            let removed = cached::execute(
                tx,
                "DELETE FROM latch_group_pending
                     WHERE root = $1 AND recipient = $2 AND message = $3",
                &[&root, to, &(*message as i64)],
            )
            .await?;
            if removed > 0 {
                cached::execute(
                    tx,
                    "UPDATE latch_groups SET delivered = delivered + 1 WHERE root = $1",
                    &[&root],
                )
                .await?;
            }
        }
    }
    Ok(seq as u64)
}

/// The projection of `root` as comparable data.
pub(crate) async fn snapshot(client: &Client, root: &str) -> Result<GroupSnapshot, Error> {
    let delivered = client
        .query_opt(
            "SELECT delivered FROM latch_groups WHERE root = $1",
            &[&root],
        )
        .await?
        .map(|r| r.get::<_, i64>(0) as u64);
    let mut snap = GroupSnapshot {
        created: delivered.is_some(),
        delivered: delivered.unwrap_or(0),
        ..GroupSnapshot::default()
    };
    for r in client
        .query(
            "SELECT member, role, active FROM latch_group_members WHERE root = $1",
            &[&root],
        )
        .await?
    {
        snap.members.insert(r.get(0), (r.get(1), r.get(2)));
    }
    let deps = client
        .query(
            "SELECT task, dep FROM latch_group_task_deps WHERE root = $1 ORDER BY task, dep",
            &[&root],
        )
        .await?;
    for r in client
        .query(
            "SELECT id, title, description, idem_key, status, owner, result
             FROM latch_group_tasks WHERE root = $1 ORDER BY id",
            &[&root],
        )
        .await?
    {
        let id = r.get::<_, i64>(0);
        snap.tasks.insert(
            id as u64,
            Task {
                id: id as u64,
                title: r.get(1),
                description: r.get(2),
                depends_on: deps
                    .iter()
                    .filter(|d| d.get::<_, i64>(0) == id)
                    .map(|d| d.get::<_, i64>(1) as u64)
                    .collect(),
                key: r.get(3),
                status: TaskStatus::from_label(r.get(4)).unwrap_or(TaskStatus::Open),
                owner: r.get(5),
                result: r.get(6),
            },
        );
    }
    snap.pending = client
        .query(
            "SELECT recipient, message, sender, text FROM latch_group_pending WHERE root = $1
             ORDER BY recipient, message",
            &[&root],
        )
        .await?
        .iter()
        .map(|r| Pending {
            to: r.get(0),
            message: r.get::<_, i64>(1) as u64,
            from: r.get(2),
            text: r.get(3),
        })
        .collect();
    Ok(snap)
}
