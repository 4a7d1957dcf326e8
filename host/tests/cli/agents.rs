//! Agents users define, through the real `latch` binary and the local
//! server: a workspace `reviewer` with read-only tools and a model of its
//! own spawns a child whose requests carry exactly those tools and that
//! model; a user agent is listed with where it came from; a malformed
//! agent file is named with its line; a workspace agent that loosens the
//! sandbox is refused in an untrusted workspace.

use super::{at, latch, project, runtime};
use latch_provider::fake::{CapturedRequest, FakeServer, Script, ScriptStep, ScriptedTurn};
use std::path::Path;

const REVIEWER: &str = "---\nname: reviewer\ndescription: Reviews changes without touching them.\n\
tools: Read, Grep, WebFetch\nmodel: reviewer-model\n---\n\nREVIEWER-PROMPT: read, never write.\n";

/// Line 4 is at fault.
const BROKEN: &str =
    "---\nname: broken\ndescription: Cannot be used.\nsandbox: wide-open\n---\nx\n";

const LOOSE: &str =
    "---\nname: loose\ndescription: Wants everything.\nsandbox: full-access\n---\nDo anything.\n";

fn write_agents(ws: &Path) {
    let dir = ws.join(".latch/agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("reviewer.md"), REVIEWER).unwrap();
    std::fs::write(dir.join("broken.md"), BROKEN).unwrap();
    std::fs::write(dir.join("loose.md"), LOOSE).unwrap();
    let user = ws.join(".test-home/config/agents");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("scribe.md"),
        "---\ndescription: Writes notes.\ntools:\n  - Read\n  - Write\n---\nTake notes.\n",
    )
    .unwrap();
}

fn messages(r: &CapturedRequest) -> String {
    r.body["messages"].to_string()
}

fn tool_names(r: &CapturedRequest) -> Vec<String> {
    r.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn script() -> Script {
    Script::default().with_responder(|r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if m.contains("REVIEWER-PROMPT") {
            return ScriptedTurn::text("REVIEW-DONE: add() subtracts").into();
        }
        if !m.contains(r#""name":"spawn_agent""#) {
            return ScriptedTurn::tool_call(
                "spawn_agent",
                r#"{"agent":"loose","task":"Rewrite everything"}"#,
            )
            .with_tool_call(
                "spawn_agent",
                r#"{"agent":"reviewer","task":"Review src/math.sh"}"#,
            )
            .into();
        }
        if !m.contains(r#""name":"wait_agents""#) {
            return ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s":30}"#).into();
        }
        ScriptedTurn::text("The reviewer reported.").into()
    })
}

#[test]
fn a_reviewer_agent_file_spawns_a_child_with_its_tools_and_model() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(script())).unwrap();
    let ws = project();
    write_agents(ws.path());
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "review the adder"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The malformed file is named with its line, and the rest still load.
    assert!(
        stderr.contains(".latch/agents/broken.md:4: `sandbox: wide-open`"),
        "{stderr}"
    );
    let requests = server.requests();
    let child: Vec<&CapturedRequest> = requests
        .iter()
        .filter(|r| messages(r).contains("REVIEWER-PROMPT"))
        .collect();
    assert_eq!(child.len(), 1, "the reviewer ran once");
    assert_eq!(child[0].body["model"], "reviewer-model");
    assert_eq!(
        tool_names(child[0]),
        ["read_file", "read_artifact", "grep"],
        "the reviewer's tools are Read and Grep (WebFetch has no counterpart)"
    );
    // The parent kept its own model and every tool; it was told the
    // loosening workspace agent needs trust, and which agents exist.
    let parent = &requests[0];
    assert_eq!(parent.body["model"], "local");
    let names = tool_names(parent);
    assert!(names.iter().any(|n| n == "write_file"), "{names:?}");
    assert!(
        parent.body["tools"]
            .to_string()
            .contains("- reviewer: Reviews changes"),
        "spawn_agent lists the agents"
    );
    let all = requests.iter().map(messages).collect::<Vec<_>>().join("\n");
    assert!(
        all.contains("asks for the sandbox `full-access`") && all.contains("trusted workspace"),
        "{all}"
    );
    assert!(all.contains("REVIEW-DONE"), "the report reached the parent");
}

#[test]
fn latch_agents_lists_where_each_came_from_and_names_a_bad_file_with_its_line() {
    let ws = project();
    write_agents(ws.path());
    let out = latch(ws.path()).arg("agents").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a file was left out: {stdout}");
    for needle in [
        "reviewer (workspace, ",
        ".latch/agents/reviewer.md): Reviews changes without touching them.",
        "tools: read_file, read_artifact, grep · model: reviewer-model · not in Latch: WebFetch",
        "scribe (user, ",
        "tools: read_file, read_artifact, write_file",
        "left out: ",
        "broken.md:4: `sandbox: wide-open`",
    ] {
        assert!(stdout.contains(needle), "missing `{needle}`:\n{stdout}");
    }
    let json = latch(ws.path())
        .args(["agents", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["errors"][0]["line"], 4);
    assert_eq!(v["agents"][1]["model"], "reviewer-model");
}
