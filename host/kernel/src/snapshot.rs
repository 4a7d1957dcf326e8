//! Snapshots of a workspace's content, taken just before a command that may
//! write it runs, so what the command replaced can be checkpointed.
//!
//! A snapshot is a git tree of the files git tracks or would track (the
//! fingerprint's set, `git add -A`), written with Latch's own index and
//! object directory (`<store dir>/snapshots/`); the repository's objects are
//! only read (as alternates), and the user's index, refs and objects are
//! never written. Latch's index keeps the stat of every file it hashed, so a
//! snapshot re-reads only files whose size or mtime moved since the last
//! one: its cost is about that of `git status`, and each distinct version of
//! a file git does not already hold is stored once, compressed.
//!
//! After the command, the paths the fingerprint found changed are read back
//! from the tree ([`Snapshot::entries`], [`Snapshot::blob`]). A workspace
//! that is not a git work tree has no snapshot.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

/// The directory under a store's directory that holds snapshot objects and
/// indexes.
pub const SNAPSHOT_DIR: &str = "snapshots";

/// A tree of a workspace's content at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The tree's object id (the workspace directory's tree).
    pub tree: String,
    workspace: PathBuf,
    /// The workspace's path inside the work tree (`sub/dir/`, or empty).
    prefix: String,
    objects: PathBuf,
    alternates: PathBuf,
}

/// One regular file of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    /// Blob id.
    pub oid: String,
    /// Size in bytes.
    pub size: u64,
}

/// Where the repository of `workspace` keeps its objects and index, and the
/// workspace's path inside the work tree.
struct Repo {
    objects: PathBuf,
    index: PathBuf,
    prefix: String,
}

fn repo(workspace: &Path) -> Option<Repo> {
    let out = Command::new("git")
        .args([
            "rev-parse",
            "--path-format=absolute",
            "--git-path",
            "objects",
            "--git-path",
            "index",
            "--path-format=relative",
            "--show-prefix",
        ])
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let mut lines = text.lines();
    let objects = PathBuf::from(lines.next()?);
    let index = PathBuf::from(lines.next()?);
    let prefix = lines.next().unwrap_or("").to_string();
    Some(Repo {
        objects,
        index,
        prefix,
    })
}

/// A short stable key of a workspace path (one Latch index per workspace).
fn key(workspace: &Path) -> String {
    let hash = crate::event::sha256_hex(workspace.to_string_lossy().as_bytes());
    hash[..16].to_string()
}

