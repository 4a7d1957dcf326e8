//! Agent groups across hosts: [`PgGroup`], the [`GroupPort`] on PostgreSQL.
//!
//! The group's events, its projection (members with their host names,
//! tasks, claims, pending messages) live in one PostgreSQL database that
//! every member reaches; each member's own session stays in its local
//! SQLite [`Store`]. Every commit is one PostgreSQL transaction holding the
//! group's transaction-scoped advisory lock, so the log order is the commit
//! order and `GroupState::replay` of the log equals the projection; a claim
//! also locks its task row (`FOR UPDATE`) and inserts into a table whose
//! primary key allows one holder per task. A claim that cannot succeed is
//! refused from the task's row before the group lock, so contending members
//! do not queue their refusals behind each other's commits. Wake-ups go through
//! `LISTEN/NOTIFY` ([`PgGroup::wait_for_message`]), never a polling loop.
//!
//! The port is synchronous (like the SQLite store) and callable from any
//! thread, async or not: the work runs on a small runtime this value owns.

mod check;
mod error;
mod listen;
mod project;
mod schema;

pub use error::{PgGroupError, redact, without_password};

use check::check;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use latch_kernel::Store;
use latch_kernel::event::{EventKind, StoredEvent};
use latch_kernel::group::{
    Committed, GroupError, GroupEvent, GroupPort, GroupSnapshot, PendingMessage, delivery_text,
};
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long connecting to PostgreSQL may take before it is an error.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The NOTIFY channel of group wake-ups; the payload is the root session.
pub const CHANNEL: &str = "latch_group";

/// A member of the group as the shared store knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostedMember {
    /// Its session id.
    pub id: String,
    /// Its role.
    pub role: String,
    /// False once it left.
    pub active: bool,
    /// The host it joined from.
    pub host: String,
}

/// An agent group store on PostgreSQL (see the module documentation).
///
/// A value is a handle: the connection pool, the LISTEN connection and
/// their runtime are shared by every handle [`PgGroup::open`] gives for
/// one URL in this process, so a process with many sessions holds one
/// pool (at most [`POOL_SIZE`] connections) and one listener per store.
pub struct PgGroup {
    shared: Arc<Shared>,
    local: Arc<Store>,
    host: String,
}

/// Most pooled connections of one pool (the LISTEN connection aside).
pub const POOL_SIZE: usize = 8;

/// What the handles of one store share: the pool, the wake-ups and the
/// runtime the connections run on.
struct Shared {
    shown: String,
    pool: Pool,
    wake: Arc<listen::Wake>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// The pools of this process by URL; a pool lives while a handle uses it.
fn registry() -> &'static Mutex<HashMap<String, Weak<Shared>>> {
    static POOLS: OnceLock<Mutex<HashMap<String, Weak<Shared>>>> = OnceLock::new();
    POOLS.get_or_init(Default::default)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// True when `url` is a PostgreSQL connection string (URL or key-value
/// form) that names a host.
pub fn usable_url(url: &str) -> bool {
    url.parse::<tokio_postgres::Config>()
        .is_ok_and(|c| !c.get_hosts().is_empty())
}

/// This machine's host name (`LATCH_HOST_NAME` overrides it).
pub fn host_name() -> String {
    if let Ok(h) = std::env::var("LATCH_HOST_NAME")
        && !h.trim().is_empty()
    {
        return h.trim().to_string();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_string())
}

impl PgGroup {
    /// Connect to the group store at `url` (a `postgres://` URL or a
    /// libpq key-value string; without a password in it, `PGPASSWORD`'s),
    /// create its tables when missing and start
    /// listening for wake-ups. `local` is this host's store, where the
    /// sessions of the members running here live (deliveries append to
    /// them). Fails within [`CONNECT_TIMEOUT`] with an error naming the URL.
    ///
    /// The new value has a pool of its own; [`PgGroup::open`] shares one.
    pub fn connect(url: &str, local: Arc<Store>) -> Result<PgGroup, PgGroupError> {
        Ok(PgGroup {
            shared: Arc::new(Shared::connect(url)?),
            local,
            host: host_name(),
        })
    }

