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
        let seed = if index.exists() { &index } else { &repo.index };
        if seed.exists() {
            std::fs::copy(seed, &tmp).ok()?;
        }
        let snapshot = Snapshot {
            tree: String::new(),
            workspace: workspace.to_path_buf(),
            objects,
            alternates: repo.objects.clone(),
        };
        let taken = snapshot.write_tree(&tmp, &dir, exclude, &repo.prefix);
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
    /// snapshot holds. Symbolic links and submodules are left out.
    pub fn entries(&self, paths: &[String]) -> HashMap<String, SnapshotEntry> {
        let mut found = HashMap::new();
        for chunk in paths.chunks(256) {
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

    /// The bytes of a blob of the snapshot.
    pub fn blob(&self, oid: &str) -> Option<Vec<u8>> {
        let out = self.git().args(["cat-file", "blob", oid]).output().ok()?;
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
