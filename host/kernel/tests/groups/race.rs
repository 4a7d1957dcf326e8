//! Claims raced by threads (each with its own connection) and by processes
//! on one SQLite file: every task ends with exactly one owner, every
//! refused claim names the holder, and the log replays to the projection.

use super::common::*;
use super::worker;
use latch_kernel::Store;
use latch_kernel::group::{GroupEvent, GroupPort, TaskStatus};
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

const TASKS: usize = 24;
const WORKERS: usize = 4;

/// A group of `WORKERS` children and `TASKS` open tasks.
fn setup() -> (Fixture, Vec<u64>) {
    let f = Fixture::new(WORKERS);
    f.form_group();
    let tasks = (0..TASKS)
        .map(|i| {
            f.store
                .commit(
                    &f.root,
                    GroupEvent::TaskCreated {
                        title: format!("task {i}"),
                        description: String::new(),
                        depends_on: vec![],
                        key: None,
                        by: f.root.clone(),
                    },
                )
                .unwrap()
                .seq
        })
        .collect();
    (f, tasks)
}

/// Worker `w`'s order: a rotation, so every worker starts on another task
/// and meets the others head-on.
fn order(tasks: &[u64], w: usize) -> Vec<u64> {
    let mut v = tasks.to_vec();
    v.rotate_left(w * TASKS / WORKERS);
    if w % 2 == 1 {
        v.reverse();
    }
    v
}

/// Check every worker's lines (`member`, lines) against the store.
fn verify(f: &Fixture, tasks: &[u64], results: &[(String, String)]) {
    let mut winners: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut refusals: Vec<(u64, String, String)> = Vec::new();
    for (member, text) in results {
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), TASKS, "{member} answered every claim");
        for line in lines {
            let mut parts = line.splitn(3, ' ');
            let task: u64 = parts.next().unwrap().parse().unwrap();
            match parts.next().unwrap() {
                "won" => winners.entry(task).or_default().push(member.clone()),
                "held" => {
                    let rest = parts.next().unwrap();
                    let (holder, message) = rest.split_once(" | ").unwrap();
                    assert!(
                        message.contains(holder),
                        "the refusal names the holder: {message}"
                    );
                    refusals.push((task, member.clone(), holder.to_string()));
                }
                other => panic!("{member}: unexpected outcome {other}: {line}"),
            }
        }
    }
    let projection = f.store.projection(&f.root).unwrap();
    for t in tasks {
        let w = winners.get(t).cloned().unwrap_or_default();
        assert_eq!(w.len(), 1, "task #{t} has exactly one owner, got {w:?}");
        let task = &projection.tasks[t];
        assert_eq!(task.status, TaskStatus::Claimed);
        assert_eq!(
            task.owner.as_ref(),
            Some(&w[0]),
            "the projection agrees on #{t}"
        );
    }
    assert_eq!(refusals.len(), TASKS * (WORKERS - 1));
    for (t, member, holder) in refusals {
        assert_eq!(
            holder, winners[&t][0],
            "{member}'s refusal of #{t} names the holder"
        );
    }
    check_log(&f.store, &f.root);
    assert_projection_is_replay(&f.path, &f.root);
}

#[test]
fn threads_racing_for_the_same_tasks_each_task_gets_one_owner() {
    let (f, tasks) = setup();
    let barrier = Arc::new(Barrier::new(WORKERS));
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (path, root, member) = (f.path.clone(), f.root.clone(), f.children[w].clone());
            let order = order(&tasks, w);
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                // A connection of its own: the race is decided by SQLite,
                // not by a mutex in this process.
                let store = Store::open(&path).unwrap();
                barrier.wait();
                let lines: Vec<String> = order
                    .iter()
                    .map(|t| worker::outcome_line(*t, &store.claim(&root, *t, &member)))
                    .collect();
                (member, lines.join("\n"))
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    verify(&f, &tasks, &results);
}

#[test]
fn processes_racing_for_the_same_tasks_each_task_gets_one_owner() {
    let (f, tasks) = setup();
    let dir = f.path.parent().unwrap().to_path_buf();
    let go = dir.join("go");
    let mut children = Vec::new();
    for w in 0..WORKERS {
        let out = dir.join(format!("out{w}"));
        let job = serde_json::json!({
            "mode": "race",
            "path": f.path,
            "root": f.root,
            "member": f.children[w],
            "tasks": order(&tasks, w),
            "go": go,
            "out": out,
        });
        children.push((worker::spawn(&job), f.children[w].clone(), out));
    }
    // Let every worker open the store, then start them at once.
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(&go, "go").unwrap();
    let mut results = Vec::new();
    for (mut child, member, out) in children {
        assert!(child.wait().unwrap().success(), "worker {member} failed");
        results.push((member, std::fs::read_to_string(out).unwrap()));
    }
    verify(&f, &tasks, &results);
}
