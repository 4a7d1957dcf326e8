//! The checks of a commit against the PostgreSQL projection, the same
//! rules and refusals as the SQLite store's: run under the group lock, in
//! the transaction that appends the event.

use latch_kernel::group::{ALL, Committed, GroupError, GroupEvent, GroupRefusal, TaskStatus};
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

async fn require_group(tx: &Transaction<'_>, root: &str) -> Checked<()> {
    let found = tx
        .query_opt("SELECT 1 FROM latch_groups WHERE root = $1", &[&root])
        .await?;
    match found {
        Some(_) => Ok(()),
        None => Err(GroupRefusal::NoGroup { root: root.into() }.into()),
    }
}

async fn require_active(tx: &Transaction<'_>, root: &str, who: &str) -> Checked<()> {
    let all = members(tx, root).await?;
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

async fn task_ids(tx: &Transaction<'_>, root: &str) -> Checked<Vec<u64>> {
    Ok(tx
        .query(
            "SELECT id FROM latch_group_tasks WHERE root = $1 ORDER BY id",
            &[&root],
        )
        .await?
        .iter()
        .map(|r| r.get::<_, i64>(0) as u64)
        .collect())
}

/// `(status, owner)` of a task, its row locked for the transaction.
async fn task(tx: &Transaction<'_>, root: &str, id: u64) -> Checked<(TaskStatus, Option<String>)> {
    let found = tx
        .query_opt(
            "SELECT status, owner FROM latch_group_tasks WHERE root = $1 AND id = $2 FOR UPDATE",
            &[&root, &(id as i64)],
        )
        .await?;
    match found {
        Some(r) => Ok((
            TaskStatus::from_label(r.get(0)).unwrap_or(TaskStatus::Open),
            r.get(1),
        )),
        None => Err(GroupRefusal::UnknownTask {
            task: id,
            known: task_ids(tx, root).await?,
        }
        .into()),
    }
}

async fn require_holder(tx: &Transaction<'_>, root: &str, id: u64, by: &str) -> Checked<()> {
    match task(tx, root, id).await? {
        (TaskStatus::Claimed, Some(holder)) if holder == by => Ok(()),
        (TaskStatus::Claimed, holder) => Err(GroupRefusal::NotHolder { task: id, holder }.into()),
        _ => Err(GroupRefusal::NotHolder {
            task: id,
            holder: None,
        }
        .into()),
    }
}

/// Check `event`; `Ok(Some(c))` when the log already says it.
///
/// One difference from the SQLite store: a member may be any session id,
/// since the sessions of other hosts are not in this host's store.
pub(crate) async fn check(
    tx: &Transaction<'_>,
    root: &str,
    event: &mut GroupEvent,
) -> Checked<Option<Committed>> {
    let same = |seq: u64| Some(Committed { seq, fresh: false });
    match event {
        GroupEvent::Created { lead } => {
            if lead != root {
                return Err(GroupRefusal::Invalid(format!(
                    "a group is created in its lead's own session: {lead} is not {root}"
                ))
                .into());
            }
            let seq = tx
                .query_opt(
                    "SELECT created_seq FROM latch_groups WHERE root = $1",
                    &[&root],
                )
                .await?
                .map(|r| r.get::<_, i64>(0) as u64);
            Ok(seq.and_then(same))
        }
        GroupEvent::MemberJoined { member, role } => {
            require_group(tx, root).await?;
            if member.trim().is_empty() {
                return Err(GroupRefusal::Invalid("a member needs a session id".into()).into());
            }
            let current = tx
                .query_opt(
                    "SELECT role, active, joined_seq FROM latch_group_members
                     WHERE root = $1 AND member = $2",
                    &[&root, &*member],
                )
                .await?
                .map(|r| {
                    (
                        r.get::<_, String>(0),
                        r.get::<_, bool>(1),
                        r.get::<_, i64>(2) as u64,
                    )
                });
            Ok(match current {
                Some((r, true, seq)) if r == *role => same(seq),
                _ => None,
            })
        }
        GroupEvent::MemberLeft { member, .. } => {
            require_group(tx, root).await?;
            let active = members(tx, root)
                .await?
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
            require_group(tx, root).await?;
            require_active(tx, root, by).await?;
            if title.trim().is_empty() {
                return Err(GroupRefusal::Invalid("a task needs a non-empty title".into()).into());
            }
            if let Some(k) = key {
                let existing = tx
                    .query_opt(
                        "SELECT id FROM latch_group_tasks WHERE root = $1 AND idem_key = $2",
                        &[&root, &*k],
                    )
                    .await?;
                if let Some(r) = existing {
                    return Ok(same(r.get::<_, i64>(0) as u64));
                }
            }
            let known = task_ids(tx, root).await?;
            depends_on.sort_unstable();
            depends_on.dedup();
            if let Some(dep) = depends_on.iter().find(|d| !known.contains(d)) {
                return Err(GroupRefusal::UnknownDependency { dep: *dep, known }.into());
            }
            Ok(None)
        }
        GroupEvent::TaskClaimed { task: id, by } => {
            require_active(tx, root, by).await?;
            let id = *id;
            match task(tx, root, id).await? {
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
            let waiting: Vec<(u64, TaskStatus)> = tx
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
            if !waiting.is_empty() {
                return Err(GroupRefusal::Blocked { task: id, waiting }.into());
            }
            Ok(None)
        }
        GroupEvent::TaskReleased { task: id, by, .. } => {
            require_holder(tx, root, *id, by).await?;
            Ok(None)
        }
        GroupEvent::TaskCompleted {
            task: id,
            by,
            result,
            ..
        } => {
            require_holder(tx, root, *id, by).await?;
            if result.trim().is_empty() {
                return Err(GroupRefusal::Invalid(
                    "say in `result` what was done (or why it failed)".into(),
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
            require_group(tx, root).await?;
            require_active(tx, root, from).await?;
            if text.trim().is_empty() {
                return Err(GroupRefusal::Invalid("a message needs text".into()).into());
            }
            let all = members(tx, root).await?;
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
            "deliveries are made at the recipient's safe boundary, not committed directly".into(),
        )
        .into()),
    }
}