impl Snapshot {
    /// Snapshot `workspace` into the snapshot directory under `store_dir`
    /// (created when missing). `exclude` lists files never snapshotted (the
    /// store's own). `None` outside a git work tree or when git fails.
    pub fn take(workspace: &Path, store_dir: &Path, exclude: &[PathBuf]) -> Option<Snapshot> {
        let repo = repo(workspace)?;
        let dir = store_dir.join(SNAPSHOT_DIR);
        let objects = dir.join("objects");
        std::fs::create_dir_all(&objects).ok()?;
        // A store inside the work tree (and not in an ignored directory)
        // must not make its own snapshots look like new files to git or to
        // the fingerprint.
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(&ignore, "# Latch's workspace snapshots: local state.\n*\n").ok()?;
        }
        let index = dir.join(format!("index-{}", key(workspace)));
        // Each snapshot works on its own copy of the index, so concurrent
        // ones never contend for a lock; the last to finish keeps its stat.
        static N: AtomicU64 = AtomicU64::new(0);
        let tmp = dir.join(format!(
            "index-{}.{}-{}.tmp",
            key(workspace),
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        // Latch's index keeps the stat of untracked files between snapshots;
        // it starts again from the repository's whenever that one changed
        // since (a commit, a `git add`), so the set stays the fingerprint's.
        let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let seed: &Path = match (modified(&index), modified(&repo.index)) {
            (Some(ours), Some(theirs)) if ours >= theirs => &index,
            (Some(_), None) => &index,
            _ => &repo.index,
        };
        let snapshot = Snapshot {
            tree: String::new(),
            workspace: workspace.to_path_buf(),
            prefix: repo.prefix.clone(),
            objects,
            alternates: repo.objects.clone(),
        };
        let attempt = |seed: &Path| {
            let _ = std::fs::remove_file(&tmp);
            if seed.exists() {
                std::fs::copy(seed, &tmp).ok()?;
            }
            snapshot.write_tree(&tmp, &dir, exclude, &repo.prefix)
        };
        // Latch's index may name objects no longer there (its directory
        // pruned by hand): start again from the repository's.
        let taken = attempt(seed).or_else(|| {
            (seed != repo.index.as_path())
                .then(|| attempt(&repo.index))
                .flatten()
        });
        match taken {
            Some(tree) => {
                let _ = std::fs::rename(&tmp, &index);
                Some(Snapshot { tree, ..snapshot })
            }
            None => {
                let _ = std::fs::remove_file(&tmp);
                None
            }
        }
    }

    /// A snapshot taken earlier, by its tree id (see [`Snapshot::take`]).
    /// `None` outside a git work tree.
    pub fn open(workspace: &Path, store_dir: &Path, tree: &str) -> Option<Snapshot> {
        let repo = repo(workspace)?;
        Some(Snapshot {
            tree: tree.to_string(),
            workspace: workspace.to_path_buf(),
            prefix: repo.prefix,
            objects: store_dir.join(SNAPSHOT_DIR).join("objects"),
            alternates: repo.objects,
        })
    }

    fn git(&self) -> Command {
        let mut cmd = Command::new("git");
        cmd.current_dir(&self.workspace)
            .env("GIT_OBJECT_DIRECTORY", &self.objects)
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &self.alternates)
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    fn write_tree(
        &self,
        index: &Path,
        dir: &Path,
        exclude: &[PathBuf],
        prefix: &str,
    ) -> Option<String> {
        let mut add = self.git();
        add.env("GIT_INDEX_FILE", index)
            .args(["add", "-A", "--ignore-errors", "--", "."]);
        // Never the snapshot directory itself, nor the store's files.
        for path in std::iter::once(dir).chain(exclude.iter().map(PathBuf::as_path)) {
            if let Ok(rel) = path.strip_prefix(&self.workspace)
                && !rel.as_os_str().is_empty()
            {
                add.arg(format!(":(exclude,literal){}", rel.display()));
            }
        }
        // `--ignore-errors` still exits non-zero when a file could not be
        // read; the tree is then written without it.
        add.stdout(Stdio::null()).status().ok()?;
        let mut write = self.git();
        write.env("GIT_INDEX_FILE", index).arg("write-tree");
        if !prefix.is_empty() {
            write.arg(format!("--prefix={prefix}"));
        }
        let out = write.output().ok()?;
        if !out.status.success() {
            return None;
        }
        let tree = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (!tree.is_empty()).then_some(tree)
    }

    /// The regular files among `paths` (workspace-relative) that the
    /// snapshot holds. Symbolic links and submodules are left out, and so
    /// is a path that would leave the workspace.
    pub fn entries(&self, paths: &[String]) -> HashMap<String, SnapshotEntry> {
        let inside: Vec<&String> = paths
            .iter()
            .filter(|p| {
                let p = Path::new(p.as_str());
                !p.as_os_str().is_empty()
                    && p.components()
                        .all(|c| matches!(c, std::path::Component::Normal(_)))
            })
            .collect();
        let mut found = HashMap::new();
        for chunk in inside.chunks(256) {
            let Ok(out) = self
                .git()
                .args(["--literal-pathspecs", "ls-tree", "-r", "-z", "-l"])
                .arg("--full-tree")
                .arg(&self.tree)
                .arg("--")
                .args(chunk)
                .output()
            else {
                continue;
            };
            for record in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
                // `<mode> SP <type> SP <oid> SP+ <size> TAB <path>`
                let record = String::from_utf8_lossy(record);
                let Some((meta, path)) = record.split_once('\t') else {
                    continue;
                };
                let fields: Vec<&str> = meta.split_whitespace().collect();
                let [mode, "blob", oid, size] = fields[..] else {
                    continue;
                };
                if mode != "100644" && mode != "100755" {
                    continue;
                }
                let Ok(size) = size.parse() else { continue };
                found.insert(
                    path.to_string(),
                    SnapshotEntry {
                        oid: oid.to_string(),
                        size,
                    },
                );
            }
        }
        found
    }

