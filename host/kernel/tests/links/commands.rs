//! Links a command leaves where files were, in a git work tree: the
//! checkpoint of the command (taken when it ends, or on resume when it was
//! killed mid-way) never reads through them, keeps the file's bytes from
//! before, and a rewind names the link and leaves it and what it points at
//! alone.

use latch_engine_sdk::types::ModelProfile;
use latch_kernel::git::Git;
use latch_kernel::snapshot::Snapshot;
use latch_kernel::{
    EventKind, LeftBehind, Store, apply_rewind, plan_rewind, run_possible_mutation,
    settle_pending_mutations,
};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Repo {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    store_dir: PathBuf,
    store: Store,
    session: String,
    before: u64,
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A committed repository with `a.txt` and `sub/authorized_keys`; a home
/// beside it with `.bashrc` and an empty `.ssh`.
fn repo() -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, home) = (base.join("ws"), base.join("home"));
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".bashrc"), "the user's bashrc\n").unwrap();
    std::fs::write(ws.join("a.txt"), "a v1\n").unwrap();
    std::fs::write(
        ws.join("sub/authorized_keys"),
        "ssh-ed25519 AAAA attacker\n",
    )
    .unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "start"]);
    let store_dir = base.join("store");
    let store = Store::open(store_dir.join("latch.db")).unwrap();
    let model = ModelProfile::with_defaults("openai", "m");
    let session = store
        .create_session(ws.to_str().unwrap(), None, &model)
        .unwrap()
        .id;
    let before = store.append(&session, EventKind::user_text("go")).unwrap();
    Repo {
        _dir: dir,
        ws,
        home,
        store_dir,
        store,
        session,
        before,
    }
}

impl Repo {
    /// What a hostile command does: `a.txt` becomes a link to `~/.bashrc`,
    /// `sub` a link to `~/.ssh`.
    fn plant_links(&self) {
        std::fs::remove_file(self.ws.join("a.txt")).unwrap();
        symlink(self.home.join(".bashrc"), self.ws.join("a.txt")).unwrap();
        std::fs::remove_dir_all(self.ws.join("sub")).unwrap();
        symlink(self.home.join(".ssh"), self.ws.join("sub")).unwrap();
    }

    /// The checkpoints recorded: path, bytes before, what was left.
    fn checkpoints(&self) -> Vec<(String, Option<Vec<u8>>, Option<LeftBehind>)> {
        self.store
            .all_events(&self.session)
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::Checkpoint {
                    path,
                    before,
                    after,
                } => Some((
                    path,
                    before.map(|h| self.store.artifact_bytes(&h).unwrap().unwrap()),
                    after,
                )),
                _ => None,
            })
            .collect()
    }

    /// The checkpoints hold the bytes from before and name the links; a
    /// rewind writes nothing outside and names both links.
    fn assert_links_kept_and_named(&self) {
        assert_eq!(
            self.checkpoints(),
            [
                (
                    "a.txt".to_string(),
                    Some(b"a v1\n".to_vec()),
                    Some(LeftBehind::NotAFile)
                ),
                (
                    "sub/authorized_keys".to_string(),
                    Some(b"ssh-ed25519 AAAA attacker\n".to_vec()),
                    Some(LeftBehind::NotAFile)
                ),
            ]
        );
        let mut plan = plan_rewind(&self.store, &self.session, &self.ws, self.before).unwrap();
        apply_rewind(&self.store, &self.session, &self.ws, &mut plan).unwrap();
        assert_eq!(plan.links, ["a.txt", "sub/authorized_keys"]);
        assert_eq!(plan.conflicts, ["a.txt", "sub/authorized_keys"]);
        assert_eq!(
            std::fs::read(self.home.join(".bashrc")).unwrap(),
            b"the user's bashrc\n"
        );
        assert!(!self.home.join(".ssh/authorized_keys").exists());
        assert!(self.ws.join("a.txt").is_symlink() && self.ws.join("sub").is_symlink());
    }
}

#[test]
fn a_command_that_leaves_links_where_files_were_gets_them_named_never_read_through() {
    let r = repo();
    run_possible_mutation(
        &r.store,
        &r.session,
        "shell",
        Some("ln -sf ~/.bashrc a.txt".into()),
        &r.ws,
        || r.plant_links(),
    )
    .unwrap();
    r.assert_links_kept_and_named();
}

#[test]
fn a_killed_command_s_links_are_named_when_resume_settles_it() {
    let r = repo();
    // What run_possible_mutation commits before the command; the process
    // then dies mid-command, and a resume settles it.
    let repository = r.store.session_repository(&r.session).unwrap().unwrap();
    let git = Git::open(&repository, &r.ws, &r.store_dir).unwrap();
    let tree = Snapshot::take(&git, &[]).unwrap().tree;
    r.store
        .append(
            &r.session,
            EventKind::MutationPending {
                source: "shell".into(),
                command: Some("ln -sf ~/.bashrc a.txt".into()),
                snapshot: Some(tree),
            },
        )
        .unwrap();
    r.plant_links();
    assert_eq!(
        settle_pending_mutations(&r.store, &r.session, &r.ws)
            .unwrap()
            .len(),
        1
    );
    r.assert_links_kept_and_named();
}
