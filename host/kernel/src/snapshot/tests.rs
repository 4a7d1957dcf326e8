//! Snapshots against real repositories: what they hold, what they leave
//! alone, and the checkpoints commands get from them.

use super::*;
use crate::checkpoint::{FileAction, plan_rewind};
use crate::event::{EventKind, LeftBehind};
use crate::git::Repository;
use crate::ops::run_possible_mutation;
use crate::store::Store;
use latch_engine_sdk::types::ModelProfile;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Latch's git for the workspace `ws` with its store in `store_dir`.
fn door(ws: &Path, store_dir: &Path) -> Git {
    Git::open(&Repository::discover(ws).unwrap(), ws, store_dir).unwrap()
}

/// The bytes of one blob of `snap`.
fn blob(snap: &Snapshot, oid: &str, path: &str) -> Option<Vec<u8>> {
    let mut found = None;
    let conversions = snap.conversions(&[path.to_string()]).unwrap();
    snap.read_blobs(
        &[(oid.to_string(), path.to_string())],
        &conversions,
        &mut |_, b| {
            found = Some(b);
            Ok(())
        },
    )
    .unwrap();
    found
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// A repository with a workspace in its `ws/` subdirectory: a tracked,
/// an untracked and an ignored file.
fn repo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(root.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(root.join("outside.txt"), "outside\n").unwrap();
    std::fs::write(ws.join("tracked.txt"), "tracked v1\n").unwrap();
    git(&root, &["init", "-q"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "start"]);
    std::fs::write(ws.join("untracked.txt"), "untracked v1\n").unwrap();
    std::fs::write(ws.join("ignored.log"), "ignored\n").unwrap();
    (dir, ws)
}

#[test]
fn a_snapshot_holds_the_workspace_before_a_change_and_leaves_the_repository_alone() {
    let (dir, ws) = repo();
    let store_dir = dir.path().join("store");
    let git_dir = ws.parent().unwrap().join(".git");
    let (index, objects) = (
        std::fs::read(git_dir.join("index")).unwrap(),
        files(&git_dir.join("objects")),
    );
    let git = door(&ws, &store_dir);
    let snap = Snapshot::take(&git, &[]).unwrap();
    std::fs::write(ws.join("tracked.txt"), "tracked v2\n").unwrap();
    std::fs::write(ws.join("untracked.txt"), "untracked v2\n").unwrap();
    std::fs::write(ws.join("new.txt"), "new\n").unwrap();
    let all: Vec<String> = [
        "tracked.txt",
        "untracked.txt",
        "ignored.log",
        "new.txt",
        "../outside.txt",
    ]
    .map(String::from)
    .to_vec();
    let entries = snap.entries(&all);
    let mut held: Vec<&String> = entries.keys().collect();
    held.sort();
    assert_eq!(
        held,
        ["tracked.txt", "untracked.txt"],
        "the workspace's files git tracks or would track, relative to it"
    );
    let bytes = |p: &str| blob(&snap, &entries[p].oid, p).unwrap();
    assert_eq!(bytes("tracked.txt"), b"tracked v1\n");
    assert_eq!(bytes("untracked.txt"), b"untracked v1\n");
    assert_eq!(std::fs::read(git_dir.join("index")).unwrap(), index);
    assert_eq!(files(&git_dir.join("objects")), objects);

    let now = Snapshot::take(&git, &[]).unwrap();
    assert_eq!(
        snap.changed_since(&now),
        ["new.txt", "tracked.txt", "untracked.txt"]
    );
    // With its objects pruned by hand, Latch's index starts again from
    // the repository's. (Files older than the index, so git trusts the
    // index's stat and hashes nothing again.)
    for f in ["tracked.txt", "untracked.txt", "new.txt"] {
        let ok = Command::new("touch")
            .args(["-d", "1 hour ago", f])
            .current_dir(&ws)
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
    Snapshot::take(&git, &[]).unwrap();
    std::fs::remove_dir_all(store_dir.join(SNAPSHOT_DIR).join("objects")).unwrap();
    let healed = Snapshot::take(&git, &[]).unwrap();
    assert_eq!(healed.tree, now.tree);
    // A snapshot read back later by its tree id.
    let reopened = Snapshot::open(&git, &healed.tree);
    assert_eq!(
        blob(&reopened, &reopened.entries(&all)["new.txt"].oid, "new.txt").unwrap(),
        b"new\n"
    );
}

#[test]
fn a_store_inside_the_workspace_is_never_snapshotted() {
    let (_dir, ws) = repo();
    let store_dir = ws.join("state");
    std::fs::create_dir_all(&store_dir).unwrap();
    let db = store_dir.join("latch.db");
    std::fs::write(&db, "db").unwrap();
    let git = door(&ws, &store_dir);
    Snapshot::take(&git, std::slice::from_ref(&db)).unwrap();
    // The second sees the first one's objects on disk.
    let snap = Snapshot::take(&git, std::slice::from_ref(&db)).unwrap();
    let listed = Command::new("git")
        .env("GIT_OBJECT_DIRECTORY", git.snapshot_dir().join("objects"))
        .env(
            "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            git.repository().objects(),
        )
        .args(["ls-tree", "-r", "--full-tree", "--name-only", &snap.tree])
        .current_dir(&ws)
        .output()
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert_eq!(listed, "tracked.txt\nuntracked.txt\n");
    // Nor does the fingerprint see them (the database is the caller's
    // to ignore).
    let mut fingerprint = crate::fingerprint::Fingerprint::take(&git).unwrap();
    std::fs::remove_file(&db).unwrap();
    Snapshot::take(&git, std::slice::from_ref(&db)).unwrap();
    let mut after = crate::fingerprint::Fingerprint::take(&git).unwrap();
    assert_eq!(fingerprint.changed_paths(&mut after), ["state/latch.db"]);
}

#[test]
fn a_command_is_pending_before_it_runs_and_its_changes_are_checkpointed() {
    let (dir, ws) = repo();
    let store = Store::open(dir.path().join("store").join("latch.db")).unwrap();
    let model = ModelProfile::with_defaults("openai", "m");
    let session = store
        .create_session(ws.to_str().unwrap(), None, &model)
        .unwrap()
        .id;
    let user = store.append(&session, EventKind::user_text("go")).unwrap();
    let (pending_seen, receipt) =
        run_possible_mutation(&store, &session, "shell", Some("edit".into()), &ws, || {
            let pending = store
                .with_kernel(&session, |k| k.unfinished().clone())
                .unwrap();
            std::fs::write(ws.join("tracked.txt"), "tracked v2\n").unwrap();
            std::fs::remove_file(ws.join("untracked.txt")).unwrap();
            std::fs::write(ws.join("new.txt"), "new\n").unwrap();
            pending.pending_mutations
        })
        .unwrap();
    assert_eq!(pending_seen.len(), 1, "committed before the command ran");
    assert!(pending_seen[0].snapshot.is_some());
    assert!(
        store
            .with_kernel(&session, |k| k.unfinished().pending_mutations.is_empty())
            .unwrap(),
        "the mutation settles it"
    );
    assert_eq!(receipt.generation, 1);
    let events = store.all_events(&session).unwrap();
    let checkpoints: Vec<(String, Option<Vec<u8>>, LeftBehind)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Checkpoint {
                path,
                before,
                after: Some(after),
            } => Some((
                path.clone(),
                before
                    .as_ref()
                    .map(|h| store.artifact_bytes(h).unwrap().unwrap()),
                after.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        checkpoints,
        [
            (
                "new.txt".into(),
                None,
                LeftBehind::Written(crate::sha256_hex(b"new\n"))
            ),
            (
                "tracked.txt".into(),
                Some(b"tracked v1\n".to_vec()),
                LeftBehind::Written(crate::sha256_hex(b"tracked v2\n"))
            ),
            (
                "untracked.txt".into(),
                Some(b"untracked v1\n".to_vec()),
                LeftBehind::Removed
            ),
        ]
    );

    // A later change by hand is a conflict; the rest goes back.
    std::fs::write(ws.join("new.txt"), "by hand\n").unwrap();
    let plan = plan_rewind(&store, &session, &ws, user).unwrap();
    assert_eq!(plan.conflicts, ["new.txt"]);
    let paths: Vec<(&str, bool)> = plan
        .actions
        .iter()
        .map(|(p, a)| (p.as_str(), matches!(a, FileAction::Restore(_))))
        .collect();
    assert_eq!(paths, [("tracked.txt", true), ("untracked.txt", true)]);

    // Nothing changed: no checkpoint, and the generation stays.
    let (_, receipt) =
        run_possible_mutation(&store, &session, "shell", Some("ls".into()), &ws, || ()).unwrap();
    assert_eq!(receipt.generation, 1);
    assert_eq!(store.all_events(&session).unwrap().len(), events.len() + 2);
}

#[test]
fn a_pending_mutation_left_by_a_killed_command_is_settled_and_checkpointed() {
    let (dir, ws) = repo();
    let store_dir = dir.path().join("store");
    let store = Store::open(store_dir.join("latch.db")).unwrap();
    let model = ModelProfile::with_defaults("openai", "m");
    let session = store
        .create_session(ws.to_str().unwrap(), None, &model)
        .unwrap()
        .id;
    // What run_possible_mutation commits before the command; the
    // process then dies mid-command.
    let snap = Snapshot::take(&door(&ws, &store_dir), &[]).unwrap();
    store
        .append(
            &session,
            EventKind::MutationPending {
                source: "shell".into(),
                command: Some("sed -i s/v1/v2/ tracked.txt; touch new.txt".into()),
                snapshot: Some(snap.tree.clone()),
            },
        )
        .unwrap();
    std::fs::write(ws.join("tracked.txt"), "tracked v2\n").unwrap();
    std::fs::write(ws.join("new.txt"), "").unwrap();
    assert_eq!(store.generation_of(&session).unwrap(), 0);

    let seqs = crate::ops::settle_pending_mutations(&store, &session, &ws).unwrap();
    assert_eq!(seqs.len(), 1);
    assert_eq!(
        store.generation_of(&session).unwrap(),
        1,
        "evidence goes stale"
    );
    assert!(
        store
            .with_kernel(&session, |k| k.unfinished().pending_mutations.is_empty())
            .unwrap()
    );
    let checkpoints: Vec<(String, Option<String>)> = store
        .all_events(&session)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Checkpoint { path, before, .. } => Some((path, before)),
            _ => None,
        })
        .collect();
    assert_eq!(
        checkpoints,
        [
            ("new.txt".to_string(), None),
            (
                "tracked.txt".to_string(),
                Some(crate::sha256_hex(b"tracked v1\n"))
            ),
        ]
    );
    assert!(
        crate::ops::settle_pending_mutations(&store, &session, &ws)
            .unwrap()
            .is_empty(),
        "settled once"
    );
}

#[test]
fn a_checkpoint_holds_the_bytes_as_they_were_on_disk() {
    // Line endings converted by the repository's attributes: git stores
    // LF, the file on disk had CRLF, and so must the checkpoint.
    let (dir, ws) = repo();
    std::fs::write(ws.join(".gitattributes"), "*.txt text eol=crlf\n").unwrap();
    std::fs::write(ws.join("crlf.txt"), "one\r\ntwo\r\n").unwrap();
    let store = Store::open(dir.path().join("store").join("latch.db")).unwrap();
    let model = ModelProfile::with_defaults("openai", "m");
    let session = store
        .create_session(ws.to_str().unwrap(), None, &model)
        .unwrap()
        .id;
    run_possible_mutation(&store, &session, "shell", Some("x".into()), &ws, || {
        std::fs::write(ws.join("crlf.txt"), "three\r\n").unwrap();
    })
    .unwrap();
    let before = store
        .all_events(&session)
        .unwrap()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::Checkpoint { path, before, .. } if path == "crlf.txt" => before,
            _ => None,
        })
        .unwrap();
    assert_eq!(
        store.artifact_bytes(&before).unwrap().unwrap(),
        b"one\r\ntwo\r\n"
    );
}
