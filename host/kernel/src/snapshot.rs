//! Snapshots of a workspace's content, taken just before a command that may
//! write it runs, so what the command replaced can be checkpointed.
//!
//! A snapshot is a git tree of the files git tracks or would track (the
//! fingerprint's set, `git add -A`), written by Latch's own git
//! ([`crate::git`]: it never reads the repository's config nor runs a
//! program of the repository's) with Latch's own index and object
//! directory (`<store dir>/snapshots/`); the repository's objects are only
//! read (as alternates), and the user's index, refs and objects are never
//! written. Latch's index keeps the stat of every file it hashed, so a
//! snapshot re-reads only files whose size or mtime moved since the last
//! one: its cost is about that of `git status`, and each distinct version of
//! a file git does not already hold is stored once, compressed.
//!
//! After the command, the paths the fingerprint found changed are read back
//! from the tree ([`Snapshot::entries`], [`Snapshot::read_blobs`]), with
//! the repository's built-in conversions (line endings, `ident`, working
//! tree encodings) but never a filter driver: a path whose attributes name
//! a filter ([`Conversions::filtered`]) cannot be read back as it was on
//! disk, and is not checkpointed. A workspace that is not a git work tree has no
//! snapshot.

pub use crate::git::SNAPSHOT_DIR;
use crate::git::{Git, GitError};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A tree of a workspace's content at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The tree's object id (the workspace directory's tree).
    pub tree: String,
    git: Git,
}

/// One entry of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    /// Blob id.
    pub oid: String,
    /// Size in bytes.
    pub size: u64,
    /// True for a regular file; false for a symbolic link or a submodule.
    pub regular: bool,
}

/// How the blobs of some paths map back to their bytes on disk (see
/// [`Snapshot::conversions`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conversions {
    /// Paths whose attributes name a filter driver (`filter=lfs`, say):
    /// their blobs hold what the filter made of the file, which Latch's git
    /// never runs a filter to undo, so they cannot be written back.
    pub filtered: HashSet<String>,
    /// Paths a checkout converts (CRLF line endings, `ident`, a working
    /// tree encoding): read back with git's built-in conversions.
    pub converted: HashSet<String>,
}

/// What [`Snapshot::read_blobs`] hands each blob to: its workspace path
/// and bytes.
pub type BlobSink<'a> = dyn FnMut(&str, Vec<u8>) -> Result<(), crate::store::StoreError> + 'a;

/// A short stable key of a workspace path (one Latch index per workspace).
fn key(workspace: &Path) -> String {
    let hash = crate::event::sha256_hex(workspace.to_string_lossy().as_bytes());
    hash[..16].to_string()
}

