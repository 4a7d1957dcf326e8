//! The workspace fingerprint: did a command that may write really change
//! the workspace?
//!
//! A fingerprint covers the files git tracks or would track (`git ls-files
//! --cached --others --exclude-standard`), each by size and modification
//! time; where those moved between two fingerprints the file is hashed, so
//! a file rewritten with the same bytes is no change. Hashes are cached per
//! path between calls, so a warm fingerprint costs one `git ls-files` and
//! one `stat` per file. A workspace that is not a git work tree has no
//! fingerprint: every possible mutation then counts as a change.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

/// One file's stat and, once known, its content hash.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    size: u64,
    mtime: Option<SystemTime>,
    sha256: Option<[u8; 32]>,
}

/// The files of a workspace at one moment.
#[derive(Clone, Debug)]
pub struct Fingerprint {
    root: PathBuf,
    files: HashMap<String, Entry>,
}

/// Content hashes from earlier fingerprints, keyed by absolute path and the
/// stat they were taken at.
fn hash_cache() -> &'static Mutex<HashMap<PathBuf, Entry>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Entry>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn hash_file(path: &Path) -> Option<[u8; 32]> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).ok()?;
    Some(hasher.finalize().into())
}

impl Fingerprint {
    /// Fingerprint `workspace`, or `None` when it is not inside a git work
    /// tree (or git is not installed).
    pub fn take(workspace: &Path) -> Option<Fingerprint> {
        let out = Command::new("git")
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .current_dir(workspace)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let cache = hash_cache().lock().unwrap_or_else(|p| p.into_inner());
        let mut files = HashMap::new();
        for rel in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let rel = String::from_utf8_lossy(rel).into_owned();
            let abs = workspace.join(&rel);
            // A tracked file deleted from disk is simply absent.
            let Ok(meta) = std::fs::symlink_metadata(&abs) else {
                continue;
            };
            let mut entry = Entry {
                size: meta.len(),
                mtime: meta.modified().ok(),
                sha256: None,
            };
            if let Some(known) = cache.get(&abs)
                && known.size == entry.size
                && known.mtime == entry.mtime
            {
                entry.sha256 = known.sha256;
            }
            files.insert(rel, entry);
        }
        Some(Fingerprint {
            root: workspace.to_path_buf(),
            files,
        })
    }

    /// How many files the fingerprint covers.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the fingerprint covers the workspace path `rel`.
    pub fn contains(&self, rel: &str) -> bool {
        self.files.contains_key(rel)
    }

    /// True when it covers no file.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The paths that differ between `self` (before) and `after`: added,
    /// removed, or changed in content. A file whose size and mtime are the
    /// same is unchanged; one whose mtime moved is hashed, and unchanged when
    /// its hash is what it was.
    pub fn changed_paths(&mut self, after: &mut Fingerprint) -> Vec<String> {
        let mut changed: Vec<String> = Vec::new();
        let mut cache = hash_cache().lock().unwrap_or_else(|p| p.into_inner());
        for (rel, new) in after.files.iter_mut() {
            let abs = after.root.join(rel);
            match self.files.get_mut(rel) {
                None => changed.push(rel.clone()),
                Some(old) if old.size != new.size => changed.push(rel.clone()),
                Some(old) if old.mtime == new.mtime => {}
                Some(old) => {
                    if new.sha256.is_none() {
                        new.sha256 = hash_file(&abs);
                    }
                    // The hash before is known only when an earlier call
                    // hashed that stat; otherwise the move counts as a change.
                    if old.sha256.is_none() || old.sha256 != new.sha256 {
                        changed.push(rel.clone());
                    }
                }
            }
            if new.sha256.is_some() {
                cache.insert(abs, new.clone());
            }
        }
        for rel in self.files.keys() {
            if !after.files.contains_key(rel) {
                changed.push(rel.clone());
            }
        }
        changed.sort();
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(ws: &Path, args: &[&str]) {
        assert!(
            Command::new("git")
                .args(args)
                .current_dir(ws)
                .output()
                .unwrap()
                .status
                .success()
        );
    }

    #[test]
    fn sees_edits_new_and_removed_files_but_not_ignored_ones() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        git(ws, &["init", "-q"]);
        std::fs::write(ws.join(".gitignore"), "target/\n").unwrap();
        std::fs::write(ws.join("a.rs"), "a").unwrap();
        let mut before = Fingerprint::take(ws).unwrap();
        std::fs::create_dir_all(ws.join("target")).unwrap();
        std::fs::write(ws.join("target/out"), "built").unwrap();
        let mut after = Fingerprint::take(ws).unwrap();
        assert!(before.changed_paths(&mut after).is_empty());
        std::fs::write(ws.join("a.rs"), "ab").unwrap();
        std::fs::write(ws.join("new.rs"), "n").unwrap();
        let mut edited = Fingerprint::take(ws).unwrap();
        assert_eq!(after.changed_paths(&mut edited), vec!["a.rs", "new.rs"]);
        std::fs::remove_file(ws.join("new.rs")).unwrap();
        let mut removed = Fingerprint::take(ws).unwrap();
        assert_eq!(edited.changed_paths(&mut removed), vec!["new.rs"]);
    }

    #[test]
    fn no_fingerprint_outside_a_git_work_tree() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Fingerprint::take(dir.path()).is_none());
    }
}
