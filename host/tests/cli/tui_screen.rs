//! The terminal UI's screen in a tmux pseudo-terminal, on the real binary:
//! provider retries reach the status line and `.latch/latch.log`, never the
//! screen; the first screen says where you are; leaving prints the session
//! and how to resume it; a failed turn's error shows in full; `latch demo
//! --tui --instant` answers typing after the end. Each test keeps what the
//! screen showed under `target/tui-captures/` (the README's captures come
//! from there).

use super::tui::{Tmux, latch_line};
use super::{latch, project};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedFailure, ScriptedTurn};
use std::time::{Duration, Instant};

/// Keep `screen` as `target/tui-captures/<name>.txt`.
fn keep(name: &str, screen: &[String]) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("tui-captures");
    std::fs::create_dir_all(&dir).unwrap();
    let text: Vec<&str> = screen.iter().map(|r| r.trim_end()).collect();
    std::fs::write(dir.join(format!("{name}.txt")), text.join("\n").trim_end()).unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Wait up to `secs` for every needle (the first start of a fresh home
/// compiles the engine component, slow on a loaded machine).
fn wait_long(tmux: &Tmux, name: &str, needles: &[&str], secs: u64) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let screen = tmux.screen(name);
        let all = screen.join("\n");
        if needles.iter().all(|n| all.contains(n)) {
            return screen;
        }
        assert!(
            Instant::now() < deadline,
            "waited {secs} s for {needles:?}:\n{all}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_exit(tmux: &Tmux, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !tmux.exited(name) {
        assert!(Instant::now() < deadline, "latch did not leave");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn first_screen_retry_warning_and_goodbye() {
    let rt = runtime();
    let rate_limited = || {
        ScriptStep::Fail(ScriptedFailure::RateLimited {
            retry_after: Some("3".into()),
        })
    };
    let script = Script::new([
        rate_limited(),
        rate_limited(),
        ScriptStep::Turn(ScriptedTurn::text("Done after the retries.")),
    ]);
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let ws = project();
    let tmux = Tmux::new();
    tmux.start("s", &latch_line(ws.path(), &server, &[]));
    let first = wait_long(
        &tmux,
        "s",
        &[
            "workspace",
            "provider   openai-compatible",
            "model      local",
            "engine     builtin:continuity",
            "Type a task and press Enter",
        ],
        300,
    );
    let shown = ws.path().canonicalize().unwrap().display().to_string();
    assert!(first.join("\n").contains(&shown[..shown.len().min(60)]));
    keep("first-screen", &first);

    tmux.text("s", "say hello");
    tmux.keys("s", &["Enter"]);
    let retrying = tmux.wait_for("s", &["retrying in ", "attempt 2"]);
    keep("retrying", &retrying);
    let all = retrying.join("\n");
    assert!(
        !all.contains("WARN"),
        "no log line crosses the screen:\n{all}"
    );
    // The status line is the last row; the warning is there.
    let status = retrying
        .iter()
        .rev()
        .find(|r| !r.trim().is_empty())
        .unwrap();
    assert!(status.contains("retrying in "), "{all}");
    let done = tmux.wait_for("s", &["Done after the retries."]);
    assert!(!done.join("\n").contains("WARN"), "{}", done.join("\n"));
    let log = std::fs::read_to_string(ws.path().join(".latch/latch.log")).unwrap();
    assert!(
        log.contains("WARN") && log.contains("retrying") && log.contains("attempt=3"),
        "{log}"
    );

    // `/context` shows the provider's figures; its key line is in view.
    tmux.text("s", "/context");
    tmux.keys("s", &["Enter"]);
    let context = tmux.wait_for("s", &["provider prefix utilization", "Esc closes"]);
    keep("context", &context);
    tmux.keys("s", &["Escape"]);
    tmux.wait_gone("s", &["Esc closes"]);
    tmux.text("s", "/recall hello");
    tmux.keys("s", &["Enter"]);
    let recall = tmux.wait_for("s", &["/recall hello", "Esc closes"]);
    keep("recall", &recall);
    tmux.keys("s", &["Escape"]);
    tmux.wait_gone("s", &["Esc closes"]);

    tmux.text("s", "/exit");
    tmux.keys("s", &["Enter"]);
    wait_exit(&tmux, "s");
    // The pane and its scrollback: what leaving printed.
    let out = tmux.run(&["capture-pane", "-p", "-S", "-40", "-t", "s"]);
    let bye: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    keep("goodbye", &bye);
    let all = bye.join("\n");
    let store = latch_kernel::Store::open(latch_kernel::default_store_path(ws.path())).unwrap();
    let session = store.list_sessions(&shown).unwrap().remove(0).id;
    assert!(all.contains(&format!("Session {session} saved.")), "{all}");
    assert!(all.contains(&format!("resume {session}")), "{all}");

    // `/recall` showed what `latch recall` prints.
    let out = latch(ws.path())
        .args(["recall", &session, "hello"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    let popup = recall.join("\n");
    let mut compared = 0;
    for line in printed.lines().filter(|l| !l.trim().is_empty()) {
        let head: String = line.trim().chars().take(40).collect();
        assert!(
            popup.contains(&head),
            "{head:?} is not in the popup:\n{popup}"
        );
        compared += 1;
    }
    assert!(compared > 0, "latch recall printed nothing: {printed}");
}

#[test]
fn a_failed_turn_shows_its_whole_error() {
    let rt = runtime();
    let long = format!(
        "{} — the end of the reason",
        "the model is not available; ".repeat(8)
    );
    let script = Script::new([ScriptStep::Fail(ScriptedFailure::Reject {
        status: 404,
        message: long.clone(),
    })]);
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let ws = project();
    let tmux = Tmux::new();
    tmux.start("e", &latch_line(ws.path(), &server, &[]));
    wait_long(&tmux, "e", &["Type a task and press Enter"], 300);
    tmux.text("e", "anything");
    tmux.keys("e", &["Enter"]);
    let screen = tmux.wait_for("e", &["the end of the reason", "see why above"]);
    keep("error", &screen);
    tmux.text("e", "/exit");
    tmux.keys("e", &["Enter"]);
}

/// `latch demo --tui <extra>` as one shell line, its environment set.
fn demo_line(home: &std::path::Path, extra: &str) -> String {
    let cmd = latch(home);
    let mut line = String::from("env");
    // `env` takes its `-u` options before the assignments.
    for (k, v) in cmd.get_envs() {
        if v.is_none() {
            line.push_str(&format!(" -u {}", k.to_string_lossy()));
        }
    }
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            line.push_str(&format!(
                " {}='{}'",
                k.to_string_lossy(),
                v.to_string_lossy()
            ));
        }
    }
    line.push_str(&format!(
        " '{}' demo --tui {extra}",
        cmd.get_program().to_string_lossy()
    ));
    line
}

/// Without `--instant` the demo plays at a pace a person can follow: from
/// the task on screen to the certified end takes seconds, not a blink.
#[test]
fn the_demo_plays_at_a_readable_pace() {
    let home = tempfile::tempdir().unwrap();
    let tmux = Tmux::new();
    tmux.start("p", &demo_line(home.path(), ""));
    let first = wait_long(&tmux, "p", &["› `sh test.sh` fails."], 300);
    let shown = Instant::now();
    assert!(
        !first.join("\n").contains("completion certified"),
        "{}",
        first.join("\n")
    );
    let playing = wait_long(&tmux, "p", &["● First, confirm the failure."], 120);
    keep("demo-playing", &playing);
    wait_long(&tmux, "p", &["◆ completion certified", "q quits"], 120);
    assert!(
        shown.elapsed() >= Duration::from_secs(3),
        "the demo played in {:?}",
        shown.elapsed()
    );
    tmux.keys("p", &["q"]);
    wait_exit(&tmux, "p");
}

#[test]
fn the_demo_plays_and_explains_its_scripted_model() {
    let home = tempfile::tempdir().unwrap();
    let line = demo_line(home.path(), "--instant");
    let tmux = Tmux::new();
    tmux.start("d", &line);
    let done = wait_long(&tmux, "d", &["◆ completion certified", "q quits"], 300);
    keep("demo", &done);
    tmux.text("d", "now add a multiply function");
    tmux.keys("d", &["Enter"]);
    let told = tmux.wait_for("d", &["model is scripted"]);
    keep("demo-typed", &told);
    tmux.keys("d", &["C-u"]);
    tmux.keys("d", &["q"]);
    wait_exit(&tmux, "d");
}
