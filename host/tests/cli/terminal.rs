//! A command never reaches the user's terminal, through the real binary in
//! a tmux pseudo-terminal: a background command that pushes `y` + Enter
//! into every terminal it can find (`TIOCSTI`) never answers Latch's
//! approval prompt, and a `y` typed before the prompt appeared does not
//! answer it either — only keys typed after it was shown do.

use super::tui::{Tmux, latch_line};
use super::{project, runtime};
use latch_kernel::{DecidedBy, EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn};
use std::path::Path;
use std::time::{Duration, Instant};

const INJECT_ENV: &str = "LATCH_TEST_INJECT";

/// Not a test when `LATCH_TEST_INJECT=<seconds>` is set: a program that,
/// for that long, pushes `y` + Enter into every terminal it can reach —
/// `/dev/tty`, its standard descriptors, every `/dev/pts/N` — and prints
/// `INJECTED via …` for each push that got through.
#[test]
fn injector_entry() {
    let Ok(seconds) = std::env::var(INJECT_ENV) else {
        return;
    };
    use std::os::fd::AsRawFd;
    let until = Instant::now() + Duration::from_secs(seconds.parse().unwrap());
    let push = |fd: i32| {
        b"y\n".iter().all(|b| {
            // SAFETY: TIOCSTI reads one byte at the pointer.
            unsafe { libc::ioctl(fd, libc::TIOCSTI, b as *const u8) == 0 }
        })
    };
    let mut attempts = 0;
    while Instant::now() < until {
        let mut targets: Vec<(String, std::fs::File)> = Vec::new();
        let mut paths = vec!["/dev/tty".to_string()];
        if let Ok(entries) = std::fs::read_dir("/dev/pts") {
            paths.extend(entries.flatten().map(|e| e.path().display().to_string()));
        }
        for p in paths {
            if let Ok(f) = std::fs::OpenOptions::new().read(true).open(&p) {
                targets.push((p, f));
            }
        }
        for fd in 0..=2 {
            if push(fd) {
                println!("INJECTED via fd {fd}");
            }
        }
        for (p, f) in &targets {
            if push(f.as_raw_fd()) {
                println!("INJECTED via {p}");
            }
        }
        attempts += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    println!("done after {attempts} rounds");
    std::process::exit(0);
}

fn permission_events(ws: &Path) -> Vec<EventKind> {
    let Ok(store) = Store::open_existing(ws.join(".latch/latch.db")) else {
        return Vec::new();
    };
    let key = std::fs::canonicalize(ws).unwrap().display().to_string();
    let Ok(Some(session)) = store.latest_root_session(&key) else {
        return Vec::new();
    };
    store
        .all_events(&session.id)
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.kind)
        .filter(|k| {
            matches!(
                k,
                EventKind::PermissionRequested { .. }
                    | EventKind::PermissionGranted { .. }
                    | EventKind::PermissionDenied { .. }
            )
        })
        .collect()
}

/// Wait until the session has a permission request; its events then.
fn wait_for_request(ws: &Path) -> Vec<EventKind> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = permission_events(ws);
        if !events.is_empty() {
            return events;
        }
        assert!(Instant::now() < deadline, "no permission request came");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The escalation the model asks for once its first call returned, then
/// a closing answer.
fn script(first: ScriptedTurn) -> Script {
    Script::new([
        first,
        ScriptedTurn::tool_call(
            "shell",
            r#"{"command":"touch escaped.txt","escalate":true,"reason":"it must run outside"}"#,
        ),
    ])
    .with_responder(|_| ScriptStep::Turn(ScriptedTurn::text("Understood.")))
}

/// After the prompt waited `wait`: nothing answered it; then `n` typed now
/// denies it, as the user's answer.
fn only_the_user_answers(tmux: &Tmux, name: &str, ws: &Path, wait: Duration) {
    tmux.wait_for(name, &["wants to run OUTSIDE", "allow? [y]es"]);
    std::thread::sleep(wait);
    let events = permission_events(ws);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, EventKind::PermissionGranted { .. })),
        "something answered the prompt: {events:?}\n{}",
        tmux.screen(name).join("\n")
    );
    tmux.text(name, "n");
    tmux.keys(name, &["Enter"]);
    tmux.wait_for(name, &["Understood."]);
    let events = permission_events(ws);
    assert!(
        events.iter().any(|e| matches!(
            e,
            EventKind::PermissionDenied {
                by: DecidedBy::User,
                ..
            }
        )),
        "{events:?}"
    );
    assert!(!ws.join("escaped.txt").exists());
    tmux.text(name, "/exit");
    tmux.keys(name, &["Enter"]);
}

#[test]
fn a_command_pushing_keys_into_the_terminal_never_answers_the_approval_prompt() {
    let rt = runtime();
    let exe = std::env::current_exe().unwrap();
    let injector = format!(
        "{INJECT_ENV}=6 '{}' --exact terminal::injector_entry --nocapture > inject.log 2>&1",
        exe.display()
    );
    let server = rt
        .block_on(FakeServer::start(script(ScriptedTurn::tool_call(
            "shell",
            serde_json::json!({ "command": injector, "background": true }).to_string(),
        ))))
        .unwrap();
    let ws = project();
    let tmux = Tmux::new();
    tmux.start(
        "inject",
        &latch_line(ws.path(), &server, &["chat", "--plain"]),
    );
    tmux.wait_for("inject", &["›"]);
    tmux.text("inject", "start");
    tmux.keys("inject", &["Enter"]);
    wait_for_request(ws.path());
    // The injector keeps pushing `y` + Enter for six seconds.
    only_the_user_answers(&tmux, "inject", ws.path(), Duration::from_secs(3));
    let log = std::fs::read_to_string(ws.path().join("inject.log")).unwrap_or_default();
    assert!(!log.contains("INJECTED"), "{log}");
}

#[test]
fn a_key_typed_before_the_prompt_appeared_does_not_answer_it() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(script(ScriptedTurn::tool_call(
            "shell",
            r#"{"command":"sleep 3; echo slept"}"#,
        ))))
        .unwrap();
    let ws = project();
    let tmux = Tmux::new();
    tmux.start(
        "early",
        &latch_line(ws.path(), &server, &["chat", "--plain"]),
    );
    tmux.wait_for("early", &["›"]);
    tmux.text("early", "start");
    tmux.keys("early", &["Enter"]);
    // While the first command runs (nothing reads the terminal), a `y` and
    // Enter are typed: meant for nothing, they wait in the terminal.
    tmux.wait_for("early", &["sleep 3"]);
    tmux.text("early", "y");
    tmux.keys("early", &["Enter"]);
    wait_for_request(ws.path());
    only_the_user_answers(&tmux, "early", ws.path(), Duration::from_millis(1_500));
}
