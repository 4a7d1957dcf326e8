//! TLS to the group store, against the test cluster's TLS-only TCP
//! listener (`.ci/run` gives it a throwaway CA and a certificate for
//! `localhost` and 127.0.0.1; `LATCH_PG_TEST_TLS_URL` says how to reach it
//! with `sslmode=verify-full` and that CA as `sslrootcert`): verify-full and
//! require connect, and the connection is encrypted as the server sees it;
//! plaintext is refused with a message that says to use TLS; a certificate
//! that does not chain to a trusted root, or does not name the host, is
//! refused with a message that says so.

use super::common::*;
use latch_group_pg::{PgGroup, PgGroupError};
use latch_kernel::Store;
use latch_kernel::group::GroupPort;
use std::sync::Arc;

/// The TLS URL of the test cluster, or `None` (printed) when not given.
fn tls_url() -> Option<String> {
    match std::env::var("LATCH_PG_TEST_TLS_URL") {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var("LATCH_PG_TEST_REQUIRED").as_deref() != Ok("1"),
                "LATCH_PG_TEST_REQUIRED=1 but LATCH_PG_TEST_TLS_URL is not set (.ci/run sets it)"
            );
            eprintln!("skipped: no TLS listener for the group store tests (LATCH_PG_TEST_TLS_URL)");
            None
        }
    }
}

/// `url` (key-value form) with `key` set to `value`, or removed.
fn with(url: &str, key: &str, value: Option<&str>) -> String {
    let mut parts: Vec<String> = url
        .split_whitespace()
        .filter(|kv| !kv.starts_with(&format!("{key}=")))
        .map(str::to_string)
        .collect();
    if let Some(v) = value {
        parts.push(format!("{key}={v}"));
    }
    parts.join(" ")
}

fn local() -> (tempfile::TempDir, Arc<Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("l.db")).unwrap());
    (dir, store)
}

/// Whether the server sees the connections named `app` as encrypted.
fn encrypted(app: &str) -> Vec<bool> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(&pg_url().unwrap(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
            .query(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
                 WHERE a.application_name = $1",
                &[&app],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    })
}

#[test]
fn verify_full_and_require_connect_encrypted() {
    let Some(url) = tls_url() else { return };
    for (mode, url) in [
        ("verify-full", url.clone()),
        (
            "require",
            with(&with(&url, "sslmode", Some("require")), "sslrootcert", None),
        ),
    ] {
        let app = format!("latch-tls-{mode}-{}", std::process::id());
        let (_dir, store) = local();
        let pg = PgGroup::connect(&format!("{url} application_name={app}"), store)
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(pg.projection("nobody").is_ok(), "{mode}");
        let seen = encrypted(&app);
        assert!(
            !seen.is_empty() && seen.iter().all(|s| *s),
            "{mode}: {seen:?}"
        );
    }
}

#[test]
fn plaintext_to_a_tls_only_server_says_to_use_tls() {
    let Some(url) = tls_url() else { return };
    let plain = with(&with(&url, "sslmode", Some("disable")), "sslrootcert", None);
    let (_dir, store) = local();
    let err = PgGroup::connect(&plain, store).err().expect("refused");
    assert!(matches!(err, PgGroupError::Unreachable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("accepts only TLS connections") && text.contains("sslmode=require"),
        "{text}"
    );
}

#[test]
fn a_certificate_the_roots_or_the_name_do_not_vouch_for_is_refused() {
    let Some(url) = tls_url() else { return };
    // The system's roots do not know the throwaway CA.
    let system = with(&url, "sslrootcert", None);
    let (_dir, store) = local();
    let err = PgGroup::connect(&system, store.clone())
        .err()
        .expect("refused");
    let text = err.to_string();
    assert!(text.contains("certificate was not accepted"), "{text}");
    // The right CA, but a name the certificate does not carry: refused by
    // verify-full, accepted by verify-ca (which checks the chain only).
    let addr = url
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("host="))
        .unwrap();
    let ip = if addr == "localhost" {
        "127.0.0.1"
    } else {
        addr
    };
    let renamed = with(
        &with(&url, "host", Some("group-store.invalid")),
        "hostaddr",
        Some(ip),
    );
    let err = PgGroup::connect(&renamed, store.clone())
        .err()
        .expect("refused");
    let text = err.to_string();
    assert!(
        text.contains("certificate was not accepted") && text.contains("name the host"),
        "{text}"
    );
    let ca_only = with(&renamed, "sslmode", Some("verify-ca"));
    PgGroup::connect(&ca_only, store).unwrap();
}
