//! One suite, two backends: every case runs against the SQLite store and
//! against PostgreSQL, with the same assertions.

use super::common::*;
use latch_kernel::EventKind;
use latch_kernel::group::GroupPort as _;
use latch_kernel::group::{ALL, Commit, GroupError, GroupEvent, GroupRefusal, TaskStatus};

fn refusal(r: Result<impl std::fmt::Debug, GroupError>) -> GroupRefusal {
    match r {
        Err(GroupError::Refused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn claim_once_and_the_refusal_names_the_holder(b: Backend) {
    let Some(e) = Env::new(b, 2) else { return };
    e.form_group();
    let t = e.task("build", vec![]);
    let (a, z) = (&e.children[0], &e.children[1]);
    assert!(e.port.claim(&e.root, t, a).unwrap().fresh);
    // Claiming again is idempotent for the holder.
    assert!(!e.port.claim(&e.root, t, a).unwrap().fresh);
    let r = refusal(e.port.claim(&e.root, t, z));
    assert_eq!(
        r,
        GroupRefusal::Held {
            task: t,
            holder: a.clone()
        }
    );
    assert!(r.to_string().contains(a.as_str()), "{r}");
    let r = refusal(e.port.claim(&e.root, 999_999_999, z));
    assert!(
        matches!(r, GroupRefusal::UnknownTask { task: 999_999_999, ref known } if known == &vec![t])
    );
    e.assert_replay();
}

fn dependencies_block_until_completed_and_only_the_holder_completes(b: Backend) {
    let Some(e) = Env::new(b, 2) else { return };
    e.form_group();
    let first = e.task("first", vec![]);
    let second = e.task("second", vec![first]);
    let (a, z) = (&e.children[0], &e.children[1]);
    let r = refusal(e.port.claim(&e.root, second, a));
    assert_eq!(
        r,
        GroupRefusal::Blocked {
            task: second,
            waiting: vec![(first, TaskStatus::Open)]
        }
    );
    e.port.claim(&e.root, first, a).unwrap();
    let done = |by: &str| GroupEvent::TaskCompleted {
        task: first,
        by: by.into(),
        ok: true,
        result: "built".into(),
    };
    let r = refusal(e.port.commit(&e.root, done(z)));
    assert_eq!(
        r,
        GroupRefusal::NotHolder {
            task: first,
            holder: Some(a.clone())
        }
    );
    e.port.commit(&e.root, done(a)).unwrap();
    let r = refusal(e.port.claim(&e.root, first, z));
    assert!(
        matches!(
            r,
            GroupRefusal::Closed {
                status: TaskStatus::Completed,
                ..
            }
        ),
        "{r:?}"
    );
    assert!(e.port.claim(&e.root, second, z).unwrap().fresh);
    let r = refusal(e.port.commit(
        &e.root,
        GroupEvent::TaskCreated {
            title: "third".into(),
            description: String::new(),
            depends_on: vec![42],
            key: None,
            by: e.root.clone(),
        },
    ));
    assert!(
        matches!(r, GroupRefusal::UnknownDependency { dep: 42, .. }),
        "{r:?}"
    );
    e.assert_replay();
}

fn task_keys_and_joins_are_idempotent(b: Backend) {
    let Some(e) = Env::new(b, 1) else { return };
    e.form_group();
    let keyed = || GroupEvent::TaskCreated {
        title: "once".into(),
        description: String::new(),
        depends_on: vec![],
        key: Some("k1".into()),
        by: e.root.clone(),
    };
    let first = e.port.commit(&e.root, keyed()).unwrap();
    let again = e.port.commit(&e.root, keyed()).unwrap();
    assert!(first.fresh && !again.fresh);
    assert_eq!(first.seq, again.seq);
    let joined = e.port.commit(
        &e.root,
        GroupEvent::MemberJoined {
            member: e.children[0].clone(),
            role: "worker0".into(),
        },
    );
    assert!(!joined.unwrap().fresh);
    assert_eq!(e.port.projection(&e.root).unwrap().tasks.len(), 1);
    e.assert_replay();
}

fn a_member_that_leaves_gives_its_claims_back(b: Backend) {
    let Some(e) = Env::new(b, 2) else { return };
    e.form_group();
    let (t1, t2) = (e.task("one", vec![]), e.task("two", vec![]));
    let (a, z) = (&e.children[0], &e.children[1]);
    e.port.claim(&e.root, t1, a).unwrap();
    e.port.claim(&e.root, t2, a).unwrap();
    e.port
        .commit(
            &e.root,
            GroupEvent::MemberLeft {
                member: a.clone(),
                reason: "interrupted".into(),
                forced_by: None,
            },
        )
        .unwrap();
    let snap = e.port.projection(&e.root).unwrap();
    assert_eq!(snap.tasks[&t1].status, TaskStatus::Open);
    assert_eq!(snap.tasks[&t2].status, TaskStatus::Open);
    assert_eq!(snap.members[a], ("worker0".to_string(), false));
    let r = refusal(e.port.claim(&e.root, t1, a));
    assert!(matches!(r, GroupRefusal::NotMember { .. }), "{r:?}");
    assert!(e.port.claim(&e.root, t1, z).unwrap().fresh);
    e.assert_replay();
}

fn messages_arrive_fifo_exactly_once(b: Backend) {
    let Some(e) = Env::new(b, 2) else { return };
    e.form_group();
    let (a, z) = (&e.children[0], &e.children[1]);
    let send = |from: &str, to: &str, text: &str| {
        e.port.commit(
            &e.root,
            GroupEvent::MessageQueued {
                from: from.into(),
                to: to.into(),
                recipients: vec![],
                text: text.into(),
            },
        )
    };
    let m1 = send(&e.root, a, "first").unwrap().seq;
    let m2 = send(z, ALL, "to all").unwrap().seq;
    let m3 = send(&e.root, a, "third").unwrap().seq;
    let pending: Vec<u64> = e
        .port
        .pending(&e.root, a)
        .unwrap()
        .iter()
        .map(|p| p.message)
        .collect();
    assert_eq!(pending, vec![m1, m2, m3]);
    let got = e.port.deliver(&e.root, a).unwrap();
    assert_eq!(got.len(), 3);
    assert!(
        e.port.deliver(&e.root, a).unwrap().is_empty(),
        "delivered once"
    );
    assert_eq!(received(&e.local, a), vec![m1, m2, m3]);
    // `all` went to the other active members, not back to the sender.
    assert_eq!(e.port.pending(&e.root, &e.root).unwrap().len(), 1);
    assert!(e.port.pending(&e.root, z).unwrap().is_empty());
    assert!(
        refusal(send(a, "nobody", "x"))
            .to_string()
            .contains("nobody")
    );
    assert_eq!(e.port.projection(&e.root).unwrap().delivered, 3);
    check_log(&*e.port, &e.root);
    e.assert_replay();
}

fn nobody_else_and_empty_inputs_are_refused(b: Backend) {
    let Some(e) = Env::new(b, 0) else { return };
    let r = refusal(e.port.commit(
        &e.root,
        GroupEvent::MemberJoined {
            member: e.root.clone(),
            role: "lead".into(),
        },
    ));
    assert_eq!(
        r,
        GroupRefusal::NoGroup {
            root: e.root.clone()
        }
    );
    e.form_group();
    let r = refusal(e.port.commit(
        &e.root,
        GroupEvent::MessageQueued {
            from: e.root.clone(),
            to: ALL.into(),
            recipients: vec![],
            text: "hello?".into(),
        },
    ));
    assert_eq!(r, GroupRefusal::NobodyElse);
    let r = refusal(e.port.commit(
        &e.root,
        GroupEvent::TaskCreated {
            title: " ".into(),
            description: String::new(),
            depends_on: vec![],
            key: None,
            by: e.root.clone(),
        },
    ));
    assert!(matches!(r, GroupRefusal::Invalid(_)));
    let r = refusal(e.port.commit(
        &e.root,
        GroupEvent::MessageDelivered {
            message: 1,
            to: e.root.clone(),
        },
    ));
    assert!(matches!(r, GroupRefusal::Invalid(_)));
    e.assert_replay();
}

/// Exactly once: a commit retried with the id of one that was applied
/// returns that first result and appends nothing (a retry after a lost
/// reply, whichever store).
fn a_commit_retried_with_its_id_returns_the_first_result(b: Backend) {
    let Some(e) = Env::new(b, 1) else { return };
    e.form_group();
    let a = &e.children[0];
    let message = || {
        Commit::new(GroupEvent::MessageQueued {
            from: e.root.clone(),
            to: a.clone(),
            recipients: vec![],
            text: "once".into(),
        })
        .with_id("commit-1")
    };
    let first = e.port.submit(&e.root, message()).unwrap();
    assert!(first.fresh);
    let again = e.port.submit(&e.root, message()).unwrap();
    assert_eq!(again, first, "the first result, not a second message");
    assert_eq!(e.port.pending(&e.root, a).unwrap().len(), 1);
    let task = || {
        Commit::new(GroupEvent::TaskCreated {
            title: "build".into(),
            description: String::new(),
            depends_on: vec![],
            key: None,
            by: e.root.clone(),
        })
        .with_id("commit-2")
    };
    let t = e.port.submit(&e.root, task()).unwrap();
    assert_eq!(e.port.submit(&e.root, task()).unwrap(), t);
    assert_eq!(e.port.projection(&e.root).unwrap().tasks.len(), 1);
    // Another id is another commit.
    let other = e.port.submit(&e.root, task().with_id("commit-3")).unwrap();
    assert_ne!(other.seq, t.seq);
    e.assert_replay();
}

/// Fencing by epoch: requests carry the member's epoch; once its
/// membership ended (it left, was removed) or it rejoined, a request from
/// the old epoch is refused, saying why, and its leave leaves nothing.
fn a_stale_epoch_is_fenced_and_its_leave_leaves_nothing(b: Backend) {
    let Some(e) = Env::new(b, 1) else { return };
    e.form_group();
    let a = e.children[0].clone();
    let t = e.task("build", vec![]);
    let first = e.port.join(&e.root, &a, "worker0").unwrap();
    let claim = |epoch: u64| {
        Commit::new(GroupEvent::TaskClaimed {
            task: t,
            by: a.clone(),
            epoch: None,
        })
        .by_epoch(epoch)
    };
    assert!(e.port.submit(&e.root, claim(first.epoch)).unwrap().fresh);
    // The claim carries the holder's epoch.
    let claimed = e
        .port
        .group_log(&e.root, 0)
        .unwrap()
        .into_iter()
        .rev()
        .find_map(|ev| match ev.kind {
            EventKind::Group(GroupEvent::TaskClaimed { epoch, .. }) => Some(epoch),
            _ => None,
        });
    assert_eq!(claimed, Some(Some(first.epoch)));
    // Removed (as the supervisor or an expired lease does): its claim goes.
    e.port
        .commit(
            &e.root,
            GroupEvent::MemberLeft {
                member: a.clone(),
                reason: "lost its lease: no renewal".into(),
                forced_by: None,
            },
        )
        .unwrap();
    let done = |epoch: u64| {
        Commit::new(GroupEvent::TaskCompleted {
            task: t,
            by: a.clone(),
            ok: true,
            result: "late".into(),
        })
        .by_epoch(epoch)
    };
    let r = refusal(e.port.submit(&e.root, done(first.epoch)));
    assert!(
        matches!(&r, GroupRefusal::Fenced { current: None, reason: Some(why), .. } if why.contains("lost its lease")),
        "{r:?}"
    );
    assert!(r.to_string().contains("nothing was applied"), "{r}");
    // Rejoined: a new epoch; the old one stays fenced.
    let second = e.port.join(&e.root, &a, "worker0").unwrap();
    assert!(second.epoch > first.epoch);
    let message = Commit::new(GroupEvent::MessageQueued {
        from: a.clone(),
        to: e.root.clone(),
        recipients: vec![],
        text: "from the old membership".into(),
    })
    .by_epoch(first.epoch);
    let r = refusal(e.port.submit(&e.root, message));
    assert_eq!(
        r,
        GroupRefusal::Fenced {
            member: a.clone(),
            epoch: first.epoch,
            current: Some(second.epoch),
            reason: None
        }
    );
    // The old membership's leave does not end the new one.
    let stale_leave = Commit::new(GroupEvent::MemberLeft {
        member: a.clone(),
        reason: "stopped running".into(),
        forced_by: None,
    })
    .by_epoch(first.epoch);
    assert!(!e.port.submit(&e.root, stale_leave).unwrap().fresh);
    assert!(
        e.port.projection(&e.root).unwrap().members[&a].1,
        "still active"
    );
    assert!(e.port.submit(&e.root, claim(second.epoch)).unwrap().fresh);
    assert_eq!(
        e.port.projection(&e.root).unwrap().tasks[&t].status,
        TaskStatus::Claimed
    );
    check_log(&*e.port, &e.root);
    e.assert_replay();
}

/// The lead's escape hatch: a task released whoever holds it and a member
/// evicted, both recorded with who and why; the evicted member's requests
/// are refused from then on.
fn the_operator_releases_and_evicts_with_a_record(b: Backend) {
    let Some(e) = Env::new(b, 2) else { return };
    e.form_group();
    let (a, z) = (e.children[0].clone(), e.children[1].clone());
    let (t1, t2) = (e.task("one", vec![]), e.task("two", vec![]));
    let ma = e.port.join(&e.root, &a, "worker0").unwrap();
    e.port.claim(&e.root, t1, &a).unwrap();
    e.port.claim(&e.root, t2, &a).unwrap();
    e.port
        .commit(
            &e.root,
            GroupEvent::TaskReleased {
                task: t1,
                by: String::new(),
                reason: "stuck for an hour".into(),
                forced_by: Some("alice on host-a".into()),
            },
        )
        .unwrap();
    let recorded = e
        .port
        .group_log(&e.root, 0)
        .unwrap()
        .into_iter()
        .rev()
        .find_map(|ev| match ev.kind {
            EventKind::Group(GroupEvent::TaskReleased {
                task,
                by,
                reason,
                forced_by: Some(who),
            }) if task == t1 => Some((by, reason, who)),
            _ => None,
        });
    assert_eq!(
        recorded,
        Some((
            a.clone(),
            "stuck for an hour".into(),
            "alice on host-a".into()
        )),
        "the former holder, why and who"
    );
    let r = refusal(e.port.commit(
        &e.root,
        GroupEvent::TaskReleased {
            task: t1,
            by: String::new(),
            reason: "again".into(),
            forced_by: Some("alice on host-a".into()),
        },
    ));
    assert_eq!(
        r,
        GroupRefusal::NotClaimed {
            task: t1,
            status: TaskStatus::Open
        }
    );
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
    let snap = e.port.projection(&e.root).unwrap();
    assert_eq!(snap.tasks[&t2].status, TaskStatus::Open);
    assert!(!snap.members[&a].1);
    let released = e
        .port
        .group_log(&e.root, 0)
        .unwrap()
        .into_iter()
        .rev()
        .find_map(|ev| match ev.kind {
            EventKind::Group(GroupEvent::TaskReleased { task, reason, .. }) if task == t2 => {
                Some(reason)
            }
            _ => None,
        });
    assert_eq!(
        released.as_deref(),
        Some("its holder was evicted by alice on host-a: its host is down")
    );
    let late = Commit::new(GroupEvent::TaskClaimed {
        task: t2,
        by: a.clone(),
        epoch: None,
    })
    .by_epoch(ma.epoch);
    let r = refusal(e.port.submit(&e.root, late));
    assert!(
        r.to_string().contains("its host is down"),
        "the evicted member hears why: {r}"
    );
    // Evicting someone who is not active is refused, naming the members.
    let r = refusal(e.port.commit(
        &e.root,
        GroupEvent::MemberLeft {
            member: a.clone(),
            reason: "twice".into(),
            forced_by: Some("alice on host-a".into()),
        },
    ));
    assert!(matches!(r, GroupRefusal::NotMember { .. }), "{r:?}");
    assert!(e.port.claim(&e.root, t2, &z).unwrap().fresh);
    check_log(&*e.port, &e.root);
    e.assert_replay();
}

macro_rules! both {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $case() { super::$case(super::Backend::Sqlite) } )*
        }
        mod postgres {
            $( #[test] fn $case() { super::$case(super::Backend::Postgres) } )*
        }
    };
}

both!(
    claim_once_and_the_refusal_names_the_holder,
    dependencies_block_until_completed_and_only_the_holder_completes,
    task_keys_and_joins_are_idempotent,
    a_member_that_leaves_gives_its_claims_back,
    messages_arrive_fifo_exactly_once,
    nobody_else_and_empty_inputs_are_refused,
    a_commit_retried_with_its_id_returns_the_first_result,
    a_stale_epoch_is_fenced_and_its_leave_leaves_nothing,
    the_operator_releases_and_evicts_with_a_record,
);

/// PostgreSQL only: a delivery whose marker never committed (the connection
/// or the process went away after the local append) is completed by the
/// next delivery without a second copy in the recipient's session.
#[test]
fn a_delivery_retried_after_a_lost_marker_is_not_duplicated() {
    let Some(e) = Env::new(Backend::Postgres, 1) else {
        return;
    };
    e.form_group();
    let a = &e.children[0];
    let m = e
        .port
        .commit(
            &e.root,
            GroupEvent::MessageQueued {
                from: e.root.clone(),
                to: a.clone(),
                recipients: vec![],
                text: "once".into(),
            },
        )
        .unwrap()
        .seq;
    // The local half of a delivery, as if the marker's commit was lost.
    e.local
        .append(
            a,
            latch_kernel::EventKind::GroupMessageDelivered {
                message_seq: m,
                from: e.root.clone(),
                text: "once".into(),
            },
        )
        .unwrap();
    assert!(
        e.port.deliver(&e.root, a).unwrap().is_empty(),
        "no second copy"
    );
    assert!(
        e.port.pending(&e.root, a).unwrap().is_empty(),
        "the marker committed"
    );
    assert_eq!(received(&e.local, a), vec![m]);
    assert_eq!(check_log(&*e.port, &e.root), vec![(a.clone(), m)]);
    e.assert_replay();
}

/// PostgreSQL only: members record the host they joined from, and a
/// NOTIFY wakes a waiting recipient.
#[test]
fn members_carry_their_host_and_a_notify_wakes_the_recipient() {
    let Some(e) = Env::new(Backend::Postgres, 1) else {
        return;
    };
    e.form_group();
    let pg = e.pg.clone().unwrap();
    let hosts: Vec<String> = pg
        .members(&e.root)
        .unwrap()
        .into_iter()
        .map(|m| m.host)
        .collect();
    assert_eq!(hosts.len(), 2);
    assert!(hosts.iter().all(|h| h == pg.host()), "{hosts:?}");
    let a = e.children[0].clone();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !pg.listening() {
        assert!(std::time::Instant::now() < deadline, "LISTEN never came up");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let waiter = {
        let (pg, root, a) = (pg.clone(), e.root.clone(), a.clone());
        std::thread::spawn(move || {
            pg.wait_for_message(&root, &a, std::time::Duration::from_secs(20))
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    let t0 = std::time::Instant::now();
    e.port
        .commit(
            &e.root,
            GroupEvent::MessageQueued {
                from: e.root.clone(),
                to: a.clone(),
                recipients: vec![],
                text: "wake up".into(),
            },
        )
        .unwrap();
    assert!(waiter.join().unwrap().unwrap(), "woken by NOTIFY");
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(5),
        "woken promptly, not by the timeout"
    );
}

/// PostgreSQL only: a claim ends no wait, so it sends no NOTIFY (one per
/// claim would serialize contending claims on the notification queue); a
/// waiter that times out still reads the log and reports the claim, so the
/// views that refresh on a timer show it. A task created wakes at once.
#[test]
fn a_claim_wakes_nobody_but_is_seen_when_the_wait_ends() {
    use std::time::{Duration, Instant};
    let Some(e) = Env::new(Backend::Postgres, 1) else {
        return;
    };
    e.form_group();
    let pg = e.pg.clone().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pg.listening() {
        assert!(Instant::now() < deadline, "LISTEN never came up");
        std::thread::sleep(Duration::from_millis(10));
    }
    let task = e.task("CLAIM ME", vec![]);
    let watermark = last_seq(&e);
    let waiter = {
        let (pg, root) = (pg.clone(), e.root.clone());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let woke = pg.wait_for_log(&root, watermark, Duration::from_millis(1500), &|| false);
            (woke.unwrap(), t0.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    e.port.claim(&e.root, task, &e.children[0]).unwrap();
    let (woke, took) = waiter.join().unwrap();
    assert!(woke, "the claim is reported when the wait ends");
    assert!(
        took >= Duration::from_millis(1400),
        "a claim sent no wake-up, the wait ran to its end: {took:?}"
    );

    let watermark_after = last_seq(&e);
    let waiter = {
        let (pg, root) = (pg.clone(), e.root.clone());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let woke = pg.wait_for_log(&root, watermark_after, Duration::from_secs(20), &|| false);
            (woke.unwrap(), t0.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    e.task("WAKE UP", vec![]);
    let (woke, took) = waiter.join().unwrap();
    assert!(woke);
    assert!(
        took < Duration::from_secs(5),
        "a created task wakes: {took:?}"
    );
}

fn last_seq(e: &Env) -> u64 {
    e.port
        .group_log(&e.root, 0)
        .unwrap()
        .last()
        .map(|ev| ev.seq)
        .unwrap()
}
