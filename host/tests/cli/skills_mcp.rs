//! `latch skills` and `latch mcp list` through the binary, and a `run`
//! whose model calls a tool of a real MCP server from npm (installed by
//! `.ci/run` into `.ci/cache/npm`).

use super::{at, latch, runtime};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use std::path::PathBuf;

fn npm_server(package: &str) -> PathBuf {
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
        ws.path().join(".latch/config.toml"),
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
        ws.path().join(".latch/config.toml"),
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
