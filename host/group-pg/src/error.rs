//! The errors of the PostgreSQL group store: connecting (each names the
//! URL, password left out, and says what to change: TLS the server
//! requires, a certificate it did not prove, a password it refused) and the
//! mapping of database failures onto [`GroupError::Unavailable`].

use crate::connect::Target;
use crate::conninfo;
use crate::tls::SslMode;
use deadpool_postgres::{Object, Pool, PoolError};
use latch_kernel::group::GroupError;

/// Why the group store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum PgGroupError {
    /// The URL does not parse.
    #[error(
        "the group store URL {url} is not a PostgreSQL connection string ({detail}); write it as \
         postgres://user:password@host:5432/database"
    )]
    BadUrl {
        /// The URL, password left out.
        url: String,
        /// What was wrong.
        detail: String,
    },
    /// The server could not be reached or refused the connection.
    #[error(
        "cannot reach the group store at {url} ({detail}); check that PostgreSQL runs there and \
         accepts this user, or fix [group] store / --store"
    )]
    Unreachable {
        /// The URL, password left out.
        url: String,
        /// What failed.
        detail: String,
    },
    /// The tables could not be created.
    #[error(
        "the group store at {url} is reachable but its tables cannot be created ({detail}); the \
         user needs CREATE rights on the database"
    )]
    Schema {
        /// The URL, password left out.
        url: String,
        /// What failed.
        detail: String,
    },
    /// The TLS settings cannot be used (a root file that cannot be read).
    #[error("the TLS settings of the group store {url} cannot be used: {detail}")]
    Tls {
        /// The URL, password left out.
        url: String,
        /// What was wrong.
        detail: String,
    },
    /// The runtime of the connections could not start.
    #[error("cannot start the group store's runtime: {0}")]
    Runtime(String),
}

/// What to do about a failed connection, when the failure says it.
fn hint(mode: SslMode, detail: &str) -> Option<&'static str> {
    let d = detail.to_ascii_lowercase();
    if d.contains("no encryption") || d.contains("ssl required") || d.contains("ssl off") {
        return Some(
            "the server accepts only TLS connections: add sslmode=require to the URL, or \
             sslmode=verify-full with sslrootcert=<CA file> to also check its certificate",
        );
    }
    if d.contains("server does not support tls") || d.contains("server does not support ssl") {
        return Some(
            "the server does not offer TLS, and sslmode asks for it: enable ssl on the server, \
             or lower sslmode",
        );
    }
    if d.contains("certificate") || d.contains("unknownissuer") || d.contains("notvalidforname") {
        return Some(match mode {
            SslMode::VerifyFull => {
                "the server's TLS certificate was not accepted: with sslmode=verify-full it must \
                 be signed by a CA in sslrootcert (or the system's roots) and name the host the \
                 URL connects to"
            }
            _ => {
                "the server's TLS certificate was not accepted: it must be signed by a CA in \
                 sslrootcert (or the system's roots)"
            }
        });
    }
    if d.contains("password authentication failed") || d.contains("no password") {
        return Some(
            "the server refused the password: put it in the URL, in [group] store, or in \
             PGPASSWORD",
        );
    }
    None
}

/// A connection to `target` that failed.
pub(crate) fn unreachable_db(target: &Target, e: &tokio_postgres::Error) -> PgGroupError {
    let mut text = detail(e);
    if let Some(h) = hint(target.mode, &text) {
        text = format!("{text}; {h}");
    }
    PgGroupError::Unreachable {
        url: target.shown.clone(),
        detail: text,
    }
}

/// `url` with its password replaced by `***`, wherever the string writes
/// it: a URL's `user:password@`, a `?password=` (or `&password=`) query
/// parameter, a key-value `password=…` quoted, escaped or spaced.
pub fn redact(url: &str) -> String {
    conninfo::replace(
        url,
        |p| p.key == "password",
        |p| Some(format!("{}***", &url[p.span.start..p.value_span.start])),
    )
}

/// `url` with its password removed (every form [`redact`] hides): what a
/// session's durable record keeps of the store it joined. The password
/// comes back from the configuration, `--store` or `PGPASSWORD` when the
/// session resumes.
pub fn without_password(url: &str) -> String {
    conninfo::replace(url, |p| p.key == "password", |_| None)
}

/// The most telling text of a database error.
pub(crate) fn detail(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text = format!("{text}: {s}");
                source = s.source();
            }
            text
        }
    }
}

pub(crate) fn pool_detail(e: &PoolError) -> String {
    match e {
        PoolError::Backend(e) => detail(e),
        PoolError::Timeout(_) => format!(
            "no connection within {} s",
            crate::connect::RECONNECT_TIMEOUT.as_secs()
        ),
        other => other.to_string(),
    }
}

pub(crate) fn unavailable(store: &str, e: &tokio_postgres::Error) -> GroupError {
    GroupError::Unavailable {
        store: store.to_string(),
        detail: detail(e),
    }
}

/// A pooled connection, or the error naming the store.
pub(crate) async fn client(pool: &Pool, store: &str) -> Result<Object, GroupError> {
    pool.get().await.map_err(|e| GroupError::Unavailable {
        store: store.to_string(),
        detail: pool_detail(&e),
    })
}

#[cfg(test)]
mod tests {
    use super::{redact, without_password};

    #[test]
    fn a_recorded_url_keeps_no_password() {
        assert_eq!(
            without_password("postgres://latch:s3cr@t@db:5432/g?sslmode=disable&password=x"),
            "postgres://latch@db:5432/g?sslmode=disable"
        );
        assert_eq!(
            without_password("postgres://latch@%2Ftmp%2Fpg/postgres"),
            "postgres://latch@%2Ftmp%2Fpg/postgres"
        );
        assert_eq!(
            without_password("postgres://db/g?password=x"),
            "postgres://db/g"
        );
        assert_eq!(
            without_password("host=/tmp user=latch password=s3cret dbname=g"),
            "host=/tmp user=latch dbname=g"
        );
    }

    #[test]
    fn passwords_never_show_in_any_form() {
        for (url, shown) in [
            (
                "postgres://latch:s3cret@db/g?password=s3cret&sslmode=require",
                "postgres://latch:***@db/g?password=***&sslmode=require",
            ),
            (
                "postgres://db/g?password=s3cret",
                "postgres://db/g?password=***",
            ),
            (
                "postgresql://latch:s3cr@t@db/g",
                "postgresql://latch:***@db/g",
            ),
            (
                "host=db password = 's3 cret' user=latch",
                "host=db password = *** user=latch",
            ),
            (r"host=db password=s3\ cret", "host=db password=***"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
            assert!(!redact(url).contains("s3"), "{url}");
            assert!(!without_password(url).contains("s3"), "{url}");
            assert!(!without_password(url).contains("password"), "{url}");
        }
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("postgres://latch:s3cret@db:5432/g"),
            "postgres://latch:***@db:5432/g"
        );
        assert_eq!(redact("postgres://latch@db/g"), "postgres://latch@db/g");
        assert_eq!(
            redact("host=/tmp user=latch password=s3cret"),
            "host=/tmp user=latch password=***"
        );
    }
}
