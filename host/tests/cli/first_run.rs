//! A new user's first minutes: errors that print their line breaks, a
//! `.latch/` that keeps `git status` clean, and `latch sessions` where
//! there is no store yet or with another store.

use super::*;

/// The no-provider message and a config error read as written: real line
/// breaks, no `\n` escapes.
#[test]
fn error_messages_print_real_line_breaks() {
    let ws = project();
    let out = latch(ws.path()).args(["run", "anything"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("\\n"), "escaped line breaks: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines.iter().any(|l| l.starts_with("  For OpenAI:")),
        "one hint a line: {stderr}"
    );

    std::fs::create_dir_all(ws.path().join(".latch")).unwrap();
    std::fs::write(
        ws.path().join(".latch/config.toml"),
        "[engine]\ncomponnet = \"x.wasm\"\n",
    )
    .unwrap();
    let out = latch(ws.path()).args(["sessions"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("componnet"), "{stderr}");
    assert!(!stderr.contains("\\n"), "escaped line breaks: {stderr}");
    assert!(stderr.lines().count() > 1, "{stderr}");
}

/// A run leaves `.latch/` with its own `.gitignore`: `git status` stays
/// clean, while a config the user writes there still shows.
#[test]
fn the_latch_directory_keeps_git_status_clean() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("Nothing to change."),
            ScriptedTurn::text("Still nothing."),
        ])))
        .unwrap();
    let ws = project();
    git(ws.path(), &["init", "-q"]);
    std::fs::write(ws.path().join(".gitignore"), ".test-home/\n").unwrap();
    git(ws.path(), &["add", "."]);
    git(ws.path(), &["commit", "-q", "-m", "start"]);
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "look around"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(ws.path().join(".latch/latch.db").is_file());
    assert_eq!(git(ws.path(), &["status", "--porcelain"]), "");

    std::fs::write(ws.path().join(".latch/config.toml"), "[agent]\n").unwrap();
    assert_eq!(
        git(ws.path(), &["status", "--porcelain", "-uall"]),
        "?? .latch/config.toml\n"
    );
    // A user's own `.gitignore` there is never replaced.
    std::fs::write(ws.path().join(".latch/.gitignore"), "latch.db*\n").unwrap();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "again"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".latch/.gitignore")).unwrap(),
        "latch.db*\n"
    );
}

/// In a folder Latch has never run in, there are no sessions: said, exit
/// 0, nothing created.
#[test]
fn sessions_without_a_store_says_there_are_none() {
    let ws = tempfile::tempdir().unwrap();
    for args in [&["sessions"][..], &["sessions", "--json"]] {
        let out = latch(ws.path()).args(args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if args.len() == 1 {
            assert!(stdout.starts_with("no sessions in "), "{stdout}");
        } else {
            assert_eq!(stdout.trim(), "[]");
        }
    }
    assert!(!ws.path().join(".latch").exists());
}

/// `--store` lists every session in that store, under the workspace each
/// belongs to, from any folder.
#[test]
fn sessions_with_a_store_list_its_sessions_and_their_workspaces() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let store = Store::open(&db).unwrap();
    let model = latch_engine_sdk::types::ModelProfile::with_defaults("anthropic", "m");
    let a = store.create_session("/work/alpha", None, &model).unwrap();
    let b = store.create_session("/work/beta", None, &model).unwrap();
    drop(store);
    let elsewhere = tempfile::tempdir().unwrap();
    let out = latch(elsewhere.path())
        .arg("--store")
        .arg(&db)
        .arg("sessions")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let at_line = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
    let alpha = at_line("workspace /work/alpha (1 session)");
    let beta = at_line("workspace /work/beta (1 session)");
    assert!(lines[alpha + 1].trim_start().starts_with(&a.id), "{stdout}");
    assert!(lines[beta + 1].trim_start().starts_with(&b.id), "{stdout}");

    let out = latch(elsewhere.path())
        .arg("--store")
        .arg(&db)
        .args(["sessions", "--json"])
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let workspace_of = |id: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .map(|s| s["workspace"].clone())
    };
    assert_eq!(workspace_of(&a.id), Some("/work/alpha".into()));
    assert_eq!(workspace_of(&b.id), Some("/work/beta".into()));
}
