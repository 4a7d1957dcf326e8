//! SIGKILL at random points of a scripted group session (a worker process
//! whose members create tasks with dependencies, claim them, complete them,
//! message each other and take deliveries at their safe boundaries). After
//! each kill the store opens with a projection equal to the replay, no
//! claim was doubled, each delivery is in the recipient's session exactly
//! when its marker is in the root's; then the supervisor releases the dead
//! members' claims, the script finishes, and every queued message has been
//! delivered exactly once, FIFO per recipient, and every task completed
//! once. Each trial's kill point comes from a printed seed;
//! `LATCH_KILL_SEED` replays one (see `common/seeds.rs`).

use super::common::*;
use super::seeds;
use super::worker;
use latch_kernel::group::{ALL, GroupEvent, GroupPort, GroupState, TaskStatus};
use latch_kernel::{EventKind, Store};
use std::collections::BTreeMap;
use std::time::Duration;

/// Tasks of the scripted session.
const TASKS: usize = 24;

/// The scripted session: resumable, it reads where the log stands and
/// carries on (task creation is idempotent by key).
pub fn script(store: &Store, root: &str, members: &[String]) {
    store
        .commit(root, GroupEvent::Created { lead: root.into() })
        .unwrap();
    for (i, m) in members.iter().enumerate() {
        let role = if m == root {
            "lead".to_string()
        } else {
            format!("worker{i}")
        };
        join(store, root, m, &role);
    }
    let mut ids: Vec<u64> = Vec::new();
    for i in 0..TASKS {
        let depends_on = match i % 4 {
            3 => vec![ids[i - 1], ids[i - 2]],
            2 => vec![ids[i - 1]],
            _ => vec![],
        };
        let c = store
            .commit(
                root,
                GroupEvent::TaskCreated {
                    title: format!("step {i}"),
                    description: String::new(),
                    depends_on,
                    key: Some(format!("step-{i}")),
                    by: root.into(),
                },
            )
            .unwrap();
        ids.push(c.seq);
    }
    let mut state = GroupState::default();
    let mut round = 0;
    loop {
        round += 1;
        for (k, m) in members.iter().enumerate() {
            // The member's safe boundary.
            store.deliver(root, m).unwrap();
            for e in store.group_log(root, state.watermark()).unwrap() {
                state.apply(&e);
            }
            let held = state
                .tasks()
                .find(|t| t.status == TaskStatus::Claimed && t.owner.as_deref() == Some(m))
                .map(|t| t.id);
            if let Some(t) = held {
                store
                    .commit(
                        root,
                        GroupEvent::TaskCompleted {
                            task: t,
                            by: m.clone(),
                            ok: true,
                            result: format!("did #{t}"),
                        },
                    )
                    .unwrap();
                let to = if t % 3 == 0 {
                    ALL.to_string()
                } else {
                    members[(k + 1) % members.len()].clone()
                };
                store
                    .commit(
                        root,
                        GroupEvent::MessageQueued {
                            from: m.clone(),
                            to,
                            recipients: vec![],
                            text: format!("#{t} is done (round {round})"),
                        },
                    )
                    .unwrap();
                continue;
            }
            let ready = state.tasks().find(|t| {
                t.status == TaskStatus::Open
                    && t.depends_on.iter().all(|d| {
                        state
                            .task(*d)
                            .is_some_and(|d| d.status == TaskStatus::Completed)
                    })
            });
            if let Some(t) = ready.map(|t| t.id) {
                store.claim(root, t, m).unwrap();
            }
        }
        for e in store.group_log(root, state.watermark()).unwrap() {
            state.apply(&e);
        }
        if state.tasks().all(|t| t.status == TaskStatus::Completed) {
            break;
        }
        assert!(round < 10 * TASKS, "the script made no progress");
    }
    for m in members {
        store.deliver(root, m).unwrap();
    }
}

