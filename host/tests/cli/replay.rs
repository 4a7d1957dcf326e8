//! `latch engine replay`, `latch export` and `latch engine compare --trace`
//! on sessions the `latch` binary recorded: the store is only read (its
//! bytes stay the same), the default engine's replayed requests are the
//! recorded ones, each export format says what it should, a session
//! deleted from history is refused, and a malformed trace is refused with
//! its line and field.

use super::*;
use latch_kernel::sha256_hex;

/// A demo session recorded into `dir/demo.db`; its id.
fn demo(dir: &Path) -> String {
    let db = dir.join("demo.db");
    let out = latch(dir)
        .args(["demo", "--store"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
