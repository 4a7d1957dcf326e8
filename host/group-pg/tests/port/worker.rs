//! The worker side of the process tests: this test binary, run again with
//! [`super::WORKER_ENV`] holding a JSON job, is one member on its own
//! "host" (its own local store file, its own host name): it races for
//! claims (`race`), works through the tasks and its messages until it is
//! done or killed (`script`), or — a member with a lease — holds a claim
//! until told to complete it (`hold`), takes a task as soon as the store
//! lets it (`take`), or leaves right after claiming (`leave`).

use super::WORKER_ENV;
use latch_group_pg::PgGroup;
use latch_kernel::Store;
use latch_kernel::group::{GroupError, GroupEvent, GroupPort, GroupRefusal, TaskStatus};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Start this binary as a worker on `job`.
pub fn spawn(job: &Value) -> Child {
    spawn_in(job, None)
}

/// Start this binary as a worker on `job`, inside the network namespace
/// `netns` when given (`ip netns exec`).
pub fn spawn_in(job: &Value, netns: Option<&str>) -> Child {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    cmd.args([
        "--exact",
        "worker::worker_entry",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(WORKER_ENV, job.to_string())
    .env(
        "LATCH_HOST_NAME",
        job["host"].as_str().unwrap_or("worker-host"),
    )
    .stdout(Stdio::null())
    .stderr(Stdio::inherit())
    .spawn()
    .unwrap()
}

/// One claim's outcome as a line: `<task> won`, `<task> held <holder> |
/// <message>`, or `<task> other <error>`.
pub fn outcome_line(task: u64, r: &Result<latch_kernel::group::Committed, GroupError>) -> String {
    match r {
        Ok(c) if c.fresh => format!("{task} won"),
        Ok(_) => format!("{task} other already mine"),
        Err(GroupError::Refused(GroupRefusal::Held { holder, .. })) => {
            format!("{task} held {holder} | {}", r.as_ref().unwrap_err())
        }
        Err(e) => format!("{task} other {e}"),
    }
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "no go signal at {}",
            path.display()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Work until no task is open or held by `me` and nothing waits for it:
/// finish what it holds (a claim that survived a kill), claim and complete
/// open tasks, deliver its messages, message the other member now and then.
/// Only tasks whose title starts with `only` are claimed.
pub fn script(port: &PgGroup, root: &str, me: &str, peer: &str, only: &str) {
    let mut step = 0u64;
    loop {
        step += 1;
        let snap = port.projection(root).unwrap();
        if let Some(t) = snap
            .tasks
            .values()
            .find(|t| t.status == TaskStatus::Claimed && t.owner.as_deref() == Some(me))
        {
            port.commit(
                root,
                GroupEvent::TaskCompleted {
                    task: t.id,
                    by: me.into(),
                    ok: true,
                    result: "done".into(),
                },
            )
            .unwrap();
            continue;
        }
        port.deliver(root, me).unwrap();
        if step.is_multiple_of(3) {
            port.commit(
                root,
                GroupEvent::MessageQueued {
                    from: me.into(),
                    to: peer.into(),
                    recipients: vec![],
                    text: format!("step {step} from {me}"),
                },
            )
            .unwrap();
        }
        let claimable = snap.tasks.values().find(|t| {
            t.status == TaskStatus::Open
                && t.title.starts_with(only)
                && t.depends_on
                    .iter()
                    .all(|d| snap.tasks[d].status == TaskStatus::Completed)
        });
        let open = snap
            .tasks
            .values()
            .any(|t| t.status == TaskStatus::Open && t.title.starts_with(only));
        match claimable {
            Some(t) => {
                let _ = port.claim(root, t.id, me);
            }
            None if open => std::thread::sleep(Duration::from_millis(5)),
            None => {
                if port.pending(root, me).unwrap().is_empty() {
                    return;
                }
            }
        }
    }
}

/// The worker's entry: a no-op unless [`WORKER_ENV`] is set.
#[test]
fn worker_entry() {
    let Ok(job) = std::env::var(WORKER_ENV) else {
        return;
    };
    let job: Value = serde_json::from_str(&job).unwrap();
    let s = |k: &str| job[k].as_str().unwrap().to_string();
    let local = Arc::new(Store::open(s("path")).unwrap());
    let port = PgGroup::connect(&s("url"), local).unwrap();
    if let Some(ms) = job["ttl_ms"].as_u64() {
        leased(port.with_lease_ttl(Duration::from_millis(ms)), &job);
        return;
    }
    match job["mode"].as_str().unwrap() {
        "race" => {
            let member = s("member");
            let tasks: Vec<u64> = serde_json::from_value(job["tasks"].clone()).unwrap();
            wait_for(Path::new(&s("go")));
            let lines: Vec<String> = tasks
                .iter()
                .map(|t| outcome_line(*t, &port.claim(&s("root"), *t, &member)))
                .collect();
            std::fs::write(s("out"), lines.join("\n")).unwrap();
        }
        "script" => {
            // A member joins from its own host, so the store records it.
            if let Some(role) = job["role"].as_str() {
                port.commit(
                    &s("root"),
                    GroupEvent::MemberJoined {
                        member: s("member"),
                        role: role.into(),
                    },
                )
                .unwrap();
            }
            let only = job["only"].as_str().unwrap_or_default();
            script(&port, &s("root"), &s("member"), &s("peer"), only);
            let netns = std::fs::read_link("/proc/self/ns/net")
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            std::fs::write(s("out"), format!("finished {netns}")).unwrap();
        }
        other => panic!("unknown worker mode {other}"),
    }
}

/// Milliseconds since the Unix epoch (one clock for every process of the
/// machine).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The lease-holding modes. Each writes `out` as it goes (`held <epoch>`,
/// `claimed <unix ms>`, `leaving`, `lost <reason>`, `late <outcome>`).
fn leased(port: PgGroup, job: &Value) {
    let s = |k: &str| job[k].as_str().unwrap().to_string();
    let (root, me, out) = (s("root"), s("member"), s("out"));
    let task = job["task"].as_u64().unwrap();
    let say = |line: String| {
        let mut all = std::fs::read_to_string(&out).unwrap_or_default();
        all.push_str(&line);
        all.push('\n');
        std::fs::write(&out, all).unwrap();
    };
    let m = port.join(&root, &me, &s("role")).unwrap();
    let lease = m.lease.clone().unwrap();
    let commit = |event: GroupEvent| {
        port.submit(
            &root,
            latch_kernel::group::Commit::new(event).by_epoch(m.epoch),
        )
    };
    let claim = || {
        commit(GroupEvent::TaskClaimed {
            task,
            by: me.clone(),
            epoch: None,
        })
    };
    match job["mode"].as_str().unwrap() {
        "hold" => {
            assert!(claim().unwrap().fresh);
            say(format!("held {}", m.epoch));
            let go = std::path::PathBuf::from(s("go"));
            while !go.exists() {
                std::thread::sleep(Duration::from_millis(20));
            }
            if let Some(why) = lease.lost() {
                say(format!("lost {why}"));
            }
            let late = commit(GroupEvent::TaskCompleted {
                task,
                by: me.clone(),
                ok: true,
                result: "done late".into(),
            });
            say(format!(
                "late {}",
                match late {
                    Ok(c) => format!("applied {}", c.seq),
                    Err(e) => format!("refused {e}"),
                }
            ));
        }
        "take" => {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                match claim() {
                    Ok(c) if c.fresh => break,
                    Ok(_) => panic!("held already"),
                    Err(GroupError::Refused(GroupRefusal::Held { .. })) => {}
                    Err(e) => eprintln!("take: {e}"),
                }
                assert!(Instant::now() < deadline, "never took #{task}");
                std::thread::sleep(Duration::from_millis(50));
            }
            say(format!("claimed {}", unix_ms()));
            commit(GroupEvent::TaskCompleted {
                task,
                by: me.clone(),
                ok: true,
                result: "done".into(),
            })
            .unwrap();
            say("completed".into());
        }
        "leave" => {
            assert!(claim().unwrap().fresh);
            say("leaving".into());
            let _ = port.submit(
                &root,
                latch_kernel::group::Commit::new(GroupEvent::MemberLeft {
                    member: me.clone(),
                    reason: "stopped running".into(),
                    forced_by: None,
                })
                .by_epoch(m.epoch),
            );
            say("left".into());
        }
        other => panic!("unknown leased mode {other}"),
    }
}