    /// A handle on the group store at `url` that shares this process's
    /// pool and listener for that URL, connecting (as
    /// [`PgGroup::connect`]) when no handle of it is alive. `local` is the
    /// store deliveries of this handle append to.
    pub fn open(url: &str, local: Arc<Store>) -> Result<PgGroup, PgGroupError> {
        // Held while connecting: two sessions opening at once share too.
        let mut pools = registry().lock().unwrap_or_else(|p| p.into_inner());
        pools.retain(|_, w| w.strong_count() > 0);
        let shared = match pools.get(url).and_then(Weak::upgrade) {
            Some(shared) => shared,
            None => {
                let shared = Arc::new(Shared::connect(url)?);
                pools.insert(url.to_string(), Arc::downgrade(&shared));
                shared
            }
        };
        Ok(PgGroup {
            shared,
            local,
            host: host_name(),
        })
    }

    /// True when this handle and `other` share one pool and listener.
    pub fn shares_pool_with(&self, other: &PgGroup) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl Shared {
    fn connect(url: &str) -> Result<Shared, PgGroupError> {
        let shown = redact(url);
        let mut config: tokio_postgres::Config =
            url.parse()
                .map_err(|e: tokio_postgres::Error| PgGroupError::BadUrl {
                    url: shown.clone(),
                    detail: e.to_string(),
                })?;
        config.connect_timeout(CONNECT_TIMEOUT);
        // As libpq: a URL without a password takes `PGPASSWORD`'s (how a
        // resumed member reaches a store whose password is not recorded).
        if config.get_password().is_none()
            && let Ok(pw) = std::env::var("PGPASSWORD")
            && !pw.is_empty()
        {
            config.password(pw);
        }
        if config.get_application_name().is_none() {
            config.application_name("latch");
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("latch-group-pg")
            .enable_all()
            .build()
            .map_err(|e| PgGroupError::Runtime(e.to_string()))?;
        let manager = Manager::from_config(
            config.clone(),
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| PgGroupError::BadUrl {
                url: shown.clone(),
                detail: e.to_string(),
            })?;
        let wake = Arc::new(listen::Wake::default());
        {
            let (pool, shown) = (pool.clone(), shown.clone());
            rt.block_on(async move {
                let mut client = pool.get().await.map_err(|e| PgGroupError::Unreachable {
                    url: shown.clone(),
                    detail: error::pool_detail(&e),
                })?;
                schema::ensure(&mut client)
                    .await
                    .map_err(|e| PgGroupError::Schema {
                        url: shown.clone(),
                        detail: error::detail(&e),
                    })
            })?;
        }
        rt.spawn(listen::run(config, wake.clone()));
        Ok(Shared {
            shown,
            pool,
            wake,
            rt: Some(rt),
        })
    }
}

impl PgGroup {
    /// The store's URL with any password left out.
    pub fn url(&self) -> &str {
        &self.shared.shown
    }

    /// The host name this process records for the members it joins.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Record `host` instead of this machine's name for members joined
    /// from here.
    pub fn with_host(mut self, host: impl Into<String>) -> PgGroup {
        self.host = host.into();
        self
    }

    /// Run `f` on this value's runtime and wait for it, from any thread.
    fn run<T, F>(&self, f: impl FnOnce(Pool, String) -> F) -> Result<T, GroupError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, GroupError>> + Send + 'static,
    {
        let rt = self
            .shared
            .rt
            .as_ref()
            .expect("the runtime lives as long as the value");
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let fut = f(self.shared.pool.clone(), self.shared.shown.clone());
        rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().unwrap_or_else(|_| {
            Err(GroupError::Unavailable {
                store: self.shared.shown.clone(),
                detail: "the operation was cancelled".to_string(),
            })
        })
    }

    /// The members of `root`'s group with the host each joined from.
    pub fn members(&self, root: &str) -> Result<Vec<HostedMember>, GroupError> {
        let root = root.to_string();
        self.run(move |pool, shown| async move {
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
        })
    }

    /// Wait until a message is queued in `root`'s group (a NOTIFY) or
    /// `timeout` passes; true when woken. Returns at once when `recipient`
    /// already has pending messages.
    pub fn wait_for_message(
        &self,
        root: &str,
        recipient: &str,
        timeout: Duration,
    ) -> Result<bool, GroupError> {
        let seen = self.shared.wake.generation(root);
        if !self.pending(root, recipient)?.is_empty() {
            return Ok(true);
        }
        Ok(self.shared.wake.wait(root, seen, timeout))
    }

    /// True while the LISTEN connection is up.
    pub fn listening(&self) -> bool {
        self.shared.wake.listening()
    }
}

impl GroupPort for PgGroup {
    fn commit(&self, root: &str, mut event: GroupEvent) -> Result<Committed, GroupError> {
        let (root, host) = (root.to_string(), self.host.clone());
        self.run(move |pool, shown| async move {
            let mut client = error::client(&pool, &shown).await?;
            let un = |e: tokio_postgres::Error| error::unavailable(&shown, &e);
            if let Some(refusal) = check::refused_claim(&**client, &root, &event)
                .await
                .map_err(|e| e.into_group(&shown))?
            {
                return Err(refusal.into());
            }
            let tx = client.transaction().await.map_err(un)?;
            schema::lock_group(&tx, &root).await.map_err(un)?;
            if let Some(done) = check(&tx, &root, &mut event)
                .await
                .map_err(|e| e.into_group(&shown))?
            {
                return Ok(done);
            }
            let time = now_ms();
            let mut entries = vec![event.clone()];
            if let GroupEvent::MemberLeft { member, reason } = &event {
                let held = tx
                    .query(
                        "SELECT id FROM latch_group_tasks WHERE root = $1 AND owner = $2
                         AND status = 'claimed' ORDER BY id",
                        &[&root, member],
                    )
                    .await
                    .map_err(un)?;
                for row in held {
                    entries.push(GroupEvent::TaskReleased {
                        task: row.get::<_, i64>(0) as u64,
                        by: member.clone(),
                        reason: format!("its holder {reason}"),
                    });
                }
            }
            let mut first = 0;
            for (i, e) in entries.iter().enumerate() {
                let seq = project::append(&tx, &root, time, &host, e)
                    .await
                    .map_err(un)?;
                if i == 0 {
                    first = seq;
                }
            }
            if matches!(event, GroupEvent::MessageQueued { .. }) {
                tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &root])
                    .await
                    .map_err(un)?;
            }
            tx.commit().await.map_err(un)?;
            Ok(Committed {
                seq: first,
                fresh: true,
            })
        })
    }

