//! The workspace fingerprint: did a command that may write really change
//! the workspace?
//!
//! A fingerprint covers the files git tracks or would track (`git ls-files
//! --cached --others --exclude-standard`, run through Latch's own git,
//! [`crate::git`]), each by size and modification time; where those moved
//! between two fingerprints the file is hashed, so a file rewritten with
//! the same bytes is no change. Hashes are cached per path between calls,
//! so a warm fingerprint costs one `git ls-files` and one `stat` per file.
//! A workspace that is not a git work tree has no fingerprint: every
//! possible mutation then counts as a change.

use crate::beneath::{self, BeneathError};
use crate::git::{Git, GitError};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
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

/// The hash of what is at `rel` beneath the workspace `root`, never
/// following a link: a regular file's bytes, a symbolic link's target
/// (what git tracks of it). Anything else (a FIFO, a device, a link swapped
/// in on the way) has no hash, and counts as changed.
fn hash_file(root: &OwnedFd, rel: &str) -> Option<[u8; 32]> {
    let mut hasher = Sha256::new();
    match beneath::open_file(root, Path::new(rel)) {
        Ok(mut file) => {
            std::io::copy(&mut file, &mut hasher).ok()?;
        }
        Err(BeneathError::Symlink) => {
            let (dir, name) = match rel.rsplit_once('/') {
                Some((dir, name)) => (dir, name),
                None => (".", rel),
            };
            let Ok(beneath::Opened::Dir(dir)) = beneath::open_beneath(root, Path::new(dir)) else {
                return None;
            };
            let target = rustix::fs::readlinkat(&dir, name, Vec::new()).ok()?;
            hasher.update(b"link:");
            hasher.update(target.as_bytes());
        }
        Err(_) => return None,
    }
    Some(hasher.finalize().into())
}

impl Fingerprint {
    /// Fingerprint the workspace of `git`.
    pub fn take(git: &Git) -> Result<Fingerprint, GitError> {
        let args = [
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ];
        // An index Latch's git cannot read (a split index keeps half of it
        // beside the repository's config) is no index: every file is then
        // one git would track.
        let out = match git.output(&git.repository().index(), &args, None) {
            Ok(out) => out,
            Err(_) => git.output(&git.snapshot_dir().join("no-index"), &args, None)?,
        };
        let workspace = git.workspace();
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
        Ok(Fingerprint {
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
        let root = beneath::open_dir(&after.root).ok();
        let mut cache = hash_cache().lock().unwrap_or_else(|p| p.into_inner());
        for (rel, new) in after.files.iter_mut() {
            let abs = after.root.join(rel);
            match self.files.get_mut(rel) {
                None => changed.push(rel.clone()),
                Some(old) if old.size != new.size => changed.push(rel.clone()),
                Some(old) if old.mtime == new.mtime => {}
                Some(old) => {
                    if new.sha256.is_none() {
                        new.sha256 = root.as_ref().and_then(|r| hash_file(r, rel));
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
    use crate::git::Repository;
    use std::process::Command;

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
        let store = tempfile::tempdir().unwrap();
        let ws = dir.path();
        git(ws, &["init", "-q"]);
        std::fs::write(ws.join(".gitignore"), "target/\n").unwrap();
        std::fs::write(ws.join(".git/info/exclude"), "*.tmp\n").unwrap();
        std::fs::write(ws.join("a.rs"), "a").unwrap();
        let repo = Repository::discover(ws).unwrap();
        let g = Git::open(&repo, ws, store.path()).unwrap();
        let mut before = Fingerprint::take(&g).unwrap();
        std::fs::create_dir_all(ws.join("target")).unwrap();
        std::fs::write(ws.join("target/out"), "built").unwrap();
        std::fs::write(ws.join("scratch.tmp"), "scratch").unwrap();
        let mut after = Fingerprint::take(&g).unwrap();
        assert!(before.changed_paths(&mut after).is_empty());
        std::fs::write(ws.join("a.rs"), "ab").unwrap();
        std::fs::write(ws.join("new.rs"), "n").unwrap();
        let mut edited = Fingerprint::take(&g).unwrap();
        assert_eq!(after.changed_paths(&mut edited), vec!["a.rs", "new.rs"]);
        std::fs::remove_file(ws.join("new.rs")).unwrap();
        let mut removed = Fingerprint::take(&g).unwrap();
        assert_eq!(edited.changed_paths(&mut removed), vec!["new.rs"]);
    }

    #[test]
    fn a_link_is_hashed_by_its_target_and_never_read_through() {
        // A link to an endless file: reading through it would never end.
        let dir = tempfile::tempdir().unwrap();
        let store = tempfile::tempdir().unwrap();
        let ws = dir.path().to_path_buf();
        git(&ws, &["init", "-q"]);
        std::os::unix::fs::symlink("/dev/zero", ws.join("zero")).unwrap();
        let repo = Repository::discover(&ws).unwrap();
        let g = Git::open(&repo, &ws, store.path()).unwrap();
        let mut before = Fingerprint::take(&g).unwrap();
        assert!(before.contains("zero"));
        // The same link again, its time moved: the same size, so hashed.
        std::fs::remove_file(ws.join("zero")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", ws.join("zero")).unwrap();
        assert!(
            Command::new("touch")
                .args(["-h", "-d", "1 hour ago", "zero"])
                .current_dir(&ws)
                .status()
                .unwrap()
                .success()
        );
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut after = Fingerprint::take(&g).unwrap();
            let changed = before.changed_paths(&mut after);
            let again = Fingerprint::take(&g).unwrap();
            let _ = done.send((changed, after, again));
        });
        let (changed, mut after, mut again) = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the fingerprint read through the link");
        // Its hash was unknown before: a change once, then none.
        assert_eq!(changed, ["zero"]);
        assert!(after.changed_paths(&mut again).is_empty());
    }
}
