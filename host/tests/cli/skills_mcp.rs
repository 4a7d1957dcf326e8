//! `latch skills` and `latch mcp list` through the binary, a `run` whose
//! model calls a tool of a real MCP server from npm (installed by
//! `.ci/run` into `.ci/cache/npm`), and a `run` with skills and MCP
//! attached whose `shell` still runs in the session's sandbox: no secret
//! variables, no writes outside, its temp dir removed at the end.

use super::{at, latch, runtime};
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use std::path::{Path, PathBuf};

pub(super) fn npm_server(package: &str) -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../.ci/cache/npm/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        script.is_file(),
        "the MCP test server {package} is not installed at {}: run `bash .ci/run` once, or \
         `npm install --prefix .ci/cache/npm @modelcontextprotocol/{package}@2026.8.31`",
        script.display()
    );
    script
}

fn write(path: PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The user's own config file of the tests' `latch` (always trusted; a
/// workspace config that starts programs waits for `latch trust`).
pub(super) fn user_config(ws: &Path) -> PathBuf {
    ws.join(".test-home/config/config.toml")
}

#[test]
fn latch_skills_lists_skills_and_names_the_malformed_field() {
    let ws = tempfile::tempdir().unwrap();
    write(
        ws.path().join(".latch/skills/release/SKILL.md"),
        "---\nname: release\ndescription: Cut a release of this project.\n---\nSteps.\n",
    );
    write(
        ws.path().join(".claude/skills/broken/SKILL.md"),
        "---\nname: broken\n---\nno description\n",
    );
    let out = latch(ws.path()).arg("skills").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("release") && stdout.contains("Cut a release"),
        "{stdout}"
    );
    assert!(
        stdout.contains("broken/SKILL.md skipped: field `description`"),
        "{stdout}"
    );
    assert!(stdout.contains("1 listed, 0 left out"), "{stdout}");
}

#[test]
fn latch_mcp_list_shows_tools_and_a_failed_server_with_its_stderr() {
    let ws = tempfile::tempdir().unwrap();
    write(
        user_config(ws.path()),
        &format!(
            "[mcp.servers.everything]\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\n\n\
             [mcp.servers.broken]\ncommand = \"node\"\nargs = [\"-e\", \"console.error('no token configured'); process.exit(1)\"]\n",
            npm_server("server-everything").display()
        ),
    );
    let out = latch(ws.path()).args(["mcp", "list"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("everything  connected"), "{stdout}");
    assert!(stdout.contains("mcp__everything__echo"), "{stdout}");
    assert!(stdout.contains("broken  failed"), "{stdout}");
    assert!(stdout.contains("no token configured"), "{stdout}");
    // The error's parts stay lines: the command and the likely cause.
    assert!(
        stdout.contains("\n    command: node -e ") && stdout.contains("\n    likely cause: "),
        "{stdout}"
    );
    // A typo in the table is refused with its name and line.
    write(
        ws.path().join(".latch/config.toml"),
        "[mcp.servers.x]\ncomand = \"node\"\n",
    );
    let out = latch(ws.path()).args(["mcp", "list"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("comand") && stderr.contains("line 2"),
        "{stderr}"
    );
}

#[test]
fn run_calls_an_mcp_tool_and_reports_a_server_that_failed_to_start() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call("mcp__everything__echo", r#"{"message":"through the CLI"}"#),
            ScriptedTurn::text("Echoed."),
        ])))
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    write(
        user_config(ws.path()),
        &format!(
            "[mcp.servers.everything]\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\n\n\
             [mcp.servers.broken]\ncommand = \"node\"\nargs = [\"-e\", \"console.error('cannot reach the database'); process.exit(1)\"]\n",
            npm_server("server-everything").display()
        ),
    );
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "--json", "echo something"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("MCP server `broken` failed to start")
            && stderr.contains("cannot reach the database"),
        "{stderr}"
    );
    assert!(stdout.contains("Echo: through the CLI"), "{stdout}");
    rt.block_on(server.shutdown());
}

fn shell_output(ws: &Path) -> String {
    let store = Store::open(latch_kernel::default_store_path(ws)).unwrap();
    let key = ws.canonicalize().unwrap().display().to_string();
    let session = &store.list_sessions(&key).unwrap()[0];
    store
        .events(&session.id, 0, u64::MAX, 100_000)
        .unwrap()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::ToolResult(r) if r.name == "shell" => Some(r.content),
            _ => None,
        })
        .expect("the shell call has a result")
}