    /// Exactly once across the two stores: the pending rows are locked in
    /// PostgreSQL, the recipient's events are appended to the local store
    /// unless a `GroupMessageDelivered` of that message is already there
    /// (a delivery whose marker was lost with a connection or a killed
    /// process), then the markers commit.
    fn deliver(&self, root: &str, recipient: &str) -> Result<Vec<(u64, EventKind)>, GroupError> {
        let (root, recipient, local, host) = (
            root.to_string(),
            recipient.to_string(),
            self.local.clone(),
            self.host.clone(),
        );
        self.run(move |pool, shown| async move {
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
            let time = now_ms();
            for message in markers {
                let marker = GroupEvent::MessageDelivered {
                    message,
                    to: recipient.clone(),
                };
                project::append(&tx, &root, time, &host, &marker)
                    .await
                    .map_err(un)?;
            }
            tx.commit().await.map_err(un)?;
            Ok(seqs.into_iter().zip(fresh).collect())
        })
    }

    fn pending(&self, root: &str, recipient: &str) -> Result<Vec<PendingMessage>, GroupError> {
        let (root, recipient) = (root.to_string(), recipient.to_string());
        self.run(move |pool, shown| async move {
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
        })
    }

    fn group_log(&self, root: &str, after: u64) -> Result<Vec<StoredEvent>, GroupError> {
        let root = root.to_string();
        let after = after.min(i64::MAX as u64) as i64;
        self.run(move |pool, shown| async move {
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
        })
    }

    fn projection(&self, root: &str) -> Result<GroupSnapshot, GroupError> {
        let root = root.to_string();
        self.run(move |pool, shown| async move {
            let client = error::client(&pool, &shown).await?;
            project::snapshot(&client, &root)
                .await
                .map_err(|e| error::unavailable(&shown, &e))
        })
    }
}
