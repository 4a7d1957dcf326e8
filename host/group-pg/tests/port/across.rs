//! Two members on separate hosts — each in a network namespace of its own,
//! reaching the database over a veth pair (where this machine allows `ip
//! netns`; otherwise separate processes behind relays, which the test says)
//! — through three faults:
//!
//! 1. a member SIGKILLed while it holds a claim: the claim is free again
//!    within 2× the lease TTL and the other member takes it, once;
//! 2. a member's link drops without a FIN while it holds a claim: the other
//!    member takes and completes the task once the lease expired; when the
//!    link is back, the cut-off member's late completion is refused by its
//!    epoch and nothing is duplicated;
//! 3. a member SIGKILLed during its leave: it leaves once (by its leave or
//!    by its lease), and its claim is free within 2× the TTL.

use super::common::*;
use super::net::Site;
use super::relay::socket;
use super::worker::unix_ms;
use latch_kernel::EventKind;
use latch_kernel::group::{GroupEvent, GroupPort};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

const TTL_MS: u64 = 1500;

/// Wait until `file` holds a line starting with `prefix`; that line.
fn line(file: &Path, prefix: &str, within: Duration, child: Option<&mut Child>) -> String {
    let deadline = Instant::now() + within;
    let mut child = child;
    loop {
        if let Some(l) = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with(prefix))
        {
            return l.to_string();
        }
        if let Some(c) = child.as_deref_mut()
            && let Some(status) = c.try_wait().unwrap()
        {
            panic!(
                "the worker exited ({status}) before `{prefix}` in {}",
                file.display()
            );
        }
        assert!(
            Instant::now() < deadline,
            "no `{prefix}` in {} within {within:?}: {:?}",
            file.display(),
            std::fs::read_to_string(file).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill9(child: &mut Child) -> u64 {
    let at = unix_ms();
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    at
}

fn group_events(port: &dyn GroupPort, root: &str, after: u64) -> Vec<(u64, GroupEvent)> {
    port.group_log(root, after)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Group(g) => Some((e.seq, g)),
            _ => None,
        })
        .collect()
}

