//! The sandbox policy as data: which hierarchies a command may read and
//! write, which device files it may use, and which paths inside writable
//! hierarchies stay read-only. [`rules`] is computed in the parent before
//! every spawn (the directory listings it reads are small) and is unit
//! tested on its own; [`crate::Sandbox`] enforces it.

use crate::mode::SandboxMode;
use std::path::{Path, PathBuf};

/// What the user configured: the mode, the network and extra writable
/// directories.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// The mode.
    pub mode: SandboxMode,
    /// True to keep the network (`[sandbox] network = true`); off by default.
    pub network: bool,
    /// More directories commands may write in `workspace-write` (e.g. a
    /// cache such as `~/.cargo/registry`).
    pub writable_roots: Vec<PathBuf>,
    /// Variables a confined command keeps although their names look secret
    /// (`[sandbox] env_passthrough`; see [`crate::env`]).
    pub env_passthrough: Vec<String>,
    /// Unix sockets (or directories of them) outside the workspace and the
    /// session temp dir a command may connect to (`[sandbox]
    /// allow_unix_sockets`, e.g. `/run/user/1000/docker.sock`).
    pub allow_unix_sockets: Vec<PathBuf>,
}

/// Paths under the home directory a sandboxed command may never read:
/// keys, tokens and credentials.
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".password-store",
    ".pypirc",
    ".npmrc",
    ".pgpass",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".terraform.d/credentials.tfrc.json",
    ".config/gcloud",
    ".config/gh",
    ".config/latch",
    ".local/share/keyrings",
];

/// Device files every mode may read and write (`2>/dev/null` works even in
/// `read-only`).
pub const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// The rules of one sandboxed command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// Hierarchies (or files) it may read and execute.
    pub read: Vec<PathBuf>,
    /// Hierarchies it may write (and read).
    pub write: Vec<PathBuf>,
    /// Device files it may read and write.
    pub devices: Vec<PathBuf>,
    /// Paths bound onto themselves, so they cannot be renamed or removed.
    pub pinned: Vec<PathBuf>,
    /// Paths inside writable hierarchies that stay read-only (and, being
    /// mount points, cannot be renamed or removed): all of the workspace's
    /// `.git` (a directory or a `.git` file), the repository directories a
    /// `.git` file names when a writable root holds them (a command may
    /// plant nothing git runs later outside the sandbox — hooks, config,
    /// `commondir` — nor rewrite what Latch's own git reads), and Latch's
    /// `.latch` directory (the store and the config).
    pub protected: Vec<PathBuf>,
}

impl Rules {
    /// True when a mount namespace is needed to pin or protect paths.
    pub fn needs_mounts(&self) -> bool {
        !self.pinned.is_empty() || !self.protected.is_empty()
    }
}

/// The rules for `policy` in `workspace` with the session's `temp_dir`,
/// hiding [`HOME_SECRETS`] under `home`. `full-access` has none.
pub fn rules(
    policy: &SandboxPolicy,
    workspace: &Path,
    temp_dir: &Path,
    home: Option<&Path>,
) -> Rules {
    if policy.mode == SandboxMode::FullAccess {
        return Rules::default();
    }
    let hidden: Vec<PathBuf> = home
        .filter(|h| h.parent().is_some())
        .map(|h| HOME_SECRETS.iter().map(|s| h.join(s)).collect())
        .unwrap_or_default();
    let mut read = Vec::new();
    readable_except(Path::new("/"), &hidden, &mut read);
    read.push(workspace.to_path_buf());
    let devices = DEVICES.iter().map(PathBuf::from).collect();
    let mut rules = Rules {
        read,
        devices,
        ..Rules::default()
    };
    if policy.mode == SandboxMode::WorkspaceWrite {
        rules.write.push(workspace.to_path_buf());
        rules.write.push(temp_dir.to_path_buf());
        rules.write.extend(policy.writable_roots.iter().cloned());
        let git = workspace.join(".git");
        if std::fs::symlink_metadata(&git).is_ok() {
            for dir in linked_git_dirs(&git) {
                let writable = rules.write.iter().any(|w| dir.starts_with(w));
                if writable && !dir.starts_with(&git) && !rules.protected.contains(&dir) {
                    rules.protected.push(dir);
                }
            }
            rules.protected.insert(0, git);
        }
        let latch = workspace.join(".latch");
        if latch.exists() {
            rules.protected.push(latch);
        }
    }
    rules
}

