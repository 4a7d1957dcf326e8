//! One driver per session: a lease row per session in the store, naming
//! the process that drives it (pid, host, surface, since when).
//!
//! A process takes a session's lease before it appends to the session as
//! its driver (a turn, a resume's repair, `/compact`) and keeps it for as
//! long as it holds the session open, renewing it from a heartbeat thread
//! ([`SessionLease`]). A second process asking for the same session is
//! refused with [`LeaseError::Held`], which names the holder. A crashed
//! holder does not keep it: on the same host a lease whose process is gone
//! (or whose pid now belongs to another process) is taken over at once,
//! and any lease its holder stopped renewing expires [`LEASE_TTL`] after
//! its last renewal. Within one process each holder has its own token, so
//! a parent that runs a child (it holds the child's lease) and a web page
//! asking to drive that child in the same process are still two drivers.
//!
//! A lease lost is a lease that stops its holder. While a [`SessionLease`]
//! lives, its store fences the session: every append to it (in the same
//! transaction that writes) first checks that the lease row still carries
//! this holder's token, and is refused with [`StoreError::LeaseLost`],
//! naming the new holder, once another process took the session over (the
//! holder was stopped with Ctrl-Z or slept past [`LEASE_TTL`]). The
//! heartbeat that finds the lease lost calls [`SessionLease::on_lost`],
//! with which the driver interrupts its turn at once.
//!
//! The lease is coordination, not history: its table is not part of the
//! event log and nothing replays it.

use super::{Result, Store, StoreError, now_ms};
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

/// How long a lease lives after its last renewal.
pub const LEASE_TTL: Duration = Duration::from_secs(30);

/// The environment variable that shortens (or lengthens) the lease of
/// this process, in milliseconds: for tests, and for filesystems slow
/// enough that a renewal every 10 s is too tight.
pub const LEASE_TTL_ENV: &str = "LATCH_LEASE_TTL_MS";

/// How long a lease of this process lives after its last renewal:
/// [`LEASE_TTL`], or [`LEASE_TTL_ENV`] when set to a number of
/// milliseconds (at least 100).
pub fn lease_ttl() -> Duration {
    std::env::var(LEASE_TTL_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|ms| Duration::from_millis(ms.max(100)))
        .unwrap_or(LEASE_TTL)
}

/// Who holds a session's lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseHolder {
    /// The holder's process id.
    pub pid: u32,
    /// The host it runs on.
    pub host: String,
    /// What drives the session, e.g. `latch resume (terminal UI)`.
    pub surface: String,
    /// When it took the lease (ms since the Unix epoch).
    pub since_ms: u64,
    /// When it last renewed it.
    pub renewed_ms: u64,
    /// How long after a renewal the lease expires (ms).
    pub ttl_ms: u64,
    /// True when the holder is this process (another holder object in it).
    pub this_process: bool,
}

impl std::fmt::Display for LeaseHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ago = now_ms().saturating_sub(self.renewed_ms) / 1000;
        write!(
            f,
            "{} (pid {} on {}{}) since {} UTC, renewed {ago} s ago",
            self.surface,
            self.pid,
            self.host,
            if self.this_process {
                ", this process"
            } else {
                ""
            },
            utc(self.since_ms),
        )
    }
}

/// Why a lease could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another process (or holder) drives the session.
    #[error(
        "session {session} is in use: {holder}. One process drives a session at a time: \
         continue it there, or close it first (`latch context` and `latch recall` still read \
         it, and `latch serve` shows it live). A holder that crashed gives the session up at \
         once on its host; otherwise its lease expires {ttl_s} s after its last renewal",
        ttl_s = holder.ttl_ms / 1000
    )]
    Held {
        /// The session asked for.
        session: String,
        /// Who holds it.
        holder: LeaseHolder,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for LeaseError {
    fn from(e: rusqlite::Error) -> LeaseError {
        LeaseError::Store(e.into())
    }
}

/// This process, as lease rows name it.
struct Me {
    pid: u32,
    start: Option<String>,
    host: String,
}

fn me() -> &'static Me {
    static ME: OnceLock<Me> = OnceLock::new();
    ME.get_or_init(|| {
        let pid = std::process::id();
        Me {
            pid,
            start: process_start(pid),
            host: host_name(),
        }
    })
}

