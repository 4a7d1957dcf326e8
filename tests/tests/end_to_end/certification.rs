//! Certification with several proofs, end to end: real `git` and `cargo`
//! in a temporary repository, the agent loop over real HTTP to the scripted
//! provider. Two requirements proven by two commands that write nothing
//! git tracks (`cargo test`, `cargo clippy` write only the ignored
//! `target/`) both stay fresh and certify; an edit after them stales both.

use crate::agent::harness_with;
use latch::agent::AgentOptions;
use latch::engine::runtime::EngineSource;
use latch_kernel::event::CertificationOutcome;
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{Script, ScriptedTurn, WireFormat};
use std::path::Path;
use std::process::Command;

fn run(ws: &Path, program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A tiny crate with one test, committed to a fresh git repository.
fn crate_repo(ws: &Path) {
    std::fs::write(
        ws.join("Cargo.toml"),
        "[package]\nname = \"proof\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(
        ws.join("src/lib.rs"),
        "pub fn two() -> u32 {\n    2\n}\n\n#[test]\nfn it_is_two() {\n    assert_eq!(two(), 2);\n}\n",
    )
    .unwrap();
    std::fs::write(ws.join(".gitignore"), "target/\nlatch.db*\nCargo.lock\n").unwrap();
    run(ws, "git", &["init", "-q"]);
    run(ws, "git", &["add", "-A"]);
    run(
        ws,
        "git",
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-qm",
            "start",
        ],
    );
}

fn attempts(store: &Store, session: &str) -> Vec<(CertificationOutcome, Vec<String>)> {
    store
        .events(session, 0, u64::MAX, 100_000)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::CertificationAttempt {
                outcome, blockers, ..
            } => Some((outcome, blockers)),
            _ => None,
        })
        .collect()
}

#[test]
fn two_requirements_proven_by_two_commands_certify_and_an_edit_stales_both() {
    let script = Script::new([
        ScriptedTurn::tool_call("require_validation", r#"{"requirement":"tests pass"}"#),
        ScriptedTurn::tool_call("require_validation", r#"{"requirement":"lints clean"}"#),
        ScriptedTurn::tool_call(
            "validate",
            r#"{"command":"cargo test --offline -q","requirement":"tests pass","timeout_ms":600000}"#,
        ),
        ScriptedTurn::tool_call(
            "validate",
            r#"{"command":"cargo clippy --offline -q -- -D warnings","requirement":"lints clean","timeout_ms":600000}"#,
        ),
        ScriptedTurn::tool_call("complete", r#"{"summary":"tests and lints proven"}"#),
        ScriptedTurn::text("Both proven."),
        // Turn two: an edit through the shell, then completion again.
        ScriptedTurn::tool_call(
            "shell",
            r#"{"command":"printf '// three\n' >> src/lib.rs"}"#,
        ),
        ScriptedTurn::tool_call("complete", r#"{"summary":"still proven?"}"#),
        ScriptedTurn::text("The edit staled the proofs."),
    ]);
    let mut h = harness_with(
        WireFormat::OpenAi,
        EngineSource::Builtin("continuity".into()),
        script,
        |_| {},
        AgentOptions {
            mode: "run".into(),
            ..AgentOptions::default()
        },
    );
    let ws = std::path::PathBuf::from(h.store.session(&h.session).unwrap().workspace);
    crate_repo(&ws);
    // The repository appeared after the session started: Latch's own git
    // uses it once the user says so (`latch git --adopt`).
    h.store.adopt_repository(&h.session).unwrap();

    h.agent
        .run_turn("Prove tests and lints, then complete.", &mut |_| {})
        .unwrap();
    let after_one = attempts(&h.store, &h.session);
    assert_eq!(
        after_one,
        vec![(CertificationOutcome::Certified, vec![])],
        "two proofs by two commands that change nothing git tracks must certify"
    );
    // Both commands recorded their possible mutation, and neither advanced.
    let unchanged: Vec<bool> = h
        .store
        .events(&h.session, 0, u64::MAX, 100_000)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Mutation {
                source, unchanged, ..
            } if source == "validate" => Some(unchanged),
            _ => None,
        })
        .collect();
    assert_eq!(unchanged, vec![true, true]);

    h.agent
        .run_turn("Edit, then complete.", &mut |_| {})
        .unwrap();
    let all = attempts(&h.store, &h.session);
    assert_eq!(all.len(), 2);
    let (outcome, blockers) = &all[1];
    assert_eq!(*outcome, CertificationOutcome::Refused);
    assert!(
        blockers.iter().any(|b| b.starts_with("stale: tests pass"))
            && blockers.iter().any(|b| b.starts_with("stale: lints clean")),
        "an edit after both proofs stales both: {blockers:?}"
    );
    h.io.block_on(h.server.take().unwrap().shutdown());
}
