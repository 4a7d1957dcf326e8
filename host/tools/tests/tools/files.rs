//! File tools on a real workspace and store: confinement, guarded writes,
//! read bounds, and gitignore-aware listing and search.

use crate::common;

use common::{assert_err, assert_ok, env, exists};
use latch_kernel::{EventKind, READ_MAX_BYTES, READ_MAX_TOKENS, sha256_hex};
use serde_json::json;

fn denials(e: &common::Env) -> Vec<(String, Option<String>, String)> {
    e.find(|k| matches!(k, EventKind::ToolDenied { .. }))
        .into_iter()
        .map(|ev| match ev.kind {
            EventKind::ToolDenied {
                tool,
                call_id,
                reason,
            } => (tool, call_id, reason),
            _ => unreachable!(),
        })
        .collect()
}

#[test]
fn parent_escapes_are_denied_and_recorded() {
    let e = env();
    std::fs::write(e.dir.path().join("outside.txt"), "secret").unwrap();

    let o = e.call("read_file", json!({"path": "../outside.txt"}));
    assert_err(&o, "denied");
    assert_err(&o, "outside the workspace");

    let o = e.call(
        "write_file",
        json!({"path": "sub/../../escape.txt", "content": "x"}),
    );
    assert_err(&o, "denied");
    assert!(!exists(&e.dir.path().join("escape.txt")));

    let o = e.call(
        "edit_file",
        json!({"path": "/etc/hostname", "old_string": "a", "new_string": "b"}),
    );
    assert_err(&o, "denied");

    let o = e.call("list_files", json!({"path": ".."}));
    assert_err(&o, "denied");

    let d = denials(&e);
    assert_eq!(d.len(), 4, "{d:?}");
    assert_eq!(d[0].0, "read_file");
    assert!(d[0].1.as_deref().is_some_and(|id| id.starts_with("call-")));
    assert!(
        d.iter()
            .all(|(_, _, reason)| reason.contains("outside the workspace"))
    );
    // A denied write commits no mutation.
    assert!(
        e.find(|k| matches!(k, EventKind::Mutation { .. }))
            .is_empty()
    );
}

#[test]
fn symlink_escapes_are_denied() {
    let e = env();
    let outside = e.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(&outside, e.path("linkdir")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), e.path("linkfile")).unwrap();
    std::os::unix::fs::symlink(outside.join("missing.txt"), e.path("dangling")).unwrap();

    assert_err(
        &e.call("read_file", json!({"path": "linkdir/secret.txt"})),
        "symbolic link",
    );
    assert_err(
        &e.call("read_file", json!({"path": "linkfile"})),
        "symbolic link",
    );
    assert_err(
        &e.call(
            "write_file",
            json!({"path": "linkdir/new.txt", "content": "x"}),
        ),
        "denied",
    );
    assert!(!exists(&outside.join("new.txt")));
    assert_err(
        &e.call("write_file", json!({"path": "dangling", "content": "x"})),
        "denied",
    );
    assert!(!exists(&outside.join("missing.txt")));
    assert_err(
        &e.call("grep", json!({"pattern": "secret", "path": "linkdir"})),
        "denied",
    );
    assert_eq!(denials(&e).len(), 5);
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "secret"
    );

    // A link that stays inside the workspace is fine.
    e.write("real.txt", "inside\n");
    std::os::unix::fs::symlink(e.path("real.txt"), e.path("inlink")).unwrap();
    let o = e.call("read_file", json!({"path": "inlink"}));
    assert_ok(&o);
    assert!(o.result.content.contains("inside"));
}

#[test]
fn latch_directory_is_not_writable() {
    let e = env();
    assert_err(
        &e.call(
            "write_file",
            json!({"path": ".latch/latch.db", "content": "x"}),
        ),
        "denied",
    );
    assert!(!exists(&e.path(".latch")));
}