    /// Whether the snapshot holds anything at `path` (a file, a symbolic
    /// link, a submodule).
    pub fn holds(&self, path: &str) -> bool {
        self.git()
            .args(["cat-file", "-e"])
            .arg(format!("{}:{path}", self.tree))
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The bytes of the blob `oid` at the workspace path `path` as they
    /// were on disk: the repository's attributes apply (line endings,
    /// smudge filters), as a checkout would write them.
    pub fn blob(&self, oid: &str, path: &str) -> Option<Vec<u8>> {
        let out = self
            .git()
            .args(["cat-file", "--filters"])
            .arg(format!("--path={}{path}", self.prefix))
            .arg(oid)
            .output()
            .ok()?;
        out.status.success().then_some(out.stdout)
    }

    /// The paths whose content differs between `self` and `other`
    /// (workspace-relative, sorted).
    pub fn changed_since(&self, other: &Snapshot) -> Vec<String> {
        let Ok(out) = self
            .git()
            .args(["diff-tree", "-r", "-z", "--name-only", "--no-renames"])
            .arg(&self.tree)
            .arg(&other.tree)
            .output()
        else {
            return Vec::new();
        };
        let mut paths: Vec<String> = out
            .stdout
            .split(|b| *b == 0)
            .filter(|r| !r.is_empty())
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect();
        paths.sort();
        paths
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{FileAction, plan_rewind};
    use crate::event::{EventKind, LeftBehind};
    use crate::ops::run_possible_mutation;
    use crate::store::Store;
    use latch_engine_sdk::types::ModelProfile;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
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
        let snap = Snapshot::take(&ws, &store_dir, &[]).unwrap();
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
        let bytes = |p: &str| snap.blob(&entries[p].oid, p).unwrap();
        assert_eq!(bytes("tracked.txt"), b"tracked v1\n");
        assert_eq!(bytes("untracked.txt"), b"untracked v1\n");
        assert_eq!(std::fs::read(git_dir.join("index")).unwrap(), index);
        assert_eq!(files(&git_dir.join("objects")), objects);

        let now = Snapshot::take(&ws, &store_dir, &[]).unwrap();
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
        Snapshot::take(&ws, &store_dir, &[]).unwrap();
        std::fs::remove_dir_all(store_dir.join(SNAPSHOT_DIR).join("objects")).unwrap();
        let healed = Snapshot::take(&ws, &store_dir, &[]).unwrap();
        assert_eq!(healed.tree, now.tree);
        // A snapshot read back later by its tree id.
        let reopened = Snapshot::open(&ws, &store_dir, &healed.tree).unwrap();
        assert_eq!(
            reopened
                .blob(&reopened.entries(&all)["new.txt"].oid, "new.txt")
                .unwrap(),
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
        Snapshot::take(&ws, &store_dir, std::slice::from_ref(&db)).unwrap();
        // The second sees the first one's objects on disk.
        let snap = Snapshot::take(&ws, &store_dir, std::slice::from_ref(&db)).unwrap();
        let listed = Command::new("git")
            .env("GIT_OBJECT_DIRECTORY", &snap.objects)
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &snap.alternates)
            .args(["ls-tree", "-r", "--full-tree", "--name-only", &snap.tree])
            .current_dir(&ws)
            .output()
            .unwrap();
        let listed = String::from_utf8(listed.stdout).unwrap();
        assert_eq!(listed, "tracked.txt\nuntracked.txt\n");
        // Nor does the fingerprint see them (the database is the caller's
        // to ignore).
        let mut fingerprint = crate::fingerprint::Fingerprint::take(&ws).unwrap();
        std::fs::remove_file(&db).unwrap();
        Snapshot::take(&ws, &store_dir, std::slice::from_ref(&db)).unwrap();
        let mut after = crate::fingerprint::Fingerprint::take(&ws).unwrap();
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
            run_possible_mutation(&store, &session, "shell", Some("ls".into()), &ws, || ())
                .unwrap();
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
        let snap = Snapshot::take(&ws, &store_dir, &[]).unwrap();
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
}