/// What resuming does for members no process runs any more: each leaves
/// (its claims released with the same commit) and rejoins.
fn release_the_dead(store: &Store, root: &str, members: &[String]) {
    let state = store.replay(root).unwrap();
    for m in members {
        let Some(member) = state.member(m) else {
            continue;
        };
        if member.active {
            store
                .commit(
                    root,
                    GroupEvent::MemberLeft {
                        member: m.clone(),
                        reason: "was interrupted".into(),
                    },
                )
                .unwrap();
        }
    }
}

/// The checks of a store whose writer may have died at any point.
fn check_after_kill(f: &Fixture, members: &[String]) {
    let store = Store::open(&f.path).unwrap();
    assert_projection_is_replay(&f.path, &f.root);
    let (delivered, _) = check_log(&store, &f.root);
    for m in members {
        let markers: Vec<u64> = delivered
            .iter()
            .filter(|(to, _)| to == m)
            .map(|(_, id)| *id)
            .collect();
        let got = received(&store, m);
        assert_eq!(
            got, markers,
            "{m}: deliveries and markers committed together"
        );
        assert!(got.windows(2).all(|w| w[0] < w[1]), "{m}: FIFO {got:?}");
    }
}

fn trial(seed: u64) {
    let f = Fixture::new(3);
    let mut members = vec![f.root.clone()];
    members.extend(f.children.iter().cloned());
    let out = f.path.with_file_name("finished");
    let job = serde_json::json!({
        "mode": "script",
        "path": f.path,
        "root": f.root,
        "members": members,
        "out": out,
    });
    let mut rng = Rng(seed);
    let delay = Duration::from_millis(30 + rng.below(1200));
    let mut child = worker::spawn(&job);
    std::thread::sleep(delay);
    let _ = child.kill(); // SIGKILL
    child.wait().unwrap();
    let finished_before_kill = out.exists();
    check_after_kill(&f, &members);
    let at_kill = f.store.group_log(&f.root, 0).unwrap().len();

    // Resume: the supervisor releases the claims of the dead members, and
    // the session carries on to the end.
    release_the_dead(&f.store, &f.root, &members);
    script(&f.store, &f.root, &members);
    check_after_kill(&f, &members);

    let (delivered, waiting) = check_log(&f.store, &f.root);
    assert!(waiting.is_empty(), "seed {seed}: undelivered {waiting:?}");
    let log = f.store.group_log(&f.root, 0).unwrap();
    let mut completions: BTreeMap<u64, usize> = BTreeMap::new();
    let mut queued = 0;
    for e in &log {
        match &e.kind {
            EventKind::Group(GroupEvent::TaskCompleted { task, .. }) => {
                *completions.entry(*task).or_default() += 1
            }
            EventKind::Group(GroupEvent::MessageQueued { recipients, .. }) => {
                queued += recipients.len()
            }
            _ => {}
        }
    }
    assert_eq!(
        completions.len(),
        TASKS,
        "seed {seed}: every task completed"
    );
    assert!(
        completions.values().all(|n| *n == 1),
        "seed {seed}: {completions:?}"
    );
    assert_eq!(
        delivered.len(),
        queued,
        "seed {seed}: every message delivered once"
    );
    eprintln!(
        "kill trial seed {seed}: killed after {delay:?} ({}) at {at_kill} of {} group events",
        if finished_before_kill {
            "after it finished"
        } else {
            "mid-session"
        },
        log.len()
    );
}

#[test]
fn sigkill_at_random_points_loses_and_duplicates_nothing() {
    for seed in seeds::trial_seeds("sigkill_at_random_points_loses_and_duplicates_nothing", 3) {
        trial(seed);
    }
}

#[test]
#[ignore = "local stress tier: 30 SIGKILL trials"]
fn sigkill_at_random_points_thirty_trials() {
    for seed in seeds::trial_seeds("sigkill_at_random_points_thirty_trials", 30) {
        trial(seed);
    }
}
