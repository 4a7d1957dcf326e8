//! Rewind against links a sandboxed command plants where files were: it
//! never restores, creates or removes through one. Each test reproduces an
//! escape: a link to `~/.bashrc` whose bytes the command made match what
//! Latch last knew, a dangling link to `~/.ssh/authorized_keys` where a
//! removed file was, a directory of the workspace swapped for a link to
//! `~/.ssh`, a link swapped in between the plan and the rewind. The files
//! outside stay as they were, and the link is left alone and named.

mod commands;

use latch_engine_sdk::types::ModelProfile;
use latch_kernel::{
    EventKind, LeftBehind, RewindPlan, Store, apply_rewind, plan_rewind, record_checkpoint,
};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    store: Store,
    session: String,
    /// The user message a rewind goes back before.
    before: u64,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, home) = (base.join("ws"), base.join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".bashrc"), "the user's bashrc\n").unwrap();
    let store = Store::open(base.join("store/latch.db")).unwrap();
    let model = ModelProfile::with_defaults("openai", "m");
    let session = store
        .create_session(ws.to_str().unwrap(), None, &model)
        .unwrap()
        .id;
    let before = store.append(&session, EventKind::user_text("go")).unwrap();
    Fixture {
        _dir: dir,
        ws,
        home,
        store,
        session,
        before,
    }
}

impl Fixture {
    /// Latch writes `bytes` to `path`, which held `old` (a `write_file`).
    fn latch_writes(&self, path: &str, old: Option<&[u8]>, bytes: &[u8]) {
        record_checkpoint(&self.store, &self.session, path, old).unwrap();
        let abs = self.ws.join(path);
        std::fs::create_dir_all(abs.parent().unwrap()).unwrap();
        std::fs::write(&abs, bytes).unwrap();
        self.store
            .append(&self.session, EventKind::file_observed(path, bytes))
            .unwrap();
    }

    /// A command removed `path`, which held `old` (its checkpoint).
    fn command_removed(&self, path: &str, old: &[u8]) {
        let sha = self.store.put_artifact(old, None).unwrap().sha256;
        self.store
            .append(
                &self.session,
                EventKind::Checkpoint {
                    path: path.into(),
                    before: Some(sha),
                    after: Some(LeftBehind::Removed),
                },
            )
            .unwrap();
        let _ = std::fs::remove_file(self.ws.join(path));
    }

    /// A command replaces `path` with a link to `target`.
    fn plant_link(&self, path: &str, target: &Path) {
        let abs = self.ws.join(path);
        match std::fs::symlink_metadata(&abs) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&abs).unwrap(),
            Ok(_) => std::fs::remove_file(&abs).unwrap(),
            Err(_) => {}
        }
        symlink(target, abs).unwrap();
    }

    fn rewind(&self) -> RewindPlan {
        let mut plan = plan_rewind(&self.store, &self.session, &self.ws, self.before).unwrap();
        apply_rewind(&self.store, &self.session, &self.ws, &mut plan).unwrap();
        plan
    }

    fn rewound_conflicts(&self) -> Vec<String> {
        self.store
            .all_events(&self.session)
            .unwrap()
            .into_iter()
            .find_map(|e| match e.kind {
                EventKind::Rewound { conflicts, .. } => Some(conflicts),
                _ => None,
            })
            .unwrap()
    }
}

#[test]
fn a_link_to_bashrc_with_the_bytes_latch_knew_is_never_overwritten() {
    let f = fixture();
    let bashrc = std::fs::read(f.home.join(".bashrc")).unwrap();
    // Latch wrote the bytes of ~/.bashrc (which a command may read) to
    // a.txt; a command then puts a link to ~/.bashrc there.
    f.latch_writes("a.txt", Some(b"echo pwned\n"), &bashrc);
    f.plant_link("a.txt", &f.home.join(".bashrc"));
    let plan = f.rewind();
    assert_eq!(std::fs::read(f.home.join(".bashrc")).unwrap(), bashrc);
    assert!(f.ws.join("a.txt").is_symlink(), "the link is left alone");
    assert_eq!(plan.conflicts, ["a.txt"]);
    assert_eq!(plan.links, ["a.txt"]);
    assert_eq!(f.rewound_conflicts(), ["a.txt"]);
}

#[test]
fn a_dangling_link_where_a_removed_file_was_never_creates_authorized_keys() {
    let f = fixture();
    std::fs::write(f.ws.join("keys"), "ssh-ed25519 AAAA attacker\n").unwrap();
    f.command_removed("keys", b"ssh-ed25519 AAAA attacker\n");
    f.plant_link("keys", &f.home.join(".ssh/authorized_keys"));
    let plan = f.rewind();
    assert!(!f.home.join(".ssh/authorized_keys").exists());
    assert_eq!(plan.links, ["keys"]);
}

#[test]
fn a_directory_swapped_for_a_link_to_ssh_never_receives_a_restored_file() {
    let f = fixture();
    std::fs::create_dir_all(f.ws.join("sub")).unwrap();
    std::fs::write(f.ws.join("sub/authorized_keys"), "attacker\n").unwrap();
    f.command_removed("sub/authorized_keys", b"ssh-ed25519 AAAA attacker\n");
    f.plant_link("sub", &f.home.join(".ssh"));
    let plan = f.rewind();
    assert!(!f.home.join(".ssh/authorized_keys").exists());
    assert_eq!(plan.links, ["sub/authorized_keys"]);
}

#[test]
fn a_link_swapped_in_between_the_plan_and_the_rewind_is_left_alone() {
    let f = fixture();
    let bashrc = std::fs::read(f.home.join(".bashrc")).unwrap();
    f.latch_writes("a.txt", Some(b"echo pwned\n"), &bashrc);
    f.latch_writes("b.txt", None, b"new\n");
    let mut plan = plan_rewind(&f.store, &f.session, &f.ws, f.before).unwrap();
    assert_eq!(plan.actions.len(), 2, "both files would go back");
    f.plant_link("a.txt", &f.home.join(".bashrc"));
    f.plant_link("b.txt", &f.home.join(".bashrc"));
    apply_rewind(&f.store, &f.session, &f.ws, &mut plan).unwrap();
    assert_eq!(std::fs::read(f.home.join(".bashrc")).unwrap(), bashrc);
    assert!(f.ws.join("a.txt").is_symlink() && f.ws.join("b.txt").is_symlink());
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert_eq!(plan.links, ["a.txt", "b.txt"]);
    assert_eq!(f.rewound_conflicts(), ["a.txt", "b.txt"]);
}

#[test]
fn regular_files_still_go_back() {
    let f = fixture();
    f.latch_writes("d/a.txt", Some(b"one\n"), b"two\n");
    f.latch_writes("d/e/new.txt", None, b"new\n");
    let plan = f.rewind();
    assert!(plan.conflicts.is_empty(), "{plan:?}");
    assert_eq!(std::fs::read(f.ws.join("d/a.txt")).unwrap(), b"one\n");
    assert!(!f.ws.join("d/e/new.txt").exists());
    // A file removed meanwhile by hand is restored with its directories.
    let f = fixture();
    f.latch_writes("x/y/z.txt", Some(b"z\n"), b"zz\n");
    std::fs::remove_dir_all(f.ws.join("x")).unwrap();
    f.command_removed("x/y/z.txt", b"zz\n");
    let plan = f.rewind();
    assert!(plan.conflicts.is_empty(), "{plan:?}");
    assert_eq!(std::fs::read(f.ws.join("x/y/z.txt")).unwrap(), b"z\n");
}
