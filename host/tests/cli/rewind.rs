//! Checkpoints and rewind, through the real `latch` binary against the
//! scripted provider over HTTP: a line-interface session of two messages
//! edits and writes files; `latch rewind` lists the messages with the files
//! changed from each on; `--to SEQ` puts the files back to their state
//! before that message as new durable events (the workspace generation
//! advances); a file changed outside Latch is reported and left alone;
//! `/rewind` does the same inside the line interface.

use super::{at, git, latch, project, resume_last, runtime};
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

fn store(ws: &Path) -> Store {
    Store::open(latch_kernel::default_store_path(ws)).unwrap()
}

fn latest(ws: &Path) -> SessionRecord {
    let key = ws.canonicalize().unwrap().display().to_string();
    store(ws).latest_root_session(&key).unwrap().unwrap()
}

fn user_seqs(ws: &Path, session: &str) -> Vec<u64> {
    store(ws)
        .all_events(session)
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::UserMessage { .. }))
        .map(|e| e.seq)
        .collect()
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The first message fixes `src/math.sh` and writes `notes.txt`; the second
/// rewrites `notes.txt` and creates `extra.txt`.
fn two_messages() -> Script {
    Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"src/math.sh"}"#),
        ScriptedTurn::tool_call(
            "edit_file",
            r#"{"path":"src/math.sh","old_string":"$1 - $2","new_string":"$1 + $2"}"#,
        )
        .with_tool_call("write_file", r#"{"path":"notes.txt","content":"one\n"}"#),
        ScriptedTurn::text("Done one."),
        ScriptedTurn::tool_call("write_file", r#"{"path":"notes.txt","content":"two\n"}"#)
            .with_tool_call("write_file", r#"{"path":"extra.txt","content":"new\n"}"#),
        ScriptedTurn::text("Done two."),
    ])
}

/// The two messages typed into the line interface.
fn session_of_two(ws: &Path, server: &FakeServer) -> SessionRecord {
    let mut child = latch(ws)
        .args(at(server))
        .arg("chat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"first task\nsecond task\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(server.requests().len(), 5, "{}", text(&out));
    assert_eq!(read(ws, "notes.txt").as_deref(), Some("two\n"));
    latest(ws)
}

fn read(ws: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(ws.join(rel)).ok()
}

#[test]
fn rewind_lists_messages_and_restores_files_as_new_events() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(two_messages())).unwrap();
    let ws = project();
    let session = session_of_two(ws.path(), &server);
    let seqs = user_seqs(ws.path(), &session.id);
    assert_eq!(seqs.len(), 2);

    let out = latch(ws.path()).arg("rewind").output().unwrap();
    let listed = text(&out);
    assert!(out.status.success(), "{listed}");
    assert!(
        listed.contains(&format!(
            "{}  first task  (3 files: extra.txt, notes.txt, src/math.sh)",
            seqs[0]
        )),
        "{listed}"
    );
    assert!(
        listed.contains(&format!(
            "{}  second task  (2 files: extra.txt, notes.txt)",
            seqs[1]
        )),
        "{listed}"
    );

    let generation = store(ws.path()).generation_of(&session.id).unwrap();
    let out = latch(ws.path())
        .args(["rewind", &session.id, "--to", &seqs[1].to_string()])
        .output()
        .unwrap();
    let done = text(&out);
    assert!(out.status.success(), "{done}");
    assert!(
        done.contains("restored notes.txt") && done.contains("removed  extra.txt"),
        "{done}"
    );
    assert_eq!(read(ws.path(), "notes.txt").as_deref(), Some("one\n"));
    assert_eq!(read(ws.path(), "extra.txt"), None);
    assert!(read(ws.path(), "src/math.sh").unwrap().contains("$1 + $2"));
    // A new durable event: history is kept, the generation advances.
    let s = store(ws.path());
    assert!(s.generation_of(&session.id).unwrap() > generation);
    let events = s.all_events(&session.id).unwrap();
    assert_eq!(
        user_seqs(ws.path(), &session.id),
        seqs,
        "no message is deleted"
    );
    assert!(events.iter().any(|e| e.kind
        == EventKind::Rewound {
            to_seq: seqs[1],
            restored: vec!["notes.txt".into()],
            removed: vec!["extra.txt".into()],
            conflicts: vec![],
        }));

    // Changed by hand: shown and left alone; the rest still goes back.
    std::fs::write(ws.path().join("src/math.sh"), "edited by hand\n").unwrap();
    let out = latch(ws.path())
        .args(["rewind", &session.id, "--to", &seqs[0].to_string()])
        .output()
        .unwrap();
    let done = text(&out);
    assert_eq!(out.status.code(), Some(1), "{done}");
    assert!(done.contains("left alone src/math.sh"), "{done}");
    assert!(done.contains("removed  notes.txt"), "{done}");
    assert_eq!(
        read(ws.path(), "src/math.sh").as_deref(),
        Some("edited by hand\n")
    );
    assert_eq!(read(ws.path(), "notes.txt"), None);

    let out = latch(ws.path())
        .args(["rewind", &session.id, "--to", "999999"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("is not the sequence number of a user message"));
}

