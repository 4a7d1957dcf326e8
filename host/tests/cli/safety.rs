//! The binary's data-safety pins: no step cap by default, commands never
//! outlive Latch (a SIGKILLed one included), nothing a command starts — a
//! `setsid` child included — outlives the command or the session, resume
//! settles managed processes, `demo --store` uses its path and the
//! read-only commands never create a store.

use super::{at, latch, project, resume_last, runtime};
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn workspace_key(ws: &Path) -> String {
    ws.canonicalize().unwrap().display().to_string()
}

#[test]
fn an_eighty_step_run_finishes_without_a_step_cap() {
    let rt = runtime();
    let mut steps: Vec<ScriptedTurn> = (0..79)
        .map(|_| ScriptedTurn::tool_call("shell", r#"{"command":"cat big.txt"}"#))
        .collect();
    steps.push(ScriptedTurn::text("Read it 79 times."));
    let server = rt.block_on(FakeServer::start(Script::new(steps))).unwrap();
    let ws = project();
    std::fs::write(ws.path().join("big.txt"), "x".repeat(4096)).unwrap();
    // The issue's setting: a 32k window, where the engine rotates often.
    std::fs::create_dir_all(ws.path().join(".latch")).unwrap();
    std::fs::write(
        ws.path().join(".latch/config.toml"),
        "[models.local]\ncontext_window_tokens = 32000\n",
    )
    .unwrap();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "read big.txt 79 times"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(server.requests().len(), 80);

    // A cap is there for who asks for one.
    let capped = rt
        .block_on(FakeServer::start(Script::new((0..5).map(|_| {
            ScriptedTurn::tool_call("shell", r#"{"command":"cat big.txt"}"#)
        }))))
        .unwrap();
    let out = latch(ws.path())
        .args(at(&capped))
        .args(["--max-steps", "3", "run", "read big.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("after 3 model requests"), "{stderr}");
    assert_eq!(capped.requests().len(), 3);
}

/// Whether a process whose command line holds `marker` runs (a command
/// inside its own PID namespace knows only its namespace's pids, so the
/// test finds its processes by what they run).
fn running(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(marker))
            .unwrap_or(false)
    })
}

/// Wait up to `limit` until none of `markers` runs; those still running.
fn outliving(markers: &[String], limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let left: Vec<String> = markers.iter().filter(|m| running(m)).cloned().collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sleep lengths no other process uses, as markers.
fn markers(n: usize) -> Vec<String> {
    let base = 300 + std::process::id() % 500;
    (0..n).map(|i| format!("{base}.{i}4321")).collect()
}

#[test]
fn commands_die_with_a_killed_latch() {
    let rt = runtime();
    let m = markers(4);
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call(
                "shell",
                serde_json::json!({
                    "command": format!(
                        "setsid sleep {} </dev/null >/dev/null 2>&1 & sleep {} & echo up > bg.up; wait",
                        m[0], m[1]
                    ),
                    "background": true,
                })
                .to_string(),
            ),
            ScriptedTurn::tool_call(
                "shell",
                serde_json::json!({
                    "command": format!(
                        "setsid sleep {} </dev/null >/dev/null 2>&1 & echo up > fg.up; exec sleep {}",
                        m[2], m[3]
                    ),
                })
                .to_string(),
            ),
            ScriptedTurn::text("unreachable"),
        ])))
        .unwrap();
    let ws = project();
    let mut child = latch(ws.path())
        .args(at(&server))
        .args(["run", "start a server and wait"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !m.iter().all(|m| running(m)) {
        assert!(Instant::now() < deadline, "the commands never all ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: nothing of Latch runs after this
    child.wait().unwrap();
    let survivors = outliving(&m, Duration::from_secs(10));
    for marker in &survivors {
        // Do not leak them into the machine.
        let _ = std::process::Command::new("pkill")
            .args(["-9", "-f", marker])
            .status();
    }
    assert!(
        survivors.is_empty(),
        "commands (or their setsid children) outlived the killed Latch: {survivors:?}"
    );
}

#[test]
fn nothing_a_command_starts_outlives_it_or_the_session() {
    let rt = runtime();
    let m = markers(1);
    let server = rt
        .block_on(FakeServer::start(Script::new([
            // The issue's own command: a detached writer, then exit.
            ScriptedTurn::tool_call(
                "shell",
                r#"{"command":"setsid sh -c 'sleep 1; while :; do date >> f; sleep 0.2; done' </dev/null >/dev/null 2>&1 & echo started"}"#,
            ),
            // A managed process with a detached writer of its own.
            ScriptedTurn::tool_call(
                "shell",
                serde_json::json!({
                    "command": format!(
                        "setsid sh -c 'while :; do date >> g; sleep 0.2; done' </dev/null >/dev/null 2>&1 & exec sleep {}",
                        m[0]
                    ),
                    "background": true,
                })
                .to_string(),
            ),
            // While the managed process lives, its writer writes.
            ScriptedTurn::tool_call("shell", r#"{"command":"sleep 1.5; wc -c < g"}"#),
            ScriptedTurn::text("Done."),
        ])))
        .unwrap();
    let ws = project();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "start things"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The managed process ran, and its writer with it, until the session
    // ended.
    let third = server.requests()[3].body.to_string();
    assert!(!third.contains("No such file"), "{third}");
    let size = |name: &str| std::fs::metadata(ws.path().join(name)).map_or(0, |m| m.len());
    std::thread::sleep(Duration::from_millis(1_500));
    let (f, g) = (size("f"), size("g"));
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(size("f"), f, "f still grows after its command returned");
    assert_eq!(size("g"), g, "g still grows after the session ended");
    assert!(g > 0, "the managed process's writer never ran");
    assert!(
        outliving(&m, Duration::from_secs(5)).is_empty(),
        "the managed process outlived the session"
    );
}

#[test]
fn resume_records_the_processes_of_a_dead_latch_as_ended() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("Started."),
            ScriptedTurn::tool_call("process_kill", r#"{"id":"p999"}"#),
            ScriptedTurn::text("It was already gone."),
        ])))
        .unwrap();
    let ws = project();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "start"])
        .output()
        .unwrap();
    assert!(out.status.success());
    // What a Latch that died holding a managed process leaves in the log.
    let db = latch_kernel::default_store_path(ws.path());
    let store = Store::open(&db).unwrap();
    let session = store.list_sessions(&workspace_key(ws.path())).unwrap()[0]
        .id
        .clone();
    store
        .append(
            &session,
            EventKind::ProcessStarted {
                id: "p999".into(),
                command: "npm run dev".into(),
            },
        )
        .unwrap();
    assert_eq!(store.kernel(&session).unwrap().running_processes().len(), 1);
    drop(store);

    let mut resume = latch(ws.path());
    resume.args(at(&server));
    let out = resume_last(resume, b"stop the dev server\n/exit\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = Store::open(&db).unwrap();
    let kernel = store.kernel(&session).unwrap();
    assert!(
        kernel.running_processes().is_empty(),
        "certification is no longer blocked by a process nobody can observe"
    );
    assert!(kernel.process_ended("p999"));
    let events = store.events(&session, 0, u64::MAX, 10_000).unwrap();
    let seq_of = |pred: &dyn Fn(&EventKind) -> bool| {
        events
            .iter()
            .find(|e| pred(&e.kind))
            .map(|e| e.seq)
            .unwrap()
    };
    let settled = seq_of(&|k| matches!(k, EventKind::ProcessExited { id, .. } if id == "p999"));
    let asked = seq_of(
        &|k| matches!(k, EventKind::UserMessage { parts } if format!("{parts:?}").contains("dev server")),
    );
    assert!(
        settled < asked,
        "the resume itself recorded the dead process as ended"
    );
    let kill = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult(r) if r.name == "process_kill" => Some(r.clone()),
            _ => None,
        })
        .expect("process_kill ran");
    assert!(!kill.is_error, "{}", kill.content);
    assert!(kill.content.contains("already ended"), "{}", kill.content);
}

