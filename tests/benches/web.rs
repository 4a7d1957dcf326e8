//! The web surface's costs, over real HTTP on loopback (criterion):
//!
//! * fan-out: committed events per second delivered to 50 SSE subscribers
//!   of one session (events committed by a command, each subscriber reading
//!   every one with its `id:`), against the same events to 1 subscriber;
//! * catch-up: the time for a client 10,000 events behind to receive every
//!   one of them after `Last-Event-ID`, against the one snapshot it gets
//!   instead when the limit is lower.
//!
//! The backend here commits plain events to the real store (no model, no
//! engine): what is measured is the web surface, not the agent.

use criterion::{Criterion, criterion_group, criterion_main};
use latch_engine_sdk::types::{ContextReport, Event, ModelProfile};
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_web::backend::Sink;
use latch_web::{Approvals, Backend, BackendError, Signal, WebConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOKEN: &str = "bench-token";

/// Commits `per_turn` events per "turn", reporting each.
struct Committer {
    store: Arc<Store>,
    workspace: String,
    per_turn: usize,
    approvals: Approvals,
}

fn unsupported() -> BackendError {
    BackendError::BadRequest("not part of the bench".into())
}

impl Backend for Committer {
    fn store(&self) -> &Arc<Store> {
        &self.store
    }
    fn workspace(&self) -> &str {
        &self.workspace
    }
    fn create_session(&self) -> Result<SessionRecord, BackendError> {
        Err(unsupported())
    }
    fn run_turn(&self, session: &str, text: &str, on: Sink<'_>) -> Result<(), BackendError> {
        for i in 0..self.per_turn {
            let seq = self
                .store
                .append(
                    session,
                    EventKind::NotificationDelivered {
                        source: "bench".into(),
                        text: format!("{text} {i}"),
                    },
                )
                .map_err(|e| BackendError::Failed(e.to_string()))?;
            on(Signal::Committed(seq));
        }
        Ok(())
    }
    fn resume(&self, _: &str, _: Sink<'_>) -> Result<usize, BackendError> {
        Err(unsupported())
    }
    fn compact(&self, _: &str, _: Sink<'_>) -> Result<usize, BackendError> {
        Err(unsupported())
    }
    fn context_report(&self, _: &str) -> Result<ContextReport, BackendError> {
        Err(unsupported())
    }
    fn recall(&self, _: &str, _: &str, _: u32) -> Result<Vec<Event>, BackendError> {
        Err(unsupported())
    }
    fn interrupt(&self, _: &str) -> Result<(), BackendError> {
        Err(unsupported())
    }
    fn approvals(&self) -> &Approvals {
        &self.approvals
    }
}

struct Bench {
    rt: tokio::runtime::Runtime,
    base: String,
    session: String,
    store: Arc<Store>,
    _dir: tempfile::TempDir,
}

fn start(per_turn: usize, snapshot_after: usize, prefill: usize) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("latch.db")).unwrap());
    let workspace = dir.path().display().to_string();
    let s = store
        .create_session(
            &workspace,
            None,
            &ModelProfile::with_defaults("openai", "bench"),
        )
        .unwrap();
    if prefill > 0 {
        let events = (0..prefill)
            .map(|i| EventKind::NotificationDelivered {
                source: "bench".into(),
                text: format!("prefilled {i}"),
            })
            .collect();
        store.append_batch(&s.id, events).unwrap();
    }
    let backend = Arc::new(Committer {
        store: store.clone(),
        workspace,
        per_turn,
        approvals: Approvals::new(),
    });
    let mut config = WebConfig::new(TOKEN);
    config.snapshot_after = snapshot_after;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(latch_web::serve(listener, backend, config));
    Bench {
        rt,
        base,
        session: s.id,
        store,
        _dir: dir,
    }
}

/// Read `stream` until `want` frames named `event: <name>` arrived.
async fn read_frames(mut resp: reqwest::Response, name: &str, want: usize) {
    let tag = format!("event: {name}\n");
    let mut buf = String::new();
    let mut got = 0;
    while got < want {
        let chunk = resp.chunk().await.unwrap().expect("the stream ended early");
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            if buf[..end + 1].contains(&tag) {
                got += 1;
            }
            buf.drain(..end + 2);
        }
    }
}

