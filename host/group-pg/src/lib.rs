//! Agent groups across hosts: [`PgGroup`], the [`GroupPort`] on PostgreSQL.
//!
//! The group's events, its projection (members with their host names,
//! tasks, claims, pending messages) and the members' leases live in one
//! PostgreSQL database that every member reaches; each member's own session
//! stays in its local SQLite [`Store`]. Every commit is one PostgreSQL
//! transaction holding the group's transaction-scoped advisory lock, so the
//! log order is the commit order and `GroupState::replay` of the log equals
//! the projection; a claim also locks its task row (`FOR UPDATE`) and
//! inserts into a table whose primary key allows one holder per task. A
//! claim that cannot succeed is refused from the task's row before the
//! group lock, so contending members do not queue their refusals behind
//! each other's commits.
//!
//! Beyond one machine: a member that joins takes a lease renewed by a
//! heartbeat on a connection of its own ([`lease`]), expired leases are
//! removed inside the commit path with their claims ([`commit`]), requests
//! carry the member's epoch (fenced by the kernel's one check), every
//! commit carries an id so a retry after a lost reply returns the first
//! result, every connection has TCP keepalives, a TCP user timeout and
//! server statement timeouts and every operation a deadline
//! ([`OP_DEADLINE`]), and TLS follows libpq's `sslmode` over rustls
//! ([`tls`]). Wake-ups go through `LISTEN/NOTIFY` ([`PgGroup::wait_for_log`]),
//! never a polling loop.
//!
//! The port is synchronous (like the SQLite store) and callable from any
//! thread, async or not: the work runs on a small runtime the store's
//! handles share.

mod cached;
mod check;
mod commit;
mod connect;
mod conninfo;
mod deliver;
mod error;
mod lease;
mod listen;
mod project;
mod read;
mod schema;
pub mod tls;

pub use connect::{CONNECT_TIMEOUT, OP_DEADLINE, POOL_SIZE};
pub use error::{PgGroupError, redact, without_password};

use commit::{Committer, LeaseSpec};
use connect::{Shared, registry};
use latch_kernel::Store;
use latch_kernel::event::{EventKind, StoredEvent};
use latch_kernel::group::{
    Commit, Committed, GroupError, GroupEvent, GroupPort, GroupSnapshot, MemberLease, Membership,
    PendingMessage,
};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The NOTIFY channel of group wake-ups; the payload is the root session.
pub const CHANNEL: &str = "latch_group";

/// A member lease's time to live unless [`PgGroup::with_lease_ttl`] says
/// otherwise; the heartbeat renews it every third of it.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);

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
/// A value is a handle: the connection pool, the LISTEN connection, the
/// lease heartbeat and their runtime are shared by every handle
/// [`PgGroup::open`] gives for one URL in this process, so a process with
/// many sessions holds one pool (at most [`POOL_SIZE`] connections), one
/// listener and one heartbeat per store.
pub struct PgGroup {
    shared: Arc<Shared>,
    local: Arc<Store>,
    host: String,
    lease_ttl: Duration,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// True when `url` is a PostgreSQL connection string (URL or key-value
/// form, TLS parameters included) that names a host.
pub fn usable_url(url: &str) -> bool {
    connect::Target::parse(url).is_ok()
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
    /// libpq key-value string; without a password in it, `PGPASSWORD`'s;
    /// `sslmode` and `sslrootcert` as libpq reads them), create its tables
    /// when missing, start listening for wake-ups and the lease heartbeat.
    /// `local` is this host's store, where the sessions of the members
    /// running here live (deliveries append to them). Fails within
    /// [`CONNECT_TIMEOUT`] with an error naming the URL (password hidden)
    /// and saying what to change.
    ///
    /// The new value has a pool of its own; [`PgGroup::open`] shares one.
    pub fn connect(url: &str, local: Arc<Store>) -> Result<PgGroup, PgGroupError> {
        Ok(PgGroup::handle(Arc::new(Shared::connect(url)?), local))
    }

    /// A handle on the group store at `url` that shares this process's
    /// pool, listener and heartbeat for that URL, connecting (as
    /// [`PgGroup::connect`]) when no handle of it is alive. `local` is the
    /// store deliveries of this handle append to.
    pub fn open(url: &str, local: Arc<Store>) -> Result<PgGroup, PgGroupError> {
        // Held while connecting: two sessions opening at once share too.
        let mut pools = registry().lock().unwrap_or_else(|p| p.into_inner());
        pools.retain(|_, w| w.strong_count() > 0);
        let shared = match pools.get(url).and_then(std::sync::Weak::upgrade) {
            Some(shared) => shared,
            None => {
                let shared = Arc::new(Shared::connect(url)?);
                pools.insert(url.to_string(), Arc::downgrade(&shared));
                shared
            }
        };
        Ok(PgGroup::handle(shared, local))
    }

    fn handle(shared: Arc<Shared>, local: Arc<Store>) -> PgGroup {
        PgGroup {
            shared,
            local,
            host: host_name(),
            lease_ttl: DEFAULT_LEASE_TTL,
        }
    }

    /// True when this handle and `other` share one pool and listener.
    pub fn shares_pool_with(&self, other: &PgGroup) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// The store's URL with any password hidden.
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

    /// Members joined through this handle take leases of `ttl` (renewed
    /// every third of it).
    pub fn with_lease_ttl(mut self, ttl: Duration) -> PgGroup {
        self.lease_ttl = ttl.max(Duration::from_millis(300));
        self
    }

    /// The TTL of the leases this handle takes.
    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// Stop (or resume) renewing every lease this process holds on this
    /// store, as a process that hangs would: for tests of expiry.
    #[doc(hidden)]
    pub fn pause_heartbeat(&self, paused: bool) {
        self.shared.leases.pause(paused);
    }

    fn committer(&self) -> Committer {
        Committer {
            pool: self.shared.pool.clone(),
            shown: self.shared.shown.clone(),
            host: self.host.clone(),
            pid: std::process::id(),
        }
    }

    /// Run `f` on the store's runtime and wait for it, from any thread, at
    /// most [`OP_DEADLINE`] (and a moment): past it, an error naming the
    /// store.
    fn run<T, F>(
        &self,
        f: impl FnOnce(deadpool_postgres::Pool, String) -> F,
    ) -> Result<T, GroupError>
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
        let shown = self.shared.shown.clone();
        let fut = f(self.shared.pool.clone(), shown.clone());
        rt.spawn(async move {
            let out = tokio::time::timeout(OP_DEADLINE + Duration::from_secs(1), fut)
                .await
                .unwrap_or_else(|_| {
                    Err(GroupError::Unavailable {
                        store: shown,
                        detail: format!("no answer within {} s", OP_DEADLINE.as_secs()),
                    })
                });
            let _ = tx.send(out);
        });
        rx.recv_timeout(OP_DEADLINE + Duration::from_secs(3))
            .unwrap_or_else(|_| {
                Err(GroupError::Unavailable {
                    store: self.shared.shown.clone(),
                    detail: "the operation did not finish".to_string(),
                })
            })
    }

