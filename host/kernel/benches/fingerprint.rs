//! The workspace fingerprint at 10k files against `git status` on the same
//! repository: a warm fingerprint (hashes cached, nothing moved) and one
//! before/after comparison, each printed as a ratio to `git status`; and the
//! snapshot a possible mutation takes before its command (so its changes
//! can be checkpointed): warm (Latch's index current), and the whole
//! bookkeeping of a command that changes nothing (fingerprint, snapshot,
//! fingerprint), also as ratios to `git status`. Every git of Latch's runs
//! through its own door ([`latch_kernel::git`]): its own config, a cleared
//! environment and the confinement of a fresh namespace and Landlock, all
//! included in the figures.

use criterion::{Criterion, criterion_group, criterion_main};
use latch_kernel::fingerprint::Fingerprint;
use latch_kernel::git::{Git, Repository};
use latch_kernel::snapshot::Snapshot;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const FILES: usize = 10_000;

fn git(ws: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(ws)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    for i in 0..FILES {
        let sub = ws.join(format!("d{}", i % 100));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(
            sub.join(format!("f{i}.rs")),
            format!("pub fn f{i}() {{}}\n"),
        )
        .unwrap();
    }
    git(ws, &["init", "-q"]);
    git(ws, &["add", "-A"]);
    git(
        ws,
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@example.com",
            "commit",
            "-qm",
            "b",
        ],
    );
    dir
}

/// Bytes of the files under `dir`.
fn du(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        total += if p.is_dir() {
            du(&p)
        } else {
            e.metadata().map_or(0, |m| m.len())
        };
    }
    total
}

fn mean(mut f: impl FnMut(), n: u32) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed() / n
}

fn bench(c: &mut Criterion) {
    let dir = repo();
    let ws = dir.path();
    let status = || {
        Command::new("git")
            .args(["status", "--porcelain"])
            .current_dir(ws)
            .output()
            .unwrap();
    };
    let store = tempfile::tempdir().unwrap();
    let repo = Repository::discover(ws).unwrap();
    let git = Git::open(&repo, ws, store.path()).unwrap();
    let compare = || {
        let mut before = Fingerprint::take(&git).unwrap();
        let mut after = Fingerprint::take(&git).unwrap();
        assert!(before.changed_paths(&mut after).is_empty());
    };
    let snapshot = || drop(Snapshot::take(&git, &[]).unwrap());
    let cold_start = Instant::now();
    snapshot();
    let cold = cold_start.elapsed();
    let command = || {
        let mut before = Fingerprint::take(&git).unwrap();
        drop(Snapshot::take(&git, &[]).unwrap());
        let mut after = Fingerprint::take(&git).unwrap();
        assert!(before.changed_paths(&mut after).is_empty());
    };
    let mut g = c.benchmark_group("fingerprint_10k");
    g.sample_size(20);
    g.bench_function("git_status", |b| b.iter(status));
    g.bench_function("fingerprint_warm", |b| {
        b.iter(|| Fingerprint::take(&git).unwrap())
    });
    g.bench_function("before_after", |b| b.iter(compare));
    g.bench_function("snapshot_warm", |b| b.iter(snapshot));
    g.bench_function("command_bookkeeping", |b| b.iter(command));
    g.finish();
    let s = mean(status, 10);
    let f = mean(|| drop(Fingerprint::take(&git).unwrap()), 10);
    let ba = mean(compare, 10);
    println!(
        "10k files: git status {s:?}, fingerprint {f:?} ({:.2}x git status), \
         before+after {ba:?} ({:.2}x git status)",
        f.as_secs_f64() / s.as_secs_f64(),
        ba.as_secs_f64() / s.as_secs_f64()
    );
    let sw = mean(snapshot, 10);
    let cb = mean(command, 10);
    println!(
        "10k files: snapshot first {cold:?} ({:.2}x git status), warm {sw:?} ({:.2}x git status); \
         a command's bookkeeping (fingerprint, snapshot, fingerprint) {cb:?} ({:.2}x git status)",
        cold.as_secs_f64() / s.as_secs_f64(),
        sw.as_secs_f64() / s.as_secs_f64(),
        cb.as_secs_f64() / s.as_secs_f64()
    );
    println!(
        "10k committed files: the snapshot directory holds {} bytes (its index and trees; \
         the blobs are the repository's)",
        du(store.path())
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
