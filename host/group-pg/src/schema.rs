//! The tables of the group store and the per-group lock every commit
//! takes. Creating them is idempotent and serialized by an advisory lock,
//! so members starting together on several hosts do not collide.

use deadpool_postgres::Object;
use tokio_postgres::Transaction;

const TABLES: &str = "
CREATE TABLE IF NOT EXISTS latch_group_events (
    seq BIGSERIAL PRIMARY KEY,
    root TEXT NOT NULL,
    body TEXT NOT NULL,
    time_ms BIGINT NOT NULL,
    host TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS latch_group_events_root ON latch_group_events (root, seq);
CREATE TABLE IF NOT EXISTS latch_groups (
    root TEXT PRIMARY KEY,
    lead TEXT NOT NULL,
    created_seq BIGINT NOT NULL,
    delivered BIGINT NOT NULL DEFAULT 0,
    last_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS latch_group_members (
    root TEXT NOT NULL,
    member TEXT NOT NULL,
    role TEXT NOT NULL,
    active BOOLEAN NOT NULL,
    left_reason TEXT,
    joined_seq BIGINT NOT NULL,
    last_ms BIGINT NOT NULL,
    host TEXT NOT NULL,
    PRIMARY KEY (root, member)
);
CREATE TABLE IF NOT EXISTS latch_group_tasks (
    root TEXT NOT NULL,
    id BIGINT NOT NULL,
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    idem_key TEXT,
    status TEXT NOT NULL,
    owner TEXT,
    result TEXT,
    PRIMARY KEY (root, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS latch_group_tasks_key
    ON latch_group_tasks (root, idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS latch_group_task_deps (
    root TEXT NOT NULL,
    task BIGINT NOT NULL,
    dep BIGINT NOT NULL,
    PRIMARY KEY (root, task, dep)
);
CREATE TABLE IF NOT EXISTS latch_group_claims (
    root TEXT NOT NULL,
    task BIGINT NOT NULL,
    holder TEXT NOT NULL,
    PRIMARY KEY (root, task)
);
CREATE TABLE IF NOT EXISTS latch_group_pending (
    root TEXT NOT NULL,
    recipient TEXT NOT NULL,
    message BIGINT NOT NULL,
    sender TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (root, recipient, message)
);
";

/// Create the tables when missing.
pub(crate) async fn ensure(client: &mut Object) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock(7284001)", &[])
        .await?;
    tx.batch_execute(TABLES).await?;
    tx.commit().await
}

/// Take `root`'s group lock until the transaction ends: the commits of one
/// group are serialized, so sequence order is commit order.
pub(crate) async fn lock_group(
    tx: &Transaction<'_>,
    root: &str,
) -> Result<(), tokio_postgres::Error> {
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[&root],
    )
    .await
    .map(|_| ())
}
