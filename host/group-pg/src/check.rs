//! The facts of a commit loaded from the PostgreSQL projection for the
//! kernel's one commit check ([`latch_kernel::group::check`]), so the rules
//! and refusals are the SQLite store's by construction: loaded under the
//! group lock, in the transaction that appends the event.

use latch_kernel::group::check::{self, Facts};
use latch_kernel::group::{Committed, GroupError, GroupEvent, GroupRefusal, TaskStatus};
use tokio_postgres::Transaction;

/// A refusal or a database failure.
pub(crate) enum CheckError {
    Refused(GroupRefusal),
    Db(tokio_postgres::Error),
}

impl From<GroupRefusal> for CheckError {
    fn from(r: GroupRefusal) -> Self {
        CheckError::Refused(r)
    }
}

impl From<tokio_postgres::Error> for CheckError {
    fn from(e: tokio_postgres::Error) -> Self {
        CheckError::Db(e)
    }
}

impl CheckError {
    pub(crate) fn into_group(self, store: &str) -> GroupError {
        match self {
            CheckError::Refused(r) => GroupError::Refused(r),
            CheckError::Db(e) => crate::error::unavailable(store, &e),
        }
    }
}

type Checked<T> = Result<T, CheckError>;

async fn members(tx: &Transaction<'_>, root: &str) -> Checked<Vec<(String, bool)>> {
    Ok(tx
        .query(
            "SELECT member, active FROM latch_group_members WHERE root = $1 ORDER BY member",
            &[&root],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}

/// Load what [`check::needs`] asks for checking `event`, the named task's
/// row locked for the transaction. Any session id may join: the sessions
/// of other hosts are not in this host's store.
async fn facts(tx: &Transaction<'_>, root: &str, event: &GroupEvent) -> Checked<Facts> {
    let needs = check::needs(event);
    let mut f = Facts {
        belongs: true,
        ..Facts::default()
    };
    if needs.group {
        f.created = tx
            .query_opt(
                "SELECT created_seq FROM latch_groups WHERE root = $1",
                &[&root],
            )
            .await?
            .map(|r| r.get::<_, i64>(0) as u64);
    }
    if needs.members {
        f.members = members(tx, root).await?;
    }
    if let Some(member) = &needs.member {
        f.joining = tx
            .query_opt(
                "SELECT role, active, joined_seq FROM latch_group_members
                 WHERE root = $1 AND member = $2",
                &[&root, member],
            )
            .await?
            .map(|r| {
                (
                    r.get::<_, String>(0),
                    r.get::<_, bool>(1),
                    r.get::<_, i64>(2) as u64,
                )
            });
    }
    if let Some(id) = needs.task {
        f.task = tx
            .query_opt(
                "SELECT status, owner FROM latch_group_tasks WHERE root = $1 AND id = $2
                 FOR UPDATE",
                &[&root, &(id as i64)],
            )
            .await?
            .map(|r| {
                (
                    TaskStatus::from_label(r.get(0)).unwrap_or(TaskStatus::Open),
                    r.get(1),
                )
            });
    }
    if needs.task_ids_given(f.task.is_some()) {
        f.task_ids = tx
            .query(
                "SELECT id FROM latch_group_tasks WHERE root = $1 ORDER BY id",
                &[&root],
            )
            .await?
            .iter()
            .map(|r| r.get::<_, i64>(0) as u64)
            .collect();
    }
    if let Some(key) = &needs.key {
        f.keyed = tx
            .query_opt(
                "SELECT id FROM latch_group_tasks WHERE root = $1 AND idem_key = $2",
                &[&root, key],
            )
            .await?
            .map(|r| r.get::<_, i64>(0) as u64);
    }
    if let Some(id) = needs.waiting.filter(|_| f.task.is_some()) {
        f.waiting = tx
            .query(
                "SELECT t.id, t.status FROM latch_group_task_deps d
                 JOIN latch_group_tasks t ON t.root = d.root AND t.id = d.dep
                 WHERE d.root = $1 AND d.task = $2 AND t.status <> 'completed' ORDER BY t.id",
                &[&root, &(id as i64)],
            )
            .await?
            .iter()
            .map(|r| {
                (
                    r.get::<_, i64>(0) as u64,
                    TaskStatus::from_label(r.get(1)).unwrap_or(TaskStatus::Open),
                )
            })
            .collect();
    }
    Ok(f)
}

/// Check `event` with the kernel's one check over the facts loaded here;
/// `Ok(Some(c))` when the log already says it.
pub(crate) async fn check(
    tx: &Transaction<'_>,
    root: &str,
    event: &mut GroupEvent,
) -> Checked<Option<Committed>> {
    let facts = facts(tx, root, event).await?;
    Ok(check::check(root, event, &facts)?)
}