#[test]
fn slash_rewind_in_the_line_interface() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(two_messages())).unwrap();
    let ws = project();
    let session = session_of_two(ws.path(), &server);
    let seqs = user_seqs(ws.path(), &session.id);
    let mut cmd = latch(ws.path());
    cmd.args(at(&server));
    let input = format!("/rewind\n/rewind {}\n", seqs[1]);
    let out = resume_last(cmd, input.as_bytes());
    let shown = text(&out);
    assert!(
        shown.contains(&format!("{}  second task", seqs[1])),
        "{shown}"
    );
    assert!(shown.contains("restored notes.txt"), "{shown}");
    assert!(
        shown.contains("the user rewound the files to their state before message"),
        "{shown}"
    );
    assert_eq!(read(ws.path(), "notes.txt").as_deref(), Some("one\n"));
    assert_eq!(read(ws.path(), "extra.txt"), None);
}

/// What 100 checkpoints of a 16 KiB file cost on disk (run with
/// `--ignored --nocapture`; the README quotes it).
#[test]
#[ignore]
fn checkpoint_disk_cost() {
    let rt = runtime();
    let mut turns = vec![ScriptedTurn::tool_call(
        "read_file",
        r#"{"path":"big.txt"}"#,
    )];
    for i in 1..=100 {
        let args = serde_json::json!({
            "path": "big.txt",
            "old_string": format!("counter {}\n", i - 1),
            "new_string": format!("counter {i}\n"),
        });
        turns.push(ScriptedTurn::tool_call("edit_file", args.to_string()));
    }
    turns.push(ScriptedTurn::text("Done."));
    let server = rt.block_on(FakeServer::start(Script::new(turns))).unwrap();
    let ws = project();
    let line = "fn example() { let value = compute(42); println!(\"{value}\"); }\n";
    let mut big = line.repeat(16 * 1024 / line.len());
    big.push_str("counter 0\n");
    std::fs::write(ws.path().join("big.txt"), &big).unwrap();
    let before = dir_size(&latch_kernel::default_store_path(ws.path()));
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "count to 100"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let session = latest(ws.path());
    let s = store(ws.path());
    let checkpoints: Vec<String> = s
        .all_events(&session.id)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Checkpoint { before, .. } => before,
            _ => None,
        })
        .collect();
    assert_eq!(checkpoints.len(), 100);
    let artifact_bytes: u64 = checkpoints
        .iter()
        .map(|h| s.artifact(h).unwrap().unwrap().byte_len)
        .sum();
    drop(s);
    let after = dir_size(&latch_kernel::default_store_path(ws.path()));
    println!(
        "100 checkpoints of a {} byte file: artifacts {} bytes ({:.2} MB); store {} -> {} bytes ({:.2} MB)",
        big.len(),
        artifact_bytes,
        artifact_bytes as f64 / 1e6,
        before,
        after,
        after as f64 / 1e6
    );
}

/// The store file and its WAL and shared-memory files, in bytes.
fn dir_size(db: &Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", db.display())).ok())
        .map(|m| m.len())
        .sum()
}

