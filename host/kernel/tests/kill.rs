//! A process appending events is killed with SIGKILL at a random point: no
//! committed event is lost, no batch is half-written, and the file opens.
//!
//! The test re-invokes its own executable with `LATCH_KILL_CHILD_DB` set; in
//! that mode `append_loop_child` appends forever and reports each commit.
//! Where the kill lands comes from a printed seed; `LATCH_KILL_SEED`
//! replays one (see `common/seeds.rs`).

mod common;
#[path = "common/seeds.rs"]
mod seeds;

use latch_kernel::{EventKind, Store};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const ENV: &str = "LATCH_KILL_CHILD_DB";
const BATCH: usize = 3;

/// The child side: does nothing unless started by the parent test.
#[test]
fn append_loop_child() {
    let Ok(path) = std::env::var(ENV) else { return };
    let session = std::env::var("LATCH_KILL_CHILD_SESSION").unwrap();
    let store = Store::open(&path).unwrap();
    for i in 0u64.. {
        let seqs = if i % 2 == 0 {
            vec![
                store
                    .append(&session, EventKind::user_text(format!("single {i}")))
                    .unwrap(),
            ]
        } else {
            store
                .append_batch(
                    &session,
                    (0..BATCH)
                        .map(|j| EventKind::assistant_text(format!("batch {i}.{j}")))
                        .collect(),
                )
                .unwrap()
        };
        // Only reported after the commit returned.
        println!(
            "COMMITTED {i} {}",
            seqs.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
    }
}

#[test]
fn sigkill_mid_append_loses_no_committed_event() {
    for seed in seeds::trial_seeds("sigkill_mid_append_loses_no_committed_event", 1) {
        trial(seed);
    }
}

/// Three kills of one appending process, where each lands drawn from `seed`.
fn trial(seed: u64) {
    let mut rng = seed;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kill.db");
    let session = {
        let store = Store::open(&path).unwrap();
        store
            .create_session("/ws", None, &common::model())
            .unwrap()
            .id
    };
    for round in 0..3 {
        let before = Store::open(&path).unwrap().event_count(&session).unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "append_loop_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENV, &path)
            .env("LATCH_KILL_CHILD_SESSION", &session)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stop_after = 20 + seeds::next(&mut rng) % 200;
        let mut reported: Vec<(u64, Vec<u64>)> = Vec::new();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while (reported.len() as u64) < stop_after {
            let line = lines.next().expect("child ended early").unwrap();
            if let Some(rest) = line.strip_prefix("COMMITTED ") {
                let (i, seqs) = rest.split_once(' ').unwrap();
                reported.push((
                    i.parse().unwrap(),
                    seqs.split(',').map(|s| s.parse().unwrap()).collect(),
                ));
            }
        }
        // Land the kill at a random point of the loop, often inside a transaction.
        std::thread::sleep(Duration::from_micros(seeds::next(&mut rng) % 2000));
        child.kill().unwrap(); // SIGKILL on Unix
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "seed {seed} round {round}: the child was killed"
        );

        let store = Store::open(&path).expect("the file opens after a kill");
        let events = store.events(&session, 0, u64::MAX, u32::MAX).unwrap();
        assert!(
            events.len() as u64 >= before + reported.len() as u64,
            "seed {seed} round {round}"
        );
        for (i, seqs) in &reported {
            for (j, seq) in seqs.iter().enumerate() {
                let e = store
                    .event(*seq)
                    .unwrap()
                    .unwrap_or_else(|| panic!("committed event {seq} lost"));
                let expected = if seqs.len() == 1 {
                    EventKind::user_text(format!("single {i}"))
                } else {
                    EventKind::assistant_text(format!("batch {i}.{j}"))
                };
                assert_eq!(e.kind, expected);
            }
        }
        // Batches are all-or-nothing.
        let batch_events = events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::AssistantMessage { .. }))
            .count();
        assert_eq!(
            batch_events % BATCH,
            0,
            "seed {seed} round {round}: a batch was half-written"
        );
        // The store still accepts appends and search still works.
        let seq = store
            .append(&session, EventKind::user_text("after the kill"))
            .unwrap();
        assert_eq!(store.recall(&session, "after kill", 1).unwrap()[0].seq, seq);
    }
}
