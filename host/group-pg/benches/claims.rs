//! Claim throughput of the group port with 1, 4 and 16 contending members,
//! on PostgreSQL and on SQLite in the same run, and the latency of a
//! delivery woken by NOTIFY. Each member has its own connection (its own
//! `PgGroup`, its own `Store` handle), so the race is the database's. Prints
//! the PostgreSQL/SQLite ratio per contention level at the end.
//!
//! PostgreSQL comes from `LATCH_PG_TEST_URL`; without it only SQLite runs.

use criterion::{Criterion, criterion_group, criterion_main};
use latch_engine_sdk::types::ModelProfile;
use latch_group_pg::PgGroup;
use latch_kernel::Store;
use latch_kernel::group::{GroupEvent, GroupPort};
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// Per (members, backend): total time and tasks claimed.
type Means = BTreeMap<(usize, &'static str), (Duration, u64)>;

static MEAN: Mutex<Means> = Mutex::new(BTreeMap::new());

struct Group {
    _dir: tempfile::TempDir,
    root: String,
    members: Vec<String>,
    ports: Vec<Arc<dyn GroupPort>>,
}

fn group(pg: Option<&str>, n: usize) -> Group {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latch.db");
    let local = Arc::new(Store::open(&path).unwrap());
    let model = ModelProfile::with_defaults("openai-compatible", "m");
    let root = local.create_session("/ws", None, &model).unwrap().id;
    let members: Vec<String> = (0..n)
        .map(|_| local.create_session("/ws", Some(&root), &model).unwrap().id)
        .collect();
    let ports: Vec<Arc<dyn GroupPort>> = (0..n)
        .map(|_| -> Arc<dyn GroupPort> {
            match pg {
                Some(url) => Arc::new(PgGroup::connect(url, local.clone()).unwrap()),
                None => Arc::new(Store::open(&path).unwrap()),
            }
        })
        .collect();
    let p = &ports[0];
    p.commit(&root, GroupEvent::Created { lead: root.clone() })
        .unwrap();
    for m in std::iter::once(&root).chain(&members) {
        p.commit(
            &root,
            GroupEvent::MemberJoined {
                member: m.clone(),
                role: "worker".into(),
            },
        )
        .unwrap();
    }
    Group {
        _dir: dir,
        root,
        members,
        ports,
    }
}

/// `iters` tasks claimed by `n` members racing over all of them.
fn race(g: &Group, iters: u64) -> Duration {
    let tasks: Vec<u64> = (0..iters)
        .map(|i| {
            g.ports[0]
                .commit(
                    &g.root,
                    GroupEvent::TaskCreated {
                        title: format!("t{i}"),
                        description: String::new(),
                        depends_on: vec![],
                        key: None,
                        by: g.root.clone(),
                    },
                )
                .unwrap()
                .seq
        })
        .collect();
    let tasks = Arc::new(tasks);
    let n = g.members.len();
    let barrier = Arc::new(Barrier::new(n + 1));
    let handles: Vec<_> = (0..n)
        .map(|w| {
            let (port, root, me) = (g.ports[w].clone(), g.root.clone(), g.members[w].clone());
            let (tasks, barrier) = (tasks.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut order: Vec<u64> = tasks.to_vec();
                let shift = w * order.len() / n;
                order.rotate_left(shift);
                barrier.wait();
                for t in order {
                    let _ = port.claim(&root, t, &me);
                }
            })
        })
        .collect();
    barrier.wait();
    let t0 = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    t0.elapsed()
}

fn claims(c: &mut Criterion) {
    let url = std::env::var("LATCH_PG_TEST_URL").ok();
    let mut g = c.benchmark_group("claim_throughput");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    for n in [1usize, 4, 16] {
        let mut backends: Vec<(&'static str, Option<&str>)> = vec![("sqlite", None)];
        if let Some(u) = url.as_deref() {
            backends.push(("postgres", Some(u)));
        }
        for (name, pg) in backends {
            let fixture = group(pg, n);
            g.bench_function(format!("{name}/{n}_members"), |b| {
                b.iter_custom(|iters| {
                    let d = race(&fixture, iters);
                    let mut m = MEAN.lock().unwrap();
                    let e = m.entry((n, name)).or_default();
                    e.0 += d;
                    e.1 += iters;
                    d
                })
            });
        }
    }
    g.finish();
}

fn delivery(c: &mut Criterion) {
    let Ok(url) = std::env::var("LATCH_PG_TEST_URL") else {
        eprintln!("delivery_latency skipped: LATCH_PG_TEST_URL is not set");
        return;
    };
    let g = group(Some(&url), 2);
    let (sender, receiver) = (g.ports[0].clone(), g.members[1].clone());
    let pg = Arc::new(
        PgGroup::connect(&url, {
            // The receiver's own connection and LISTEN, on the same local store.
            let path = g._dir.path().join("latch.db");
            Arc::new(Store::open(path).unwrap())
        })
        .unwrap(),
    );
    while !pg.listening() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let (tx, rx) = std::sync::mpsc::channel::<Instant>();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = {
        let (pg, root, me, stop) = (pg.clone(), g.root.clone(), receiver.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if pg
                    .wait_for_message(&root, &me, Duration::from_millis(200))
                    .unwrap()
                    && !pg.deliver(&root, &me).unwrap().is_empty()
                {
                    tx.send(Instant::now()).unwrap();
                }
            }
        })
    };
    let from = g.members[0].clone();
    c.bench_function("delivery_latency/notify", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                sender
                    .commit(
                        &g.root,
                        GroupEvent::MessageQueued {
                            from: from.clone(),
                            to: receiver.clone(),
                            recipients: vec![],
                            text: "ping".into(),
                        },
                    )
                    .unwrap();
                total += rx.recv().unwrap() - t0;
            }
            total
        })
    });
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    worker.join().unwrap();
}

fn ratios(_: &mut Criterion) {
    let m = MEAN.lock().unwrap();
    for n in [1usize, 4, 16] {
        let per = |name| {
            m.get(&(n, name))
                .map(|(d, i)| d.as_secs_f64() / (*i).max(1) as f64)
        };
        if let (Some(s), Some(p)) = (per("sqlite"), per("postgres")) {
            println!(
                "claims with {n:>2} contending members: sqlite {:.0}/s, postgres {:.0}/s, \
                 postgres/sqlite throughput ratio {:.2}",
                1.0 / s,
                1.0 / p,
                s / p
            );
        }
    }
}

criterion_group!(benches, claims, delivery, ratios);
criterion_main!(benches);
