//! The durable store: one SQLite file (WAL mode, bundled SQLite with FTS5)
//! holding sessions, the append-only event log with its full-text index, and
//! content-addressed artifacts.
//!
//! * [`Store::open`] refuses non-SQLite, corrupted, foreign and newer-schema
//!   files with a clear message and never writes to them.
//! * Events are only ever inserted (triggers abort any `UPDATE` or `DELETE`);
//!   events that belong together are appended in one immediate transaction.
//! * The agent-group projection (tables of tasks, claims, members and
//!   pending deliveries) is maintained by the transaction that appends each
//!   group event and rebuilt from the log at open; the store implements
//!   [`crate::group::GroupPort`] over it.
//! * Each session records the git repository Latch's own git uses for it,
//!   fixed when it is created (see [`Store::session_repository`]).
//! * Each session has at most one driver: a lease row names the process
//!   that holds it (see [`SessionLease`]).
//! * The kernel reducers are cached per session with a sequence watermark and
//!   caught up from the log on demand, so canonical state stays cheap.

mod agents;
mod artifacts;
mod events;
mod group_port;
mod group_projection;
mod lease;
mod profile;
mod provider;
mod recall;
mod repository;
mod schema;
mod sessions;

pub use artifacts::{ImageInfo, image_info};
pub use lease::{LEASE_TTL, LEASE_TTL_ENV, LeaseError, LeaseHolder, SessionLease, lease_ttl};
pub use recall::{SNIPPET_CHARS, SearchRow, fts_query, snippet};
pub use repository::RepositoryDrift;
pub use schema::{APPLICATION_ID, SCHEMA_VERSION};
pub use sessions::{SessionRecord, new_session_id};