/// The start time of process `pid` (field 22 of `/proc/PID/stat`, in
/// clock ticks since boot): with the pid it identifies one process, so a
/// reused pid is not taken for the holder. `None` when the process does
/// not exist or `/proc` cannot tell.
fn process_start(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields
    // after it start past the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19).map(str::to_string)
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// A lease row as stored.
struct Row {
    token: String,
    pid: u32,
    pid_start: Option<String>,
    holder: LeaseHolder,
}

impl Row {
    /// True when nobody holds it any more: it expired, or its process on
    /// this host is gone (or the pid now names another process).
    fn is_stale(&self, now: u64) -> bool {
        if self.holder.renewed_ms.saturating_add(self.holder.ttl_ms) < now {
            return true;
        }
        let me = me();
        // Without /proc (`me.start` unknown) only expiry frees a lease.
        if self.holder.host != me.host || me.start.is_none() {
            return false;
        }
        match process_start(self.pid) {
            None => true,
            Some(start) => self.pid_start.as_ref().is_some_and(|s| *s != start),
        }
    }
}

fn read_row(conn: &rusqlite::Connection, session: &str) -> rusqlite::Result<Option<Row>> {
    conn.query_row(
        "SELECT token, pid, pid_start, host, surface, since_ms, renewed_ms, ttl_ms
         FROM session_leases WHERE session = ?1",
        [session],
        |r| {
            let pid: u32 = r.get(1)?;
            let host: String = r.get(3)?;
            let pid_start: Option<String> = r.get(2)?;
            let me = me();
            Ok(Row {
                token: r.get(0)?,
                pid,
                holder: LeaseHolder {
                    pid,
                    this_process: pid == me.pid && host == me.host && pid_start == me.start,
                    host,
                    surface: r.get(4)?,
                    since_ms: r.get(5)?,
                    renewed_ms: r.get(6)?,
                    ttl_ms: r.get(7)?,
                },
                pid_start,
            })
        },
    )
    .optional()
}

/// A token no other holder has.
fn new_token() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        now_ms(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl Store {
    /// Take the lease of `session` for `surface`, valid `ttl` after each
    /// renewal; the token that renews and releases it. Refused with
    /// [`LeaseError::Held`] while another holder's lease is live; a stale
    /// one (see the module docs) is taken over.
    pub fn acquire_lease(
        &self,
        session: &str,
        surface: &str,
        ttl: Duration,
    ) -> Result<String, LeaseError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let exists: bool = tx.query_row(
            "SELECT COUNT(*) > 0 FROM sessions WHERE id = ?1",
            [session],
            |r| r.get(0),
        )?;
        if !exists {
            return Err(StoreError::UnknownSession(session.to_string()).into());
        }
        let now = now_ms();
        if let Some(row) = read_row(&tx, session)?
            && !row.is_stale(now)
        {
            return Err(LeaseError::Held {
                session: session.to_string(),
                holder: row.holder,
            });
        }
        let token = new_token();
        let me = me();
        tx.execute(
            "INSERT OR REPLACE INTO session_leases
             (session, token, pid, pid_start, host, surface, since_ms, renewed_ms, ttl_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8)",
            params![
                session,
                token,
                me.pid,
                me.start,
                me.host,
                surface,
                now,
                ttl.as_millis() as u64
            ],
        )?;
        tx.commit()?;
        Ok(token)
    }

    /// Renew the lease `token` holds on `session`; false when it no longer
    /// holds it (it expired and was taken over).
    pub fn renew_lease(&self, session: &str, token: &str) -> Result<bool> {
        let n = self.conn().execute(
            "UPDATE session_leases SET renewed_ms = ?3 WHERE session = ?1 AND token = ?2",
            params![session, token, now_ms()],
        )?;
        Ok(n == 1)
    }

    /// Give up the lease `token` holds on `session` (nothing when it no
    /// longer holds it).
    pub fn release_lease(&self, session: &str, token: &str) -> Result<()> {
        self.conn().execute(
            "DELETE FROM session_leases WHERE session = ?1 AND token = ?2",
            params![session, token],
        )?;
        Ok(())
    }

    /// Who drives `session` now; `None` when nobody holds a live lease.
    pub fn lease_holder(&self, session: &str) -> Result<Option<LeaseHolder>> {
        let row = read_row(&self.conn(), session)?;
        Ok(row.filter(|r| !r.is_stale(now_ms())).map(|r| r.holder))
    }

    /// Whether `token` still holds `session`'s lease.
    fn holds(&self, session: &str, token: &str) -> Result<bool> {
        Ok(read_row(&self.conn(), session)?.is_some_and(|r| r.token == token))
    }
}

/// The refusal of an append by a holder that lost `session`'s lease.
pub(crate) fn lost_sentence(session: &str, holder: Option<&LeaseHolder>) -> String {
    let now = match holder {
        Some(h) => format!("it is driven by {h}"),
        None => "its new driver has closed it since".to_string(),
    };
    format!(
        "this process lost the lease of session {session} (it was stopped or asleep longer than \
         the lease lives, and the session was taken over): {now}. Nothing more is written here; \
         continue the session where it is driven, or resume it once that has closed"
    )
}

/// Refuse an append to `session` when this process fences it (`fences`
/// holds its token) and the token no longer holds the lease; runs inside
/// the appending transaction.
pub(crate) fn check_fence(
    conn: &rusqlite::Connection,
    fences: &HashMap<String, String>,
    session: &str,
) -> Result<()> {
    let Some(token) = fences.get(session) else {
        return Ok(());
    };
    match read_row(conn, session)? {
        Some(row) if row.token == *token => Ok(()),
        row => Err(StoreError::LeaseLost {
            session: session.to_string(),
            holder: row
                .filter(|r| !r.is_stale(now_ms()))
                .map(|r| Box::new(r.holder)),
        }),
    }
}

impl Store {
    /// The sessions this store fences, with their holders' tokens.
    pub(crate) fn fences(&self) -> HashMap<String, String> {
        self.fences
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Refused with [`StoreError::LeaseLost`] when a holder in this process
    /// drives `session` and has lost its lease: what a driver asks before
    /// an effect outside the store (a tool call) as well as before every
    /// append.
    pub fn check_lease(&self, session: &str) -> Result<()> {
        let fences = self.fences();
        if !fences.contains_key(session) {
            return Ok(());
        }
        check_fence(&self.conn(), &fences, session)
    }

    fn fence(&self, session: &str, token: &str) {
        self.fences
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session.to_string(), token.to_string());
    }

    fn unfence(&self, session: &str, token: &str) {
        let mut fences = self.fences.lock().unwrap_or_else(|p| p.into_inner());
        if fences.get(session).is_some_and(|t| t == token) {
            fences.remove(session);
        }
    }
}

/// What a lease found lost calls (set by [`SessionLease::on_lost`]).
type LostCallback = Arc<Mutex<Option<Box<dyn Fn() + Send>>>>;

/// A held lease: renewed by a heartbeat thread while it lives, released
/// when dropped. If the heartbeat finds it lost (it expired, e.g. the
/// process was stopped, and another process took the session over), it
/// says so through [`SessionLease::is_lost`] and the callback given to
/// [`SessionLease::on_lost`].
pub struct SessionLease {
    store: Arc<Store>,
    session: String,
    token: String,
    lost: Arc<AtomicBool>,
    on_lost: LostCallback,
    stop: Option<mpsc::Sender<()>>,
    heartbeat: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for SessionLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLease")
            .field("session", &self.session)
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl SessionLease {
    /// Take `session`'s lease for `surface` (see [`Store::acquire_lease`])
    /// living [`lease_ttl`] after each renewal, and start renewing it.
    pub fn acquire(
        store: &Arc<Store>,
        session: &str,
        surface: &str,
    ) -> Result<SessionLease, LeaseError> {
        SessionLease::acquire_with_ttl(store, session, surface, lease_ttl())
    }

    /// [`SessionLease::acquire`] with a lease that lives `ttl` after each
    /// renewal (renewed every third of it).
    pub fn acquire_with_ttl(
        store: &Arc<Store>,
        session: &str,
        surface: &str,
        ttl: Duration,
    ) -> Result<SessionLease, LeaseError> {
        let token = store.acquire_lease(session, surface, ttl)?;
        let lost = Arc::new(AtomicBool::new(false));
        let on_lost: LostCallback = Arc::new(Mutex::new(None));
        let (stop, stopped) = mpsc::channel::<()>();
        let beat = {
            let (store, session, token) = (store.clone(), session.to_string(), token.clone());
            let (lost, on_lost) = (lost.clone(), on_lost.clone());
            move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(ttl / 3) {
                    // A failed write is tried again at the next beat; only
                    // a lease found taken over is lost.
                    if let Ok(false) = store.renew_lease(&session, &token) {
                        lost.store(true, Ordering::SeqCst);
                        if let Some(f) = on_lost.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
                        {
                            f();
                        }
                        return;
                    }
                }
            }
        };
        let heartbeat = std::thread::Builder::new()
            .name(format!("latch-lease-{session}"))
            .spawn(beat)
            .map_err(|e| {
                let _ = store.release_lease(session, &token);
                StoreError::Io {
                    path: store.path().to_path_buf(),
                    source: e,
                }
            })?;
        store.fence(session, &token);
        Ok(SessionLease {
            store: store.clone(),
            session: session.to_string(),
            token,
            lost,
            on_lost,
            stop: Some(stop),
            heartbeat: Some(heartbeat),
        })
    }

    /// The session held.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// True once the heartbeat found the lease taken over by another
    /// holder.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Whether the lease is still this holder's, asked of the store now.
    pub fn still_held(&self) -> Result<bool> {
        self.store.holds(&self.session, &self.token)
    }

    /// Call `f` (on the heartbeat thread) if the lease is found lost, e.g.
    /// to stop the turn that drives the session.
    pub fn on_lost(&self, f: impl Fn() + Send + 'static) {
        *self.on_lost.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(f));
    }
}

