//! 4 processes, each a member on its own "host" (own local store, own host
//! name), race for the same 24 tasks through PostgreSQL: every task ends
//! with exactly one owner and every refusal names that owner.

use super::common::*;
use super::worker;
use latch_kernel::group::TaskStatus;
use std::collections::BTreeMap;

const TASKS: usize = 24;
const WORKERS: usize = 4;

#[test]
fn four_processes_race_for_24_tasks_and_each_gets_one_owner() {
    let Some(e) = Env::new(Backend::Postgres, WORKERS) else {
        return;
    };
    let url = pg_url().unwrap();
    e.form_group();
    let tasks: Vec<u64> = (0..TASKS)
        .map(|i| e.task(&format!("task {i}"), vec![]))
        .collect();
    let dir = e._dir.path().to_path_buf();
    let go = dir.join("go");
    let mut children = Vec::new();
    for w in 0..WORKERS {
        let mut order = tasks.clone();
        order.rotate_left(w * TASKS / WORKERS);
        if w % 2 == 1 {
            order.reverse();
        }
        let out = dir.join(format!("out{w}"));
        let job = serde_json::json!({
            "mode": "race",
            "url": url,
            "path": dir.join(format!("host{w}.db")),
            "host": format!("host-{w}"),
            "root": e.root,
            "member": e.children[w],
            "tasks": order,
            "go": go,
            "out": out,
        });
        children.push((worker::spawn(&job), e.children[w].clone(), out));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::write(&go, "go").unwrap();
    let mut winners: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut refusals = Vec::new();
    for (mut child, member, out) in children {
        assert!(child.wait().unwrap().success(), "worker {member} failed");
        let text = std::fs::read_to_string(out).unwrap();
        assert_eq!(text.lines().count(), TASKS, "{member} answered every claim");
        for line in text.lines() {
            let mut parts = line.splitn(3, ' ');
            let task: u64 = parts.next().unwrap().parse().unwrap();
            match parts.next().unwrap() {
                "won" => winners.entry(task).or_default().push(member.clone()),
                "held" => {
                    let (holder, message) = parts.next().unwrap().split_once(" | ").unwrap();
                    assert!(
                        message.contains(holder),
                        "the refusal names the holder: {message}"
                    );
                    refusals.push((task, holder.to_string()));
                }
                other => panic!("{member}: unexpected outcome {other}: {line}"),
            }
        }
    }
    let snap = e.port.projection(&e.root).unwrap();
    for t in &tasks {
        let w = winners.get(t).cloned().unwrap_or_default();
        assert_eq!(w.len(), 1, "task #{t} has exactly one owner, got {w:?}");
        assert_eq!(snap.tasks[t].status, TaskStatus::Claimed);
        assert_eq!(snap.tasks[t].owner.as_ref(), Some(&w[0]));
    }
    assert_eq!(refusals.len(), TASKS * (WORKERS - 1));
    for (t, holder) in refusals {
        assert_eq!(holder, winners[&t][0]);
    }
    check_log(&*e.port, &e.root);
    e.assert_replay();
}
