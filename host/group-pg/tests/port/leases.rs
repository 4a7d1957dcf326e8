//! Member leases on PostgreSQL: a member that stops renewing (its process
//! hangs or dies) is removed by the next commit of anyone once its lease
//! expired on the server's clock, with the reason, its claims released in
//! that same commit; its heartbeat reports the lease lost, and its late
//! requests are refused by its epoch. A member whose heartbeat runs stays,
//! however long past its TTL.

use super::common::*;
use latch_group_pg::PgGroup;
use latch_kernel::EventKind;
use latch_kernel::group::{Commit, GroupError, GroupEvent, GroupPort, GroupRefusal, TaskStatus};
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_millis(1200);

fn claim(task: u64, by: &str) -> GroupEvent {
    GroupEvent::TaskClaimed {
        task,
        by: by.into(),
        epoch: None,
    }
}

#[test]
fn an_expired_member_is_removed_in_the_commit_path_with_its_claims() {
    let Some(e) = Env::new(Backend::Postgres, 2) else {
        return;
    };
    e.form_group();
    let (a, z) = (e.children[0].clone(), e.children[1].clone());
    let t = e.task("build", vec![]);
    // `a` runs in a process of its own (its own heartbeat).
    let a_port = PgGroup::connect(&pg_url().unwrap(), e.local.clone())
        .unwrap()
        .with_lease_ttl(TTL)
        .with_host("host-a");
    let m = a_port.join(&e.root, &a, "worker0").unwrap();
    let lease = m.lease.clone().expect("a shared store gives a lease");
    assert!(
        a_port
            .submit(&e.root, Commit::new(claim(t, &a)).by_epoch(m.epoch))
            .unwrap()
            .fresh
    );
    // Renewed well past its TTL while its process runs.
    std::thread::sleep(TTL * 5 / 2);
    assert_eq!(lease.lost(), None);
    let leases = e.port.leases(&e.root).unwrap().unwrap();
    let mine = leases.iter().find(|l| l.member == a).unwrap();
    assert!(!mine.expired(), "{mine:?}");
    assert_eq!((mine.host.as_str(), mine.epoch), ("host-a", m.epoch));
    assert_eq!(mine.pid, std::process::id());
    let refused = e.port.claim(&e.root, t, &z).unwrap_err();
    assert!(
        matches!(refused, GroupError::Refused(GroupRefusal::Held { .. })),
        "{refused:?}"
    );

    // Its process hangs: no more renewals.
    a_port.pause_heartbeat(true);
    let t0 = Instant::now();
    let claimed = loop {
        match e.port.claim(&e.root, t, &z) {
            Ok(c) if c.fresh => break c,
            Err(GroupError::Refused(GroupRefusal::Held { .. })) => {}
            other => panic!("{other:?}"),
        }
        assert!(t0.elapsed() < TTL * 3, "never reclaimed");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        t0.elapsed() <= TTL * 2,
        "reclaimed {:?} after the last renewal could stop; TTL {TTL:?}",
        t0.elapsed()
    );
    // One commit: the removal, the release and the claim, in that order.
    let log = e.port.group_log(&e.root, 0).unwrap();
    let at = log.iter().position(|ev| ev.seq == claimed.seq).unwrap();
    let tail: Vec<&GroupEvent> = log[at - 2..=at]
        .iter()
        .map(|ev| match &ev.kind {
            EventKind::Group(g) => g,
            _ => unreachable!(),
        })
        .collect();
    assert!(
        matches!(tail[0], GroupEvent::MemberLeft { member, reason, forced_by: None }
            if *member == a
                && reason.starts_with("lost its lease: no renewal from host-a pid ")
                && reason.ends_with("within its 2 s TTL")),
        "{tail:?}"
    );
    assert!(
        matches!(tail[1], GroupEvent::TaskReleased { task, by, reason, .. }
            if *task == t && *by == a && reason.starts_with("its holder lost its lease")),
        "{tail:?}"
    );
    assert_eq!(log[at - 2].time_ms, log[at].time_ms, "committed together");
    assert!(
        e.port
            .leases(&e.root)
            .unwrap()
            .unwrap()
            .iter()
            .all(|l| l.member != a),
        "its lease row went with it"
    );

    // The member hears it: its lease is lost (no renewal for a TTL), and a
    // late request from its epoch is refused, saying why.
    let deadline = Instant::now() + TTL * 2;
    while lease.lost().is_none() {
        assert!(Instant::now() < deadline, "the lease was never lost");
        std::thread::sleep(Duration::from_millis(20));
    }
    a_port.pause_heartbeat(false);
    let late = Commit::new(GroupEvent::TaskCompleted {
        task: t,
        by: a.clone(),
        ok: true,
        result: "done late".into(),
    })
    .by_epoch(m.epoch);
    let r = a_port.submit(&e.root, late).unwrap_err();
    assert!(
        r.to_string().contains("lost its lease") && r.to_string().contains("nothing was applied"),
        "{r}"
    );
    let snap = e.port.projection(&e.root).unwrap();
    assert_eq!(snap.tasks[&t].status, TaskStatus::Claimed);
    assert_eq!(snap.tasks[&t].owner.as_ref(), Some(&z));
    check_log(&*e.port, &e.root);
    e.assert_replay();
}

#[test]
fn a_renewal_that_finds_its_member_evicted_loses_the_lease() {
    let Some(e) = Env::new(Backend::Postgres, 1) else {
        return;
    };
    e.form_group();
    let a = e.children[0].clone();
    let a_port = PgGroup::connect(&pg_url().unwrap(), e.local.clone())
        .unwrap()
        .with_lease_ttl(TTL);
    let m = a_port.join(&e.root, &a, "worker0").unwrap();
    let lease = m.lease.clone().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    lease.on_lost(move |why| {
        let _ = tx.send(why.to_string());
    });
    e.port
        .commit(
            &e.root,
            GroupEvent::MemberLeft {
                member: a.clone(),
                reason: "its host is down".into(),
                forced_by: Some("alice on host-a".into()),
            },
        )
        .unwrap();
    // The next renewal (a third of the TTL) finds the lease gone.
    let why = rx.recv_timeout(TTL).expect("the lease was lost");
    assert!(why.contains("no longer holds"), "{why}");
}