/// The repository directories a workspace's `.git` leads to, as real
/// paths: the directory itself, or the one a `.git` file names (`gitdir:
/// PATH`), then the `commondir` that directory names (where a linked
/// worktree's config, hooks and objects live).
fn linked_git_dirs(git: &Path) -> Vec<PathBuf> {
    let base = git.parent().unwrap_or(Path::new("/"));
    let git_dir = if git.is_file() {
        let Ok(text) = std::fs::read_to_string(git) else {
            return Vec::new();
        };
        let Some(named) = text.lines().next().and_then(|l| l.strip_prefix("gitdir:")) else {
            return Vec::new();
        };
        base.join(named.trim())
    } else {
        git.to_path_buf()
    };
    let mut dirs = Vec::new();
    if let Ok(real) = std::fs::canonicalize(&git_dir) {
        if let Ok(common) = std::fs::read_to_string(real.join("commondir"))
            && let Ok(common) = std::fs::canonicalize(real.join(common.trim()))
        {
            dirs.push(common);
        }
        dirs.insert(0, real);
    }
    dirs
}

/// Take `hidden` (and everything under them) out of what `rules` lets a
/// command read, as [`HOME_SECRETS`] are: an entry that holds a hidden path
/// is replaced by its other entries. Used for Latch's own config directory
/// wherever it is (`LATCH_CONFIG_DIR`). A hidden path inside a writable
/// hierarchy is still reachable through that hierarchy's rule; the sandbox
/// masks those with a mount.
pub fn hide(rules: &mut Rules, hidden: &[PathBuf]) {
    let mut read = Vec::new();
    for entry in std::mem::take(&mut rules.read) {
        if hidden.iter().any(|h| h == &entry) {
            continue;
        }
        if hidden.iter().any(|h| h.starts_with(&entry)) && entry.is_dir() {
            readable_except(&entry, hidden, &mut read);
        } else {
            read.push(entry);
        }
    }
    rules.read = read;
}

