//! The errors of the PostgreSQL group store: connecting (each names the
//! URL, password left out) and the mapping of database failures onto
//! [`GroupError::Unavailable`].

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
    /// The runtime of the connections could not start.
    #[error("cannot start the group store's runtime: {0}")]
    Runtime(String),
}

/// `url` with its password replaced by `***` (URL and key-value forms).
pub fn redact(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let (auth, tail) = match rest.find('@') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => return url.to_string(),
        };
        return match auth.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***{tail}"),
            None => url.to_string(),
        };
    }
    url.split_whitespace()
        .map(|kv| {
            if kv.starts_with("password=") {
                "password=***".to_string()
            } else {
                kv.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `url` with its password removed (URL and key-value forms, and a
/// `password` query parameter): what a session's durable record keeps of
/// the store it joined. The password comes back from the configuration,
/// `--store` or `PGPASSWORD` when the session resumes.
pub fn without_password(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let authority = match authority.rsplit_once('@') {
            Some((auth, host)) => match auth.split_once(':') {
                Some((user, _)) => format!("{user}@{host}"),
                None => authority.to_string(),
            },
            None => authority.to_string(),
        };
        let tail = match tail.split_once('?') {
            Some((path, query)) => {
                let kept: Vec<&str> = query
                    .split('&')
                    .filter(|kv| !kv.starts_with("password="))
                    .collect();
                if kept.is_empty() {
                    path.to_string()
                } else {
                    format!("{path}?{}", kept.join("&"))
                }
            }
            None => tail.to_string(),
        };
        return format!("{scheme}://{authority}{tail}");
    }
    url.split_whitespace()
        .filter(|kv| !kv.starts_with("password="))
        .collect::<Vec<_>>()
        .join(" ")
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
            crate::CONNECT_TIMEOUT.as_secs()
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