#[test]
fn demo_records_its_session_in_the_store_it_is_given() {
    let home = tempfile::tempdir().unwrap();
    let store_path = home.path().join("elsewhere").join("demo.db");
    let out = latch(home.path())
        .args(["demo", "--keep", "--store"])
        .arg(&store_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = Store::open_existing(&store_path).unwrap();
    assert!(store.total_event_count().unwrap() > 10);
    let kept = stdout
        .lines()
        .find_map(|l| l.strip_prefix("project kept at "))
        .expect("the project was kept")
        .trim()
        .to_string();
    assert!(
        !latch_kernel::default_store_path(Path::new(&kept)).exists(),
        "the demo wrote no store into its project"
    );
    let _ = std::fs::remove_dir_all(&kept);
}

#[test]
fn read_only_commands_never_create_a_store() {
    let ws = project();
    let db = latch_kernel::default_store_path(ws.path());
    // `latch sessions` says there are none and succeeds (see
    // `first_run::sessions_without_a_store_says_there_are_none`); the
    // rest refuse, naming the store and `--store`.
    let out = latch(ws.path()).arg("sessions").output().unwrap();
    assert!(out.status.success());
    assert!(!db.parent().unwrap().exists(), "sessions created .latch/");
    let commands: &[&[&str]] = &[
        &["context"],
        &["recall", "01abc", "anything"],
        &["compact"],
        &["history", "delete", "01abc"],
        &["resume", "--last"],
    ];
    for args in commands {
        let out = latch(ws.path())
            .args(*args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
        assert!(
            stderr.contains(&db.display().to_string()) && stderr.contains("--store"),
            "{args:?}: {stderr}"
        );
        assert!(!db.exists(), "{args:?} created {}", db.display());
        assert!(!db.parent().unwrap().exists(), "{args:?} created .latch/");
    }
    // `--store` naming a missing file is refused the same way.
    let missing = ws.path().join("nope.db");
    let out = latch(ws.path())
        .arg("--store")
        .arg(&missing)
        .arg("sessions")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope.db"));
    assert!(!missing.exists());
}
