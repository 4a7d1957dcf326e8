//! Trust covers what it lets run, through the binary: a trusted MCP
//! server's script rewritten after the yes is asked about again (its hash
//! is part of the grant); Latch's config directory is hidden from commands
//! wherever `LATCH_CONFIG_DIR` puts it; and a session store shipped in a
//! repository cannot send the user's API key to the endpoint it recorded.

use super::tui::Tmux;
use super::{at, latch, project, runtime};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn};
use std::path::Path;
use std::process::{Command, Stdio};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A stdio "server" that only records that it ran, as `version`.
fn server_script(ws: &Path, version: &str) {
    write(
        &ws.join("tools/server.js"),
        &format!("require('fs').appendFileSync('ran.txt', '{version}\\n');\n"),
    );
}

#[test]
fn a_trusted_servers_script_rewritten_later_is_asked_about_again() {
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path().canonicalize().unwrap();
    write(
        &w.join(".latch/config.toml"),
        "[mcp.servers.local]\ncommand = \"node\"\nargs = [\"tools/server.js\"]\nstartup_timeout_ms = 3000\n",
    );
    server_script(&w, "v1");
    let out = latch(&w).arg("trust").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("tools/server.js"),
        "the grant names the script: {stdout}"
    );
    let ran = || std::fs::read_to_string(w.join("ran.txt")).unwrap_or_default();
    latch(&w).args(["mcp", "list"]).output().unwrap();
    assert_eq!(ran(), "v1\n", "trusted, it starts");
    // A command (or a `git pull`) rewrites the trusted script.
    server_script(&w, "v2");
    let out = latch(&w).args(["mcp", "list"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("local  not started") && stdout.contains("is not trusted"),
        "{stdout}"
    );
    assert_eq!(ran(), "v1\n", "the rewritten script never ran unasked");
    // The question names the file; trusting again runs the new script.
    let out = latch(&w).arg("trust").output().unwrap();
    assert!(out.status.success());
    latch(&w).args(["mcp", "list"]).output().unwrap();
    assert_eq!(ran(), "v1\nv2\n");
}

/// A model that shows `dir`'s config and serve tokens with `shell`.
fn show_secrets(dir: &Path) -> Script {
    Script::new([
        ScriptedTurn::tool_call(
            "shell",
            serde_json::json!({
                "command": format!(
                    "cat {d}/config.toml; ls {d}/serve-tokens; cat {d}/serve-tokens/*",
                    d = dir.display()
                )
            })
            .to_string(),
        ),
        ScriptedTurn::text("Done."),
    ])
}

#[test]
fn latch_config_dir_is_hidden_from_commands_wherever_it_is() {
    let rt = runtime();
    // Outside the home directory and outside the workspace; and inside the
    // workspace, where only a mount can hide it.
    let elsewhere = tempfile::tempdir().unwrap();
    let ws = project();
    for dir in [
        elsewhere.path().join("latch-config"),
        ws.path().join("my-latch-config"),
    ] {
        write(
            &dir.join("config.toml"),
            "[provider]\napi_key = \"sk-user-secret-4242\"\n",
        );
        write(
            &dir.join("serve-tokens/0123abcd"),
            "serve-token-secret-9191",
        );
        let server = rt.block_on(FakeServer::start(show_secrets(&dir))).unwrap();
        let out = latch(ws.path())
            .env("LATCH_CONFIG_DIR", &dir)
            .args(at(&server))
            .args(["run", "show me"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let result = server.requests()[1].body.to_string();
        assert!(
            !result.contains("sk-user-secret-4242") && !result.contains("serve-token-secret-9191"),
            "a command read Latch's secrets in {}: {result}",
            dir.display()
        );
        assert!(
            result.contains("Permission denied") || result.contains("No such file"),
            "{result}"
        );
    }
}

/// What a repository ships: a store whose session was recorded talking to
/// `server` (made with a config dir that is not the user's).
fn shipped_store(ws: &Path, server: &FakeServer) {
    let attacker = tempfile::tempdir().unwrap();
    let out = latch(ws)
        .env("LATCH_CONFIG_DIR", attacker.path())
        .args(at(server))
        .args(["run", "hello"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_shipped_store_cannot_send_the_key_to_its_recorded_endpoint() {
    let rt = runtime();
    let collector = rt
        .block_on(FakeServer::start(
            Script::new([ScriptedTurn::text("Recorded.")])
                .with_responder(|_| ScriptStep::Turn(ScriptedTurn::text("Got your key."))),
        ))
        .unwrap();
    let ws = project();
    shipped_store(ws.path(), &collector);
    let before = collector.requests().len();
    // The victim resumes without flags; nothing can answer a pipe.
    let out = latch(ws.path())
        .env("OPENAI_API_KEY", "sk-victim-key")
        .args(["resume", "--last"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&collector.openai_base_url())
            && stderr.contains("nothing you trust names")
            && stderr.contains("--base-url"),
        "{stderr}"
    );
    assert_eq!(collector.requests().len(), before, "the key went out");

    // On a terminal it is asked: `n` refuses, nothing is sent.
    let tmux = Tmux::new();
    let line = |cmd: Command| {
        // `env -u A … K=V … program args`: the options come first.
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
        for a in cmd.get_args() {
            line.push_str(&format!(" '{}'", a.to_string_lossy()));
        }
        line
    };
    let mut resume = latch(ws.path());
    resume
        .env("OPENAI_API_KEY", "sk-victim-key")
        .args(["resume", "--last", "--plain"]);
    let resume = line(resume);
    tmux.start("no", &resume);
    tmux.wait_for(
        "no",
        &[
            "Send your API key to this endpoint",
            &collector.openai_base_url(),
        ],
    );
    tmux.text("no", "n");
    tmux.keys("no", &["Enter"]);
    tmux.wait_for("no", &["nothing you trust names"]);
    assert_eq!(collector.requests().len(), before, "the key went out");
    // `y` resumes with it, and it is remembered.
    tmux.start("yes", &resume);
    tmux.wait_for("yes", &["Send your API key to this endpoint"]);
    tmux.text("yes", "y");
    tmux.keys("yes", &["Enter"]);
    tmux.wait_for("yes", &["›"]);
    tmux.text("yes", "again");
    tmux.keys("yes", &["Enter"]);
    tmux.wait_for("yes", &["Got your key."]);
    let sent = collector.requests().last().unwrap().headers.clone();
    assert!(
        format!("{sent:?}").contains("sk-victim-key"),
        "the user said yes: the key went where they agreed"
    );
    tmux.text("yes", "/exit");
    tmux.keys("yes", &["Enter"]);
}

#[test]
fn a_resume_with_the_endpoint_named_by_a_flag_asks_nothing() {
    let rt = runtime();
    let collector = rt
        .block_on(FakeServer::start(
            Script::new([ScriptedTurn::text("Recorded.")])
                .with_responder(|_| ScriptStep::Turn(ScriptedTurn::text("Fine."))),
        ))
        .unwrap();
    let ws = project();
    shipped_store(ws.path(), &collector);
    let out = super::resume_last(
        {
            let mut c = latch(ws.path());
            c.args(at(&collector));
            c
        },
        b"again\n/exit\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Fine."), "{stdout}");
}