    /// The members of `root`'s group with the host each joined from.
    pub fn members(&self, root: &str) -> Result<Vec<HostedMember>, GroupError> {
        let root = root.to_string();
        self.run(move |pool, shown| read::members(pool, shown, root))
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
    fn submit(&self, root: &str, commit: Commit) -> Result<Committed, GroupError> {
        let (root, committer) = (root.to_string(), self.committer());
        if let GroupEvent::MemberLeft { member, .. } = &commit.event {
            // Its membership here is over whatever the commit's fate: a
            // leave that fails is left to the lease's expiry.
            self.shared.leases.drop_lease(&root, member);
        }
        self.run(move |_, _| async move { committer.submit(&root, commit, None).await })
    }

    /// Join with a lease of [`PgGroup::lease_ttl`] that this process's
    /// heartbeat renews from now on (for as long as a clone of the
    /// returned watch lives).
    fn join(&self, root: &str, member: &str, role: &str) -> Result<Membership, GroupError> {
        let (r, committer, ttl) = (root.to_string(), self.committer(), self.lease_ttl);
        let event = GroupEvent::MemberJoined {
            member: member.to_string(),
            role: role.to_string(),
        };
        let taken = Instant::now();
        let c = self.run(move |_, _| async move {
            committer
                .submit(&r, Commit::new(event), Some(LeaseSpec { ttl }))
                .await
        })?;
        let watch = self.shared.leases.hold(root, member, c.seq, ttl, taken);
        Ok(Membership {
            epoch: c.seq,
            lease: Some(watch),
        })
    }

    fn leases(&self, root: &str) -> Result<Option<Vec<MemberLease>>, GroupError> {
        let root = root.to_string();
        self.run(move |pool, shown| read::leases(pool, shown, root))
            .map(Some)
    }

    /// Woken by the NOTIFY of every commit that can end a wait (all but a
    /// claim); the log is read again after each wake-up, at the timeout
    /// (so a claim is seen then), and at least every second while the
    /// LISTEN connection is down (a notification lost with it delays,
    /// never loses, a wake-up).
    fn wait_for_log(
        &self,
        root: &str,
        after: u64,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<bool, GroupError> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.shared.wake.generation(root);
            let read_at = Instant::now();
            if !self.group_log(root, after)?.is_empty() {
                return Ok(true);
            }
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if stop() {
                    return Ok(false);
                }
                if left.is_zero() {
                    // A change nobody notified (a claim): seen at the end.
                    return Ok(!self.group_log(root, after)?.is_empty());
                }
                // Short slices, so `stop` is heard promptly.
                if self
                    .shared
                    .wake
                    .wait(root, seen, left.min(Duration::from_millis(100)))
                {
                    break;
                }
                if !self.listening() && read_at.elapsed() >= Duration::from_secs(1) {
                    break;
                }
            }
        }
    }

    fn deliver(&self, root: &str, recipient: &str) -> Result<Vec<(u64, EventKind)>, GroupError> {
        let (root, recipient, local, host) = (
            root.to_string(),
            recipient.to_string(),
            self.local.clone(),
            self.host.clone(),
        );
        self.run(move |pool, shown| deliver::deliver(pool, shown, local, host, root, recipient))
    }

    fn pending(&self, root: &str, recipient: &str) -> Result<Vec<PendingMessage>, GroupError> {
        let (root, recipient) = (root.to_string(), recipient.to_string());
        self.run(move |pool, shown| read::pending(pool, shown, root, recipient))
    }

    fn group_log(&self, root: &str, after: u64) -> Result<Vec<StoredEvent>, GroupError> {
        let root = root.to_string();
        let after = after.min(i64::MAX as u64) as i64;
        self.run(move |pool, shown| read::group_log(pool, shown, root, after))
    }

    fn projection(&self, root: &str) -> Result<GroupSnapshot, GroupError> {
        let root = root.to_string();
        self.run(move |pool, shown| read::projection(pool, shown, root))
    }
}
