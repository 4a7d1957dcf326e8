//! The facts of a commit loaded from the PostgreSQL projection for the
//! kernel's one commit check ([`latch_kernel::group::check`]), so the rules
//! and refusals are the SQLite store's by construction: loaded under the
//! group lock, in the transaction that appends the event.

use crate::cached;
use deadpool_postgres::{GenericClient, Transaction};
use latch_kernel::group::check::{self, Facts, MemberRow};
use latch_kernel::group::{Committed, GroupEvent, GroupRefusal, TaskStatus};

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

type Checked<T> = Result<T, CheckError>;

async fn members<C: GenericClient + Sync>(tx: &C, root: &str) -> Checked<Vec<(String, bool)>> {
    Ok(cached::query(
        tx,
        "SELECT member, active FROM latch_group_members WHERE root = $1 ORDER BY member",
        &[&root],
    )
    .await?
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect())
}

/// Load what [`check::needs`] asks for checking `event` (made at `epoch`),
/// the named task's row locked (for the transaction, or for the statement
/// outside one). The queries are independent and go out together
/// (pipelined on the one connection): one round trip, not one per fact.
/// Any session id may join: the sessions of other hosts are not in this
/// host's store. Also says whether the named task's holder's lease has
/// expired on the server's clock.
async fn facts<C: GenericClient + Sync>(
    tx: &C,
    root: &str,
    event: &GroupEvent,
    epoch: Option<u64>,
) -> Checked<(Facts, bool)> {
    let needs = check::needs(event, epoch);
    let created = async {
        if !needs.group {
            return Ok(None);
        }
        Ok::<_, CheckError>(
            cached::query_opt(
                tx,
                "SELECT created_seq FROM latch_groups WHERE root = $1",
                &[&root],
            )
            .await?
            .map(|r| r.get::<_, i64>(0) as u64),
        )
    };
    let all = async {
        if !needs.members {
            return Ok(Vec::new());
        }
        members(tx, root).await
    };
    let joining = async {
        let Some(member) = &needs.member else {
            return Ok(None);
        };
        Ok::<_, CheckError>(
            cached::query_opt(
                tx,
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
            }),
        )
    };
    let actor = async {
        let Some(who) = &needs.actor else {
            return Ok(None);
        };
        Ok::<_, CheckError>(
            cached::query_opt(
                tx,
                "SELECT active, joined_seq, left_reason FROM latch_group_members
                 WHERE root = $1 AND member = $2",
                &[&root, who],
            )
            .await?
            .map(|r| MemberRow {
                active: r.get(0),
                epoch: r.get::<_, i64>(1) as u64,
                left_reason: r.get(2),
            }),
        )
    };
    let task = async {
        let Some(id) = needs.task else {
            return Ok(None);
        };
        Ok::<_, CheckError>(
            cached::query_opt(
                tx,
                "SELECT t.status, t.owner,
                        COALESCE(l.expires_at <= clock_timestamp(), FALSE)
                 FROM latch_group_tasks t
                 LEFT JOIN latch_group_leases l ON l.root = t.root AND l.member = t.owner
                 WHERE t.root = $1 AND t.id = $2
                 FOR UPDATE OF t",
                &[&root, &(id as i64)],
            )
            .await?
            .map(|r| {
                (
                    (
                        TaskStatus::from_label(r.get(0)).unwrap_or(TaskStatus::Open),
                        r.get::<_, Option<String>>(1),
                    ),
                    r.get::<_, bool>(2),
                )
            }),
        )
    };
    let keyed = async {
        let Some(key) = &needs.key else {
            return Ok(None);
        };
        Ok::<_, CheckError>(
            cached::query_opt(
                tx,
                "SELECT id FROM latch_group_tasks WHERE root = $1 AND idem_key = $2",
                &[&root, key],
            )
            .await?
            .map(|r| r.get::<_, i64>(0) as u64),
        )
    };
    let waiting = async {
        let Some(id) = needs.waiting else {
            return Ok(Vec::new());
        };
        Ok::<_, CheckError>(
            cached::query(
                tx,
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
            .collect(),
        )
    };
    let (created, members, joining, actor, task, keyed, waiting) =
        tokio::try_join!(created, all, joining, actor, task, keyed, waiting)?;
    let holder_expired = task.as_ref().is_some_and(|(_, expired)| *expired);
    let task = task.map(|(t, _)| t);
    let task_ids = if needs.task_ids_given(task.is_some()) {
        cached::query(
            tx,
            "SELECT id FROM latch_group_tasks WHERE root = $1 ORDER BY id",
            &[&root],
        )
        .await?
        .iter()
        .map(|r| r.get::<_, i64>(0) as u64)
        .collect()
    } else {
        Vec::new()
    };
    let facts = Facts {
        created,
        members,
        joining,
        belongs: true,
        actor,
        // The dependencies of a task that does not exist say nothing.
        waiting: if task.is_some() { waiting } else { Vec::new() },
        task,
        task_ids,
        keyed,
    };
    Ok((facts, holder_expired))
}

/// Check `event` (made at `epoch`) with the kernel's one check over the
/// facts loaded here; `Ok(Some(c))` when the log already says it.
pub(crate) async fn check(
    tx: &Transaction<'_>,
    root: &str,
    event: &mut GroupEvent,
    epoch: Option<u64>,
) -> Checked<Option<Committed>> {
    let (facts, _) = facts(tx, root, event, epoch).await?;
    Ok(check::check(root, event, epoch, &facts)?)
}

/// The refusal of a claim decided before the group lock, from committed
/// rows (the task's row lock waits for a claim being committed): a claim
/// that cannot succeed — held, closed, blocked, unknown, not a member, a
/// stale epoch — never queues behind the group's other commits. A refusal
/// writes nothing, so it needs no place in the log's order; every refusal
/// states a fact that held when its row was read. A claim that may succeed
/// is checked again under the group lock before it is appended, and so is a
/// claim of a task whose holder's lease expired (the locked commit removes
/// that holder first).
pub(crate) async fn refused_claim<C: GenericClient + Sync>(
    client: &C,
    root: &str,
    event: &GroupEvent,
    epoch: Option<u64>,
) -> Checked<Option<GroupRefusal>> {
    if !matches!(event, GroupEvent::TaskClaimed { .. }) {
        return Ok(None);
    }
    let (facts, holder_expired) = facts(client, root, event, epoch).await?;
    Ok(
        match check::check(root, &mut event.clone(), epoch, &facts).err() {
            Some(GroupRefusal::Held { .. }) if holder_expired => None,
            refusal => refusal,
        },
    )
}
