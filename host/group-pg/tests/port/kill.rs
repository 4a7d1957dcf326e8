//! Members SIGKILLed mid-claim and mid-delivery: two worker processes, each
//! on its own "host" (own local store), work through tasks and messages and
//! are killed at random points, then restarted until done. Nothing is lost
//! or duplicated: every task completed once, every message in its
//! recipient's local session exactly once with one marker in the log.

use super::common::*;
use super::worker;
use latch_engine_sdk::types::ModelProfile;
use latch_kernel::Store;
use latch_kernel::group::{GroupEvent, GroupPort, TaskStatus};
use std::time::{Duration, Instant};

const TASKS: usize = 200;
const MESSAGES: usize = 100;
const KILLS: usize = 8;

#[test]
fn members_killed_mid_claim_and_mid_delivery_lose_and_duplicate_nothing() {
    let Some(e) = Env::new(Backend::Postgres, 0) else {
        return;
    };
    let url = pg_url().unwrap();
    e.form_group();
    let dir = e._dir.path().to_path_buf();
    let model = ModelProfile::with_defaults("openai-compatible", "m");
    // Each member's session lives in its own host's store.
    let hosts: Vec<(std::path::PathBuf, String)> = (0..2)
        .map(|w| {
            let path = dir.join(format!("host{w}.db"));
            let id = Store::open(&path)
                .unwrap()
                .create_session("/ws", None, &model)
                .unwrap()
                .id;
            (path, id)
        })
        .collect();
    for (w, (_, id)) in hosts.iter().enumerate() {
        e.join(id, &format!("worker{w}"));
    }
    for i in 0..TASKS {
        e.task(&format!("task {i}"), vec![]);
    }
    for (_, id) in &hosts {
        for i in 0..MESSAGES {
            e.port
                .commit(
                    &e.root,
                    GroupEvent::MessageQueued {
                        from: e.root.clone(),
                        to: id.clone(),
                        recipients: vec![],
                        text: format!("note {i}"),
                    },
                )
                .unwrap();
        }
    }
    let job = |w: usize| {
        serde_json::json!({
            "mode": "script",
            "url": url,
            "path": hosts[w].0,
            "host": format!("host-{w}"),
            "root": e.root,
            "member": hosts[w].1,
            "peer": hosts[1 - w].1,
            "out": dir.join(format!("out{w}")),
        })
    };
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut mid_work = 0;
    for k in 0..KILLS {
        let w = k % 2;
        let out = dir.join(format!("out{w}"));
        let _ = std::fs::remove_file(&out);
        let mut child = worker::spawn(&job(w));
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Past connecting (tens of ms), into the work.
        std::thread::sleep(Duration::from_millis(40 + seed % 160));
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        if !out.exists() {
            mid_work += 1;
        }
    }
    assert!(
        mid_work >= KILLS / 2,
        "only {mid_work} of {KILLS} kills landed mid-work"
    );
    // Run both to the end, together.
    let mut running: Vec<_> = (0..2).map(|w| worker::spawn(&job(w))).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    for c in &mut running {
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                assert!(status.success());
                break;
            }
            assert!(Instant::now() < deadline, "workers did not finish");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // A member that finished early may have been messaged since: deliver
    // on its host as its next boundary would.
    for (path, id) in &hosts {
        let local = std::sync::Arc::new(Store::open(path).unwrap());
        latch_group_pg::PgGroup::connect(&url, local)
            .unwrap()
            .deliver(&e.root, id)
            .unwrap();
    }
    let delivered = check_log(&*e.port, &e.root);
    let snap = e.port.projection(&e.root).unwrap();
    assert!(
        snap.tasks
            .values()
            .all(|t| t.status == TaskStatus::Completed),
        "every task completed"
    );
    for (path, id) in &hosts {
        let mut got = received(&Store::open(path).unwrap(), id);
        let n = got.len();
        got.sort_unstable();
        got.dedup();
        assert_eq!(got.len(), n, "no message twice in {id}'s session");
        let mut marked: Vec<u64> = delivered
            .iter()
            .filter(|(to, _)| to == id)
            .map(|(_, m)| *m)
            .collect();
        marked.sort_unstable();
        assert_eq!(
            got, marked,
            "every delivery of {id} is in its session exactly once"
        );
        assert!(
            e.port.pending(&e.root, id).unwrap().is_empty(),
            "nothing left behind"
        );
    }
    e.assert_replay();
}
