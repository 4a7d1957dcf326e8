//! The commit path on PostgreSQL: exactly once, fenced, and never hanging.
//!
//! Every commit carries an id (the client's, or one made here) that the log
//! stores under a unique index with the commit's first event. An attempt
//! that fails before `COMMIT` was sent applied nothing; one whose `COMMIT`
//! went out and got no answer may have applied. Either way the same commit
//! is tried again, with the same id, until [`crate::OP_DEADLINE`]: a retry
//! of a commit that was applied finds its id and returns the first result,
//! so a lost reply neither duplicates a message or a task nor is reported
//! as "not applied". Past the deadline the answer is
//! [`GroupError::Unavailable`] (nothing was applied) or
//! [`GroupError::Uncertain`] (it may have been; the id retries it safely).
//!
//! Under the group lock, before the commit's own facts are read, the
//! members whose leases expired on the server's clock are removed (the
//! kernel's [`check::expire`]): `MemberLeft` with the reason, their claims
//! released, in this same transaction.

use crate::check::{CheckError, check, refused_claim};
use crate::connect::OP_DEADLINE;
use crate::{CHANNEL, cached, error, project, schema};
use deadpool_postgres::Pool;
use deadpool_postgres::Transaction;
use latch_kernel::group::check as kernel;
use latch_kernel::group::{Commit, Committed, GroupError, GroupEvent, GroupRefusal, new_commit_id};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Who commits: the pool, the store as shown, and this process.
#[derive(Clone)]
pub(crate) struct Committer {
    pub pool: Pool,
    pub shown: String,
    pub host: String,
    pub pid: u32,
}

/// A lease to take with a join.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeaseSpec {
    pub ttl: Duration,
}

/// Why one attempt failed.
enum Fail {
    Refused(GroupRefusal),
    /// Nothing was applied; worth another attempt.
    Before(String),
    /// `COMMIT` was sent and not answered: it may have been applied.
    After(String),
    /// Not worth another attempt (the database said no for a reason a
    /// retry does not change).
    Fatal(String),
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// True for a failure another attempt may not meet: the connection went,
/// a timeout, the server restarting.
fn transient(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        None => true,
        Some(code) => {
            let c = code.code();
            c.starts_with("08")
                || c.starts_with("57")
                || c == "55P03"
                || c == "40001"
                || c == "40P01"
        }
    }
}

fn before(e: tokio_postgres::Error) -> Fail {
    if transient(&e) {
        Fail::Before(error::detail(&e))
    } else {
        Fail::Fatal(error::detail(&e))
    }
}

impl From<CheckError> for Fail {
    fn from(e: CheckError) -> Fail {
        match e {
            CheckError::Refused(r) => Fail::Refused(r),
            CheckError::Db(e) => before(e),
        }
    }
}