use crate::event::EventDecodeError;
use crate::state::KernelState;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The first 16 bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file exists and is not an SQLite database.
    #[error(
        "{path} is not a Latch store: it is not an SQLite database. Latch refuses to open it \
         and has not changed it; pass another path with --store"
    )]
    NotSqlite {
        /// The file.
        path: PathBuf,
    },
    /// The file looks like SQLite but cannot be read.
    #[error(
        "{path} is corrupted and cannot be opened as a Latch store ({detail}). Latch has not \
         changed it; restore it from a backup or pass another path with --store"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
    },
    /// An SQLite database that some other program owns.
    #[error(
        "{path} is an SQLite database but not a Latch store. Latch refuses to open it and has \
         not changed it; pass another path with --store"
    )]
    Foreign {
        /// The file.
        path: PathBuf,
    },
    /// The store was written by a newer Latch.
    #[error(
        "{path} has store schema version {found}, but this Latch supports up to version \
         {supported}. Upgrade Latch to open it; the file has not been changed"
    )]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// The file's schema version.
        found: u32,
        /// The newest version this build understands.
        supported: u32,
    },
    /// A read-only command found a store of an older schema (upgrading it
    /// would write).
    #[error(
        "{path} has store schema version {found}; this Latch reads version {current} without \
         writing. Open it once with a command that writes (e.g. `latch sessions`) to upgrade \
         it, then try again; the file has not been changed"
    )]
    OlderSchema {
        /// The file.
        path: PathBuf,
        /// The file's schema version.
        found: u32,
        /// The version this build reads.
        current: u32,
    },
    /// A command that only reads (or continues) sessions found no store.
    #[error(
        "there is no Latch store at {path}: nothing was recorded there, and this command \
         does not create one. Start a session with `latch` or `latch run` in this \
         workspace, or pass the store's path with --store"
    )]
    Missing {
        /// The path that does not exist.
        path: PathBuf,
    },
    /// No session has this id.
    #[error("no session `{0}` in this store")]
    UnknownSession(String),
    /// A session selector matched nothing visible.
    #[error("no session matches `{0}` (deleted sessions are not resumable)")]
    NoMatch(String),
    /// A session id prefix matched several sessions.
    #[error("session prefix `{prefix}` is ambiguous: it matches {}", candidates.join(", "))]
    Ambiguous {
        /// The prefix given.
        prefix: String,
        /// The matching ids.
        candidates: Vec<String>,
    },
    /// A stored artifact's bytes no longer hash to its name.
    #[error("artifact {sha256} is corrupted: its bytes hash to {actual}")]
    CorruptArtifact {
        /// The artifact's name.
        sha256: String,
        /// What the bytes hash to now.
        actual: String,
    },
    /// A stored event could not be decoded.
    #[error(transparent)]
    Decode(#[from] EventDecodeError),
    /// A stored JSON value (model profile) could not be decoded.
    #[error("stored {what} is malformed: {source}")]
    Json {
        /// What was being decoded.
        what: &'static str,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// An SQLite error.
    #[error("store error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// This process lost the session's lease (it was stopped or asleep
    /// past its expiry and another process took the session over): the
    /// append is refused and nothing is written.
    #[error("{}", lease::lost_sentence(session, holder.as_deref()))]
    LeaseLost {
        /// The session.
        session: String,
        /// Who drives it now (`None` when the new holder already gave it
        /// up).
        holder: Option<Box<LeaseHolder>>,
    },
    /// A file-system error.
    #[error("store I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Result alias of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A cached reducer with the workspace it reduces.
struct CachedKernel {
    workspace: String,
    state: KernelState,
}

/// The durable store. Cheap to share behind an `Arc`; every method takes
/// `&self` and serializes access to the one connection.
pub struct Store {
    path: PathBuf,
    conn: Mutex<Connection>,
    kernels: Mutex<HashMap<String, CachedKernel>>,
    /// Events decoded from rows since the store was opened.
    decoded: AtomicU64,
    /// The lease token of each session a holder in this process drives
    /// through this store: an append to one of them is refused once the
    /// token no longer holds the lease (see [`lease`]).
    fences: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// The default store path of a workspace: `<workspace>/.latch/latch.db`.
pub fn default_store_path(workspace: &Path) -> PathBuf {
    workspace.join(".latch").join("latch.db")
}

/// Milliseconds since the Unix epoch, by the wall clock.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Check that an existing, non-empty file starts with the SQLite header.
fn check_header(path: &Path) -> Result<()> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mut header = Vec::with_capacity(16);
    (&mut file)
        .take(16)
        .read_to_end(&mut header)
        .map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if header.is_empty() || header.as_slice() == SQLITE_HEADER {
        Ok(())
    } else {
        Err(StoreError::NotSqlite {
            path: path.to_path_buf(),
        })
    }
}

impl Store {
    /// Open (or create) the store at `path`, creating parent directories.
    ///
    /// Refuses, without writing to the file, anything that is not an SQLite
    /// database, a corrupted database, an SQLite database of another program,
    /// and a store whose schema is newer than this build's.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        check_header(&path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let corrupt = |e: rusqlite::Error| StoreError::Corrupt {
            path: path.clone(),
            detail: e.to_string(),
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(&path, flags).map_err(corrupt)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        // Room for every statement the log, recall and the group projection
        // reuse, so a projection rebuild never re-prepares them.
        conn.set_prepared_statement_cache_capacity(64);

        // Read-only probes first: nothing is written before these pass.
        let tables: Vec<String> = (|| {
            let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(corrupt)?;
        let found = if tables.is_empty() {
            0
        } else if tables.iter().any(|t| t == "latch_schema") {
            conn.query_row("SELECT version FROM latch_schema", [], |r| {
                r.get::<_, u32>(0)
            })
            .map_err(corrupt)?
        } else {
            return Err(StoreError::Foreign { path });
        };
        if found > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path,
                found,
                supported: SCHEMA_VERSION,
            });
        }

        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Corrupt {
                path,
                detail: format!("could not enable WAL mode (journal mode is {mode})"),
            });
        }
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        migrate(&mut conn, &path)?;
        // The group projection is a cache: rebuilt from the log at open.
        group_projection::rebuild(&mut conn)?;
        Ok(Store {
            path,
            conn: Mutex::new(conn),
            kernels: Mutex::new(HashMap::new()),
            decoded: AtomicU64::new(0),
            fences: Mutex::new(HashMap::new()),
        })
    }

    /// Open the store at `path` only if it exists: for commands that read or
    /// continue recorded sessions, which must never create a store. A missing
    /// file is [`StoreError::Missing`], naming it; nothing is created.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        if !path.is_file() {
            return Err(StoreError::Missing {
                path: path.to_path_buf(),
            });
        }
        Store::open(path)
    }

    /// Open the existing store at `path` for reading only: for commands that
    /// must never change a recorded session (`latch engine replay`, `latch
    /// export`). SQLite itself refuses every write through this handle
    /// (read-only connection, `query_only`); nothing is migrated, no
    /// projection is rebuilt and no file is created. A store written by an
    /// older Latch is refused with how to upgrade it, since upgrading writes.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        if !path.is_file() {
            return Err(StoreError::Missing { path });
        }
        check_header(&path)?;
        let corrupt = |e: rusqlite::Error| StoreError::Corrupt {
            path: path.clone(),
            detail: e.to_string(),
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).map_err(corrupt)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.set_prepared_statement_cache_capacity(64);
        conn.pragma_update(None, "query_only", "ON")?;
        let has_table: bool = conn
            .query_row(
                "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'latch_schema'",
                [],
                |r| r.get(0),
            )
            .map_err(corrupt)?;
        if !has_table {
            return Err(StoreError::Foreign { path });
        }
        let found: u32 = conn
            .query_row("SELECT version FROM latch_schema", [], |r| r.get(0))
            .map_err(corrupt)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path,
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found < SCHEMA_VERSION {
            return Err(StoreError::OlderSchema {
                path,
                found,
                current: SCHEMA_VERSION,
            });
        }
        Ok(Store {
            path,
            conn: Mutex::new(conn),
            kernels: Mutex::new(HashMap::new()),
            decoded: AtomicU64::new(0),
            fences: Mutex::new(HashMap::new()),
        })
    }

    /// How many events this handle has decoded from rows since it was
    /// opened by the event reads (ranges, pages, catch-up). Lets tests pin
    /// that a repeated
    /// operation costs what is new.
    pub fn decoded_events(&self) -> u64 {
        self.decoded.load(Ordering::Relaxed)
    }

    pub(crate) fn count_decoded(&self, n: usize) {
        self.decoded.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open store.
    pub fn schema_version(&self) -> Result<u32> {
        Ok(self
            .conn()
            .query_row("SELECT version FROM latch_schema", [], |r| r.get(0))?)
    }

    pub(crate) fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite half-written
        // (transactions roll back on drop), so a poisoned lock is still usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `f` on the session's reducer, caught up with the log first.
    ///
    /// The reducer is cached with its watermark; only events newer than it
    /// are read and applied, so repeated calls cost what is new.
    pub fn with_kernel<R>(&self, session: &str, f: impl FnOnce(&KernelState) -> R) -> Result<R> {
        let mut kernels = self.kernels.lock().unwrap_or_else(|p| p.into_inner());
        if !kernels.contains_key(session) {
            let record = self.session(session)?;
            kernels.insert(
                session.to_string(),
                CachedKernel {
                    workspace: record.workspace,
                    state: KernelState::new(session),
                },
            );
        }
        let cached = kernels.get_mut(session).expect("inserted above");
        self.catch_up(&cached.workspace, &mut cached.state)?;
        Ok(f(&cached.state))
    }

    /// A copy of the session's reducer, caught up with the log.
    pub fn kernel(&self, session: &str) -> Result<KernelState> {
        self.with_kernel(session, KernelState::clone)
    }

    /// The session's reducer rebuilt from scratch by a full replay of its
    /// workspace log (no cache). Equal to [`Store::kernel`] by construction;
    /// tests pin it.
    pub fn replay_kernel(&self, session: &str) -> Result<KernelState> {
        let record = self.session(session)?;
        let mut state = KernelState::new(session);
        self.catch_up(&record.workspace, &mut state)?;
        Ok(state)
    }

    /// The current workspace generation of `workspace`: generation-advancing
    /// events of every session sharing it. Tombstones never lower it.
    pub fn workspace_generation(&self, workspace: &str) -> Result<u64> {
        Ok(self.conn().query_row(
            "SELECT COUNT(*) FROM events e JOIN sessions s ON s.id = e.session
             WHERE e.wide = 1 AND s.workspace = ?1 AND e.kind IN ('mutation', 'external_change')",
            [workspace],
            |r| r.get::<_, u64>(0),
        )?)
    }
}

/// Bring the schema up to [`SCHEMA_VERSION`], one immediate transaction per
/// migration (another process may be migrating the same file).
fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let has_table: bool = tx.query_row(
            "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'latch_schema'",
            [],
            |r| r.get(0),
        )?;
        let version: u32 = if has_table {
            tx.query_row("SELECT version FROM latch_schema", [], |r| r.get(0))?
        } else {
            0
        };
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version == SCHEMA_VERSION {
            tx.commit()?;
            return Ok(());
        }
        tx.execute_batch(MIGRATIONS_FOR[version as usize])?;
        tx.execute("UPDATE latch_schema SET version = ?1", [version + 1])?;
        if version == 0 {
            tx.pragma_update(None, "application_id", APPLICATION_ID)?;
        }
        tx.commit()?;
    }
}

use schema::MIGRATIONS as MIGRATIONS_FOR;

#[cfg(test)]
mod tests;
