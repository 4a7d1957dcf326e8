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

/// The relayed URL of the test cluster, with a password the server's trust
/// authentication ignores (so a test sees where it would leak).
fn relayed(relay: &Relay) -> String {
    let test_url: tokio_postgres::Config = pg_url().unwrap().parse().unwrap();
    format!(
        "host=127.0.0.1 port={} user={} password=hunter2 dbname={}",
        relay.port,
        test_url.get_user().unwrap_or("postgres"),
        test_url.get_dbname().unwrap_or("postgres"),
    )
}

/// A commit whose reply is lost after the server applied it is retried with
/// its id: the caller gets the first result (a success, never "not
/// applied"), and the log holds it once.
#[test]
fn a_commit_whose_reply_was_lost_returns_its_first_result_once() {
    let Some(e) = Env::new(Backend::Postgres, 1) else {
        return;
    };
    let Some(socket) = socket() else {
        eprintln!("skipped: LATCH_PG_TEST_SOCKET names no PostgreSQL socket directory");
        return;
    };
    e.form_group();
    let relay = Relay::start(socket);
    let member = PgGroup::connect(&relayed(&relay), e.local.clone()).unwrap();
    let a = e.children[0].clone();
    relay.lose_next_commit_reply();
    let queued = member
        .commit(
            &e.root,
            GroupEvent::MessageQueued {
                from: e.root.clone(),
                to: a.clone(),
                recipients: vec![],
                text: "exactly once".into(),
            },
        )
        .expect("a commit that was applied is reported applied");
    assert!(queued.fresh);
    assert_eq!(relay.lost_replies(), 1, "the reply was lost for real");
    let queued_events = e
        .port
        .group_log(&e.root, 0)
        .unwrap()
        .into_iter()
        .filter(|ev| {
            matches!(
                ev.kind,
                latch_kernel::EventKind::Group(GroupEvent::MessageQueued { .. })
            )
        })
        .count();
    assert_eq!(queued_events, 1, "not duplicated by the retry");
    assert_eq!(e.port.pending(&e.root, &a).unwrap()[0].message, queued.seq);
    check_log(&*e.port, &e.root);
    e.assert_replay();
}

/// A network that goes silent (no FIN, nothing passes): a group operation
/// answers with an error naming the store within seconds, never its
/// password, and nothing is applied twice once it is back.
#[test]
fn a_silent_network_is_an_error_within_seconds() {
    let Some(e) = Env::new(Backend::Postgres, 1) else {
        return;
    };
    let Some(socket) = socket() else {
        eprintln!("skipped: LATCH_PG_TEST_SOCKET names no PostgreSQL socket directory");
        return;
    };
    e.form_group();
    let t = e.task("one", vec![]);
    let relay = Relay::start(socket);
    let member = Arc::new(PgGroup::connect(&relayed(&relay), e.local.clone()).unwrap());
    let a = e.children[0].clone();
    // A pooled connection is open, then the network goes silent under it.
    member.pending(&e.root, &a).unwrap();
    relay.stall(true);
    let t0 = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let (member, root, a) = (member.clone(), e.root.clone(), a.clone());
        std::thread::spawn(move || {
            let _ = tx.send(member.claim(&root, t, &a));
        });
    }
    let limit = latch_group_pg::OP_DEADLINE + Duration::from_secs(2);
    let err = rx
        .recv_timeout(limit)
        .unwrap_or_else(|_| panic!("no answer within {limit:?}"))
        .unwrap_err();
    let took = t0.elapsed();
    assert!(took <= limit, "answered after {took:?}");
    let text = err.to_string();
    assert!(text.contains("host=127.0.0.1"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("password=***"), "{text}");
    relay.stall(false);
    relay.cut();
    relay.restore();
    // Back: the claim applies once, whatever the silent attempt did.
    let c = retry(|| member.claim(&e.root, t, &a));
    let _ = c;
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
    assert_eq!(claims, 1);
    check_log(&*e.port, &e.root);
}
