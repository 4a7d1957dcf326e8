//! What the sandbox costs per command: the median wall time of spawning
//! `true` and waiting for it, unsandboxed against each mode (the ruleset is
//! built in the parent for every spawn, then namespaces, mounts and the
//! Landlock restriction happen in the child), printed as ratios — the
//! figure the README's sandbox section quotes.

use criterion::{Criterion, criterion_group, criterion_main};
use latch_sandbox::{Sandbox, SandboxMode, SandboxPolicy};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn spawn_true(sandbox: Option<&Sandbox>) {
    let mut cmd = Command::new("true");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(s) = sandbox {
        s.apply(&mut cmd).unwrap();
    }
    assert!(cmd.status().unwrap().success());
}

fn median_of(n: usize, mut f: impl FnMut()) -> Duration {
    let mut samples: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort();
    samples[n / 2]
}

fn bench(c: &mut Criterion) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    let mk = |mode, network| {
        Sandbox::new(
            SandboxPolicy {
                mode,
                network,
                ..SandboxPolicy::default()
            },
            ws.path(),
            "bench",
        )
        .unwrap()
    };
    let cases: Vec<(&str, Option<Sandbox>)> = vec![
        ("unsandboxed", None),
        ("full-access", Some(mk(SandboxMode::FullAccess, false))),
        ("read-only", Some(mk(SandboxMode::ReadOnly, false))),
        (
            "workspace-write",
            Some(mk(SandboxMode::WorkspaceWrite, false)),
        ),
        (
            "workspace-write+network",
            Some(mk(SandboxMode::WorkspaceWrite, true)),
        ),
    ];
    let mut group = c.benchmark_group("sandbox_true");
    for (name, sandbox) in &cases {
        group.bench_function(*name, |b| b.iter(|| spawn_true(sandbox.as_ref())));
    }
    group.finish();
    // Ratios from interleaved medians, so machine noise hits every case.
    let rounds = 5;
    let mut medians = vec![Vec::new(); cases.len()];
    for _ in 0..rounds {
        for (i, (_, sandbox)) in cases.iter().enumerate() {
            medians[i].push(median_of(40, || spawn_true(sandbox.as_ref())));
        }
    }
    let med = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let base = med(&mut medians[0].clone());
    println!("\nmedian of `true` per mode (ratio to unsandboxed):");
    for (i, (name, _)) in cases.iter().enumerate() {
        let m = med(&mut medians[i]);
        println!(
            "  {name:<24} {:>8.2} ms  ×{:.2}",
            m.as_secs_f64() * 1e3,
            m.as_secs_f64() / base.as_secs_f64()
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
