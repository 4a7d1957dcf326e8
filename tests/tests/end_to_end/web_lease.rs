//! A lost lease stops its holder (issue 36), over real HTTP against the
//! local wire-format server, with `latch` child processes: a `latch run`
//! stopped (SIGSTOP, as Ctrl-Z or a laptop's sleep does) past its lease
//! while its tool call runs is taken over by `latch resume`; continued
//! (SIGCONT), it writes nothing more and ends naming the new holder. And
//! `latch serve` holds a session only while it writes to it: a page left
//! open never locks the terminal out.

use super::{latch_command, project, provider_args, runtime, serve};
use latch_kernel::{EventKind, Store, StoredEvent};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn};
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Kills the child when a test ends early.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = signal(self.0.id(), "CONT");
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(pid: u32, name: &str) -> std::io::Result<std::process::ExitStatus> {
    std::process::Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .stderr(Stdio::null())
        .status()
}

fn store(ws: &Path) -> Store {
    try_store(ws).unwrap()
}

/// The store, or `None` while another process holds it busy.
fn try_store(ws: &Path) -> Option<Store> {
    Store::open_existing(latch_kernel::default_store_path(ws)).ok()
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn events(ws: &Path, id: &str) -> Vec<StoredEvent> {
    store(ws).events(id, 0, u64::MAX, 10_000).unwrap()
}

/// SIGSTOP a driver past its lease, take the session over, SIGCONT: the
/// first writes nothing, and says who drives the session now.
#[test]
fn a_driver_stopped_past_its_lease_writes_nothing_after_a_takeover() {
    let io = runtime();
    let ws = project();
    let provider = io
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call("shell", r#"{"command":"sleep 12; echo late > late.txt"}"#),
            ScriptedTurn::text("Done."),
        ])))
        .unwrap();
    let mut args = provider_args(ws.path(), &provider);
    args.extend(["run", "sleep, then write late.txt"].map(str::to_string));
    let first = Reaped(
        latch_command(ws.path(), &args)
            .env(latch_kernel::LEASE_TTL_ENV, "2000")
            .spawn()
            .unwrap(),
    );
    let first_pid = first.0.id();
    // Its tool call runs: the call is committed, its result not yet.
    let id = wait_for("the first driver's tool call", || {
        let store = Store::open_existing(latch_kernel::default_store_path(ws.path())).ok()?;
        let session = store
            .list_sessions(&ws.path().canonicalize().unwrap().display().to_string())
            .ok()?
            .into_iter()
            .next()?;
        let open = store
            .with_kernel(&session.id, |k| k.unfinished().open_calls.clone())
            .ok()?;
        (!open.is_empty()).then_some(session.id)
    });
    let running = Instant::now();
    assert_eq!(
        store(ws.path()).lease_holder(&id).unwrap().unwrap().pid,
        first_pid
    );
    // Stopped outside a write of its own (a process stopped inside one
    // holds SQLite's write lock until it runs again).
    wait_for("a stop outside a write", || {
        signal(first_pid, "STOP").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let writable = try_store(ws.path()).is_some_and(|s| {
            matches!(
                s.acquire_lease(&id, "probe", Duration::from_secs(1)),
                Err(latch_kernel::LeaseError::Held { .. })
            )
        });
        if !writable {
            signal(first_pid, "CONT").unwrap();
        }
        writable.then_some(())
    });
    let mut first = first;
    assert!(
        first.0.try_wait().unwrap().is_none(),
        "the first driver ended before it was stopped"
    );
    // Past its lease (2 s), another process takes the session over.
    std::thread::sleep(Duration::from_millis(3_000));
    let mut second = Reaped(
        latch_command(
            ws.path(),
            &["-C", &ws.path().display().to_string(), "resume", &id].map(str::to_string),
        )
        .stdin(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let second_pid = second.0.id();
    wait_for("the takeover", || {
        let holder = try_store(ws.path())?.lease_holder(&id).ok()??;
        (holder.pid == second_pid).then_some(())
    });
    // The resume repaired the stopped driver's open call.
    let repaired = wait_for("the repair", || {
        let events = try_store(ws.path())?
            .events(&id, 0, u64::MAX, 10_000)
            .ok()?;
        events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::ToolResult(_)))
            .then_some(events)
    });
    let before = repaired.len();
    signal(first_pid, "CONT").unwrap();
    let status = wait_for("the first driver to end", || first.0.try_wait().unwrap());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut first.0.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("lost the lease of session {id}"))
            && stderr.contains(&format!("pid {second_pid}"))
            && stderr.contains("`latch` (line interface)"),
        "the holder is told, naming the new holder: {stderr}"
    );
    // The first wrote nothing after the takeover, and sent nothing more.
    let after = events(ws.path(), &id);
    assert_eq!(
        after.len(),
        before,
        "the stopped driver wrote after the takeover: {:?}",
        &after[before..]
    );
    assert_eq!(
        provider.requests().len(),
        1,
        "no request after the takeover"
    );
    // Its tool call was stopped at once: the command never finished.
    std::thread::sleep(Duration::from_secs(13).saturating_sub(running.elapsed()));
    assert!(
        !ws.path().join("late.txt").exists(),
        "the lost holder's command ran on"
    );
    // The new holder goes on driving the session.
    second
        .0
        .stdin
        .take()
        .unwrap()
        .write_all(b"/exit\n")
        .unwrap();
    wait_for("the second driver to exit", || second.0.try_wait().unwrap());
    assert_eq!(store(ws.path()).lease_holder(&id).unwrap(), None);
}