#[test]
fn guarded_edit_rejects_after_an_external_change() {
    let e = env();
    // Creating a new file needs no read.
    let o = e.call(
        "write_file",
        json!({"path": "src/lib.rs", "content": "fn a() {}\nfn b() {}\n"}),
    );
    assert_ok(&o);
    assert!(o.result.content.contains("created"));
    // Consecutive edits work: the write is observed.
    assert_ok(&e.call(
        "edit_file",
        json!({"path": "src/lib.rs", "old_string": "fn a() {}", "new_string": "fn a() { 1 }"}),
    ));
    assert_ok(&e.call(
        "edit_file",
        json!({"path": "src/lib.rs", "old_string": "fn b() {}", "new_string": "fn b() { 2 }"}),
    ));
    assert_eq!(
        std::fs::read_to_string(e.path("src/lib.rs")).unwrap(),
        "fn a() { 1 }\nfn b() { 2 }\n"
    );

    // Someone changes the file behind the tool's back.
    e.write("src/lib.rs", "fn a() { 1 }\nfn b() { 2 }\nfn c() {}\n");
    let gen_before = e.generation();
    let o = e.call(
        "edit_file",
        json!({"path": "src/lib.rs", "old_string": "fn c() {}", "new_string": "fn c() { 3 }"}),
    );
    assert_err(&o, "re-read");
    assert_eq!(
        std::fs::read_to_string(e.path("src/lib.rs")).unwrap(),
        "fn a() { 1 }\nfn b() { 2 }\nfn c() {}\n",
        "the external change is kept"
    );
    let changes = e.find(|k| matches!(k, EventKind::ExternalChange { .. }));
    assert_eq!(changes.len(), 1);
    match &changes[0].kind {
        EventKind::ExternalChange {
            path,
            actual_sha256,
            ..
        } => {
            assert_eq!(path, "src/lib.rs");
            assert_eq!(
                actual_sha256.as_deref(),
                Some(sha256_hex(b"fn a() { 1 }\nfn b() { 2 }\nfn c() {}\n").as_str())
            );
        }
        _ => unreachable!(),
    }
    assert_eq!(
        e.generation(),
        gen_before + 1,
        "an external change advances the generation"
    );
    // Still rejected (and not recorded twice) until re-read.
    assert_err(
        &e.call("write_file", json!({"path": "src/lib.rs", "content": "x"})),
        "re-read",
    );
    assert_eq!(
        e.find(|k| matches!(k, EventKind::ExternalChange { .. }))
            .len(),
        1
    );

    assert_ok(&e.call("read_file", json!({"path": "src/lib.rs"})));
    assert_ok(&e.call(
        "edit_file",
        json!({"path": "src/lib.rs", "old_string": "fn c() {}", "new_string": "fn c() { 3 }"}),
    ));
    assert!(
        std::fs::read_to_string(e.path("src/lib.rs"))
            .unwrap()
            .ends_with("fn c() { 3 }\n")
    );
}

#[test]
fn existing_files_must_be_read_before_writing() {
    let e = env();
    e.write("notes.txt", "old\n");
    assert_err(
        &e.call(
            "write_file",
            json!({"path": "notes.txt", "content": "new\n"}),
        ),
        "has not been read",
    );
    assert_err(
        &e.call(
            "edit_file",
            json!({"path": "notes.txt", "old_string": "old", "new_string": "new"}),
        ),
        "has not been read",
    );
    assert_eq!(
        std::fs::read_to_string(e.path("notes.txt")).unwrap(),
        "old\n"
    );
    assert!(
        e.find(|k| matches!(k, EventKind::Mutation { .. }))
            .is_empty()
    );

    assert_ok(&e.call("read_file", json!({"path": "notes.txt"})));
    assert_ok(&e.call(
        "write_file",
        json!({"path": "notes.txt", "content": "new\n"}),
    ));
    assert_eq!(
        std::fs::read_to_string(e.path("notes.txt")).unwrap(),
        "new\n"
    );
}

#[test]
fn a_file_deleted_externally_can_be_created_again() {
    let e = env();
    e.write("gone.txt", "here\n");
    assert_ok(&e.call("read_file", json!({"path": "gone.txt"})));
    std::fs::remove_file(e.path("gone.txt")).unwrap();
    assert_err(
        &e.call(
            "write_file",
            json!({"path": "gone.txt", "content": "again\n"}),
        ),
        "re-read",
    );
    assert_err(
        &e.call("read_file", json!({"path": "gone.txt"})),
        "does not exist",
    );
    assert_ok(&e.call(
        "write_file",
        json!({"path": "gone.txt", "content": "again\n"}),
    ));
    assert_eq!(
        std::fs::read_to_string(e.path("gone.txt")).unwrap(),
        "again\n"
    );
}

#[test]
fn edit_requires_a_unique_match_unless_replace_all() {
    let e = env();
    e.write("a.txt", "x = 1\nx = 1\n");
    assert_ok(&e.call("read_file", json!({"path": "a.txt"})));
    assert_err(
        &e.call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"}),
        ),
        "occurs 2 times",
    );
    assert_err(
        &e.call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "y", "new_string": "z"}),
        ),
        "does not occur",
    );
    assert!(
        e.find(|k| matches!(k, EventKind::Mutation { .. }))
            .is_empty()
    );
    let o = e.call(
        "edit_file",
        json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": true}),
    );
    assert_ok(&o);
    assert!(
        o.result.content.contains("2 occurrences"),
        "{}",
        o.result.content
    );
    assert_eq!(
        std::fs::read_to_string(e.path("a.txt")).unwrap(),
        "x = 2\nx = 2\n"
    );
}

