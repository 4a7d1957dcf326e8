//! What the group store answers without writing: the pending messages of a
//! recipient, the log after a sequence number, the projection, the members
//! with their hosts and the member leases as the server's clock sees them.

use crate::{HostedMember, error, project};
use deadpool_postgres::Pool;
use latch_kernel::event::{EventKind, StoredEvent};
use latch_kernel::group::{GroupError, GroupEvent, GroupSnapshot, MemberLease, PendingMessage};

pub(crate) async fn pending(
    pool: Pool,
    shown: String,
    root: String,
    recipient: String,
) -> Result<Vec<PendingMessage>, GroupError> {
    let client = error::client(&pool, &shown).await?;
    let rows = client
        .query(
            "SELECT message, sender, text FROM latch_group_pending
             WHERE root = $1 AND recipient = $2 ORDER BY message",
            &[&root, &recipient],
        )
        .await
        .map_err(|e| error::unavailable(&shown, &e))?;
    Ok(rows
        .iter()
        .map(|r| PendingMessage {
            message: r.get::<_, i64>(0) as u64,
            from: r.get(1),
            text: r.get(2),
        })
        .collect())
}

pub(crate) async fn group_log(
    pool: Pool,
    shown: String,
    root: String,
    after: i64,
) -> Result<Vec<StoredEvent>, GroupError> {
    let client = error::client(&pool, &shown).await?;
    let rows = client
        .query(
            "SELECT seq, body, time_ms FROM latch_group_events
             WHERE root = $1 AND seq > $2 ORDER BY seq",
            &[&root, &after],
        )
        .await
        .map_err(|e| error::unavailable(&shown, &e))?;
    rows.iter()
        .map(|r| {
            let body: String = r.get(1);
            let event: GroupEvent =
                serde_json::from_str(&body).map_err(|e| GroupError::Unavailable {
                    store: shown.clone(),
                    detail: format!("a group event does not decode: {e}"),
                })?;
            Ok(StoredEvent {
                seq: r.get::<_, i64>(0) as u64,
                session: root.clone(),
                time_ms: r.get::<_, i64>(2) as u64,
                kind: EventKind::Group(event),
            })
        })
        .collect()
}

pub(crate) async fn projection(
    pool: Pool,
    shown: String,
    root: String,
) -> Result<GroupSnapshot, GroupError> {
    let client = error::client(&pool, &shown).await?;
    project::snapshot(&client, &root)
        .await
        .map_err(|e| error::unavailable(&shown, &e))
}

pub(crate) async fn members(
    pool: Pool,
    shown: String,
    root: String,
) -> Result<Vec<HostedMember>, GroupError> {
    let client = error::client(&pool, &shown).await?;
    let rows = client
        .query(
            "SELECT member, role, active, host FROM latch_group_members
             WHERE root = $1 ORDER BY member",
            &[&root],
        )
        .await
        .map_err(|e| error::unavailable(&shown, &e))?;
    Ok(rows
        .iter()
        .map(|r| HostedMember {
            id: r.get(0),
            role: r.get(1),
            active: r.get(2),
            host: r.get(3),
        })
        .collect())
}

pub(crate) async fn leases(
    pool: Pool,
    shown: String,
    root: String,
) -> Result<Vec<MemberLease>, GroupError> {
    let client = error::client(&pool, &shown).await?;
    let rows = client
        .query(
            "SELECT member, epoch, host, pid, ttl_ms,
                    (EXTRACT(EPOCH FROM (expires_at - clock_timestamp())) * 1000)::bigint
             FROM latch_group_leases WHERE root = $1 ORDER BY member",
            &[&root],
        )
        .await
        .map_err(|e| error::unavailable(&shown, &e))?;
    Ok(rows
        .iter()
        .map(|r| MemberLease {
            member: r.get(0),
            epoch: r.get::<_, i64>(1) as u64,
            host: r.get(2),
            pid: r.get::<_, i64>(3) as u32,
            ttl_ms: r.get::<_, i64>(4) as u64,
            expires_in_ms: r.get(5),
        })
        .collect())
}
