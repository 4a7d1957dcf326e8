//! Finding a workspace's repository without running git: the nearest
//! `.git` at or above the workspace, as git's own discovery finds it (a
//! directory, or a `.git` file naming the repository directory of a linked
//! worktree or submodule), and that directory's `commondir`. Nothing is
//! executed and no config is read, so a repository cannot steer it to run
//! anything; what it finds is fixed for the session (see
//! [`crate::Store::session_repository`]), so a `.git`, `gitdir:` file or
//! `commondir` planted later changes nothing.

use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A workspace's git repository as Latch's own git uses it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repository {
    /// The top of the work tree: the workspace or a directory above it.
    pub work_tree: PathBuf,
    /// The work tree's repository directory: its `.git`, or the directory
    /// a `.git` file names. Latch reads its index.
    pub git_dir: PathBuf,
    /// Where the repository's shared parts live (objects,
    /// `info/exclude`, `info/attributes`, `config`): the directory the git
    /// dir's `commondir` names, else the git dir itself.
    pub common_dir: PathBuf,
}

impl Repository {
    /// The repository whose work tree holds `workspace`, found as git
    /// would (the nearest `.git` going up), or `None`: no repository, a
    /// `.git` that is not a usable repository, or one owned by another user
    /// (git refuses those too, unless configured otherwise).
    pub fn discover(workspace: &Path) -> Option<Repository> {
        let start = std::fs::canonicalize(workspace).ok()?;
        for dir in start.ancestors() {
            let dotgit = dir.join(".git");
            let Ok(meta) = std::fs::symlink_metadata(&dotgit) else {
                continue;
            };
            let git_dir = if meta.is_file() {
                let text = std::fs::read_to_string(&dotgit).ok()?;
                let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
                dir.join(named)
            } else {
                dotgit
            };
            let git_dir = std::fs::canonicalize(git_dir).ok()?;
            let common_dir = match std::fs::read_to_string(git_dir.join("commondir")) {
                Ok(common) => std::fs::canonicalize(git_dir.join(common.trim())).ok()?,
                Err(_) => git_dir.clone(),
            };
            let repo = Repository {
                work_tree: dir.to_path_buf(),
                git_dir,
                common_dir,
            };
            return repo.usable().then_some(repo);
        }
        None
    }

    /// True when the directories look like a repository git would use:
    /// a `HEAD` file, `objects` and `refs` in the common dir, all owned by
    /// this user (as is the work tree).
    fn usable(&self) -> bool {
        // SAFETY: geteuid cannot fail and touches no memory.
        let me = unsafe { libc::geteuid() };
        let owned = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.uid() == me);
        let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
        self.git_dir.join("HEAD").is_file()
            && is_dir(&self.common_dir.join("objects"))
            && is_dir(&self.common_dir.join("refs"))
            && owned(&self.work_tree)
            && owned(&self.git_dir)
            && owned(&self.common_dir)
    }

    /// `workspace`'s path inside the work tree (`sub/dir/`, or empty), or
    /// `None` when the work tree does not hold it.
    pub fn prefix_of(&self, workspace: &Path) -> Option<String> {
        let rel = workspace.strip_prefix(&self.work_tree).ok()?;
        if rel.as_os_str().is_empty() {
            return Some(String::new());
        }
        Some(format!("{}/", rel.to_str()?))
    }

    /// The repository's index (the work tree's, in its git dir).
    pub fn index(&self) -> PathBuf {
        self.git_dir.join("index")
    }

    /// The repository's object directory (read only, as alternates).
    pub fn objects(&self) -> PathBuf {
        self.common_dir.join("objects")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn finds_the_nearest_repository_above_and_a_linked_worktree_through_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap().join("repo");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        git(&root, &["init", "-q"]);
        let repo = Repository::discover(&root.join("a/b")).unwrap();
        assert_eq!(repo.work_tree, root);
        assert_eq!(repo.git_dir, root.join(".git"));
        assert_eq!(repo.common_dir, root.join(".git"));
        assert_eq!(repo.prefix_of(&root.join("a/b")).unwrap(), "a/b/");
        assert_eq!(repo.prefix_of(&root).unwrap(), "");
        assert_eq!(repo.prefix_of(dir.path()), None);

        std::fs::write(root.join("f"), "f").unwrap();
        git(&root, &["add", "f"]);
        git(&root, &["commit", "-qm", "f"]);
        let wt = root.parent().unwrap().join("wt");
        git(&root, &["worktree", "add", "-q", wt.to_str().unwrap()]);
        let linked = Repository::discover(&wt).unwrap();
        assert_eq!(linked.work_tree, wt);
        assert_eq!(linked.git_dir, root.join(".git/worktrees/wt"));
        assert_eq!(linked.common_dir, root.join(".git"));
        assert_eq!(linked.objects(), root.join(".git/objects"));
    }

    #[test]
    fn nothing_outside_a_repository_nor_for_a_dot_git_that_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Repository::discover(dir.path()), None);
        // A `.git` file naming nothing usable, a `.git` directory without
        // HEAD: no repository (and no looking further up).
        std::fs::write(dir.path().join(".git"), "gitdir: /nonexistent\n").unwrap();
        assert_eq!(Repository::discover(dir.path()), None);
        std::fs::remove_file(dir.path().join(".git")).unwrap();
        std::fs::create_dir_all(dir.path().join(".git/objects")).unwrap();
        assert_eq!(Repository::discover(dir.path()), None);
    }
}
