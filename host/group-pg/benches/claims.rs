//! Claim throughput of the group port with 1, 4 and 16 contending members,
//! on PostgreSQL and on SQLite in the same run; at 16 members on PostgreSQL
//! also with every member holding a lease its own heartbeat renews
//! (`postgres+leases`, TTL [`CLAIMS_TTL`]: a renewal every 2 s per
//! member), each batch paired with one on a lease-less group while those
//! heartbeats are paused; the latency of a delivery woken by NOTIFY; and the time from a
//! lease holder's SIGKILL until another member's claim of its task
//! succeeds. Each member has its own connection (its own `PgGroup`, its own
//! `Store` handle), so the race is the database's. Prints the ratios at the
//! end: PostgreSQL/SQLite per contention level, heartbeats on/off at 16
//! members, and the reclaim time against the TTL.
//!
//! PostgreSQL comes from `LATCH_PG_TEST_URL`; without it only SQLite runs.

use criterion::{Criterion, criterion_group};
use latch_engine_sdk::types::ModelProfile;
use latch_group_pg::PgGroup;
use latch_kernel::Store;
use latch_kernel::group::{Commit, GroupError, GroupEvent, GroupPort, GroupRefusal, Membership};
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// Per (members, backend): total time and tasks claimed.
type Means = BTreeMap<(usize, &'static str), (Duration, u64)>;

static MEAN: Mutex<Means> = Mutex::new(BTreeMap::new());

/// The same batches of claims at 16 members with heartbeats off and on,
/// interleaved: (off, on) total time.
static PAIRED: Mutex<(Duration, Duration)> = Mutex::new((Duration::ZERO, Duration::ZERO));

/// The lease TTL of the reclaim bench's holder.
const BENCH_TTL: Duration = Duration::from_secs(2);

/// The lease TTL of the members of the `postgres+leases` runs: a renewal
/// every 2 s per member (the default TTL, 15 s, renews every 5 s). Long
/// enough for a batch of claims without leases to run while these
/// members' heartbeats are paused.
const CLAIMS_TTL: Duration = Duration::from_secs(6);

/// The variable that turns this bench binary into a lease holder (the
/// reclaim bench's process to SIGKILL).
const HOLDER_ENV: &str = "LATCH_BENCH_LEASE_HOLDER";

struct Group {
    _dir: tempfile::TempDir,
    root: String,
    members: Vec<String>,
    ports: Vec<Arc<dyn GroupPort>>,
    /// The same handles as PostgreSQL handles (empty on SQLite).
    pg: Vec<Arc<PgGroup>>,
    /// The members' epochs and leases, when they hold leases.
    held: Vec<Membership>,
}

impl Group {
    /// Stop (or resume) every member's heartbeat.
    fn pause_heartbeats(&self, paused: bool) {
        for p in &self.pg {
            p.pause_heartbeat(paused);
        }
    }

    /// Panic unless every member's lease still holds: a batch measured
    /// with leases lost would time refusals, not claims.
    fn assert_leases_hold(&self) {
        for m in &self.held {
            if let Some(lost) = m.lease.as_ref().and_then(|w| w.lost()) {
                panic!("a member lost its lease during the bench ({lost}): the figure is void");
            }
        }
    }
}

fn group(pg: Option<&str>, n: usize) -> Group {
    group_with(pg, n, false)
}

/// `n` members on `pg` (SQLite when `None`); with `leases`, each joins with
/// a lease its own handle's heartbeat renews, and claims with its epoch.
fn group_with(pg: Option<&str>, n: usize, leases: bool) -> Group {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latch.db");
    let local = Arc::new(Store::open(&path).unwrap());
    let model = ModelProfile::with_defaults("openai-compatible", "m");
    let root = local.create_session("/ws", None, &model).unwrap().id;
    let members: Vec<String> = (0..n)
        .map(|_| local.create_session("/ws", Some(&root), &model).unwrap().id)
        .collect();
    let pgs: Vec<Arc<PgGroup>> = match pg {
        Some(url) => (0..n)
            .map(|_| {
                Arc::new(
                    PgGroup::connect(url, local.clone())
                        .unwrap()
                        .with_lease_ttl(CLAIMS_TTL),
                )
            })
            .collect(),
        None => Vec::new(),
    };
    let ports: Vec<Arc<dyn GroupPort>> = match pg {
        Some(_) => pgs
            .iter()
            .map(|p| Arc::clone(p) as Arc<dyn GroupPort>)
            .collect(),
        None => (0..n)
            .map(|_| -> Arc<dyn GroupPort> { Arc::new(Store::open(&path).unwrap()) })
            .collect(),
    };
    let p = &ports[0];
    p.commit(&root, GroupEvent::Created { lead: root.clone() })
        .unwrap();
    p.commit(
        &root,
        GroupEvent::MemberJoined {
            member: root.clone(),
            role: "lead".into(),
        },
    )
    .unwrap();
    let mut held = Vec::new();
    for (m, port) in members.iter().zip(&ports) {
        if leases {
            held.push(port.join(&root, m, "worker").unwrap());
        } else {
            p.commit(
                &root,
                GroupEvent::MemberJoined {
                    member: m.clone(),
                    role: "worker".into(),
                },
            )
            .unwrap();
        }
    }
    Group {
        _dir: dir,
        root,
        members,
        ports,
        pg: pgs,
        held,
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
            let epoch = g.held.get(w).map(|m| m.epoch);
            let (tasks, barrier) = (tasks.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut order: Vec<u64> = tasks.to_vec();
                let shift = w * order.len() / n;
                order.rotate_left(shift);
                barrier.wait();
                for t in order {
                    let claim = GroupEvent::TaskClaimed {
                        task: t,
                        by: me.clone(),
                        epoch: None,
                    };
                    let mut commit = Commit::new(claim);
                    commit.epoch = epoch;
                    let _ = port.submit(&root, commit);
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
        if n == 16
            && let Some(u) = url.as_deref()
        {
            backends.push(("postgres+leases", Some(u)));
        }
        for (name, pg) in backends {
            let leases = name == "postgres+leases";
            let fixture = group_with(pg, n, leases);
            // With leases, each batch of claims also runs, just before, on
            // a group of the same age whose members hold no leases, while
            // the leased members' heartbeats are paused: heartbeats on
            // against off, interleaved, so a busy machine slows both alike.
            let paired = leases.then(|| group_with(pg, n, false));
            g.bench_function(format!("{name}/{n}_members"), |b| {
                b.iter_custom(|iters| {
                    if let Some(off) = &paired {
                        fixture.pause_heartbeats(true);
                        let d = race(off, iters);
                        fixture.pause_heartbeats(false);
                        fixture.assert_leases_hold();
                        PAIRED.lock().unwrap().0 += d;
                    }
                    let d = race(&fixture, iters);
                    if paired.is_some() {
                        fixture.assert_leases_hold();
                        PAIRED.lock().unwrap().1 += d;
                    }
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

/// The reclaim times measured (ms).
static RECLAIMS: Mutex<Vec<f64>> = Mutex::new(Vec::new());

/// The lease holder's side: join `member` with a lease, claim `task`, say
/// `held` on stdout, then wait to be killed.
fn hold(job: &str) {
    let v: Vec<&str> = job.split('\t').collect();
    let (url, path, root, member, task) = (v[0], v[1], v[2], v[3], v[4].parse::<u64>().unwrap());
    let pg = PgGroup::connect(url, Arc::new(Store::open(path).unwrap()))
        .unwrap()
        .with_lease_ttl(BENCH_TTL);
    let m = pg.join(root, member, "holder").unwrap();
    let mut claim = Commit::new(GroupEvent::TaskClaimed {
        task,
        by: member.to_string(),
        epoch: None,
    });
    claim.epoch = Some(m.epoch);
    pg.submit(root, claim).unwrap();
    println!("held");
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// From a lease holder's SIGKILL until another member's claim of its task
/// succeeds (the claimant retrying every 20 ms, as a waiting member
/// would), per kill.
fn reclaim(c: &mut Criterion) {
    let Ok(url) = std::env::var("LATCH_PG_TEST_URL") else {
        eprintln!("reclaim skipped: LATCH_PG_TEST_URL is not set");
        return;
    };
    let g = group(Some(&url), 1);
    let claimant = g.members[0].clone();
    let path = g._dir.path().join("holder.db");
    let mut group = c.benchmark_group("reclaim_after_sigkill");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1));
    group.bench_function(format!("ttl_{}ms", BENCH_TTL.as_millis()), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                let task = g.ports[0]
                    .commit(
                        &g.root,
                        GroupEvent::TaskCreated {
                            title: format!("held {i}"),
                            description: String::new(),
                            depends_on: vec![],
                            key: None,
                            by: g.root.clone(),
                        },
                    )
                    .unwrap()
                    .seq;
                let holder = format!("holder-{}-{i}", std::process::id());
                let job = [
                    url.as_str(),
                    path.to_str().unwrap(),
                    &g.root,
                    &holder,
                    &task.to_string(),
                ]
                .join("\t");
                let mut child = std::process::Command::new(std::env::current_exe().unwrap())
                    .env(HOLDER_ENV, job)
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut line = String::new();
                use std::io::BufRead;
                std::io::BufReader::new(child.stdout.as_mut().unwrap())
                    .read_line(&mut line)
                    .unwrap();
                assert_eq!(line.trim(), "held");
                // Killed at a random point of its renewal period.
                std::thread::sleep(Duration::from_millis(137 * (i % 5)));
                child.kill().unwrap();
                let t0 = Instant::now();
                child.wait().unwrap();
                loop {
                    match g.ports[0].claim(&g.root, task, &claimant) {
                        Ok(c) if c.fresh => break,
                        Err(GroupError::Refused(GroupRefusal::Held { .. })) => {}
                        other => panic!("{other:?}"),
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let took = t0.elapsed();
                RECLAIMS.lock().unwrap().push(took.as_secs_f64() * 1000.0);
                total += took;
            }
            total
        })
    });
    group.finish();
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
    let per = |name| {
        m.get(&(16, name))
            .map(|(d, i): &(Duration, u64)| d.as_secs_f64() / (*i).max(1) as f64)
    };
    if let (Some(off), Some(on)) = (per("postgres"), per("postgres+leases")) {
        let (p_off, p_on) = *PAIRED.lock().unwrap();
        println!(
            "claims with 16 contending members on postgres: without leases {:.0}/s, with \
             leases {:.0}/s (separate runs); interleaved batches, heartbeats on (TTL {} ms) / \
             off: throughput ratio {:.2} (goal >= 0.9)",
            1.0 / off,
            1.0 / on,
            CLAIMS_TTL.as_millis(),
            p_off.as_secs_f64() / p_on.as_secs_f64().max(f64::MIN_POSITIVE)
        );
    }
    let r = RECLAIMS.lock().unwrap();
    if !r.is_empty() {
        let mut sorted = r.clone();
        sorted.sort_by(f64::total_cmp);
        let max = sorted[sorted.len() - 1];
        let median = sorted[sorted.len() / 2];
        let ttl = BENCH_TTL.as_secs_f64() * 1000.0;
        println!(
            "SIGKILL to reclaimed ({} kills): median {median:.0} ms, max {max:.0} ms with TTL \
             {ttl:.0} ms: max/TTL ratio {:.2} (goal <= 2.0)",
            r.len(),
            max / ttl
        );
    }
}

criterion_group!(benches, claims, delivery, reclaim, ratios);

fn main() {
    if let Ok(job) = std::env::var(HOLDER_ENV) {
        hold(&job);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
