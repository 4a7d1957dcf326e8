//! Approvals through the binary: the plain REPL asks on the terminal and
//! runs what the user allows; `latch run` in `untrusted` mode never blocks
//! on stdin (closed here) and denies with a reason the model sees; a
//! SIGKILL while a request waits resumes with the request denied as
//! interrupted and the next request protocol-valid.

use super::{at, latch, project, resume_last, runtime};
use latch_kernel::{DecidedBy, EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn};
use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn events(ws: &Path) -> Vec<EventKind> {
    let store = Store::open(latch_kernel::default_store_path(ws)).unwrap();
    let key = ws.canonicalize().unwrap().display().to_string();
    let mut all = Vec::new();
    for s in store.list_sessions(&key).unwrap() {
        all.extend(
            store
                .events(&s.id, 0, u64::MAX, 100_000)
                .unwrap()
                .into_iter()
                .map(|e| e.kind),
        );
    }
    all
}

fn touch_script() -> Script {
    Script::new([
        ScriptedTurn::tool_call("shell", r#"{"command":"echo hi > made.txt"}"#),
        ScriptedTurn::text("Made."),
    ])
    .with_responder(|_| ScriptStep::Turn(ScriptedTurn::text("Nothing else.")))
}

#[test]
fn the_repl_asks_and_runs_what_the_user_allows() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(touch_script())).unwrap();
    let ws = project();
    let mut child = latch(ws.path())
        .args(at(&server))
        .args(["--approval", "untrusted"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"make the file\ny\n/exit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("wants to run: echo hi > made.txt"),
        "{stdout}"
    );
    assert!(stdout.contains("[y]es / [n]o"), "{stdout}");
    assert!(stdout.contains("allowed by the user"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("made.txt")).unwrap(),
        "hi\n"
    );
}

#[test]
fn latch_run_in_untrusted_mode_never_blocks_on_stdin() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(touch_script())).unwrap();
    let ws = project();
    let started = Instant::now();
    let mut child = latch(ws.path())
        .args(at(&server))
        .args(["--approval", "untrusted", "run", "make the file"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("latch run blocked");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    assert!(!ws.path().join("made.txt").exists());
    let ev = events(ws.path());
    assert!(ev.iter().any(|e| matches!(
        e,
        EventKind::PermissionDenied {
            by: DecidedBy::NonInteractive,
            ..
        }
    )));
    let sent = serde_json::to_string(&server.requests().last().unwrap().body).unwrap();
    assert!(
        sent.contains("needs approval"),
        "the model saw the denial: {sent}"
    );
}

#[test]
fn a_sigkill_while_waiting_resumes_protocol_safe() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(touch_script())).unwrap();
    let ws = project();
    let mut child = latch(ws.path())
        .args(at(&server))
        .args(["--approval", "untrusted"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The task, but no answer: the request waits.
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"make the file\n")
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let db = latch_kernel::default_store_path(ws.path());
    loop {
        let waiting = db.exists()
            && events(ws.path())
                .iter()
                .any(|e| matches!(e, EventKind::PermissionRequested(_)));
        if waiting {
            break;
        }
        assert!(Instant::now() < deadline, "no permission request appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(!ws.path().join("made.txt").exists());
    let mut cmd = latch(ws.path());
    cmd.args(at(&server)).args(["--approval", "untrusted"]);
    let out = resume_last(cmd, b"go on\n/exit\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = events(ws.path());
    let denied = ev
        .iter()
        .position(|e| {
            matches!(
                e,
                EventKind::PermissionDenied {
                    by: DecidedBy::Interrupted,
                    ..
                }
            )
        })
        .expect("the waiting request is denied as interrupted");
    assert!(matches!(&ev[denied + 1], EventKind::ToolResult(t) if t.is_error));
    // The server (which checks tool-call protocol) accepted the next
    // request, and it carried the denial.
    let last = serde_json::to_string(&server.requests().last().unwrap().body).unwrap();
    assert!(last.contains("when Latch stopped"), "{last}");
    assert!(!ws.path().join("made.txt").exists());
}
