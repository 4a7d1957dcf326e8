//! Custom slash commands end to end: Markdown files in the workspace's
//! `.latch/commands/` and `.claude/commands/` become `/name args`; Tab
//! completes them and `/help` lists them, in the TUI and in the line
//! interface (both in a tmux pseudo-terminal), and the prompt the model
//! receives over HTTP is the file's body with `$ARGUMENTS` replaced.

use super::project;
use super::tui::{Tmux, latch_line};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};

/// A workspace with `/review` (front matter, `$ARGUMENTS`) and a Claude
/// Code command `/explain`.
fn workspace_with_commands() -> tempfile::TempDir {
    let ws = project();
    let latch = ws.path().join(".latch/commands");
    let claude = ws.path().join(".claude/commands");
    std::fs::create_dir_all(&latch).unwrap();
    std::fs::create_dir_all(&claude).unwrap();
    std::fs::write(
        latch.join("review.md"),
        "---\ndescription: Review one file for bugs\nargument-hint: <file>\n---\n\
         Review $ARGUMENTS and list its bugs.\n",
    )
    .unwrap();
    std::fs::write(
        claude.join("explain.md"),
        "Explain the code in $ARGUMENTS.\n",
    )
    .unwrap();
    ws
}

/// True when a request the server received carries `text`.
fn sent(server: &FakeServer, text: &str) -> bool {
    server
        .requests()
        .iter()
        .any(|r| r.body.to_string().contains(text))
}

fn server() -> (tokio::runtime::Runtime, FakeServer) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let script = Script::new([
        ScriptedTurn::text("Reviewed: the add function subtracts."),
        ScriptedTurn::text("It adds two numbers."),
    ]);
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    (rt, server)
}

#[test]
fn tab_completes_and_runs_a_custom_command_in_the_tui() {
    let (_rt, server) = server();
    let ws = workspace_with_commands();
    let tmux = Tmux::new();
    tmux.start("tui", &latch_line(ws.path(), &server, &[]));
    tmux.wait_for("tui", &["message · /help", "ready"]);
    tmux.text("tui", "/help");
    tmux.keys("tui", &["Enter"]);
    tmux.wait_for(
        "tui",
        &[
            "/review <file>",
            "Review one file for bugs (custom)",
            "/explain",
        ],
    );
    tmux.keys("tui", &["Escape"]);
    tmux.wait_gone("tui", &["Review one file for bugs (custom)"]);
    tmux.text("tui", "/rev");
    tmux.keys("tui", &["Tab"]);
    tmux.text("tui", "src/math.sh");
    tmux.wait_for("tui", &["/review src/math.sh"]);
    tmux.keys("tui", &["Enter"]);
    tmux.wait_for(
        "tui",
        &[
            "Review src/math.sh and list its bugs.",
            "Reviewed: the add function subtracts.",
        ],
    );
    assert!(sent(&server, "Review src/math.sh and list its bugs."));
    tmux.text("tui", "/expl");
    tmux.keys("tui", &["Tab"]);
    tmux.text("tui", "test.sh");
    tmux.keys("tui", &["Enter"]);
    tmux.wait_for("tui", &["It adds two numbers."]);
    assert!(sent(&server, "Explain the code in test.sh."));
    tmux.text("tui", "/exit");
    tmux.keys("tui", &["Enter"]);
}

#[test]
fn tab_completes_and_runs_a_custom_command_in_the_line_interface() {
    let (_rt, server) = server();
    let ws = workspace_with_commands();
    let tmux = Tmux::new();
    tmux.start(
        "plain",
        &latch_line(ws.path(), &server, &["chat", "--plain"]),
    );
    tmux.wait_for("plain", &["/help /context"]);
    tmux.text("plain", "/help");
    tmux.keys("plain", &["Enter"]);
    tmux.wait_for(
        "plain",
        &["/review <file>", "Review one file for bugs (custom)"],
    );
    tmux.text("plain", "/rev");
    tmux.keys("plain", &["Tab"]);
    tmux.wait_for("plain", &["› /review"]);
    tmux.text("plain", "src/math.sh");
    tmux.wait_for("plain", &["› /review src/math.sh"]);
    tmux.keys("plain", &["Enter"]);
    tmux.wait_for("plain", &["Reviewed: the add function subtracts."]);
    assert!(sent(&server, "Review src/math.sh and list its bugs."));
    tmux.text("plain", "/exit");
    tmux.keys("plain", &["Enter"]);
}