#[test]
fn members_on_separate_hosts_survive_a_kill_a_silent_link_and_a_kill_during_leave() {
    let Some(e) = Env::new(Backend::Postgres, 0) else {
        return;
    };
    let Some(sock) = socket() else {
        eprintln!("skipped: LATCH_PG_TEST_SOCKET names no PostgreSQL socket directory");
        return;
    };
    e.form_group();
    let test_url: tokio_postgres::Config = pg_url().unwrap().parse().unwrap();
    let (user, db) = (
        test_url.get_user().unwrap_or("postgres").to_string(),
        test_url.get_dbname().unwrap_or("postgres").to_string(),
    );
    let sites = [Site::new(0, sock.clone()), Site::new(1, sock)];
    if sites.iter().all(Site::isolated) {
        eprintln!("across: each member runs in its own network namespace, over a veth pair");
    } else {
        eprintln!(
            "note: `ip netns` with veth pairs is not allowed here; the members are separate \
             processes behind relays, and a silent link is a stalled relay"
        );
    }
    let dir = e._dir.path().to_path_buf();
    let pid = std::process::id();
    let (a, b) = (format!("a-{pid}"), format!("b-{pid}"));
    let ttl = Duration::from_millis(TTL_MS);
    let job = |site: usize, mode: &str, member: &str, task: u64, out: &str| {
        serde_json::json!({
            "mode": mode,
            "url": sites[site].url(&user, &db),
            "path": dir.join(format!("host{site}.db")),
            "host": format!("host-{site}"),
            "root": e.root,
            "member": member,
            "role": "worker",
            "task": task,
            "ttl_ms": TTL_MS,
            "out": dir.join(out),
            "go": dir.join(format!("{out}.go")),
        })
    };
    let out = |name: &str| dir.join(name);

    // 1. Killed while holding a claim.
    let t1 = e.task("one", vec![]);
    let mut holder = sites[0].spawn(&job(0, "hold", &a, t1, "a1"));
    line(
        &out("a1"),
        "held",
        Duration::from_secs(30),
        Some(&mut holder),
    );
    let mut taker = sites[1].spawn(&job(1, "take", &b, t1, "b1"));
    std::thread::sleep(Duration::from_millis(300));
    let killed = kill9(&mut holder);
    let claimed: u64 = line(&out("b1"), "claimed", ttl * 6, Some(&mut taker))
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let reclaimed = Duration::from_millis(claimed.saturating_sub(killed));
    eprintln!("across: SIGKILL to reclaimed {reclaimed:?} (TTL {ttl:?})");
    assert!(
        reclaimed <= ttl * 2,
        "reclaimed after {reclaimed:?}; TTL {ttl:?}"
    );
    assert!(taker.wait().unwrap().success());
    let claims: Vec<String> = group_events(&*e.port, &e.root, 0)
        .into_iter()
        .filter_map(|(_, g)| match g {
            GroupEvent::TaskClaimed { task, by, .. } if task == t1 => Some(by),
            _ => None,
        })
        .collect();
    assert_eq!(
        claims,
        [a.clone(), b.clone()],
        "claimed once by each, in turn"
    );
    let phase2 = e.port.group_log(&e.root, 0).unwrap().last().unwrap().seq;

    // 2. The holder's link drops without a FIN.
    let t2 = e.task("two", vec![]);
    let mut holder = sites[0].spawn(&job(0, "hold", &a, t2, "a2"));
    line(
        &out("a2"),
        "held",
        Duration::from_secs(30),
        Some(&mut holder),
    );
    sites[0].go_silent();
    let mut taker = sites[1].spawn(&job(1, "take", &b, t2, "b2"));
    line(
        &out("b2"),
        "completed",
        ttl * 6 + Duration::from_secs(5),
        Some(&mut taker),
    );
    assert!(taker.wait().unwrap().success());
    sites[0].come_back();
    std::fs::write(out("a2.go"), "go").unwrap();
    let late = line(
        &out("a2"),
        "late",
        Duration::from_secs(30),
        Some(&mut holder),
    );
    assert!(holder.wait().unwrap().success());
    let said = std::fs::read_to_string(out("a2")).unwrap();
    assert!(
        said.contains("\nlost "),
        "its lease was lost on its side: {said}"
    );
    assert!(
        late.starts_with("late refused") && late.contains("nothing was applied"),
        "{late}"
    );
    let completions: Vec<String> = group_events(&*e.port, &e.root, phase2)
        .into_iter()
        .filter_map(|(_, g)| match g {
            GroupEvent::TaskCompleted { task, by, .. } if task == t2 => Some(by),
            _ => None,
        })
        .collect();
    assert_eq!(
        completions,
        std::slice::from_ref(&b),
        "completed once, by the member that took it"
    );
    let phase3 = e.port.group_log(&e.root, 0).unwrap().last().unwrap().seq;

    // 3. Killed during its leave.
    let t3 = e.task("three", vec![]);
    let mut leaver = sites[0].spawn(&job(0, "leave", &a, t3, "a3"));
    line(
        &out("a3"),
        "leaving",
        Duration::from_secs(30),
        Some(&mut leaver),
    );
    let killed = kill9(&mut leaver);
    let mut taker = sites[1].spawn(&job(1, "take", &b, t3, "b3"));
    let claimed: u64 = line(&out("b3"), "claimed", ttl * 6, Some(&mut taker))
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let reclaimed = Duration::from_millis(claimed.saturating_sub(killed));
    eprintln!("across: killed during its leave, reclaimed after {reclaimed:?}");
    assert!(
        reclaimed <= ttl * 2,
        "reclaimed after {reclaimed:?}; TTL {ttl:?}"
    );
    assert!(taker.wait().unwrap().success());
    let left: Vec<String> = group_events(&*e.port, &e.root, phase3)
        .into_iter()
        .filter_map(|(_, g)| match g {
            GroupEvent::MemberLeft { member, reason, .. } if member == a => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(left.len(), 1, "it left once: {left:?}");

    check_log(&*e.port, &e.root);
    e.assert_replay();
}
