//! The worker side of the process tests: this test binary, run again with
//! [`super::WORKER_ENV`] holding a JSON job, claims tasks (`race`) or runs
//! the scripted group session until it is killed (`script`).

use super::WORKER_ENV;
use latch_kernel::Store;
use latch_kernel::group::{GroupError, GroupPort, GroupRefusal};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Start this binary as a worker on `job`.
pub fn spawn(job: &Value) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "worker::worker_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(WORKER_ENV, job.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// One claim's outcome as a line: `<task> won`, `<task> held <holder>`, or
/// `<task> other <error>`.
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

/// The worker's entry: a no-op unless [`WORKER_ENV`] is set.
#[test]
fn worker_entry() {
    let Ok(job) = std::env::var(WORKER_ENV) else {
        return;
    };
    let job: Value = serde_json::from_str(&job).unwrap();
    let s = |k: &str| job[k].as_str().unwrap().to_string();
    let store = Store::open(s("path")).unwrap();
    match job["mode"].as_str().unwrap() {
        "race" => {
            let member = s("member");
            let tasks: Vec<u64> = serde_json::from_value(job["tasks"].clone()).unwrap();
            wait_for(Path::new(&s("go")));
            let lines: Vec<String> = tasks
                .iter()
                .map(|t| outcome_line(*t, &store.claim(&s("root"), *t, &member)))
                .collect();
            std::fs::write(s("out"), lines.join("\n")).unwrap();
        }
        "script" => {
            let members: Vec<String> = serde_json::from_value(job["members"].clone()).unwrap();
            super::kill::script(&store, &s("root"), &members);
            std::fs::write(s("out"), "finished").unwrap();
        }
        other => panic!("unknown worker mode {other}"),
    }
}