impl Committer {
    /// Commit `commit` to `root`'s group (taking `lease` for a join),
    /// retrying as the module says until the deadline.
    pub(crate) async fn submit(
        &self,
        root: &str,
        mut commit: Commit,
        lease: Option<LeaseSpec>,
    ) -> Result<Committed, GroupError> {
        // A caller's id may name a commit applied before (a retry across
        // processes); one made here is new until an attempt may have applied.
        let supplied = commit.id.is_some();
        let id = commit.id.get_or_insert_with(new_commit_id).clone();
        let deadline = Instant::now() + OP_DEADLINE;
        let mut uncertain: Option<String> = None;
        let mut last;
        loop {
            let sent = AtomicBool::new(false);
            let left = deadline.saturating_duration_since(Instant::now());
            let outcome = tokio::time::timeout(
                left,
                self.attempt(root, &commit, lease, supplied || uncertain.is_some(), &sent),
            )
            .await
            .unwrap_or_else(|_| {
                let what = format!("no answer within {} s", OP_DEADLINE.as_secs());
                if sent.load(Ordering::SeqCst) {
                    Err(Fail::After(what))
                } else {
                    Err(Fail::Before(what))
                }
            });
            match outcome {
                Ok(c) => return Ok(c),
                Err(Fail::Refused(r)) => return Err(r.into()),
                Err(Fail::Fatal(detail)) if uncertain.is_none() => {
                    return Err(GroupError::Unavailable {
                        store: self.shown.clone(),
                        detail,
                    });
                }
                Err(Fail::Fatal(detail) | Fail::Before(detail)) => last = detail,
                Err(Fail::After(detail)) => {
                    uncertain = Some(detail.clone());
                    last = detail;
                }
            }
            if Instant::now() + Duration::from_millis(150) >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(match uncertain {
            Some(first) => GroupError::Uncertain {
                store: self.shown.clone(),
                detail: if first == last {
                    first
                } else {
                    format!("{first}; then {last}")
                },
                commit: id,
            },
            None => GroupError::Unavailable {
                store: self.shown.clone(),
                detail: last,
            },
        })
    }

    /// One attempt, in one transaction.
    async fn attempt(
        &self,
        root: &str,
        commit: &Commit,
        lease: Option<LeaseSpec>,
        repeat: bool,
        sent: &AtomicBool,
    ) -> Result<Committed, Fail> {
        let mut client = self
            .pool
            .get()
            .await
            .map_err(|e| Fail::Before(error::pool_detail(&e)))?;
        if let Some(refusal) = refused_claim(&client, root, &commit.event, commit.epoch).await? {
            return Err(Fail::Refused(refusal));
        }
        let tx = client.transaction().await.map_err(before)?;
        let id = commit.id.as_deref();
        // Only a commit that may have been applied already (its id came
        // from the caller, or an earlier attempt's `COMMIT` went unanswered)
        // looks its id up; a fresh id cannot be in the log, and the unique
        // index on (root, commit_id) would refuse it if it were.
        let seen = async {
            match id.filter(|_| repeat) {
                Some(id) => {
                    cached::query_opt(
                        &tx,
                        "SELECT seq FROM latch_group_events WHERE root = $1 AND commit_id = $2",
                        &[&root, &id],
                    )
                    .await
                }
                None => Ok(None),
            }
        };
        let sweep_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&root];
        let expired = cached::query(
            &tx,
            "DELETE FROM latch_group_leases
             WHERE root = $1 AND expires_at <= clock_timestamp()
             RETURNING member, epoch, host, pid, ttl_ms",
            &sweep_params,
        );
        // Pipelined: the lookups run once the lock is held.
        let (_, seen, expired) =
            tokio::try_join!(schema::lock_group(&tx, root), seen, expired).map_err(before)?;
        if let Some(row) = seen {
            // Applied before: its first result, nothing appended again.
            return Ok(Committed {
                seq: row.get::<_, i64>(0) as u64,
                fresh: true,
            });
        }
        let time = now_ms();
        let expired: Vec<kernel::ExpiredLease> = expired
            .iter()
            .map(|r| kernel::ExpiredLease {
                member: r.get(0),
                epoch: r.get::<_, i64>(1) as u64,
                host: r.get(2),
                pid: r.get::<_, i64>(3) as u32,
                ttl_ms: r.get::<_, i64>(4) as u64,
            })
            .collect();
        let swept = self.sweep(&tx, root, time, &expired).await?;
        let mut event = commit.event.clone();
        let verdict = check(&tx, root, &mut event, commit.epoch).await;
        let result = match verdict {
            Err(CheckError::Refused(r)) => Err(r),
            Err(CheckError::Db(e)) => return Err(before(e)),
            Ok(Some(done)) => Ok(done),
            Ok(None) => {
                let seq = self.append(&tx, root, time, &event, id).await?;
                Ok(Committed { seq, fresh: true })
            }
        };
        if let (Ok(done), Some(spec), GroupEvent::MemberJoined { member, .. }) =
            (&result, lease, &event)
        {
            self.take_lease(&tx, root, member, done.seq, spec).await?;
        }
        // Waiters wake on what can end a wait (a task created, closed or
        // released, a member joined or gone, a message); a claim alone
        // ends none, and a NOTIFY per claim would serialize contending
        // claims on the notification queue. Views see claims at their next
        // refresh.
        let wakes = swept || !matches!(event, GroupEvent::TaskClaimed { .. });
        let appended = matches!(result, Ok(Committed { fresh: true, .. }));
        if wakes && (swept || appended) {
            cached::execute(&tx, "SELECT pg_notify($1, $2)", &[&CHANNEL, &root])
                .await
                .map_err(before)?;
        }
        sent.store(true, Ordering::SeqCst);
        tx.commit()
            .await
            .map_err(|e| Fail::After(error::detail(&e)))?;
        result.map_err(Fail::Refused)
    }