/// A page that drove a session gives it back when its turn ends: the
/// terminal resumes the session while the server runs and the page stays
/// open, and the page's next message is refused while the terminal holds
/// it, then runs once the terminal has closed.
#[test]
fn the_server_holds_a_session_only_while_it_writes_to_it() {
    let rt = runtime();
    let io = runtime();
    let ws = project();
    let provider = io
        .block_on(FakeServer::start(Script::default().with_responder(|_| {
            ScriptStep::Turn(ScriptedTurn::text("Answered."))
        })))
        .unwrap();
    let served = serve(ws.path(), &provider, &[]);
    rt.block_on(async {
        let id = served.new_session().await;
        let (status, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                json!({"text": "first"}),
            )
            .await;
        assert_eq!(status, 202, "{r}");
        let store = served.store();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !store
            .events(&id, 0, u64::MAX, 1_000)
            .unwrap()
            .iter()
            .any(|e| matches!(e.kind, EventKind::RunFinished { .. }))
        {
            assert!(Instant::now() < deadline, "the page's turn never ended");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.lease_holder(&id).unwrap().is_some() {
            assert!(Instant::now() < deadline, "the server kept the lease");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // `/context` and recall read without taking it.
        let ctx = served.get(&format!("/sessions/{id}/context")).await;
        assert!(ctx.is_object(), "{ctx}");
        assert!(store.lease_holder(&id).unwrap().is_none());
        // The terminal drives the session while the page is open.
        let mut terminal = latch_command(
            ws.path(),
            &["-C", &ws.path().display().to_string(), "resume", &id].map(str::to_string),
        )
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
        let pid = terminal.id();
        let deadline = Instant::now() + Duration::from_secs(60);
        while store.lease_holder(&id).unwrap().map(|h| h.pid) != Some(pid) {
            assert!(
                Instant::now() < deadline,
                "the terminal was locked out: {:?}",
                terminal.try_wait()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (status, refused) = served
            .post(
                &format!("/sessions/{id}/messages"),
                json!({"text": "second"}),
            )
            .await;
        assert_eq!(status, 409, "{refused}");
        assert!(
            refused["error"]
                .as_str()
                .unwrap()
                .contains(&format!("pid {pid}")),
            "{refused}"
        );
        terminal
            .stdin
            .take()
            .unwrap()
            .write_all(b"/exit\n")
            .unwrap();
        let out = terminal.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (status, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                json!({"text": "third"}),
            )
            .await;
        assert_eq!(status, 202, "{r}");
    });
}
