//! Latch's own git through the real `latch` binary: a repository that a
//! sandboxed command creates mid-session (`git init`, with a
//! `core.fsmonitor` it chose) is not used until the user adopts it with
//! `latch git --adopt`; once adopted, its programs still never run, and
//! the command the model asked for is checkpointed; the file tools never
//! write `.git`.

use super::{at, latch, project, resume_last, runtime};
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use serde_json::json;
use std::path::Path;
use std::process::Output;

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn checkpoints(ws: &Path) -> Vec<String> {
    let store = Store::open(latch_kernel::default_store_path(ws)).unwrap();
    let key = ws.canonicalize().unwrap().display().to_string();
    let session = store.latest_root_session(&key).unwrap().unwrap();
    store
        .all_events(&session.id)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Checkpoint { path, .. } => Some(path),
            _ => None,
        })
        .collect()
}

#[test]
fn a_repository_a_command_creates_is_used_only_once_adopted_and_never_runs_its_programs() {
    let ws = project();
    let marker = ws.path().join(".test-home/pwned");
    let plant = format!(
        "git init -q && git config core.fsmonitor 'mkdir -p .test-home; touch {m}' && \
         git config core.hooksPath .evil-hooks && printf 'one\\n' > a.txt",
        m = marker.display()
    );
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call("shell", json!({ "command": plant }).to_string()),
            ScriptedTurn::tool_call("shell", r#"{"command":"printf 'two\\n' > a.txt"}"#),
            ScriptedTurn::tool_call(
                "write_file",
                json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch pwned\n"})
                    .to_string(),
            ),
            ScriptedTurn::text("Planted."),
            ScriptedTurn::tool_call("shell", r#"{"command":"printf 'three\\n' > a.txt"}"#),
            ScriptedTurn::text("Changed after adopting."),
        ])))
        .unwrap();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "--sandbox", "workspace-write", "plant a repository"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(ws.path().join(".git/config").exists(), "{}", text(&out));
    assert!(!marker.exists(), "{}", text(&out));
    assert!(
        checkpoints(ws.path()).is_empty(),
        "the repository that appeared is not used: no command was snapshotted"
    );
    assert!(!ws.path().join(".git/hooks/pre-commit").exists());
    assert!(text(&out).contains("belongs to git"), "{}", text(&out));

    let out = latch(ws.path()).arg("git").output().unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("uses no git repository"), "{said}");
    assert!(
        said.contains("the workspace is now in the git repository"),
        "{said}"
    );
    assert!(said.contains("--adopt"), "{said}");

    let out = latch(ws.path()).args(["git", "--adopt"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("now uses the git repository"),
        "{}",
        text(&out)
    );

    let mut cmd = latch(ws.path());
    cmd.args(at(&server));
    let out = resume_last(cmd, b"change it again\n");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "three\n"
    );
    assert!(!marker.exists(), "the repository's fsmonitor never runs");
    assert!(
        checkpoints(ws.path()).contains(&"a.txt".to_string()),
        "the adopted repository is used: {:?}",
        checkpoints(ws.path())
    );
}