#[test]
fn mutation_is_committed_before_the_write_and_observed_after() {
    let e = env();
    let gen0 = e.generation();
    assert_ok(&e.call("write_file", json!({"path": "m.txt", "content": "hello\n"})));
    let events = e.events();
    let mutation = events
        .iter()
        .find(|ev| matches!(&ev.kind, EventKind::Mutation { source, paths, .. } if source == "write_file" && paths == &vec!["m.txt".to_string()]))
        .expect("mutation recorded");
    let observed = events
        .iter()
        .find(|ev| matches!(&ev.kind, EventKind::FileObserved { path, .. } if path == "m.txt"))
        .expect("observation recorded");
    assert!(mutation.seq < observed.seq);
    match &observed.kind {
        EventKind::FileObserved { sha256, size, .. } => {
            assert_eq!(sha256.as_deref(), Some(sha256_hex(b"hello\n").as_str()));
            assert_eq!(*size, 6);
        }
        _ => unreachable!(),
    }
    assert_eq!(e.generation(), gen0 + 1);
}

#[test]
fn reads_are_bounded_and_large_files_carry_no_hash() {
    let e = env();
    let big: String = (0..2048)
        .map(|i| format!("line {i:05} {}\n", "x".repeat(38)))
        .collect();
    assert_eq!(big.len(), 100 * 1024);
    e.write("big.txt", &big);
    let o = e.call("read_file", json!({"path": "big.txt"}));
    assert_ok(&o);
    let content = &o.result.content;
    assert!(content.len() <= READ_MAX_BYTES, "{}", content.len());
    assert!(
        latch_engine_sdk::estimate(latch_engine_sdk::types::EstimatorProfile::Openai, content)
            <= READ_MAX_TOKENS
    );
    assert!(content.contains("line 00000"));
    assert!(
        content.contains("continue with offset="),
        "{}",
        &content[content.len() - 200..]
    );
    let obs = e.find(|k| matches!(k, EventKind::FileObserved { .. }));
    assert!(matches!(
        &obs[0].kind,
        EventKind::FileObserved { sha256: None, size, .. } if *size == 100 * 1024
    ));

    // Paging continues where the page ended.
    let next: u64 = content
        .rsplit("offset=")
        .next()
        .unwrap()
        .trim_end_matches(']')
        .parse()
        .unwrap();
    let o = e.call(
        "read_file",
        json!({"path": "big.txt", "offset": next, "limit": 3}),
    );
    assert_ok(&o);
    assert!(o.result.content.contains(&format!("line {:05}", next - 1)));
    assert_eq!(
        o.result
            .content
            .lines()
            .filter(|l| l.contains('\t'))
            .count(),
        3
    );

    // A small file is hashed whole, even when only a page is shown.
    e.write("small.txt", "a\nb\nc\n");
    let o = e.call(
        "read_file",
        json!({"path": "small.txt", "offset": 2, "limit": 1}),
    );
    assert_ok(&o);
    assert!(
        o.result.content.contains("     2\tb"),
        "{}",
        o.result.content
    );
    assert!(!o.result.content.contains("\ta"));
    let obs = e.find(|k| matches!(k, EventKind::FileObserved { path, .. } if path == "small.txt"));
    assert!(matches!(
        &obs[0].kind,
        EventKind::FileObserved { sha256: Some(h), size: 6, .. } if *h == sha256_hex(b"a\nb\nc\n")
    ));

    // One enormous line is cut to the bound too.
    e.write("oneline.txt", &"y".repeat(200 * 1024));
    let o = e.call("read_file", json!({"path": "oneline.txt"}));
    assert_ok(&o);
    assert!(o.result.content.len() <= READ_MAX_BYTES);
    assert!(
        o.result
            .content
            .contains("line 1 is 204800 bytes long; only its first"),
        "{}",
        o.result.content
    );
}

