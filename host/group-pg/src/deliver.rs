//! Deliveries on PostgreSQL, exactly once across the two stores: the
//! pending rows are read under the group lock, the recipient's events are
//! appended to its local store unless a `GroupMessageDelivered` of that
//! message is already there (a delivery whose marker was lost with a
//! connection or a killed process), then the markers commit.

use crate::{CHANNEL, error, project, schema};
use deadpool_postgres::Pool;
use latch_kernel::Store;
use latch_kernel::event::EventKind;
use latch_kernel::group::{GroupError, GroupEvent, delivery_text};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Deliver what waits for `recipient` in `root`'s group into `local`.
pub(crate) async fn deliver(
    pool: Pool,
    shown: String,
    local: Arc<Store>,
    host: String,
    root: String,
    recipient: String,
) -> Result<Vec<(u64, EventKind)>, GroupError> {
    let mut client = error::client(&pool, &shown).await?;
    let un = |e: tokio_postgres::Error| error::unavailable(&shown, &e);
    let tx = client.transaction().await.map_err(un)?;
    schema::lock_group(&tx, &root).await.map_err(un)?;
    let rows = tx
        .query(
            "SELECT p.message, p.sender, COALESCE(m.role, ''), p.text
             FROM latch_group_pending p
             LEFT JOIN latch_group_members m ON m.root = p.root AND m.member = p.sender
             WHERE p.root = $1 AND p.recipient = $2 ORDER BY p.message",
            &[&root, &recipient],
        )
        .await
        .map_err(un)?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let already: BTreeSet<u64> = local
        .all_events(&recipient)?
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::GroupMessageDelivered { message_seq, .. } => Some(message_seq),
            _ => None,
        })
        .collect();
    let mut fresh = Vec::new();
    let mut markers = Vec::new();
    for r in &rows {
        let message = r.get::<_, i64>(0) as u64;
        let (from, role, text): (String, String, String) = (r.get(1), r.get(2), r.get(3));
        markers.push(message);
        if !already.contains(&message) {
            fresh.push(EventKind::GroupMessageDelivered {
                message_seq: message,
                from: from.clone(),
                text: delivery_text(&from, &role, &text),
            });
        }
    }
    let seqs = if fresh.is_empty() {
        Vec::new()
    } else {
        local.append_batch(&recipient, fresh.clone())?
    };
    let time = crate::now_ms();
    for message in markers {
        let marker = GroupEvent::MessageDelivered {
            message,
            to: recipient.clone(),
        };
        project::append(&tx, &root, time, &host, &marker, None)
            .await
            .map_err(un)?;
    }
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &root])
        .await
        .map_err(un)?;
    tx.commit().await.map_err(un)?;
    Ok(seqs.into_iter().zip(fresh).collect())
}
