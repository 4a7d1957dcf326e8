//! Agent groups' costs on the real SQLite store, as figures and ratios that
//! stay meaningful on a noisy machine:
//!
//! * claim throughput: 4 workers (threads with connections of their own)
//!   racing for the same tasks, against one worker claiming them alone;
//! * delivery latency at a safe boundary: a member's boundary that delivers
//!   one waiting message, against a boundary with nothing waiting;
//! * projection rebuild at 10k group events (what every store open does),
//!   against replaying the same events through `GroupState`.

use criterion::{Criterion, criterion_group, criterion_main};
use latch::agent::{AgentError, Delegation};
use latch::supervisor::groups::{GroupMember, ensure_group};
use latch_engine_sdk::types::{ModelProfile, ToolCall};
use latch_kernel::group::{GroupEvent, GroupPort, GroupState};
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_provider::ToolSchema;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const WORKERS: usize = 4;
const TASKS: usize = 200;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// A store with a group of the root and `members` children.
fn group(dir: &Path, members: usize) -> (PathBuf, Arc<Store>, SessionRecord, Vec<String>) {
    let path = dir.join("latch.db");
    let store = Arc::new(Store::open(&path).unwrap());
    let model = ModelProfile::with_defaults("openai-compatible", "m");
    let root = store.create_session("/ws", None, &model).unwrap();
    ensure_group(&*store, &root.id).unwrap();
    let children: Vec<String> = (0..members)
        .map(|i| {
            let c = store
                .create_session("/ws", Some(&root.id), &model)
                .unwrap()
                .id;
            store
                .commit(
                    &root.id,
                    GroupEvent::MemberJoined {
                        member: c.clone(),
                        role: format!("worker{i}"),
                    },
                )
                .unwrap();
            c
        })
        .collect();
    (path, store, root, children)
}

/// `TASKS` open tasks, created in one batch.
fn tasks(store: &Store, root: &str) -> Vec<u64> {
    store
        .append_batch(
            root,
            (0..TASKS)
                .map(|i| {
                    EventKind::Group(GroupEvent::TaskCreated {
                        title: format!("task {i}"),
                        description: String::new(),
                        depends_on: vec![],
                        key: None,
                        by: root.to_string(),
                    })
                })
                .collect(),
        )
        .unwrap()
}