/// `/rewind` in the terminal UI (tmux): the list in a popup, then the
/// restore, and the rewind's note in the transcript.
#[test]
fn slash_rewind_in_the_terminal_ui() {
    use super::tui::{Tmux, latch_line};
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(two_messages())).unwrap();
    let ws = project();
    let tmux = Tmux::new();
    tmux.start("rw", &latch_line(ws.path(), &server, &[]));
    tmux.wait_for("rw", &["ready"]);
    for (task, done) in [("first task", "Done one."), ("second task", "Done two.")] {
        tmux.text("rw", task);
        tmux.keys("rw", &["Enter"]);
        tmux.wait_for("rw", &[done]);
    }
    let session = latest(ws.path());
    let seqs = user_seqs(ws.path(), &session.id);
    tmux.text("rw", "/rewind");
    tmux.keys("rw", &["Enter"]);
    tmux.wait_for("rw", &["/rewind", &format!("{}  second task", seqs[1])]);
    tmux.keys("rw", &["Escape"]);
    tmux.wait_gone("rw", &[&format!("{}  second task", seqs[1])]);
    tmux.text("rw", &format!("/rewind {}", seqs[1]));
    tmux.keys("rw", &["Enter"]);
    tmux.wait_for("rw", &["restored notes.txt", "removed  extra.txt"]);
    assert_eq!(read(ws.path(), "notes.txt").as_deref(), Some("one\n"));
    assert_eq!(read(ws.path(), "extra.txt"), None);
    tmux.keys("rw", &["Escape"]);
    tmux.wait_for("rw", &["the user rewound the files"]);
}

/// Changes a `shell` command makes in a git work tree are checkpointed from
/// the snapshot taken before it ran: `latch rewind` lists them, and `--to`
/// puts the tracked file's old bytes back and removes the file the command
/// created; the user's repository (index, objects) is not written.
#[test]
fn rewind_restores_what_a_shell_command_changed() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call(
                "shell",
                r#"{"command":"printf 'rewritten\\n' > src/math.sh; printf 'made\\n' > made.txt; rm test.sh"}"#,
            ),
            ScriptedTurn::text("Changed by shell."),
        ])))
        .unwrap();
    let ws = project();
    let math = read(ws.path(), "src/math.sh").unwrap();
    let test_sh = read(ws.path(), "test.sh").unwrap();
    std::fs::write(ws.path().join(".gitignore"), ".test-home/\n").unwrap();
    git(ws.path(), &["init", "-q"]);
    git(ws.path(), &["add", "-A"]);
    git(ws.path(), &["commit", "-qm", "start"]);
    let objects = |ws: &Path| {
        walk(&ws.join(".git/objects"))
            .into_iter()
            .filter(|p| p.is_file())
            .count()
    };
    let (index, object_count) = (
        std::fs::read(ws.path().join(".git/index")).unwrap(),
        objects(ws.path()),
    );

    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "rewrite math with shell"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(read(ws.path(), "made.txt").as_deref(), Some("made\n"));
    let session = latest(ws.path());
    let seqs = user_seqs(ws.path(), &session.id);

    let out = latch(ws.path()).arg("rewind").output().unwrap();
    let listed = text(&out);
    assert!(
        listed.contains("3 files: made.txt, src/math.sh, test.sh"),
        "{listed}"
    );
    let out = latch(ws.path())
        .args(["rewind", &session.id, "--to", &seqs[0].to_string()])
        .output()
        .unwrap();
    let done = text(&out);
    assert!(out.status.success(), "{done}");
    assert!(
        done.contains("restored src/math.sh")
            && done.contains("restored test.sh")
            && done.contains("removed  made.txt"),
        "{done}"
    );
    assert_eq!(read(ws.path(), "src/math.sh"), Some(math));
    assert_eq!(read(ws.path(), "test.sh"), Some(test_sh));
    assert_eq!(read(ws.path(), "made.txt"), None);
    // The snapshot wrote nothing into the user's repository.
    assert_eq!(std::fs::read(ws.path().join(".git/index")).unwrap(), index);
    assert_eq!(objects(ws.path()), object_count);
}

/// Every path under `dir`, recursively.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}
