//! The file tools against links a hostile command plants and swaps: a
//! directory exchanged with a link to outside (`renameat2(RENAME_EXCHANGE)`)
//! in a loop while the tools read and write in it never lets a byte out or
//! in; and `.git`, like `.latch/`, is never written by the file tools.

use crate::common;

use common::{assert_err, assert_ok, env};
use serde_json::json;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Exchange `a` and `b` atomically.
fn exchange(a: &Path, b: &Path) {
    let (a, b) = (
        CString::new(a.as_os_str().as_bytes()).unwrap(),
        CString::new(b.as_os_str().as_bytes()).unwrap(),
    );
    // SAFETY: two valid NUL-terminated paths.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
}

/// A command swapping `ws/sub` (a directory) with `ws/swap` (a link to
/// `outside`) as fast as it can, until the guard is dropped.
struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    fn start(ws: &Path, outside: &Path) -> Swapper {
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::os::unix::fs::symlink(outside, ws.join("swap")).unwrap();
        let (stop, swaps) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (a, b) = (ws.join("sub"), ws.join("swap"));
        let thread = {
            let (stop, swaps) = (Arc::clone(&stop), Arc::clone(&swaps));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    exchange(&a, &b);
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        Swapper {
            stop,
            swaps,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        self.swaps.load(Ordering::Relaxed)
    }
}

fn outside_dir(e: &common::Env) -> PathBuf {
    let outside = e.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "SECRET\n").unwrap();
    std::fs::canonicalize(outside).unwrap()
}

#[test]
fn write_file_racing_a_directory_link_swap_never_creates_anything_outside() {
    let e = env();
    let outside = outside_dir(&e);
    let swapper = Swapper::start(&e.ws, &outside);
    let (mut written, mut refused) = (0, 0);
    for i in 0..400 {
        let o = e.call(
            "write_file",
            json!({"path": format!("sub/f{i}.txt"), "content": "payload\n"}),
        );
        if o.result.is_error {
            refused += 1;
        } else {
            written += 1;
        }
    }
    let swaps = swapper.stop();
    let mut names: Vec<String> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["secret.txt"], "nothing was created outside");
    assert!(swaps > 100, "the swap raced ({swaps} swaps)");
    assert!(written > 0, "{written} written, {refused} refused");
}

#[test]
fn the_approval_preview_of_an_edit_racing_a_link_swap_never_shows_a_file_outside() {
    let e = env();
    let outside = outside_dir(&e);
    std::fs::create_dir_all(e.ws.join("sub")).unwrap();
    std::fs::write(e.ws.join("sub/secret.txt"), "inside\n").unwrap();
    let swapper = Swapper::start(&e.ws, &outside);
    let mut shown = 0;
    for i in 0..3000 {
        let (name, args) = if i % 2 == 0 {
            (
                "write_file",
                json!({"path": "sub/secret.txt", "content": "new\n"}),
            )
        } else {
            (
                "edit_file",
                json!({"path": "sub/secret.txt", "old_string": "SECRET", "new_string": "x"}),
            )
        };
        let call = latch_engine_sdk::types::ToolCall {
            id: format!("p{i}"),
            name: name.into(),
            arguments_json: args.to_string(),
        };
        let diff = latch_tools::preview(&e.ctx, &call).diff.unwrap_or_default();
        assert!(
            !diff.contains("SECRET"),
            "the preview read through the link: {diff}"
        );
        shown += usize::from(!diff.is_empty());
    }
    let swaps = swapper.stop();
    assert!(swaps > 100 && shown > 0, "{swaps} swaps, {shown} previews");
}