/// True for a workspace-relative path that stays inside it.
fn inside(p: &str) -> bool {
    let p = Path::new(p);
    !p.as_os_str().is_empty()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

impl Snapshot {
    /// Snapshot the workspace of `git` into Latch's snapshot directory.
    /// `exclude` lists files never snapshotted (the store's own).
    pub fn take(git: &Git, exclude: &[PathBuf]) -> Result<Snapshot, GitError> {
        let dir = git.snapshot_dir();
        let own_dir = |e: std::io::Error| GitError::OwnDir {
            path: dir.to_path_buf(),
            why: e.to_string(),
        };
        // A store inside the work tree (and not in an ignored directory)
        // must not make its own snapshots look like new files to git or to
        // the fingerprint.
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(&ignore, "# Latch's workspace snapshots: local state.\n*\n")
                .map_err(own_dir)?;
        }
        // Deleting the objects between commands is safe: they come back.
        std::fs::create_dir_all(dir.join("objects")).map_err(own_dir)?;
        let workspace = git.workspace();
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
        let theirs = git.repository().index();
        let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let seed: Option<&Path> = match (modified(&index), modified(&theirs)) {
            (Some(ours), Some(t)) if ours >= t => Some(&index),
            (Some(_), None) => Some(&index),
            (_, Some(_)) => Some(&theirs),
            (None, None) => None,
        };
        let snapshot = Snapshot {
            tree: String::new(),
            git: git.clone(),
        };
        let attempt = |seed: Option<&Path>| {
            let _ = std::fs::remove_file(&tmp);
            if let Some(seed) = seed {
                copy_keeping_mtime(seed, &tmp).map_err(own_dir)?;
            }
            snapshot.write_tree(&tmp, exclude)
        };
        // Latch's index may name objects no longer there (its directory
        // pruned by hand): start again from the repository's; an index
        // Latch's git cannot read (a split one): start from none.
        let taken = attempt(seed)
            .or_else(|e| match seed {
                Some(s) if s != theirs.as_path() && theirs.exists() => attempt(Some(&theirs)),
                _ => Err(e),
            })
            .or_else(|_| attempt(None));
        match taken {
            Ok(tree) => {
                let _ = std::fs::rename(&tmp, &index);
                Ok(Snapshot { tree, ..snapshot })
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// A snapshot taken earlier, by its tree id (see [`Snapshot::take`]).
    pub fn open(git: &Git, tree: &str) -> Snapshot {
        Snapshot {
            tree: tree.to_string(),
            git: git.clone(),
        }
    }

    /// The index for commands that need none (an empty one).
    fn no_index(&self) -> PathBuf {
        self.git.snapshot_dir().join("no-index")
    }

    fn write_tree(&self, index: &Path, exclude: &[PathBuf]) -> Result<String, GitError> {
        let workspace = self.git.workspace();
        let mut add: Vec<String> = ["add", "-A", "--ignore-errors", "--", "."]
            .map(String::from)
            .to_vec();
        // Never the snapshot directory itself, nor the store's files.
        let dir = self.git.snapshot_dir();
        for path in std::iter::once(dir).chain(exclude.iter().map(PathBuf::as_path)) {
            let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            if let Ok(rel) = path.strip_prefix(workspace)
                && !rel.as_os_str().is_empty()
            {
                add.push(format!(":(exclude,literal){}", rel.display()));
            }
        }
        // `--ignore-errors` still exits non-zero when a file could not be
        // read; the tree is then written without it.
        self.git.run(index, &add, None)?;
        let mut write = vec!["write-tree".to_string()];
        if !self.git.prefix().is_empty() {
            write.push(format!("--prefix={}", self.git.prefix()));
        }
        let out = self.git.output(index, &write, None)?;
        let tree = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if tree.is_empty() {
            return Err(GitError::Failed {
                args: "write-tree".into(),
                status: out.status,
                stderr: "no tree id".into(),
            });
        }
        Ok(tree)
    }

    /// What the snapshot holds at each of `paths` (workspace-relative):
    /// regular files, symbolic links and submodules. A path that would
    /// leave the workspace is left out.
    pub fn entries(&self, paths: &[String]) -> HashMap<String, SnapshotEntry> {
        let inside: Vec<&String> = paths.iter().filter(|p| inside(p)).collect();
        let mut found = HashMap::new();
        for chunk in inside.chunks(256) {
            let mut args: Vec<&str> = vec![
                "--literal-pathspecs",
                "ls-tree",
                "-r",
                "-z",
                "-l",
                "--full-tree",
                &self.tree,
                "--",
            ];
            args.extend(chunk.iter().map(|p| p.as_str()));
            let Ok(out) = self.git.output(&self.no_index(), &args, None) else {
                continue;
            };
            for record in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
                // `<mode> SP <type> SP <oid> SP+ <size> TAB <path>`
                let record = String::from_utf8_lossy(record);
                let Some((meta, path)) = record.split_once('\t') else {
                    continue;
                };
                let fields: Vec<&str> = meta.split_whitespace().collect();
                let [mode, _kind, oid, size] = fields[..] else {
                    continue;
                };
                found.insert(
                    path.to_string(),
                    SnapshotEntry {
                        oid: oid.to_string(),
                        size: size.parse().unwrap_or(0),
                        regular: mode == "100644" || mode == "100755",
                    },
                );
            }
        }
        found
    }

    /// How the blobs of `paths` map back to their bytes on disk, from their
    /// attributes (one `git check-attr` for all of them).
    pub fn conversions(&self, paths: &[String]) -> Result<Conversions, GitError> {
        let mut input = Vec::new();
        for p in paths.iter().filter(|p| inside(p)) {
            input.extend_from_slice(p.as_bytes());
            input.push(0);
        }
        let mut found = Conversions::default();
        if input.is_empty() {
            return Ok(found);
        }
        let out = self.git.output(
            &self.no_index(),
            &[
                "check-attr",
                "-z",
                "--stdin",
                "filter",
                "ident",
                "working-tree-encoding",
                "eol",
                "text",
            ],
            Some(&input),
        )?;
        let mut attrs: HashMap<String, HashMap<String, String>> = HashMap::new();
        let fields: Vec<&[u8]> = out.stdout.split(|b| *b == 0).collect();
        for f in fields.chunks(3) {
            if let [path, attr, value] = f {
                attrs
                    .entry(String::from_utf8_lossy(path).into_owned())
                    .or_default()
                    .insert(
                        String::from_utf8_lossy(attr).into_owned(),
                        String::from_utf8_lossy(value).into_owned(),
                    );
            }
        }
        let crlf_everywhere = self.git.checks_out_crlf();
        for (path, a) in attrs {
            let given = |name: &str| {
                a.get(name)
                    .is_some_and(|v| v != "unspecified" && v != "unset")
            };
            let text = a.get("text").map_or("unspecified", String::as_str) != "unset";
            if given("filter") {
                found.filtered.insert(path);
            } else if given("ident")
                || given("working-tree-encoding")
                || (text && (a.get("eol").is_some_and(|v| v == "crlf") || crlf_everywhere))
            {
                found.converted.insert(path);
            }
        }
        Ok(found)
    }

    /// The bytes of each blob `(oid, path)` as a checkout would write them
    /// at the workspace path — with the conversions `conversions` names
    /// (line endings, `ident`, a working-tree encoding; never a filter
    /// driver) — handed to `each` in order. Blobs without a conversion come
    /// from one `git cat-file --batch`; each converted one from its own
    /// `git cat-file --filters`. A blob that cannot be read is skipped.
    pub fn read_blobs(
        &self,
        blobs: &[(String, String)],
        conversions: &Conversions,
        each: &mut BlobSink<'_>,
    ) -> Result<(), crate::store::StoreError> {
        let (converted, plain): (Vec<_>, Vec<_>) = blobs
            .iter()
            .cloned()
            .partition(|(_, p)| conversions.converted.contains(p));
        for (oid, path) in &converted {
            let at = format!("--path={}{path}", self.git.prefix());
            if let Ok(out) = self.git.output(
                &self.no_index(),
                &["cat-file", "--filters", at.as_str(), oid.as_str()],
                None,
            ) {
                each(path, out.stdout)?;
            }
        }
        if plain.is_empty() {
            return Ok(());
        }
        let Ok(mut child) = self.git.spawn(&self.no_index(), &["cat-file", "--batch"]) else {
            return Ok(());
        };
        let mut input = Vec::new();
        for (oid, _) in &plain {
            input.extend_from_slice(format!("{oid}\n").as_bytes());
        }
        let stdin = child.stdin.take();
        let writer = std::thread::spawn(move || {
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(&input);
            }
        });
        let result = match child.stdout.take() {
            Some(stdout) => read_batch(BufReader::new(stdout), &plain, each),
            None => Ok(()),
        };
        let _ = child.kill();
        let _ = child.wait();
        let _ = writer.join();
        result
    }

    /// Whether the snapshot holds anything at `path` (a file, a symbolic
    /// link, a submodule).
    pub fn holds(&self, path: &str) -> bool {
        self.entries(&[path.to_string()]).contains_key(path)
    }

    /// The paths whose content differs between `self` and `other`
    /// (workspace-relative, sorted).
    pub fn changed_since(&self, other: &Snapshot) -> Vec<String> {
        let args = [
            "diff-tree",
            "-r",
            "-z",
            "--name-only",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            &self.tree,
            &other.tree,
        ];
        let Ok(out) = self.git.output(&self.no_index(), &args, None) else {
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

/// Copy the index `from` to `to` with its modification time: git tells a
/// file changed within the same clock tick as the index was written
/// ("racily clean") by comparing with the index's own time, which a plain
/// copy would move past such a change.
fn copy_keeping_mtime(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::copy(from, to)?;
    let mtime = std::fs::metadata(from)?.modified()?;
    std::fs::File::options()
        .write(true)
        .open(to)?
        .set_modified(mtime)
}

/// Read `cat-file --batch` answers for `blobs`, in order: `<oid> <type>
/// <size>` then the bytes and a newline, or `<oid> missing`.
fn read_batch(
    mut out: impl BufRead,
    blobs: &[(String, String)],
    each: &mut BlobSink<'_>,
) -> Result<(), crate::store::StoreError> {
    for (_, path) in blobs {
        let mut header = String::new();
        if out.read_line(&mut header).unwrap_or(0) == 0 {
            return Ok(());
        }
        let fields: Vec<&str> = header.split_whitespace().collect();
        // `<oid> missing` has no body.
        let [_, kind, size] = fields[..] else {
            continue;
        };
        let Ok(size) = size.parse::<u64>() else {
            return Ok(());
        };
        let mut bytes = Vec::with_capacity(size.min(1 << 24) as usize);
        if (&mut out).take(size).read_to_end(&mut bytes).is_err() || bytes.len() as u64 != size {
            return Ok(());
        }
        let mut newline = [0u8; 1];
        let _ = out.read_exact(&mut newline);
        if kind == "blob" {
            each(path, bytes)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