    /// Remove the members of `expired` leases that are still current, with
    /// their claims; true when anything was appended.
    async fn sweep(
        &self,
        tx: &Transaction<'_>,
        root: &str,
        time: u64,
        expired: &[kernel::ExpiredLease],
    ) -> Result<bool, Fail> {
        if expired.is_empty() {
            return Ok(false);
        }
        let names: Vec<&str> = expired.iter().map(|l| l.member.as_str()).collect();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&root, &names];
        let (members, held) = tokio::try_join!(
            cached::query(
                tx,
                "SELECT member, active, joined_seq FROM latch_group_members
                 WHERE root = $1 AND member = ANY($2)",
                &params,
            ),
            cached::query(
                tx,
                "SELECT id, owner FROM latch_group_tasks
                 WHERE root = $1 AND status = 'claimed' AND owner = ANY($2) ORDER BY id",
                &params,
            ),
        )
        .map_err(before)?;
        let members: Vec<(String, bool, u64)> = members
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get::<_, i64>(2) as u64))
            .collect();
        let held: Vec<(u64, String)> = held
            .iter()
            .map(|r| (r.get::<_, i64>(0) as u64, r.get(1)))
            .collect();
        let events = kernel::expire(expired, &members, &held);
        for e in &events {
            project::append(tx, root, time, &self.host, e, None)
                .await
                .map_err(before)?;
        }
        Ok(!events.is_empty())
    }

    /// Append a checked event (a leave with the releases of its claims);
    /// the first event carries the commit id. Returns its sequence number.
    async fn append(
        &self,
        tx: &Transaction<'_>,
        root: &str,
        time: u64,
        event: &GroupEvent,
        id: Option<&str>,
    ) -> Result<u64, Fail> {
        let mut entries = vec![event.clone()];
        if let GroupEvent::MemberLeft { member, .. } = event {
            let held: Vec<u64> = cached::query(
                tx,
                "SELECT id FROM latch_group_tasks WHERE root = $1 AND owner = $2
                     AND status = 'claimed' ORDER BY id",
                &[&root, member],
            )
            .await
            .map_err(before)?
            .iter()
            .map(|r| r.get::<_, i64>(0) as u64)
            .collect();
            entries.extend(kernel::leaving(event, &held));
        }
        let mut first = 0;
        for (i, e) in entries.iter().enumerate() {
            let seq = project::append(tx, root, time, &self.host, e, id.filter(|_| i == 0))
                .await
                .map_err(before)?;
            if i == 0 {
                first = seq;
            }
        }
        Ok(first)
    }

    /// The lease of `member` at `epoch`, taken (or taken over) by this
    /// process, expiring a TTL past the server's now.
    async fn take_lease(
        &self,
        tx: &Transaction<'_>,
        root: &str,
        member: &str,
        epoch: u64,
        spec: LeaseSpec,
    ) -> Result<(), Fail> {
        cached::execute(
            tx,
            "INSERT INTO latch_group_leases (root, member, epoch, host, pid, ttl_ms, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6::bigint,
                     clock_timestamp() + $6::bigint * interval '1 millisecond')
             ON CONFLICT (root, member) DO UPDATE SET epoch = excluded.epoch,
                host = excluded.host, pid = excluded.pid, ttl_ms = excluded.ttl_ms,
                expires_at = excluded.expires_at",
            &[
                &root,
                &member,
                &(epoch as i64),
                &self.host,
                &(self.pid as i64),
                &(spec.ttl.as_millis() as i64),
            ],
        )
        .await
        .map_err(before)?;
        Ok(())
    }
}