async fn subscribe(client: &reqwest::Client, b: &Bench, after: u64) -> reqwest::Response {
    client
        .get(format!("{}/api/sessions/{}/events", b.base, b.session))
        .bearer_auth(TOKEN)
        .header("Last-Event-ID", after.to_string())
        .send()
        .await
        .unwrap()
}

/// Time for `subscribers` clients to receive one turn of `per_turn` events.
fn fan_out(b: &Bench, subscribers: usize, per_turn: usize) -> Duration {
    b.rt.block_on(async {
        let client = reqwest::Client::new();
        let after = b.store.latest_seq(&b.session).unwrap();
        let mut streams = Vec::new();
        for _ in 0..subscribers {
            streams.push(subscribe(&client, b, after).await);
        }
        let readers: Vec<_> = streams
            .into_iter()
            .map(|s| tokio::spawn(read_frames(s, "event", per_turn)))
            .collect();
        let t = Instant::now();
        loop {
            let r = client
                .post(format!("{}/api/sessions/{}/messages", b.base, b.session))
                .bearer_auth(TOKEN)
                .json(&serde_json::json!({"text": "go"}))
                .send()
                .await
                .unwrap();
            match r.status().as_u16() {
                202 => break,
                // The previous turn is still releasing the session.
                409 => tokio::time::sleep(Duration::from_millis(1)).await,
                s => panic!("posting a message answered {s}"),
            }
        }
        for r in readers {
            r.await.unwrap();
        }
        t.elapsed()
    })
}

fn catch_up(b: &Bench, name: &str, want: usize) -> Duration {
    b.rt.block_on(async {
        let client = reqwest::Client::new();
        let t = Instant::now();
        let s = subscribe(&client, b, 1).await;
        read_frames(s, name, want).await;
        t.elapsed()
    })
}

fn bench(c: &mut Criterion) {
    const PER_TURN: usize = 200;
    let b = start(PER_TURN, usize::MAX, 0);
    let mut group = c.benchmark_group("web");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    let mut fifty = Vec::new();
    let mut one = Vec::new();
    group.bench_function("fan_out_200_events_to_50_subscribers", |bn| {
        bn.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let d = fan_out(&b, 50, PER_TURN);
                    fifty.push(d);
                    d
                })
                .sum()
        })
    });
    group.bench_function("fan_out_200_events_to_1_subscriber", |bn| {
        bn.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let d = fan_out(&b, 1, PER_TURN);
                    one.push(d);
                    d
                })
                .sum()
        })
    });

    const BEHIND: usize = 10_000;
    let far = start(0, usize::MAX, BEHIND);
    let snap = start(0, 1_000, BEHIND);
    let mut events = Vec::new();
    let mut snapshots = Vec::new();
    group.bench_function("catch_up_10k_events_behind", |bn| {
        bn.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    // The session's first event is seq 1: everything after it.
                    let d = catch_up(&far, "event", BEHIND - 1);
                    events.push(d);
                    d
                })
                .sum()
        })
    });
    group.bench_function("snapshot_10k_events_behind", |bn| {
        bn.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let d = catch_up(&snap, "snapshot", 1);
                    snapshots.push(d);
                    d
                })
                .sum()
        })
    });
    group.finish();

    let med = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (f50, f1) = (med(&mut fifty), med(&mut one));
    let (ev, sn) = (med(&mut events), med(&mut snapshots));
    println!(
        "fan-out: {:.0} events/s committed and delivered to 50 subscribers ({:.0} deliveries/s); \
         1 subscriber: {:.0} events/s; 50 subscribers cost {:.2}x one",
        PER_TURN as f64 / f50.as_secs_f64(),
        (PER_TURN * 50) as f64 / f50.as_secs_f64(),
        PER_TURN as f64 / f1.as_secs_f64(),
        f50.as_secs_f64() / f1.as_secs_f64(),
    );
    println!(
        "catch-up 10k behind: {:.1} ms for every event ({:.0} events/s); one snapshot instead: {:.1} ms ({:.2}x)",
        ev.as_secs_f64() * 1e3,
        (BEHIND - 1) as f64 / ev.as_secs_f64(),
        sn.as_secs_f64() * 1e3,
        sn.as_secs_f64() / ev.as_secs_f64(),
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