/// Time for `workers` threads to race through every task; each worker
/// tries every task (rotated start). Returns the elapsed time.
fn race(workers: usize) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let (path, store, root, children) = group(dir.path(), workers);
    let ids = tasks(&store, &root.id);
    let barrier = Arc::new(Barrier::new(workers + 1));
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let (path, root, me, barrier) = (
                path.clone(),
                root.id.clone(),
                children[w].clone(),
                barrier.clone(),
            );
            let mut order = ids.clone();
            order.rotate_left(w * TASKS / workers);
            std::thread::spawn(move || {
                let store = Store::open(&path).unwrap();
                barrier.wait();
                for t in order {
                    let _ = store.claim(&root, t, &me);
                }
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    started.elapsed()
}

/// A member with nothing of its own to delegate.
struct Nothing;

impl Delegation for Nothing {
    fn schemas(&self) -> Vec<ToolSchema> {
        Vec::new()
    }
    fn execute(&mut self, _: &SessionRecord, _: &ToolCall) -> Option<Vec<EventKind>> {
        None
    }
    fn at_safe_boundary(&mut self, _: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
        Ok(Vec::new())
    }
}

/// A store with `n` valid group events (tasks created, claimed, completed;
/// messages queued and delivered), written in large batches.
fn history(dir: &Path, n: usize) -> (Arc<Store>, String) {
    let (_, store, root, children) = group(dir, 3);
    let per = n / 5;
    let ids = store
        .append_batch(
            &root.id,
            (0..per)
                .map(|i| {
                    EventKind::Group(GroupEvent::TaskCreated {
                        title: format!("task {i}"),
                        description: "do it".into(),
                        depends_on: vec![],
                        key: Some(format!("k{i}")),
                        by: root.id.clone(),
                    })
                })
                .collect(),
        )
        .unwrap();
    let who = |i: usize| children[i % children.len()].clone();
    let batch = |f: &dyn Fn(usize, u64) -> GroupEvent| {
        store
            .append_batch(
                &root.id,
                ids.iter()
                    .enumerate()
                    .map(|(i, t)| EventKind::Group(f(i, *t)))
                    .collect(),
            )
            .unwrap()
    };
    batch(&|i, t| GroupEvent::TaskClaimed {
        task: t,
        by: who(i),
        epoch: None,
    });
    batch(&|i, t| GroupEvent::TaskCompleted {
        task: t,
        by: who(i),
        ok: true,
        result: "done".into(),
    });
    let messages = batch(&|i, t| GroupEvent::MessageQueued {
        from: who(i),
        to: who(i + 1),
        recipients: vec![who(i + 1)],
        text: format!("#{t} is done"),
    });
    store
        .append_batch(
            &root.id,
            messages
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    EventKind::Group(GroupEvent::MessageDelivered {
                        message: *m,
                        to: who(i + 1),
                    })
                })
                .collect(),
        )
        .unwrap();
    (store, root.id)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("groups");

    // Claim throughput under contention.
    let alone = median((0..5).map(|_| race(1)).collect());
    let contended = median((0..5).map(|_| race(WORKERS)).collect());
    println!(
        "groups: claims: {TASKS} tasks in {alone:?} by 1 worker ({:.0} claims/s) vs {contended:?} \
         by {WORKERS} racing workers ({:.0} won claims/s, {:.0} attempts/s); contended/alone \
         time = {:.2}x",
        TASKS as f64 / alone.as_secs_f64(),
        TASKS as f64 / contended.as_secs_f64(),
        (TASKS * WORKERS) as f64 / contended.as_secs_f64(),
        contended.as_secs_f64() / alone.as_secs_f64()
    );
    g.bench_function("claim_race_4_workers_200_tasks", |b| {
        b.iter(|| race(WORKERS))
    });

    // Delivery latency at a boundary.
    let dir = tempfile::tempdir().unwrap();
    let (_, store, root, children) = group(dir.path(), 2);
    let me = store.session(&children[0]).unwrap();
    let mut member = GroupMember::for_child(Box::new(Nothing), store.clone(), &root.id);
    member.at_safe_boundary(&me).unwrap();
    let send = |i: usize| {
        store
            .commit(
                &root.id,
                GroupEvent::MessageQueued {
                    from: children[1].clone(),
                    to: children[0].clone(),
                    recipients: vec![],
                    text: format!("note {i}"),
                },
            )
            .unwrap()
    };
    let n = 200;
    let idle = median(
        (0..n)
            .map(|_| {
                let t = Instant::now();
                member.at_safe_boundary(&me).unwrap();
                t.elapsed()
            })
            .collect(),
    );
    let mut queued = Vec::new();
    let delivering = median(
        (0..n)
            .map(|i| {
                let q = Instant::now();
                send(i);
                queued.push(q.elapsed());
                let t = Instant::now();
                member.at_safe_boundary(&me).unwrap();
                t.elapsed()
            })
            .collect(),
    );
    assert!(store.pending(&root.id, &children[0]).unwrap().is_empty());
    println!(
        "groups: delivery at a boundary: {delivering:?} to deliver one waiting message vs \
         {idle:?} with nothing waiting ({:.1}x); queueing it took {:?}",
        delivering.as_secs_f64() / idle.as_secs_f64(),
        median(queued)
    );
    g.bench_function("boundary_nothing_waiting", |b| {
        b.iter(|| member.at_safe_boundary(&me).unwrap())
    });

    // Projection rebuild at 10k group events.
    let dir = tempfile::tempdir().unwrap();
    let (store, root) = history(dir.path(), 10_000);
    let events = store.group_log(&root, 0).unwrap();
    assert!(events.len() >= 10_000, "{}", events.len());
    let rebuild = median(
        (0..7)
            .map(|_| {
                let t = Instant::now();
                store.rebuild_group_projection().unwrap();
                t.elapsed()
            })
            .collect(),
    );
    let replay = median(
        (0..7)
            .map(|_| {
                let t = Instant::now();
                GroupState::replay(&store.group_log(&root, 0).unwrap());
                t.elapsed()
            })
            .collect(),
    );
    let open = median(
        (0..7)
            .map(|_| {
                let t = Instant::now();
                drop(Store::open(store.path()).unwrap());
                t.elapsed()
            })
            .collect(),
    );
    assert_eq!(
        store.projection(&root).unwrap(),
        GroupState::replay(&events).snapshot()
    );
    println!(
        "groups: projection rebuild at {} group events: {rebuild:?} (store open with it: \
         {open:?}) vs GroupState::replay of the same log {replay:?} ({:.1}x)",
        events.len(),
        rebuild.as_secs_f64() / replay.as_secs_f64()
    );
    g.bench_function("projection_rebuild_10k", |b| {
        b.iter(|| store.rebuild_group_projection().unwrap())
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
