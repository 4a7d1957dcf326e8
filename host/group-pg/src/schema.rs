//! The tables of the group store and the per-group lock every commit
//! takes. Creating them is idempotent and serialized by an advisory lock,
//! so members starting together on several hosts do not collide; a store
//! created by an earlier Latch gains the newer columns and tables the same
//! way (the commit ids of the log, the member leases).

use crate::cached;
use deadpool_postgres::Transaction;
use tokio_postgres::Client;

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
ALTER TABLE latch_group_events ADD COLUMN IF NOT EXISTS commit_id TEXT;
CREATE UNIQUE INDEX IF NOT EXISTS latch_group_events_commit
    ON latch_group_events (root, commit_id) WHERE commit_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS latch_group_leases (
    root TEXT NOT NULL,
    member TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    host TEXT NOT NULL,
    pid BIGINT NOT NULL,
    ttl_ms BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (root, member)
);
CREATE INDEX IF NOT EXISTS latch_group_leases_expiry ON latch_group_leases (root, expires_at);
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
/// The version [`TABLES`] bring a store to. A store at it is left alone:
/// the DDL's table locks would otherwise queue behind (and deadlock with)
/// the commits of members already at work.
const VERSION: i32 = 2;

/// Create the tables when missing, or bring an older store's up to date.
pub(crate) async fn ensure(client: &mut Client) -> Result<(), tokio_postgres::Error> {
    let current = async |c: &Client| -> Result<bool, tokio_postgres::Error> {
        let row = c
            .query_one("SELECT to_regclass('latch_group_schema') IS NOT NULL", &[])
            .await?;
        if !row.get::<_, bool>(0) {
            return Ok(false);
        }
        let v: Option<i32> = c
            .query_opt("SELECT max(version) FROM latch_group_schema", &[])
            .await?
            .and_then(|r| r.get(0));
        Ok(v.is_some_and(|v| v >= VERSION))
    };
    if current(client).await? {
        return Ok(());
    }
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock(7284001)", &[])
        .await?;
    tx.batch_execute(TABLES).await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS latch_group_schema (version INTEGER NOT NULL);
         DELETE FROM latch_group_schema;",
    )
    .await?;
    tx.execute(
        "INSERT INTO latch_group_schema (version) VALUES ($1)",
        &[&VERSION],
    )
    .await?;
    tx.commit().await
}

/// Take `root`'s group lock until the transaction ends: the commits of one
/// group are serialized, so sequence order is commit order.
pub(crate) async fn lock_group(
    tx: &Transaction<'_>,
    root: &str,
) -> Result<(), tokio_postgres::Error> {
    cached::execute(
        tx,
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[&root],
    )
    .await
    .map(|_| ())
}
