//! A database that is away: unreachable at start is an error naming the
//! URL (never its password); lost mid-session, operations answer with an
//! error naming the store while the process goes on, and once it is back
//! the same value reconnects without duplicating a claim. The loss is real:
//! the port talks to PostgreSQL through a TCP relay that these tests cut.

use super::common::*;
use super::relay::{Relay, socket};
use latch_group_pg::{CONNECT_TIMEOUT, PgGroup, PgGroupError};
use latch_kernel::group::{GroupError, GroupEvent, GroupPort};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn unreachable_at_start_is_an_error_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let local = Arc::new(latch_kernel::Store::open(dir.path().join("l.db")).unwrap());
    let t0 = Instant::now();
    let err = PgGroup::connect("postgres://latch:hunter2@127.0.0.1:1/latch", local.clone())
        .err()
        .expect("nothing listens on port 1");
    assert!(t0.elapsed() < CONNECT_TIMEOUT);
    assert!(matches!(err, PgGroupError::Unreachable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("postgres://latch:***@127.0.0.1:1/latch"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
    assert_eq!(CONNECT_TIMEOUT, Duration::from_secs(15));
    let err = PgGroup::connect("mysql://nope", local).err().unwrap();
    assert!(matches!(err, PgGroupError::BadUrl { .. }), "{err:?}");
    assert!(err.to_string().contains("mysql://nope"), "{err}");
}

fn retry<T>(mut f: impl FnMut() -> Result<T, GroupError>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if Instant::now() < deadline => {
                eprintln!("retrying after: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("the store did not come back: {e}"),
        }
    }
}

#[test]
fn lost_mid_session_answers_with_a_clear_error_and_reconnects_without_duplicates() {
    let Some(e) = Env::new(Backend::Postgres, 1) else {
        return;
    };
    let Some(socket) = socket() else {
        eprintln!("skipped: LATCH_PG_TEST_SOCKET names no PostgreSQL socket directory");
        return;
    };
    let test_url: tokio_postgres::Config = pg_url().unwrap().parse().unwrap();
    e.form_group();
    let (t1, t2) = (e.task("one", vec![]), e.task("two", vec![]));
    let relay = Relay::start(socket);
    let url = format!(
        "host=127.0.0.1 port={} user={} dbname={}",
        relay.port,
        test_url.get_user().unwrap_or("postgres"),
        test_url.get_dbname().unwrap_or("postgres"),
    );
    let member = PgGroup::connect(&url, e.local.clone()).unwrap();
    let a = e.children[0].clone();
    assert!(member.claim(&e.root, t1, &a).unwrap().fresh);

    relay.cut();
    let err = member.claim(&e.root, t2, &a).unwrap_err();
    assert!(matches!(err, GroupError::Unavailable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&url) && text.contains("unavailable"),
        "{text}"
    );
    let err = member.deliver(&e.root, &a).unwrap_err();
    assert!(err.to_string().contains(&url), "{err}");

    relay.restore();
    // The same value reconnects; claiming again is no second claim.
    assert!(!retry(|| member.claim(&e.root, t1, &a)).fresh);
    assert!(retry(|| member.claim(&e.root, t2, &a)).fresh);
    let claims = e
        .port
        .group_log(&e.root, 0)
        .unwrap()
        .into_iter()
        .filter(|ev| {
            matches!(
                ev.kind,
                latch_kernel::EventKind::Group(GroupEvent::TaskClaimed { .. })
            )
        })
        .count();
    assert_eq!(claims, 2, "one claim event per task");
    check_log(&*e.port, &e.root);
    e.assert_replay();
}
