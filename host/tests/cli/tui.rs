//! The terminal UI end to end: the real binary in a tmux pseudo-terminal
//! against the scripted provider. Type a task, see the streamed text and
//! the tool row, press Esc while the next request is in flight, see the
//! interrupted marker, leave, resume in a new process and see the same
//! transcript. Under `--approval untrusted` a command waits for the
//! permission modal, and `y` runs it.

use super::{latch, project};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A tmux server of this test's own (its own socket), killed on drop.
pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    pub(crate) fn new() -> Tmux {
        let found = Command::new("tmux").arg("-V").output();
        assert!(
            found.is_ok_and(|o| o.status.success()),
            "this test drives the TUI in tmux: install it (apt-get install -y tmux)"
        );
        // One server per test: tests of this binary run in parallel in one
        // process, and each kills its server when it ends.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Tmux {
            socket: format!("latch-tui-{}-{n}", std::process::id()),
        }
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    /// Start `cmd` (a shell command line) in a 120×40 window named `name`.
    pub(crate) fn start(&self, name: &str, cmd: &str) {
        let out = self.run(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "120",
            "-y",
            "40",
            cmd,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Keep the pane after the command exits, to read what it printed.
        self.run(&["set-option", "-w", "-t", name, "remain-on-exit", "on"]);
    }

    pub(crate) fn keys(&self, name: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", name];
        args.extend(keys);
        assert!(self.run(&args).status.success());
    }

    pub(crate) fn text(&self, name: &str, text: &str) {
        assert!(
            self.run(&["send-keys", "-t", name, "-l", text])
                .status
                .success()
        );
    }

    pub(crate) fn screen(&self, name: &str) -> Vec<String> {
        let out = self.run(&["capture-pane", "-p", "-t", name]);
        let mut rows: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        // tmux may leave out trailing blank rows.
        rows.resize(rows.len().max(40), String::new());
        rows
    }

    /// Wait until every needle is on the screen; the screen.
    pub(crate) fn wait_for(&self, name: &str, needles: &[&str]) -> Vec<String> {
        self.wait_until(name, &format!("{needles:?}"), |all| {
            needles.iter().all(|n| all.contains(n))
        })
    }

    /// Wait until none of the needles is on the screen (a popup closed:
    /// keys typed before it did could be read as part of its Esc).
    pub(crate) fn wait_gone(&self, name: &str, needles: &[&str]) -> Vec<String> {
        self.wait_until(name, &format!("none of {needles:?}"), |all| {
            !needles.iter().any(|n| all.contains(n))
        })
    }

    fn wait_until(&self, name: &str, what: &str, done: impl Fn(&str) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen(name);
            let all = screen.join("\n");
            if done(&all) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited 60 s for {what}; the screen:\n{all}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// True when the program in `name` has exited (its pane is dead or
    /// the session is gone).
    pub(crate) fn exited(&self, name: &str) -> bool {
        let out = self.run(&["display-message", "-p", "-t", name, "#{pane_dead}"]);
        !out.status.success() || String::from_utf8_lossy(&out.stdout).trim() == "1"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The transcript pane: the rows above the input box, left of the sidebar.
fn transcript(screen: &[String]) -> Vec<String> {
    screen[..35]
        .iter()
        .map(|r| {
            r.chars()
                .take(81)
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

/// The `latch` command line for `workspace` against `server`, with its
/// environment, as one shell line (`env` takes its `-u` options before the
/// assignments); `extra` goes before the provider flags.
pub(crate) fn latch_line(
    workspace: &std::path::Path,
    server: &FakeServer,
    extra: &[&str],
) -> String {
    let mut line = command_line(&latch(workspace), extra);
    line.push_str(&format!(
        " --provider openai-compatible --base-url '{}' --model local",
        server.openai_base_url()
    ));
    line
}

/// `cmd` with `extra` arguments as a shell command line for tmux: its
/// environment changes through `env`, every word quoted.
pub(crate) fn command_line(cmd: &Command, extra: &[&str]) -> String {
    let mut line = String::from("env");
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
    line.push_str(&format!(" '{}'", cmd.get_program().to_string_lossy()));
    for a in cmd.get_args().chain(extra.iter().map(std::ffi::OsStr::new)) {
        line.push_str(&format!(" '{}'", a.to_string_lossy()));
    }
    line
}

#[test]
fn type_stream_interrupt_and_resume_in_a_terminal() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The first answer streams text and a tool call; the second request
    // stalls (a slow model) until the user presses Esc.
    let script = Script::new([ScriptedTurn::text("Reading the helper first.")
        .with_tool_call("read_file", r#"{"path":"src/math.sh"}"#)])
    .with_responder(|_| {
        std::thread::sleep(Duration::from_secs(20));
        ScriptStep::Turn(ScriptedTurn::text("too late"))
    });
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let ws = project();
    let line = latch_line(ws.path(), &server, &[]);

    let tmux = Tmux::new();
    tmux.start("live", &line);
    tmux.wait_for("live", &["message · /help", "ready"]);
    tmux.text("live", "fix the add function");
    tmux.keys("live", &["Enter"]);
    // Streamed text and the tool row, then the next request in flight.
    tmux.wait_for(
        "live",
        &[
            "› fix the add function",
            "● Reading the helper first.",
            "✓ read_file src/math.sh",
            "waiting for the model",
        ],
    );
    let stalled = Instant::now();
    tmux.keys("live", &["Escape"]);
    let live = tmux.wait_for("live", &["! run interrupted: interrupted by the user"]);
    assert!(
        stalled.elapsed() < Duration::from_secs(10),
        "Esc must stop the turn at once, not when the model answers"
    );
    assert!(live[39].contains("interrupted"), "{}", live[39]);
    // Ctrl-C twice on the idle, empty prompt leaves.
    tmux.keys("live", &["C-c"]);
    tmux.wait_for("live", &["press Ctrl-C again to leave"]);
    tmux.keys("live", &["C-c"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !tmux.exited("live") {
        assert!(
            Instant::now() < deadline,
            "latch did not exit after Ctrl-C twice"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // A new process resumes the session and shows the same transcript.
    tmux.start("resumed", &format!("{line} resume --last"));
    let resumed = tmux.wait_for("resumed", &["! run interrupted: interrupted by the user"]);
    assert_eq!(
        transcript(&live),
        transcript(&resumed),
        "\nlive:\n{}\nresumed:\n{}",
        live.join("\n"),
        resumed.join("\n")
    );
    assert!(resumed[39].contains("interrupted"), "{}", resumed[39]);
    tmux.text("resumed", "/exit");
    tmux.keys("resumed", &["Enter"]);
    drop(tmux);

    // The log is protocol-safe: the run is closed, every call answered.
    let store = latch_kernel::Store::open_existing(ws.path().join(".latch/latch.db")).unwrap();
    let session = store
        .latest_root_session(
            &std::fs::canonicalize(ws.path())
                .unwrap()
                .display()
                .to_string(),
        )
        .unwrap()
        .unwrap();
    let open = store
        .with_kernel(&session.id, |k| k.unfinished().clone())
        .unwrap();
    assert!(!open.open_run && open.open_calls.is_empty(), "{open:?}");
}

#[test]
fn a_command_under_untrusted_approval_waits_for_the_modal() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let script = Script::new([
        ScriptedTurn::tool_call("shell", r#"{"command":"echo made > made.txt"}"#),
        ScriptedTurn::text("Made it."),
    ]);
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let ws = project();
    let line = latch_line(ws.path(), &server, &["--approval", "untrusted"]);
    let tmux = Tmux::new();
    tmux.start("ask", &line);
    tmux.wait_for("ask", &["message · /help", "ready"]);
    tmux.text("ask", "make the file");
    tmux.keys("ask", &["Enter"]);
    let asked = tmux.wait_for(
        "ask",
        &[
            "shell wants to run:",
            "echo made > made.txt",
            "y allow once",
            "waiting for permission: shell",
        ],
    );
    assert!(
        !ws.path().join("made.txt").exists(),
        "nothing runs before the answer:\n{}",
        asked.join("\n")
    );
    tmux.keys("ask", &["y"]);
    tmux.wait_for("ask", &["Made it.", "allowed `echo made > made.txt` once"]);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("made.txt")).unwrap(),
        "made\n"
    );
    tmux.text("ask", "/exit");
    tmux.keys("ask", &["Enter"]);
    drop(tmux);
}
