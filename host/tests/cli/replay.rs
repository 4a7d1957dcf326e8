//! `latch engine replay`, `latch export` and `latch engine compare --trace`
//! on sessions the `latch` binary recorded: the store is only read (its
//! bytes stay the same), the default engine's replayed requests are the
//! recorded ones, each export format says what it should, a session
//! deleted from history is refused, and a malformed trace is refused with
//! its line and field.

use super::*;
use latch_kernel::sha256_hex;

/// Panics with its standard error when `out` is not a success.
fn ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A demo session recorded into `dir/demo.db`; its id.
fn demo(dir: &Path) -> String {
    let db = dir.join("demo.db");
    let out = latch(dir)
        .args(["demo", "--store"])
        .arg(&db)
        .output()
        .unwrap();
    ok(&out);
    let store = Store::open_read_only(&db).unwrap();
    store.list_all_sessions().unwrap().remove(0).id
}

/// `latch --store dir/demo.db ARGS`: its output, exit code and stderr.
fn with_store(dir: &Path, args: &[&str]) -> (String, i32, String) {
    let out = latch(dir)
        .arg("--store")
        .arg(dir.join("demo.db"))
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The store file's bytes (hashed) and its modification time: a store
/// opened for writing is changed or at least touched when it closes (the
/// projection rebuilt at open is checkpointed), a read-only one neither.
fn db_hash(dir: &Path) -> (String, std::time::SystemTime) {
    let path = dir.join("demo.db");
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    (sha256_hex(&std::fs::read(&path).unwrap()), modified)
}

/// Canonical tokens of each viewed request of engine `e` in a JSON report.
fn tokens(report: &serde_json::Value, e: usize) -> Vec<u64> {
    report["engines"][e]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["outcome"]["outcome"], "viewed", "{r}");
            r["outcome"]["priced"]["tokens"].as_u64().unwrap()
        })
        .collect()
}