#[test]
fn a_run_with_skills_and_mcp_keeps_shell_sandboxed_without_secrets_and_cleans_its_temp_dir() {
    let rt = runtime();
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let escape = outside.path().join("escape.txt");
    let command = format!(
        "env | grep '^LATCH_T_' | sort; echo \"tmp=$TMPDIR\"; echo x > \"$TMPDIR/scratch\"; \
         echo x > {}",
        escape.display()
    );
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call(
                "shell",
                serde_json::json!({ "command": command }).to_string(),
            ),
            ScriptedTurn::text("Looked."),
        ])))
        .unwrap();
    write(
        ws.path().join(".latch/skills/release/SKILL.md"),
        "---\nname: release\ndescription: Cut a release of this project.\n---\nSteps.\n",
    );
    write(
        user_config(ws.path()),
        &format!(
            "[sandbox]\nenv_passthrough = [\"LATCH_T_PASSED_TOKEN\"]\n\n\
             [mcp.servers.everything]\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\n",
            npm_server("server-everything").display()
        ),
    );
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "--json", "look around"])
        .env("LATCH_T_SERVICE_API_KEY", "sk-hidden")
        .env("LATCH_T_PASSED_TOKEN", "passed")
        .env("LATCH_T_PLAIN", "plain")
        .env("OPENAI_API_KEY", "sk-provider")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = shell_output(ws.path());
    assert!(
        shown.contains("LATCH_T_PASSED_TOKEN=passed\nLATCH_T_PLAIN=plain\n"),
        "{shown}"
    );
    assert!(
        !shown.contains("sk-hidden") && !shown.contains("sk-provider"),
        "{shown}"
    );
    assert!(shown.contains("Permission denied"), "{shown}");
    assert!(!escape.exists(), "the sandbox refused the write outside");
    let tmp = shown
        .lines()
        .find_map(|l| l.strip_prefix("tmp="))
        .expect("the command printed its TMPDIR");
    assert!(tmp.contains("latch-"), "{shown}");
    assert!(
        !Path::new(tmp).exists(),
        "the session temp dir {tmp} is removed when the run ends"
    );
    rt.block_on(server.shutdown());
}

/// `.ci/cache/npm/node_modules`, where `.ci/run` installs the npm servers.
fn npm_modules() -> PathBuf {
    npm_server("server-everything");
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../.ci/cache/npm/node_modules")
        .canonicalize()
        .unwrap()
}

#[test]
fn the_mcp_config_every_readme_shows_works_with_no_extra_keys() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call(
                "mcp__everything__echo",
                r#"{"message":"as the README says"}"#,
            ),
            ScriptedTurn::tool_call("mcp__everything__get-env", "{}"),
            ScriptedTurn::text("Echoed."),
        ])))
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    // Exactly the README's entry: `npx -y PACKAGE`, nothing else.
    write(
        user_config(ws.path()),
        "[mcp.servers.everything]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-everything\"]\n",
    );
    // What npx does on a user's machine: fetch the package from the
    // registry (a local one here, serving the pinned packages) into its
    // cache outside the workspace (as `~/.npm`), then run it.
    let registry = super::npm_registry::Registry::start(&npm_modules());
    let home = tempfile::tempdir().unwrap();
    let npmrc = home.path().join("npmrc");
    std::fs::write(&npmrc, "").unwrap();
    let npm = |mut cmd: std::process::Command| {
        cmd.env("npm_config_registry", &registry.url)
            .env("npm_config_cache", home.path().join("npm-cache"))
            .env("npm_config_userconfig", &npmrc)
            .env("npm_config_fetch_retries", "0")
            .env("npm_config_update_notifier", "false")
            .env("npm_config_audit", "false")
            .env("npm_config_fund", "false");
        cmd
    };
    let out = npm(latch(ws.path()))
        .args(["mcp", "list"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("everything  connected") && stdout.contains("sandbox none"),
        "{stdout}"
    );
    assert!(stdout.contains("mcp__everything__echo"), "{stdout}");
    // A session calls it; the unconfined server still gets none of the
    // secret-looking variables (the provider key among them).
    let out = npm(latch(ws.path()))
        .args(at(&server))
        .args(["run", "--json", "echo something"])
        .env("LATCH_T_SERVICE_TOKEN", "sk-hidden")
        .env("OPENAI_API_KEY", "sk-provider")
        .env("LATCH_T_PLAIN", "plain-value")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Echo: as the README says"), "{stdout}");
    assert!(stdout.contains("plain-value"), "get-env answered: {stdout}");
    assert!(
        !stdout.contains("sk-hidden") && !stdout.contains("sk-provider"),
        "{stdout}"
    );
    rt.block_on(server.shutdown());
}

#[test]
fn the_repl_asks_before_an_mcp_tool_showing_its_server_tool_and_arguments() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call(
                "mcp__everything__toggle-simulated-logging",
                r#"{"level":"debug"}"#,
            ),
            ScriptedTurn::text("Toggled."),
        ])))
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    write(
        user_config(ws.path()),
        &format!(
            "[mcp.servers.everything]\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\n",
            npm_server("server-everything").display()
        ),
    );
    let mut child = latch(ws.path())
        .args(at(&server))
        .args(["--approval", "untrusted", "chat", "--plain"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"toggle the logging\ny\n/exit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(
            "MCP server `everything`'s tool `toggle-simulated-logging` with: {\"level\":\"debug\"}"
        ) && stdout.contains("approval mode `untrusted`"),
        "{stdout}"
    );
    assert!(stdout.contains("allowed by the user"), "{stdout}");
    rt.block_on(server.shutdown());
}
