//! Store and reducer benchmarks (criterion, small samples so the whole run
//! takes a few minutes):
//!
//! * append throughput: one transaction per batch of 100 vs one commit per event;
//! * recall latency at 1k / 10k / 100k events, with the 100k ÷ 1k ratio;
//! * reducer replay at 100k events (from the store, and in memory);
//! * database size per 100k events.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use latch_engine_sdk::types::{ModelProfile, Part, ToolCall, ToolResult};
use latch_kernel::{EventKind, KernelState, Outcome, StateOp, Store};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn model() -> ModelProfile {
    ModelProfile::with_defaults("anthropic", "bench")
}

/// A realistic mix of a coding session's events; `n` picks the variant.
fn event(n: u64) -> EventKind {
    match n % 10 {
        0 => EventKind::user_text(format!(
            "step {n}: please refactor the widget parser so that module {} handles errors",
            n % 97
        )),
        1 => EventKind::AssistantMessage {
            parts: vec![
                Part::Text(format!("I'll look at src/parser/m{}.rs first.", n % 50)),
                Part::ToolCall(ToolCall {
                    id: format!("call{n}"),
                    name: "read_file".into(),
                    arguments_json: format!("{{\"path\":\"src/parser/m{}.rs\"}}", n % 50),
                }),
            ],
        },
        2 | 3 => EventKind::ToolResult(ToolResult {
            call_id: format!("call{n}"),
            name: "read_file".into(),
            content: format!(
                "fn parse_{n}(input: &str) -> Result<Widget, ParseError> {{\n    let tokens = lex(input)?;\n    build(tokens).map_err(|e| ParseError::at({n}, e))\n}}\n{}",
                "// filler line of source code\n".repeat(8)
            ),
            is_error: false,
            images: vec![],
        }),
        4 => EventKind::ToolResult(ToolResult {
            call_id: format!("call{n}"),
            name: "shell".into(),
            content: if n % 100 == 4 {
                format!("error[E0425]: cannot find value `token_{n}` in this scope")
            } else {
                format!("compiled {} crates in {}.{}s", n % 40, n % 9, n % 7)
            },
            is_error: n % 100 == 4,
            images: vec![],
        }),
        5 => EventKind::assistant_text(format!("Done with step {n}; moving to the next module.")),
        6 => EventKind::Mutation {
            source: "edit_file".into(),
            paths: vec![format!("src/parser/m{}.rs", n % 50)],
            command: None,
            unchanged: false,
        },
        7 => EventKind::file_observed(
            format!("src/parser/m{}.rs", n % 50),
            format!("contents {n}").as_bytes(),
        ),
        8 => EventKind::StateUpdate(match n % 40 {
            8 => StateOp::AddConstraint {
                text: format!("constraint {}", n % 13),
            },
            18 => StateOp::RecordDecision {
                text: format!("decision {}", n % 17),
            },
            28 => StateOp::AddNote {
                text: format!("note {}", n % 101),
            },
            _ => StateOp::AddAction {
                text: format!("action {}", n % 23),
            },
        }),
        _ => EventKind::Validation {
            requirements: vec!["cargo test passes".into(), "clippy is clean".into()],
            command: "cargo test".into(),
            outcome: if n.is_multiple_of(3) {
                Outcome::Failed
            } else {
                Outcome::Passed
            },
            exit_code: Some(if n.is_multiple_of(3) { 101 } else { 0 }),
            output: format!("test result: {} passed", n % 300),
            generation: n / 10,
        },
    }
}

/// A store in a temp dir with one session holding `n` events.
fn filled(n: u64) -> (tempfile::TempDir, Store, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("bench.db")).unwrap();
    let id = store.create_session("/ws", None, &model()).unwrap().id;
    let mut next = 0;
    while next < n {
        let end = (next + 1000).min(n);
        store
            .append_batch(&id, (next..end).map(event).collect())
            .unwrap();
        next = end;
    }
    (dir, store, id)
}

fn median(mut f: impl FnMut(), runs: usize) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn append(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("append.db")).unwrap();
    let id = store.create_session("/ws", None, &model()).unwrap().id;
    let mut g = c.benchmark_group("append");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(100));
    let mut n = 0u64;
    g.bench_function("batched_100_per_transaction", |b| {
        b.iter(|| {
            let batch = (n..n + 100).map(event).collect();
            n += 100;
            store.append_batch(&id, batch).unwrap()
        })
    });
    g.bench_function("one_commit_per_event_x100", |b| {
        b.iter(|| {
            for _ in 0..100 {
                store.append(&id, event(n)).unwrap();
                n += 1;
            }
        })
    });
    g.finish();
}

fn recall(c: &mut Criterion) {
    let sizes = [1_000u64, 10_000, 100_000];
    let stores: Vec<_> = sizes.iter().map(|&n| filled(n)).collect();
    let mut g = c.benchmark_group("recall");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (n, (_, store, id)) in sizes.iter().zip(&stores) {
        for (name, query) in [("frequent", "widget parser"), ("rare", "E0425 token")] {
            g.bench_with_input(BenchmarkId::new(name, n), n, |b, _| {
                b.iter(|| black_box(store.recall(id, query, 20).unwrap()))
            });
        }
    }
    g.finish();
    for query in ["widget parser", "E0425 token"] {
        let t: Vec<Duration> = stores
            .iter()
            .map(|(_, s, id)| median(|| drop(black_box(s.recall(id, query, 20).unwrap())), 101))
            .collect();
        println!(
            "recall {query:?} (limit 20) medians: 1k {:?}, 10k {:?}, 100k {:?}; 100k/1k ratio = {:.2}",
            t[0],
            t[1],
            t[2],
            t[2].as_secs_f64() / t[0].as_secs_f64()
        );
    }

    // Database size per 100k events (WAL checkpointed into the main file).
    let (dir, store, id) = &stores[2];
    let path = store.path().to_path_buf();
    let count = store.event_count(id).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let bytes = std::fs::metadata(&path).unwrap().len();
    println!(
        "database size: {count} events -> {:.1} MiB ({:.0} bytes/event) in {}",
        bytes as f64 / (1024.0 * 1024.0),
        bytes as f64 / count as f64,
        dir.path().display()
    );
}

fn replay(c: &mut Criterion) {
    let (_dir, store, id) = filled(100_000);
    let events = store.events(&id, 0, u64::MAX, u32::MAX).unwrap();
    let mut g = c.benchmark_group("replay_100k");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("in_memory", |b| {
        b.iter(|| black_box(KernelState::replay(id.as_str(), &events)))
    });
    g.bench_function("from_store", |b| {
        b.iter(|| black_box(store.replay_kernel(&id).unwrap()))
    });
    g.finish();
    let warm = store.kernel(&id).unwrap();
    println!(
        "replay check: revision {}, generation {}, {} events",
        warm.revision(),
        warm.generation(),
        warm.own_event_count()
    );
}

criterion_group!(benches, append, recall, replay);
criterion_main!(benches);