impl Drop for SessionLease {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(h) = self.heartbeat.take() {
            let _ = h.join();
        }
        self.store.unfence(&self.session, &self.token);
        let _ = self.store.release_lease(&self.session, &self.token);
    }
}

/// A millisecond timestamp as UTC `YYYY-MM-DD HH:MM:SS`.
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let (h, m, s) = ((secs % 86_400) / 3600, (secs % 3600) / 60, secs % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if mo <= 2 { 1 } else { 0 };
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{m:02}:{s:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::ModelProfile;

    fn store_with_session() -> (tempfile::TempDir, Arc<Store>, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path().join("s.db")).unwrap());
        let model = ModelProfile::with_defaults("anthropic", "m");
        let id = store.create_session("/w", None, &model).unwrap().id;
        (dir, store, id)
    }

    /// Write a lease row for a holder that is not this process.
    fn plant(store: &Store, session: &str, pid: u32, host: &str, renewed_ms: u64, ttl_ms: u64) {
        store
            .conn()
            .execute(
                "INSERT OR REPLACE INTO session_leases
                 (session, token, pid, pid_start, host, surface, since_ms, renewed_ms, ttl_ms)
                 VALUES (?1, 'other', ?2, NULL, ?3, 'latch (elsewhere)', ?4, ?4, ?5)",
                params![session, pid, host, renewed_ms, ttl_ms],
            )
            .unwrap();
    }

    #[test]
    fn a_second_holder_is_refused_with_who_holds_it_and_gets_it_after_release() {
        let (_d, store, id) = store_with_session();
        let first = SessionLease::acquire(&store, &id, "latch (terminal UI)").unwrap();
        let err = SessionLease::acquire(&store, &id, "latch serve").unwrap_err();
        let LeaseError::Held { holder, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(holder.pid, std::process::id());
        assert!(holder.this_process);
        let text = err.to_string();
        assert!(
            text.contains("latch (terminal UI)")
                && text.contains(&format!("pid {}", std::process::id()))
                && text.contains("since "),
            "{text}"
        );
        assert_eq!(
            store.lease_holder(&id).unwrap().unwrap().surface,
            "latch (terminal UI)"
        );
        drop(first);
        assert_eq!(store.lease_holder(&id).unwrap(), None);
        let _second = SessionLease::acquire(&store, &id, "latch serve").unwrap();
    }

    #[test]
    fn a_gone_process_on_this_host_is_taken_over_at_once() {
        let (_d, store, id) = store_with_session();
        // A pid no process has (the kernel's pid_max is below 2^22).
        plant(&store, &id, 4_194_304 + 7, &me().host, now_ms(), 3_600_000);
        if me().start.is_some() {
            assert_eq!(store.lease_holder(&id).unwrap(), None);
            SessionLease::acquire(&store, &id, "latch").unwrap();
        }
    }

    #[test]
    fn another_hosts_lease_holds_until_it_expires() {
        let (_d, store, id) = store_with_session();
        plant(&store, &id, 1, "elsewhere", now_ms(), 60_000);
        let err = store
            .acquire_lease(&id, "latch", LEASE_TTL)
            .unwrap_err()
            .to_string();
        assert!(err.contains("pid 1 on elsewhere"), "{err}");
        // Not renewed for longer than its ttl: expired, taken over.
        plant(&store, &id, 1, "elsewhere", now_ms() - 61_000, 60_000);
        store.acquire_lease(&id, "latch", LEASE_TTL).unwrap();
    }

    #[test]
    fn a_lease_taken_over_is_found_lost_by_its_heartbeat() {
        let (_d, store, id) = store_with_session();
        let lease = SessionLease::acquire_with_ttl(&store, &id, "latch", Duration::from_millis(90))
            .unwrap();
        let (tx, rx) = mpsc::channel();
        lease.on_lost(move || {
            let _ = tx.send(());
        });
        plant(&store, &id, 1, "elsewhere", now_ms(), 60_000);
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(lease.is_lost());
        assert!(!lease.still_held().unwrap());
        drop(lease);
        // Dropping a lost lease leaves the new holder's row alone.
        assert_eq!(store.lease_holder(&id).unwrap().unwrap().host, "elsewhere");
    }

    #[test]
    fn a_holder_that_lost_its_lease_appends_nothing() {
        let (_d, store, id) = store_with_session();
        let lease = SessionLease::acquire(&store, &id, "latch").unwrap();
        store
            .append(
                &id,
                crate::EventKind::NotificationDelivered {
                    source: "t".into(),
                    text: "mine".into(),
                },
            )
            .unwrap();
        store.check_lease(&id).unwrap();
        // Another host's process took the session over.
        plant(&store, &id, 77, "elsewhere", now_ms(), 60_000);
        let before = store.events(&id, 0, u64::MAX, 100).unwrap().len();
        let err = store
            .append(
                &id,
                crate::EventKind::NotificationDelivered {
                    source: "t".into(),
                    text: "late".into(),
                },
            )
            .unwrap_err();
        let StoreError::LeaseLost { holder, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(holder.as_ref().unwrap().pid, 77);
        let text = err.to_string();
        assert!(
            text.contains("lost the lease") && text.contains("pid 77 on elsewhere"),
            "{text}"
        );
        assert!(matches!(
            store.check_lease(&id),
            Err(StoreError::LeaseLost { .. })
        ));
        assert_eq!(store.events(&id, 0, u64::MAX, 100).unwrap().len(), before);
        drop(lease);
        // No holder of this process fences the session any more.
        store
            .append(
                &id,
                crate::EventKind::NotificationDelivered {
                    source: "t".into(),
                    text: "after".into(),
                },
            )
            .unwrap();
    }

    #[test]
    fn an_unknown_session_has_no_lease() {
        let (_d, store, _id) = store_with_session();
        let err = store.acquire_lease("nope", "latch", LEASE_TTL).unwrap_err();
        assert!(matches!(
            err,
            LeaseError::Store(StoreError::UnknownSession(_))
        ));
    }

    #[test]
    fn times_read_as_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_764_670_000_000), "2025-12-02 10:06:40");
    }
}
