//! Reaching the group store: the connection settings every connection gets
//! (TLS as `sslmode` says, TCP keepalives and a TCP user timeout, server
//! statement, lock and idle-transaction timeouts, `PGPASSWORD` as libpq
//! reads it), and what the handles of one store share in a process
//! ([`Shared`]: the pool, the LISTEN connection, the heartbeat that renews
//! member leases, and the runtime they run on).

use crate::error::{self, PgGroupError, redact};
use crate::{lease, listen, schema, tls};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How long connecting to PostgreSQL may take at start before it is an
/// error.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How long one operation of the port (a commit with its retries, a read)
/// may take before it answers with an error: a dead network is a tool
/// error within seconds, never a hang.
pub const OP_DEADLINE: Duration = Duration::from_secs(8);

/// How long a connection made while working (the pool's, the heartbeat's)
/// may take.
pub(crate) const RECONNECT_TIMEOUT: Duration = Duration::from_secs(4);

/// The server-side limits every connection sets: one statement (a lock
/// wait included) at most 5 s; a transaction left idle by a member that
/// vanished mid-commit is ended after 10 s, releasing the group lock.
const SERVER_LIMITS: &str = "-c statement_timeout=5000 -c lock_timeout=5000 \
                             -c idle_in_transaction_session_timeout=10000";

/// TCP: unacknowledged data for 5 s, or an idle connection whose probes go
/// unanswered for about 5 s more, closes the connection.
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(5);
const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
const KEEPALIVE_RETRIES: u32 = 4;

/// Most pooled connections of one pool (the LISTEN and heartbeat
/// connections aside).
pub const POOL_SIZE: usize = 8;

/// A connection string read into tokio-postgres's configuration and the
/// TLS connector it asks for.
#[derive(Clone)]
pub(crate) struct Target {
    pub config: tokio_postgres::Config,
    pub tls: MakeRustlsConnect,
    pub mode: tls::SslMode,
    /// The URL as shown: password hidden.
    pub shown: String,
}

impl Target {
    /// Read `url` (URL or key-value form).
    pub(crate) fn parse(url: &str) -> Result<Target, PgGroupError> {
        let shown = redact(url);
        let bad = |detail: String| PgGroupError::BadUrl {
            url: shown.clone(),
            detail,
        };
        let (rest, wanted) = tls::split(url).map_err(bad)?;
        let mut config: tokio_postgres::Config = rest
            .parse()
            .map_err(|e: tokio_postgres::Error| bad(e.to_string()))?;
        if config.get_hosts().is_empty() {
            return Err(bad("it names no host".into()));
        }
        config.ssl_mode(wanted.mode.for_client());
        config.connect_timeout(CONNECT_TIMEOUT);
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
        config.keepalives(true);
        config.keepalives_idle(KEEPALIVE_IDLE);
        config.keepalives_interval(KEEPALIVE_INTERVAL);
        config.keepalives_retries(KEEPALIVE_RETRIES);
        let options = match config.get_options() {
            Some(o) if !o.trim().is_empty() => format!("{o} {SERVER_LIMITS}"),
            _ => SERVER_LIMITS.to_string(),
        };
        config.options(options);
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
        let connector = tls::connector(&wanted).map_err(|detail| PgGroupError::Tls {
            url: shown.clone(),
            detail,
        })?;
        Ok(Target {
            config,
            tls: connector,
            mode: wanted.mode,
            shown,
        })
    }

    /// The same target with connections made within `timeout`.
    pub(crate) fn connecting_within(&self, timeout: Duration) -> Target {
        let mut t = self.clone();
        t.config.connect_timeout(timeout);
        t
    }
}

/// What the handles of one store share: the pool, the wake-ups, the lease
/// heartbeat and the runtime the connections run on.
pub(crate) struct Shared {
    pub shown: String,
    pub pool: Pool,
    pub wake: Arc<listen::Wake>,
    pub leases: Arc<lease::Leases>,
    pub rt: Option<tokio::runtime::Runtime>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// The pools of this process by URL; a pool lives while a handle uses it.
pub(crate) fn registry() -> &'static Mutex<HashMap<String, Weak<Shared>>> {
    static POOLS: OnceLock<Mutex<HashMap<String, Weak<Shared>>>> = OnceLock::new();
    POOLS.get_or_init(Default::default)
}