#[test]
fn list_and_grep_respect_gitignore() {
    let e = env();
    e.write(".gitignore", "ignored/\n*.log\n");
    e.write("src/a.rs", "fn needle() {}\n");
    e.write("src/b.txt", "NEEDLE in caps\n");
    e.write("ignored/c.rs", "needle\n");
    e.write("debug.log", "needle\n");
    e.write(".git/config", "needle\n");
    e.write(".latch/notes", "needle\n");

    let o = e.call("list_files", json!({}));
    assert_ok(&o);
    let listed: Vec<&str> = o
        .result
        .content
        .lines()
        .filter(|l| !l.starts_with('['))
        .collect();
    assert_eq!(listed, vec![".gitignore", "src/a.rs", "src/b.txt"]);

    let o = e.call("list_files", json!({"pattern": "*.rs"}));
    assert_eq!(
        o.result
            .content
            .lines()
            .filter(|l| !l.starts_with('['))
            .collect::<Vec<_>>(),
        vec!["src/a.rs"]
    );

    let o = e.call("grep", json!({"pattern": "needle"}));
    assert_ok(&o);
    let lines: Vec<&str> = o
        .result
        .content
        .lines()
        .filter(|l| !l.starts_with('['))
        .collect();
    assert_eq!(lines, vec!["src/a.rs:1: fn needle() {}"]);

    let o = e.call(
        "grep",
        json!({"pattern": "needle", "case_insensitive": true, "path": "src"}),
    );
    let lines: Vec<&str> = o
        .result
        .content
        .lines()
        .filter(|l| !l.starts_with('['))
        .collect();
    assert_eq!(
        lines,
        vec!["src/a.rs:1: fn needle() {}", "src/b.txt:1: NEEDLE in caps"]
    );

    let o = e.call(
        "grep",
        json!({"pattern": "needle", "case_insensitive": true, "glob": "*.txt"}),
    );
    assert!(
        o.result.content.starts_with("src/b.txt:1:"),
        "{}",
        o.result.content
    );

    assert_err(
        &e.call("grep", json!({"pattern": "("})),
        "not a valid regular expression",
    );
    let o = e.call("grep", json!({"pattern": "absent-term"}));
    assert_ok(&o);
    assert!(o.result.content.contains("no matches"));
}

/// The process's peak resident set (VmHWM) in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

#[test]
fn read_file_on_a_multi_gigabyte_file_without_a_newline_uses_bounded_memory() {
    let e = env();
    let path = e.ws.join("huge.log");
    // Text up front (not binary), then a sparse tail: 2 GiB, no newline.
    let file = std::fs::File::create(&path).unwrap();
    use std::io::Write;
    (&file).write_all(&[b'a'; 16 * 1024]).unwrap();
    file.set_len(2 << 30).unwrap();
    drop(file);
    let before = peak_rss();
    let o = e.call("read_file", json!({"path": "huge.log"}));
    assert_ok(&o);
    assert!(o.result.content.len() <= READ_MAX_BYTES);
    // The line's real length, and where to read on inside it.
    assert!(
        o.result
            .content
            .contains("line 1 is 2147483648 bytes long; only its first"),
        "{}",
        o.result.content
    );
    assert!(o.result.content.contains("tail -c +"));
    let grown = peak_rss().saturating_sub(before);
    assert!(
        grown < 256 << 20,
        "reading a 2 GiB line grew the peak resident set by {grown} bytes"
    );
}

#[test]
fn read_artifact_reads_only_artifacts_of_the_sessions_tree() {
    let e = env();
    let long: String = (1..=6000).map(|i| format!("entry {i}\n")).collect();
    let artifact = |text: &str| e.store.put_artifact(text.as_bytes(), None).unwrap().sha256;
    // Another root session of the store names one artifact, a child of
    // this session another.
    let model = e.store.session(&e.session).unwrap().model;
    let ws = e.ws.to_str().unwrap().to_string();
    let other = e.store.create_session(&ws, None, &model).unwrap().id;
    let child = e
        .store
        .create_session(&ws, Some(&e.session), &model)
        .unwrap()
        .id;
    let foreign = artifact(&format!("foreign\n{long}"));
    let of_child = artifact(&format!("child\n{long}"));
    for (session, sha) in [(&other, &foreign), (&child, &of_child)] {
        e.store
            .append(session, EventKind::user_text(format!("see artifact {sha}")))
            .unwrap();
    }
    let o = e.call("read_artifact", json!({"id": foreign}));
    assert_err(
        &o,
        &format!("artifact `{foreign}` is not an artifact of this session"),
    );
    let o = e.call(
        "read_artifact",
        json!({"id": format!("artifact {of_child}"), "limit": 2}),
    );
    assert_ok(&o);
    assert!(
        o.result
            .content
            .starts_with("     1\tchild\n     2\tentry 1\n"),
        "{}",
        o.result.content
    );
    assert!(o.result.content.contains("continue with offset=3"));
    // A malformed id is named, with what an id looks like.
    assert_err(&e.call("read_artifact", json!({"id": "abc"})), "not `abc`");
}