/// Add every entry of `dir` to `out`, except the `hidden` paths: an entry
/// that holds a hidden path is entered and its other entries added.
pub(crate) fn readable_except(dir: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    names.sort();
    for path in names {
        if hidden.iter().any(|h| h == &path) {
            continue;
        }
        if hidden.iter().any(|h| h.starts_with(&path)) && path.is_dir() {
            readable_except(&path, hidden, out);
        } else {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: SandboxMode) -> SandboxPolicy {
        SandboxPolicy {
            mode,
            ..SandboxPolicy::default()
        }
    }

    #[test]
    fn secrets_under_home_are_never_readable_and_their_siblings_are() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        for d in [
            ".ssh",
            ".cargo/registry",
            ".cargo/bin",
            ".config/gh",
            ".config/git",
        ] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        std::fs::write(h.join(".netrc"), "machine x").unwrap();
        std::fs::write(h.join(".config/git/config"), "[user]").unwrap();
        let secrets = [
            ".netrc",
            ".npmrc",
            ".pypirc",
            ".cargo/credentials",
            ".cargo/credentials.toml",
            ".pgpass",
            ".docker/config.json",
            ".kube/config",
            ".git-credentials",
            ".config/gcloud/credentials.db",
            ".azure/accessTokens.json",
            ".aws/credentials",
            ".gnupg/private-keys-v1.d",
        ];
        for secret in secrets {
            std::fs::create_dir_all(h.join(secret).parent().unwrap()).unwrap();
            std::fs::write(h.join(secret), "secret").unwrap();
        }
        let ws = tempfile::tempdir().unwrap();
        let r = rules(
            &policy(SandboxMode::ReadOnly),
            ws.path(),
            Path::new("/tmp/t"),
            Some(h),
        );
        let covered = |p: &Path| r.read.iter().any(|g| p.starts_with(g));
        assert!(!covered(&h.join(".ssh/id_ed25519")));
        assert!(!covered(&h.join(".netrc")));
        assert!(!covered(&h.join(".config/gh/hosts.yml")));
        assert!(covered(&h.join(".cargo/bin/cargo")));
        assert!(covered(&h.join(".cargo/registry/index")));
        for secret in secrets {
            assert!(!covered(&h.join(secret)), "{secret} is readable");
        }
        assert!(covered(&h.join(".config/git/config")));
        assert!(covered(Path::new("/usr/bin/sh")));
        assert!(covered(ws.path()));
        assert!(r.write.is_empty() && r.protected.is_empty());
    }

    #[test]
    fn workspace_write_writes_the_workspace_and_temp_dir_and_protects_all_of_git_and_latch() {
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        std::fs::create_dir_all(w.join(".git/hooks")).unwrap();
        std::fs::write(w.join(".git/config"), "[core]").unwrap();
        std::fs::create_dir_all(w.join(".latch")).unwrap();
        let mut p = policy(SandboxMode::WorkspaceWrite);
        p.writable_roots.push("/opt/cache".into());
        let r = rules(&p, w, Path::new("/tmp/latch-s"), None);
        assert_eq!(
            r.write,
            vec![w.to_path_buf(), "/tmp/latch-s".into(), "/opt/cache".into()]
        );
        assert_eq!(r.protected, vec![w.join(".git"), w.join(".latch")]);
        assert!(r.pinned.is_empty());
        // A `.git` file (a linked worktree) is protected as a whole, and so
        // are the repository directories it names when a writable root
        // holds them (here a second writable root).
        let main = tempfile::tempdir().unwrap();
        let main_git = std::fs::canonicalize(main.path()).unwrap().join(".git");
        std::fs::create_dir_all(main_git.join("worktrees/wt")).unwrap();
        std::fs::write(main_git.join("worktrees/wt/commondir"), "../..\n").unwrap();
        let wt = tempfile::tempdir().unwrap();
        std::fs::write(
            wt.path().join(".git"),
            format!("gitdir: {}\n", main_git.join("worktrees/wt").display()),
        )
        .unwrap();
        let r = rules(&p, wt.path(), Path::new("/tmp/x"), None);
        assert_eq!(r.protected, vec![wt.path().join(".git")]);
        p.writable_roots.push(main.path().to_path_buf());
        let r = rules(&p, wt.path(), Path::new("/tmp/x"), None);
        assert_eq!(
            r.protected,
            vec![
                wt.path().join(".git"),
                main_git.join("worktrees/wt"),
                main_git.clone()
            ]
        );
        // A workspace with no `.git` yet protects none (a repository a
        // command creates is protected from the next command on).
        let bare = tempfile::tempdir().unwrap();
        assert!(
            rules(&p, bare.path(), Path::new("/tmp/x"), None)
                .protected
                .is_empty()
        );
    }

    #[test]
    fn a_hidden_directory_anywhere_is_left_out_and_its_siblings_stay() {
        let root = tempfile::tempdir().unwrap();
        let config = root.path().join("elsewhere/latch-config");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("config.toml"), "api_key = \"k\"").unwrap();
        std::fs::create_dir_all(root.path().join("elsewhere/tools")).unwrap();
        let ws = tempfile::tempdir().unwrap();
        let mut r = rules(
            &policy(SandboxMode::ReadOnly),
            ws.path(),
            Path::new("/tmp/t"),
            None,
        );
        let covered = |r: &Rules, p: &Path| r.read.iter().any(|g| p.starts_with(g));
        assert!(covered(&r, &config.join("config.toml")));
        hide(&mut r, std::slice::from_ref(&config));
        assert!(!covered(&r, &config.join("config.toml")));
        assert!(!covered(&r, &config));
        assert!(covered(&r, &root.path().join("elsewhere/tools")));
        assert!(covered(&r, Path::new("/usr/bin/sh")) && covered(&r, ws.path()));
    }

    #[test]
    fn full_access_has_no_rules() {
        let r = rules(
            &policy(SandboxMode::FullAccess),
            Path::new("/w"),
            Path::new("/t"),
            None,
        );
        assert_eq!(r, Rules::default());
    }
}