impl Shared {
    /// Connect to `url`, create the tables when missing, start listening
    /// and the heartbeat.
    pub(crate) fn connect(url: &str) -> Result<Shared, PgGroupError> {
        let target = Target::parse(url)?;
        let shown = target.shown.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("latch-group-pg")
            .enable_all()
            .build()
            .map_err(|e| PgGroupError::Runtime(e.to_string()))?;
        let working = target.connecting_within(RECONNECT_TIMEOUT);
        let manager = Manager::from_config(
            working.config.clone(),
            working.tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(RECONNECT_TIMEOUT))
            .create_timeout(Some(RECONNECT_TIMEOUT))
            .recycle_timeout(Some(RECONNECT_TIMEOUT))
            .build()
            .map_err(|e| PgGroupError::BadUrl {
                url: shown.clone(),
                detail: e.to_string(),
            })?;
        // The first connection may take the start timeout; it creates the
        // tables and says precisely why it fails (TLS, password, host).
        rt.block_on(async {
            let mut client = connect(&target).await?;
            schema::ensure(&mut client)
                .await
                .map_err(|e| PgGroupError::Schema {
                    url: target.shown.clone(),
                    detail: error::detail(&e),
                })
        })?;
        let wake = Arc::new(listen::Wake::default());
        rt.spawn(listen::run(working.clone(), wake.clone()));
        let leases = Arc::new(lease::Leases::default());
        rt.spawn(lease::heartbeat(working, leases.clone()));
        Ok(Shared {
            shown,
            pool,
            wake,
            leases,
            rt: Some(rt),
        })
    }
}

/// One connection to `target` outside the pool, driven on the current
/// runtime until the client is dropped; an error says why it failed.
pub(crate) async fn connect(target: &Target) -> Result<tokio_postgres::Client, PgGroupError> {
    let limit = target
        .config
        .get_connect_timeout()
        .copied()
        .unwrap_or(CONNECT_TIMEOUT)
        + Duration::from_secs(1);
    let made = tokio::time::timeout(limit, target.config.connect(target.tls.clone())).await;
    match made {
        Ok(Ok((client, conn))) => {
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(client)
        }
        Ok(Err(e)) => Err(error::unreachable_db(target, &e)),
        Err(_) => Err(PgGroupError::Unreachable {
            url: target.shown.clone(),
            detail: format!("no answer within {} s", limit.as_secs()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test cluster's URL, or `None` (saying why) when there is none;
    /// a failure when `LATCH_PG_TEST_REQUIRED=1`.
    fn pg_url() -> Option<String> {
        match std::env::var("LATCH_PG_TEST_URL") {
            Ok(u) if !u.trim().is_empty() => Some(u),
            _ => {
                assert!(
                    std::env::var("LATCH_PG_TEST_REQUIRED").as_deref() != Ok("1"),
                    "LATCH_PG_TEST_REQUIRED=1 but LATCH_PG_TEST_URL is not set"
                );
                eprintln!("skipped: no PostgreSQL (set LATCH_PG_TEST_URL)");
                None
            }
        }
    }

    /// A pooled connection (what commits and reads use) runs with the
    /// server-side limits, options the URL gives kept beside them, and the
    /// TCP keepalives and user timeout are set on every connection.
    #[test]
    fn every_connection_runs_with_the_server_limits_and_tcp_timeouts() {
        let Some(url) = pg_url() else { return };
        let sep = if url.contains("://") {
            if url.contains('?') { '&' } else { '?' }
        } else {
            ' '
        };
        let with_option = if url.contains("://") {
            format!("{url}{sep}options=-c%20work_mem%3D3MB")
        } else {
            format!("{url}{sep}options='-c work_mem=3MB'")
        };
        let target = Target::parse(&with_option).unwrap();
        assert_eq!(
            target.config.get_tcp_user_timeout(),
            Some(&TCP_USER_TIMEOUT)
        );
        assert!(target.config.get_keepalives());
        assert_eq!(target.config.get_keepalives_idle(), KEEPALIVE_IDLE);
        assert_eq!(
            target.config.get_keepalives_interval(),
            Some(KEEPALIVE_INTERVAL)
        );
        let shared = Shared::connect(&with_option).unwrap();
        let shown: Vec<String> = shared.rt.as_ref().unwrap().block_on(async {
            let client = shared.pool.get().await.unwrap();
            let mut shown = Vec::new();
            for setting in [
                "statement_timeout",
                "lock_timeout",
                "idle_in_transaction_session_timeout",
                "work_mem",
            ] {
                let row = client
                    .query_one(&format!("SHOW {setting}"), &[])
                    .await
                    .unwrap();
                shown.push(row.get(0));
            }
            shown
        });
        assert_eq!(shown, ["5s", "5s", "10s", "3MB"]);
    }
}