#[test]
fn replay_and_export_read_a_recorded_session_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let id = demo(dir.path());
    let before = db_hash(dir.path());

    let (out, code, err) = with_store(
        dir.path(),
        &[
            "engine",
            "replay",
            &id[..8],
            "builtin:continuity",
            "baseline:summarize",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let recorded: Vec<u64> = report["recorded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["estimated_tokens"].as_u64().unwrap())
        .collect();
    assert!(recorded.len() >= 5, "{recorded:?}");
    assert_eq!(
        tokens(&report, 0),
        recorded,
        "the default engine sends what was sent"
    );
    assert_eq!(tokens(&report, 1).len(), recorded.len());
    assert!(report["note"].as_str().unwrap().contains("approximation"));

    let (table, code, _) = with_store(
        dir.path(),
        &["engine", "replay", &id, "builtin:continuity", "--requests"],
    );
    assert_eq!(code, 0);
    assert!(
        table.contains("would have seen a different view"),
        "{table}"
    );
    let first: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("0/0"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(first[1], first[2], "recorded and replayed agree: {table}");

    let (md, code, err) = with_store(dir.path(), &["export", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(md.starts_with(&format!("# Latch session {id}\n")), "{md}");
    for part in [
        "## User\n",
        "## Assistant\n",
        "<details>\n<summary>read_file output",
        "```diff\n@@ src/math.sh @@\n-",
        "**validation passed**",
    ] {
        assert!(md.contains(part), "{part} missing:\n{md}");
    }
    let json_path = dir.path().join("session.json");
    let (_, code, err) = with_store(
        dir.path(),
        &[
            "export",
            &id,
            "--format",
            "json",
            "-o",
            json_path.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let exported: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let store = Store::open_read_only(dir.path().join("demo.db")).unwrap();
    let events = store.all_events(&id).unwrap();
    drop(store);
    assert_eq!(exported["format"], "latch-session");
    assert_eq!(exported["events"].as_array().unwrap().len(), events.len());
    assert_eq!(exported["events"][0]["seq"], events[0].seq);

    // A trace replays as the store it came from; compare takes it too.
    let trace = dir.path().join("demo.jsonl");
    let (_, code, err) = with_store(
        dir.path(),
        &["export", &id, "--trace", trace.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    let (out, code, err) = with_store(
        dir.path(),
        &[
            "engine",
            "replay",
            trace.to_str().unwrap(),
            "builtin:continuity",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let from_trace: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(tokens(&from_trace, 0), recorded);
    assert!(from_trace["source"].as_str().unwrap().starts_with("trace "));
    let (out, code, err) = with_store(
        dir.path(),
        &[
            "engine",
            "compare",
            "builtin:continuity",
            "--trace",
            trace.to_str().unwrap(),
            "--window",
            "16k",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let reports: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(reports.as_array().unwrap().len(), 1);
    assert_eq!(tokens(&reports[0], 0).len(), recorded.len());

    assert_eq!(
        db_hash(dir.path()),
        before,
        "nothing was written to the store"
    );
}

#[test]
fn a_deleted_session_is_neither_exported_nor_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let id = demo(dir.path());
    let (_, code, err) = with_store(dir.path(), &["history", "delete", &id]);
    assert_eq!(code, 0, "{err}");
    let trace = dir.path().join("t.jsonl");
    for args in [
        vec!["export", &id[..6]],
        vec!["export", &id, "--format", "json"],
        vec!["export", &id, "--trace", trace.to_str().unwrap()],
        vec!["engine", "replay", &id, "builtin:continuity"],
    ] {
        let (out, code, err) = with_store(dir.path(), &args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(
            err.contains(&format!("session {id} was deleted from history"))
                && err.contains("does not export"),
            "{args:?}: {err}"
        );
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    assert!(!trace.exists(), "no trace of a deleted session");
}

#[test]
fn a_malformed_trace_is_refused_with_its_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let id = demo(dir.path());
    let trace = dir.path().join("demo.jsonl");
    let (_, code, err) = with_store(
        dir.path(),
        &[
            "export",
            &id,
            "--trace",
            trace.to_str().unwrap(),
            "--redact",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.lines().next().unwrap().contains(r#""redacted":true"#));
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let at = lines
        .iter()
        .position(|l| l.contains(r#""kind":"tool_result""#))
        .unwrap();
    lines[at] = lines[at].replacen(r#""is_error":false"#, r#""is_error":"no""#, 1);
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, lines.join("\n")).unwrap();
    let (out, code, err) = with_store(
        dir.path(),
        &[
            "engine",
            "replay",
            bad.to_str().unwrap(),
            "builtin:continuity",
        ],
    );
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains(&format!("line {}, field `event.data.is_error`", at + 1))
            && err.contains("invalid type"),
        "{err}"
    );
    assert!(err.contains("docs/trace-format.md"), "{err}");
}

/// Where the shipped traces live.
fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/traces")
}

/// `latch run TASK` in `ws` against a server playing `script`, then the
/// follow-ups typed into `latch resume --last`; the session's id.
fn session(ws: &Path, script: Script, task: &str, follow_ups: &[&str]) -> String {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let at = |mut cmd: Command| {
        cmd.env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", server.anthropic_base_url())
            .args(["--model", "claude-sonnet-4-5"]);
        cmd
    };
    let out = at(latch(ws)).args(["run", task]).output().unwrap();
    ok(&out);
    for text in follow_ups {
        let out = resume_last(at(latch(ws)), format!("{text}\n/exit\n").as_bytes());
        ok(&out);
    }
    assert_eq!(server.remaining(), 0, "the script was played to its end");
    let store = Store::open_read_only(latch_kernel::default_store_path(
        &ws.canonicalize().unwrap(),
    ))
    .unwrap();
    let key = ws.canonicalize().unwrap().display().to_string();
    store.latest_root_session(&key).unwrap().unwrap().id
}

/// True when `name` is to be recorded: every trace, or those named in
/// `LATCH_TRACES` (comma-separated).
fn wanted(name: &str) -> bool {
    std::env::var("LATCH_TRACES").map_or(true, |list| list.split(',').any(|n| n.trim() == name))
}

fn call(name: &str, args: serde_json::Value) -> ScriptedTurn {
    ScriptedTurn::tool_call(name, args.to_string())
}

/// Records the traces shipped under `tests/fixtures/traces/`: the two
/// scripted sessions of `latch engine compare`, three `latch run` sessions
/// on a copy of this repository against the scripted provider (redacted),
/// and `latch demo team` (a parent and two children). By hand:
/// `cargo test -p latch --test cli record_fixture_traces -- --ignored`
/// (`LATCH_TRACES=repo-tour,steps80` records only those;
/// `LATCH_TRACES_RAW=DIR` also writes the `repo-*` sessions unredacted
/// into DIR).
#[test]
#[ignore]
fn record_fixture_traces() {
    let out_dir = fixtures();
    std::fs::create_dir_all(&out_dir).unwrap();
    let tmp = tempfile::tempdir().unwrap();

    // The scripted sessions, as `latch engine compare` plays them.
    for (session, window) in [("steps80", "32k"), ("mixed500", "128k")] {
        if !wanted(session) {
            continue;
        }
        let saved = tmp.path().join(session);
        let out = latch(tmp.path())
            .args([
                "engine",
                "compare",
                "builtin:continuity",
                "--session",
                session,
            ])
            .args(["--window", window, "--save-traces"])
            .arg(&saved)
            .output()
            .unwrap();
        ok(&out);
        let file = std::fs::read_dir(&saved)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::copy(file, out_dir.join(format!("{session}.jsonl"))).unwrap();
    }

    // A copy of this repository, as a git work tree of its own.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let ws = tmp.path().join("latch");
    std::fs::create_dir_all(&ws).unwrap();
    let archive = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["archive", "--format=tar", "HEAD"])
        .output()
        .unwrap();
    assert!(archive.status.success());
    let mut tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&ws)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        tar.stdin
            .take()
            .unwrap()
            .write_all(&archive.stdout)
            .unwrap();
    }
    assert!(tar.wait().unwrap().success());
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "copy"]);
    use serde_json::json;

    let mut recorded: Vec<(&str, String)> = Vec::new();
    if wanted("repo-explore") {
        let id = session(
            &ws,
            Script::new([
                call("list_files", json!({"path": "host/src/compare"})),
                call(
                    "grep",
                    json!({"pattern": "pub fn replay", "path": "host/src"}),
                ),
                call(
                    "read_file",
                    json!({"path": "host/src/compare/replay/driver.rs", "limit": 120}),
                ),
                call(
                    "read_file",
                    json!({"path": "host/src/compare/replay/session.rs", "limit": 80}),
                ),
                ScriptedTurn::text("Back to the driver, where the request is rebuilt.")
                    .with_tool_call(
                        "read_file",
                        json!({"path": "host/src/compare/replay/driver.rs", "limit": 120})
                            .to_string(),
                    ),
                ScriptedTurn::text(
                    "`replay` in host/src/compare/replay/driver.rs rebuilds each recorded request; \
                 host/src/compare/replay/session.rs is the read-only session each engine sees.",
                ),
            ]),
            "Where does Latch rebuild what a replayed engine sees? Point me to the files.",
            &[],
        );
        recorded.push(("repo-explore", id));
    }
    if wanted("repo-edit") {
        let id = session(
        &ws,
        Script::new([
            call("set_goal", json!({"text": "Mention the replay benchmark in the README"})),
            call("add_constraint", json!({"text": "Keep the README's two commands exactly as they are."})),
            call("grep", json!({"pattern": "cargo bench -p latch-tests", "path": "README.md"})),
            ScriptedTurn::text("Editing the benchmark line.").with_tool_call(
                "edit_file",
                json!({
                    "path": "README.md",
                    "old_string": "- `cargo bench -p latch-tests`, `cargo bench -p latch-kernel`,",
                    "new_string": "- `cargo bench -p latch-tests` (its `replay` bench replays a 500-request session), `cargo bench -p latch-kernel`,"
                })
                .to_string(),
            ),
            call("record_decision", json!({"text": "Name the replay bench beside the other benches, not in its own section."})),
            call("validate", json!({"requirement": "the README names the replay bench", "command": "grep -q 'replay` bench' README.md"})),
            ScriptedTurn::text("The README names the replay bench; the check passes."),
            call("shell", json!({"command": "git diff --stat"})),
            call("shell", json!({"command": "git diff README.md | head -20"})),
            ScriptedTurn::text("One line changed in README.md, shown above."),
        ]),
        "The README's test section should mention the replay benchmark. Add it.",
        &["Show me the diff."],
    );
        recorded.push(("repo-edit", id));
    }
    if wanted("repo-missing-doc") {
        let id = session(
            &ws,
            Script::new([
                call("shell", json!({"command": "cat docs/replay.md"})),
                ScriptedTurn::text(
                    "It is not there: cat: docs/replay.md: No such file or directory",
                )
                .with_tool_call("list_files", json!({"path": "docs"}).to_string()),
                call(
                    "add_note",
                    json!({"text": "docs/ holds only screenshots so far."}),
                ),
                call("shell", json!({"command": "wc -l README.md Cargo.toml"})),
                ScriptedTurn::text("Checking once more.").with_tool_call(
                    "shell",
                    json!({"command": "cat docs/replay.md"}).to_string(),
                ),
                ScriptedTurn::text("There is no docs/replay.md; the README is the documentation."),
                call(
                    "grep",
                    json!({"pattern": "engine replay", "path": "README.md"}),
                ),
                ScriptedTurn::text(
                    "The README describes `latch engine replay` in its engine section.",
                ),
            ]),
            "Is there a separate document about replay in docs/?",
            &["Then where is replay documented?"],
        );
        recorded.push(("repo-missing-doc", id));
    }
    if wanted("repo-tour") {
        // A longer session: the host's compare, agent and engine code read
        // file by file (a few read twice), with state recorded on the way.
        let mut files: Vec<String> = ["host/src/compare", "host/src/agent", "host/src/engine"]
            .iter()
            .flat_map(|d| std::fs::read_dir(ws.join(d)).unwrap())
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .map(|p| p.strip_prefix(&ws).unwrap().display().to_string())
            .collect();
        files.sort();
        let mut turns = vec![
            call(
                "set_goal",
                json!({"text": "Explain how a model request is built, from the log to the wire"}),
            ),
            call(
                "add_constraint",
                json!({"text": "Read only; change no file."}),
            ),
            call("list_files", json!({"path": "host/src"})),
        ];
        for (i, f) in files.iter().enumerate() {
            turns.push(call("read_file", json!({"path": f})));
            if i % 10 == 9 {
                turns.push(call(
                    "record_decision",
                    json!({"text": format!("Describe {f} as part of the request path.")}),
                ));
            }
        }
        for f in [
            "host/src/agent/turn.rs",
            "host/src/agent/mod.rs",
            "host/src/engine/guard.rs",
        ] {
            turns.push(call("read_file", json!({"path": f})));
        }
        turns.push(call(
            "grep",
            json!({"pattern": "fn next_request", "path": "host/src"}),
        ));
        turns.push(ScriptedTurn::text(
            "`Agent::next_request` builds the request and budget; the engine's view is checked by \
             its `ViewGuard`, its entries persisted, then `drive` sends exactly the view.",
        ));
        let id = session(
            &ws,
            Script::new(turns),
            "Read the host's compare, agent and engine code and explain how a model request is built.",
            &[],
        );
        recorded.push(("repo-tour", id));
    }
    for (name, id) in &recorded {
        // `LATCH_TRACES_RAW=DIR` keeps unredacted copies there too (not
        // shipped: recall over redacted output finds nothing).
        if let Ok(raw) = std::env::var("LATCH_TRACES_RAW") {
            let out = latch(&ws)
                .args(["export", id, "--trace"])
                .arg(Path::new(&raw).join(format!("{name}.jsonl")))
                .output()
                .unwrap();
            ok(&out);
        }
        let out = latch(&ws)
            .args(["export", id, "--redact", "--trace"])
            .arg(out_dir.join(format!("{name}.jsonl")))
            .output()
            .unwrap();
        ok(&out);
    }

    // A parent and two children.
    if !wanted("demo-team") {
        return;
    }
    let db = tmp.path().join("team.db");
    let out = latch(tmp.path())
        .args(["demo", "team", "--store"])
        .arg(&db)
        .output()
        .unwrap();
    ok(&out);
    let store = Store::open_read_only(&db).unwrap();
    let root = store
        .list_all_sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.parent.is_none())
        .unwrap();
    drop(store);
    let out = latch(tmp.path())
        .arg("--store")
        .arg(&db)
        .args(["export", &root.id, "--tree", "--redact", "--trace"])
        .arg(out_dir.join("demo-team.jsonl"))
        .output()
        .unwrap();
    ok(&out);
}