#[test]
fn read_file_racing_a_directory_link_swap_never_reads_outside() {
    let e = env();
    let outside = outside_dir(&e);
    // Whichever way the swap stands, `sub/secret.txt` names a file: the
    // workspace's, or through the link the one outside.
    std::fs::create_dir_all(e.ws.join("sub")).unwrap();
    std::fs::write(e.ws.join("sub/secret.txt"), "inside\n").unwrap();
    let swapper = Swapper::start(&e.ws, &outside);
    let mut read = 0;
    for _ in 0..400 {
        let o = e.call("read_file", json!({"path": "sub/secret.txt"}));
        assert!(
            !o.result.content.contains("SECRET"),
            "read through the link: {}",
            o.result.content
        );
        if !o.result.is_error {
            read += 1;
        }
    }
    let swaps = swapper.stop();
    assert!(swaps > 100 && read > 0, "{swaps} swaps, {read} reads");
}

#[test]
fn edit_file_never_edits_through_a_link_swapped_in_for_the_file() {
    let e = env();
    let outside = outside_dir(&e);
    e.write("a.txt", "one\n");
    assert_ok(&e.call("read_file", json!({"path": "a.txt"})));
    // Between the read and the edit, a command puts a link there.
    std::fs::remove_file(e.ws.join("a.txt")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), e.ws.join("a.txt")).unwrap();
    let o = e.call(
        "edit_file",
        json!({"path": "a.txt", "old_string": "SECRET", "new_string": "pwned"}),
    );
    assert_err(&o, "denied");
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "SECRET\n"
    );
}

#[test]
fn the_file_tools_never_write_git() {
    let e = env();
    std::fs::create_dir_all(e.ws.join(".git/hooks")).unwrap();
    std::fs::write(e.ws.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(e.ws.join("vendor/lib/.git")).unwrap();
    std::os::unix::fs::symlink(e.ws.join(".git"), e.ws.join("gitlink")).unwrap();
    assert_ok(&e.call("read_file", json!({"path": ".git/config"})));
    for path in [
        ".git/config",
        ".git/hooks/pre-commit",
        ".git/commondir",
        ".git/info/attributes",
        "vendor/lib/.git/config",
        "gitlink/hooks/post-index-change",
        ".GIT/config",
    ] {
        let o = e.call("write_file", json!({"path": path, "content": "x"}));
        assert_err(&o, "belongs to git");
        let o = e.call(
            "edit_file",
            json!({"path": path, "old_string": "core", "new_string": "x"}),
        );
        assert_err(&o, "denied");
    }
    assert_eq!(
        std::fs::read_to_string(e.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!e.ws.join(".git/hooks/pre-commit").exists());
    assert!(!e.ws.join(".git/commondir").exists());
    // A `.git` file (a linked worktree) is git's too.
    let e = env();
    std::fs::write(e.ws.join(".git"), "gitdir: /elsewhere\n").unwrap();
    let o = e.call(
        "write_file",
        json!({"path": ".git", "content": "gitdir: /evil\n"}),
    );
    assert_err(&o, "belongs to git");
}

#[test]
fn the_file_tools_never_write_a_repository_directory_a_git_file_names() {
    // `git init --separate-git-dir`: the repository lives in `.gitstore/`
    // of the workspace, named by a `.git` file.
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ok = std::process::Command::new("git")
        .args(["init", "-q", "--separate-git-dir", ".gitstore"])
        .current_dir(&ws)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let store = Arc::new(latch_kernel::Store::open(dir.path().join("s/latch.db")).unwrap());
    let model = latch_engine_sdk::types::ModelProfile::with_defaults("openai", "m");
    let session = store
        .create_session(ws.to_str().unwrap(), None, &model)
        .unwrap()
        .id;
    let ctx = latch_tools::ToolContext::new(store, &session, &ws).unwrap();
    let call = |args: serde_json::Value| {
        latch_tools::execute(
            &ctx,
            &latch_engine_sdk::types::ToolCall {
                id: "c1".into(),
                name: "write_file".into(),
                arguments_json: args.to_string(),
            },
        )
    };
    let o = call(json!({"path": ".gitstore/hooks/pre-commit", "content": "x"}));
    assert_err(&o, "belongs to git");
    assert!(!ws.join(".gitstore/hooks/pre-commit").exists());
    assert_ok(&call(json!({"path": "src/ok.txt", "content": "x"})));
}
