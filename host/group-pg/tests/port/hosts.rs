//! Two "hosts" complete the team scenario's group work together: the lead
//! (this process) puts two fixes and the proof that depends on both on the
//! list; two member processes, each with its own local store, its own host
//! name and (where the sandbox allows `ip netns`) its own network
//! namespace, reach the database through its socket, claim and complete
//! the fixes and message the lead; the lead, woken by NOTIFY, claims the
//! proof once the list unblocks it.

use super::common::*;
use super::net::Netns;
use super::worker;
use latch_engine_sdk::types::ModelProfile;
use latch_kernel::Store;
use latch_kernel::group::{GroupEvent, GroupPort, TaskStatus};
use std::time::{Duration, Instant};

#[test]
fn two_hosts_complete_the_team_scenario_together() {
    let Some(e) = Env::new(Backend::Postgres, 0) else {
        return;
    };
    let url = pg_url().unwrap();
    let pg = e.pg.clone().unwrap();
    e.form_group();
    let dir = e._dir.path().to_path_buf();
    let model = ModelProfile::with_defaults("openai-compatible", "m");
    let hosts: Vec<(std::path::PathBuf, String)> = (0..2)
        .map(|w| {
            let path = dir.join(format!("host{w}.db"));
            let id = Store::open(&path)
                .unwrap()
                .create_session("/ws", None, &model)
                .unwrap()
                .id;
            (path, id)
        })
        .collect();
    let add = e.task("fix add", vec![]);
    let mul = e.task("fix mul", vec![]);
    let proof = e.task("prove the suite", vec![add, mul]);

    let namespaces: Vec<Option<Netns>> = (0..2)
        .map(|w| Netns::create(format!("latch-pg-{}-{w}", std::process::id())))
        .collect();
    if namespaces.iter().any(Option::is_none) {
        eprintln!("note: `ip netns` is not allowed here; the hosts are separate processes only");
    }
    let mut children: Vec<_> = (0..2)
        .map(|w| {
            let job = serde_json::json!({
                "mode": "script",
                "url": url,
                "path": hosts[w].0,
                "host": format!("host-{}", ["a", "b"][w]),
                "root": e.root,
                "member": hosts[w].1,
                "peer": e.root,
                "only": "fix",
                "role": (["adder", "multiplier"][w]),
                "out": dir.join(format!("out{w}")),
            });
            worker::spawn_in(&job, namespaces[w].as_ref().map(|n| n.0.as_str()))
        })
        .collect();

    // The lead: woken by NOTIFY, takes its messages, proves when unblocked.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut messages = 0;
    loop {
        assert!(Instant::now() < deadline, "the team did not finish");
        messages += pg.deliver(&e.root, &e.root).unwrap().len();
        let snap = pg.projection(&e.root).unwrap();
        if snap.tasks[&proof].status == TaskStatus::Open
            && snap.tasks[&add].status == TaskStatus::Completed
            && snap.tasks[&mul].status == TaskStatus::Completed
        {
            assert!(pg.claim(&e.root, proof, &e.root).unwrap().fresh);
            pg.commit(
                &e.root,
                GroupEvent::TaskCompleted {
                    task: proof,
                    by: e.root.clone(),
                    ok: true,
                    result: "sh test.sh: all checks pass".into(),
                },
            )
            .unwrap();
        }
        let done = children.iter_mut().all(|c| c.try_wait().unwrap().is_some());
        if done && pg.projection(&e.root).unwrap().tasks[&proof].status == TaskStatus::Completed {
            break;
        }
        pg.wait_for_message(&e.root, &e.root, Duration::from_millis(200))
            .unwrap();
    }
    for c in &mut children {
        assert!(c.wait().unwrap().success());
    }
    messages += pg.deliver(&e.root, &e.root).unwrap().len();
    assert!(messages > 0, "the members messaged the lead");

    let snap = pg.projection(&e.root).unwrap();
    for t in [add, mul, proof] {
        assert_eq!(snap.tasks[&t].status, TaskStatus::Completed, "#{t}");
    }
    assert_eq!(snap.tasks[&proof].owner.as_ref(), Some(&e.root));
    let workers: Vec<&String> = hosts.iter().map(|(_, id)| id).collect();
    for t in [add, mul] {
        assert!(workers.contains(&snap.tasks[&t].owner.as_ref().unwrap()));
    }
    // Every member shows with its host.
    let members = pg.members(&e.root).unwrap();
    for (w, (_, id)) in hosts.iter().enumerate() {
        let m = members.iter().find(|m| &m.id == id).unwrap();
        assert_eq!(m.host, format!("host-{}", ["a", "b"][w]));
    }
    // Separate namespaces when allowed: each worker says where it ran.
    let seen: Vec<String> = (0..2)
        .map(|w| std::fs::read_to_string(dir.join(format!("out{w}"))).unwrap())
        .collect();
    if namespaces.iter().all(Option::is_some) {
        let mine = std::fs::read_link("/proc/self/ns/net")
            .unwrap()
            .display()
            .to_string();
        assert_ne!(seen[0], seen[1], "{seen:?}");
        assert!(
            seen.iter().all(|s| !s.contains(&mine)),
            "{seen:?} vs {mine}"
        );
    }
    check_log(&*e.port, &e.root);
    e.assert_replay();
}
