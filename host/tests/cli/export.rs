//! `/export` in the terminal UI (tmux) and the line interface: the running
//! session written into the workspace as the same Markdown `latch export`
//! prints (or its durable events as JSON for a `.json` path), and an
//! existing file refused and kept.

use super::{at, latch, project, resume_last, runtime};
use latch_kernel::{SessionRecord, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use std::path::Path;

/// A read, an edit and an answer: a tool call to fold and a diff to show.
fn read_and_fix() -> Script {
    Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"src/math.sh"}"#),
        ScriptedTurn::tool_call(
            "edit_file",
            r#"{"path":"src/math.sh","old_string":"$1 - $2","new_string":"$1 + $2"}"#,
        ),
        ScriptedTurn::text("Fixed the sign."),
    ])
}

fn latest(ws: &Path) -> SessionRecord {
    let key = ws.canonicalize().unwrap().display().to_string();
    Store::open_read_only(latch_kernel::default_store_path(ws))
        .unwrap()
        .latest_root_session(&key)
        .unwrap()
        .unwrap()
}

/// What `latch export SESSION` prints.
fn cli_export(ws: &Path, session: &str, format: &str) -> String {
    let out = latch(ws)
        .args(["export", session, "--format", format])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The Markdown export shows the task, the folded read and the edit's diff.
fn assert_readable(md: &str, session: &str) {
    assert!(
        md.starts_with(&format!("# Latch session {session}\n")),
        "{md}"
    );
    for part in [
        "fix the sign",
        "<details>\n<summary>read_file output",
        "```diff\n@@ src/math.sh @@\n-",
        "Fixed the sign.",
    ] {
        assert!(md.contains(part), "{part} missing:\n{md}");
    }
}

#[test]
fn slash_export_in_the_terminal_ui() {
    use super::tui::{Tmux, latch_line};
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(read_and_fix())).unwrap();
    let ws = project();
    let tmux = Tmux::new();
    tmux.start("ex", &latch_line(ws.path(), &server, &[]));
    tmux.wait_for("ex", &["ready"]);
    tmux.text("ex", "fix the sign");
    tmux.keys("ex", &["Enter"]);
    tmux.wait_for("ex", &["Fixed the sign."]);
    let session = latest(ws.path());
    let md_path = ws.path().join(format!("latch-{}.md", session.id));

    tmux.text("ex", "/export");
    tmux.keys("ex", &["Enter"]);
    tmux.wait_for("ex", &["exported the session to", "(Markdown)"]);
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert_readable(&md, &session.id);
    assert_eq!(md, cli_export(ws.path(), &session.id, "md"), "as the CLI");

    // A second export to the same file is refused; the file is kept.
    std::fs::write(&md_path, "my notes\n").unwrap();
    tmux.text("ex", "/export");
    tmux.keys("ex", &["Enter"]);
    tmux.wait_for("ex", &["/export failed", "exists and is kept"]);
    assert_eq!(std::fs::read_to_string(&md_path).unwrap(), "my notes\n");

    tmux.text("ex", "/export run.json");
    tmux.keys("ex", &["Enter"]);
    tmux.wait_for("ex", &["its durable events as JSON"]);
    let json = std::fs::read_to_string(ws.path().join("run.json")).unwrap();
    assert_eq!(json, cli_export(ws.path(), &session.id, "json"));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["format"], "latch-session");
    assert_eq!(value["session"]["id"], session.id.as_str());
}

#[test]
fn slash_export_in_the_line_interface() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(read_and_fix())).unwrap();
    let ws = project();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "fix the sign"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = latest(ws.path());
    let mut cmd = latch(ws.path());
    cmd.args(at(&server));
    let out = resume_last(cmd, b"/export\n/export\n/export missing/dir/x.md\n");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let md_path = ws
        .path()
        .canonicalize()
        .unwrap()
        .join(format!("latch-{}.md", session.id));
    assert!(
        stdout.contains(&format!("exported the session to {}", md_path.display())),
        "{stdout}\n{stderr}"
    );
    assert!(stderr.contains("exists and is kept"), "{stderr}");
    assert!(
        stderr.contains("cannot write") && stderr.contains("missing/dir/x.md"),
        "{stderr}"
    );
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert_readable(&md, &session.id);
}
