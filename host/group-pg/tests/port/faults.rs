//! A database that is away: unreachable at start is an error naming the
//! URL (never its password); lost mid-session, operations answer with an
//! error naming the store while the process goes on, and once it is back
//! the same value reconnects without duplicating a claim. The loss is real:
//! the port talks to PostgreSQL through a TCP relay that these tests cut.

use super::common::*;
use latch_group_pg::{CONNECT_TIMEOUT, PgGroup, PgGroupError};
use latch_kernel::group::{GroupError, GroupEvent, GroupPort};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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

/// A TCP relay to the test cluster's unix socket that can be cut.
struct Relay {
    port: u16,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn start(socket: PathBuf) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        {
            let (cut, open) = (cut.clone(), open.clone());
            std::thread::spawn(move || {
                for tcp in listener.incoming() {
                    let Ok(tcp) = tcp else { continue };
                    if cut.load(Ordering::SeqCst) {
                        let _ = tcp.shutdown(Shutdown::Both);
                        continue;
                    }
                    let Ok(unix) = UnixStream::connect(&socket) else {
                        continue;
                    };
                    open.lock().unwrap().push(tcp.try_clone().unwrap());
                    let (mut t1, mut u1) = (tcp.try_clone().unwrap(), unix.try_clone().unwrap());
                    let (mut t2, mut u2) = (tcp, unix);
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut t1, &mut u1);
                        let _ = u1.shutdown(Shutdown::Both);
                    });
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut u2, &mut t2);
                        let _ = t2.shutdown(Shutdown::Both);
                    });
                }
            });
        }
        Relay { port, cut, open }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn socket() -> Option<PathBuf> {
    let dir = std::env::var("LATCH_PG_TEST_SOCKET").ok()?;
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            name.starts_with(".s.PGSQL.") && !name.ends_with(".lock")
        })
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
