//! Latch's own git: the one door through which Latch runs git for its own
//! bookkeeping — the workspace fingerprint ([`crate::fingerprint`]), the
//! snapshots taken before a command and the checkpoints read back from them
//! ([`crate::snapshot`], [`crate::checkpoint`]). Nothing else in Latch runs
//! git for itself; a second caller would be a second door.
//!
//! Whatever the repository or a command configured, no git Latch runs
//! executes a program of theirs:
//!
//! * **the repository is fixed when the session starts**: found by reading
//!   `.git`, a `gitdir:` file and `commondir` as data, never by running git
//!   ([`Repository::discover`]); recorded with the session
//!   ([`crate::Store::session_repository`]), so a `.git`, `gitdir:` file or
//!   `commondir` planted later is never followed;
//! * **git never reads the repository's config**: `GIT_DIR` and
//!   `GIT_COMMON_DIR` are a directory of Latch's own ([`own`]), `GIT_WORK_TREE`
//!   the work tree, `GIT_INDEX_FILE` and `GIT_OBJECT_DIRECTORY` name the
//!   index and the objects explicitly (the repository's objects only as
//!   read-only alternates). The workspace's hooks, `core.hooksPath`,
//!   `core.fsmonitor`, filter (`clean`, `smudge`, `process`), diff
//!   (`textconv`, `command`) and merge drivers, `diff.external`, the pager,
//!   editor, askpass, credential helper, `core.sshCommand` and every
//!   `include`/`includeIf` are never seen: the one config git reads defines
//!   none, and [`PROGRAM_KEYS`] override each on the command line as well;
//! * **nothing of the user's environment reaches it**: the environment is
//!   cleared (`GIT_DIR`, `GIT_CONFIG_*`, `GIT_EXTERNAL_DIFF`, `GIT_SSH*`,
//!   `GIT_TRACE*` and the rest cannot redirect it), system and global config
//!   are off (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`), `PATH`
//!   is the system's, and the `git` binary is found once from Latch's own
//!   `PATH`, never inside the workspace;
//! * **it runs confined** ([`latch_sandbox::HelperJail`]): read-only to
//!   everything but Latch's snapshot directory, no network, its own session
//!   without a terminal, no socket.
//!
//! Why the `git` program and not a git library in the Latch process: these
//! operations must run confined, and only a separate process can be jailed
//! while Latch keeps its own rights; and a snapshot must see the work tree
//! exactly as the user's git does (ignore rules, attributes, built-in
//! conversions, racily clean index entries, SHA-256 repositories). What
//! keeps the program from running anything is data Latch controls: the
//! repository directory, config and environment above.
//!
//! A machine that cannot confine it, or a git that fails, leaves the
//! workspace without a fingerprint: every command that may write then
//! counts as a change, as outside a git work tree.

mod discover;
mod own;

pub use discover::Repository;
pub use own::REPOSITORY_SETTINGS;

use latch_sandbox::{HelperJail, JailError};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

/// The directory under a store's directory that holds snapshot objects and
/// indexes (the only place Latch's git may write).
pub const SNAPSHOT_DIR: &str = "snapshots";

/// Every config key through which git may run a program, with the value
/// Latch's git gets on its command line. The config git reads sets none of
/// them either; these hold even should a config file slip through.
pub const PROGRAM_KEYS: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("credential.helper", ""),
    ("core.sshCommand", ""),
    ("core.gitProxy", ""),
    ("diff.external", ""),
    ("core.alternateRefsCommand", ""),
    ("uploadpack.packObjectsHook", ""),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("protocol.allow", "never"),
];

/// Settings that keep git's bookkeeping to the files Latch names.
const QUIET_KEYS: &[(&str, &str)] = &[
    ("core.untrackedCache", "false"),
    ("core.splitIndex", "false"),
    ("core.safecrlf", "false"),
];

/// Why Latch's own git could not run.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// No `git` on `PATH` (outside the workspace).
    #[error("no `git` program was found on PATH (outside the workspace)")]
    NoGit,
    /// The workspace is not inside the session's repository.
    #[error("the workspace {0} is not inside the session's git work tree")]
    Outside(PathBuf),
    /// Latch's private directory for its git is missing or unsafe.
    #[error("Latch's own git directory {path} cannot be used: {why}")]
    OwnDir {
        /// The directory or file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The machine cannot confine it.
    #[error(transparent)]
    Jail(#[from] JailError),
    /// Starting or talking to git failed.
    #[error("git {args}: {source}")]
    Io {
        /// The command's arguments.
        args: String,
        /// The error.
        source: std::io::Error,
    },
    /// Git exited with an error.
    #[error("git {args} failed ({status}): {stderr}")]
    Failed {
        /// The command's arguments.
        args: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The start of what it wrote to stderr.
        stderr: String,
    },
}

impl GitError {
    /// A stable name for the kind of failure.
    pub fn kind(&self) -> &'static str {
        match self {
            GitError::NoGit => "no-git",
            GitError::Outside(_) => "outside",
            GitError::OwnDir { .. } => "own-dir",
            GitError::Jail(e) => e.kind(),
            GitError::Io { .. } => "io",
            GitError::Failed { .. } => "failed",
        }
    }
}

/// Latch's git for one workspace of one store: every git Latch runs for
/// itself is built here (see the module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub struct Git {
    workspace: PathBuf,
    repo: Repository,
    prefix: String,
    binary: PathBuf,
    base: PathBuf,
    own_dir: PathBuf,
    excludes: PathBuf,
    attributes: PathBuf,
    settings: Vec<String>,
    snapshots: PathBuf,
    jail: HelperJail,
}

/// The `git` program: the first on Latch's own `PATH` (absolute entries
/// only), found once.
fn git_binary() -> Option<&'static Path> {
    static BINARY: OnceLock<Option<PathBuf>> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            use std::os::unix::fs::PermissionsExt;
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .filter(|d| d.is_absolute())
                .map(|d| d.join("git"))
                .find(|p| {
                    std::fs::metadata(p)
                        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                })
                .and_then(|p| std::fs::canonicalize(p).ok())
        })
        .as_deref()
}

/// The jail of the git writing under `snapshots`, built once per directory
/// (the ruleset is shared by every spawn).
fn jail_for(snapshots: &Path) -> Result<HelperJail, JailError> {
    static JAILS: OnceLock<Mutex<HashMap<PathBuf, HelperJail>>> = OnceLock::new();
    let mut jails = JAILS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(j) = jails.get(snapshots) {
        return Ok(j.clone());
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let jail = HelperJail::new(&[snapshots.to_path_buf()], home.as_deref())?;
    jails.insert(snapshots.to_path_buf(), jail.clone());
    Ok(jail)
}

impl Git {
    /// Latch's git for `workspace` (inside `repo`'s work tree), writing
    /// only under the snapshot directory of the store in `store_dir`
    /// (created when missing).
    pub fn open(repo: &Repository, workspace: &Path, store_dir: &Path) -> Result<Git, GitError> {
        let workspace = std::fs::canonicalize(workspace)
            .map_err(|_| GitError::Outside(workspace.to_path_buf()))?;
        let prefix = repo
            .prefix_of(&workspace)
            .ok_or_else(|| GitError::Outside(workspace.clone()))?;
        let binary = git_binary()
            .filter(|b| !b.starts_with(&workspace) && !b.starts_with(&repo.work_tree))
            .ok_or(GitError::NoGit)?
            .to_path_buf();
        let base = own::base_dir()?;
        let settings = own::repository_settings(&repo.git_dir, &repo.common_dir);
        let format = if settings
            .iter()
            .any(|s| s == "extensions.objectformat=sha256")
        {
            "sha256"
        } else {
            "sha1"
        };
        let own_dir = own::git_dir(&base, format)?;
        let (excludes, attributes) = own::composed_files(&base, &repo.common_dir)?;
        let snapshots = store_dir.join(SNAPSHOT_DIR);
        std::fs::create_dir_all(snapshots.join("objects")).map_err(|e| GitError::OwnDir {
            path: snapshots.clone(),
            why: e.to_string(),
        })?;
        let snapshots = std::fs::canonicalize(&snapshots).map_err(|e| GitError::OwnDir {
            path: snapshots.clone(),
            why: e.to_string(),
        })?;
        let jail = jail_for(&snapshots)?;
        Ok(Git {
            workspace,
            repo: repo.clone(),
            prefix,
            binary,
            base,
            own_dir,
            excludes,
            attributes,
            settings,
            snapshots,
            jail,
        })
    }

    /// The repository.
    pub fn repository(&self) -> &Repository {
        &self.repo
    }

    /// The workspace (canonical).
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The workspace's path inside the work tree (`sub/dir/`, or empty).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// True when the repository's settings make a checkout write CRLF line
    /// endings to every text file (`core.autocrlf = true`, `core.eol =
    /// crlf`).
    pub fn checks_out_crlf(&self) -> bool {
        self.settings
            .iter()
            .any(|s| s == "core.autocrlf=true" || s == "core.eol=crlf")
    }

    /// Latch's snapshot directory (canonical), the one place its git writes.
    pub fn snapshot_dir(&self) -> &Path {
        &self.snapshots
    }

    /// A git command in the workspace with `index` as its index (see the
    /// module docs for everything else it gets), confined.
    pub(crate) fn command<S: AsRef<OsStr>>(&self, index: &Path, args: &[S]) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.env_clear()
            .current_dir(&self.workspace)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.base)
            .env("XDG_CONFIG_HOME", &self.base)
            .env("LC_ALL", "C")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_DIR", &self.own_dir)
            .env("GIT_COMMON_DIR", &self.own_dir)
            .env("GIT_WORK_TREE", &self.repo.work_tree)
            .env("GIT_INDEX_FILE", index)
            .env("GIT_OBJECT_DIRECTORY", self.snapshots.join("objects"))
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", self.repo.objects())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let attributes = format!("core.attributesFile={}", self.attributes.display());
        let excludes = format!("core.excludesFile={}", self.excludes.display());
        let keys = PROGRAM_KEYS
            .iter()
            .chain(QUIET_KEYS)
            .map(|(k, v)| format!("{k}={v}"))
            .chain([attributes, excludes])
            .chain(self.settings.iter().cloned());
        for kv in keys {
            cmd.arg("-c").arg(kv);
        }
        cmd.arg("--no-pager").args(args);
        self.jail.confine(&mut cmd);
        cmd
    }

    /// Run git with `args` and `index`, feeding it `input`; its output when
    /// it exits with 0.
    pub(crate) fn output<S: AsRef<OsStr>>(
        &self,
        index: &Path,
        args: &[S],
        input: Option<&[u8]>,
    ) -> Result<Output, GitError> {
        let out = self.run(index, args, input)?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(failed(args, &out))
        }
    }

    /// Run git with `args` and `index`, feeding it `input`, whatever its
    /// exit status.
    pub(crate) fn run<S: AsRef<OsStr>>(
        &self,
        index: &Path,
        args: &[S],
        input: Option<&[u8]>,
    ) -> Result<Output, GitError> {
        let mut cmd = self.command(index, args);
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let io = |source| GitError::Io {
            args: joined(args),
            source,
        };
        let mut child = cmd.spawn().map_err(io)?;
        let writer = match (input, child.stdin.take()) {
            (Some(bytes), Some(mut stdin)) => {
                let bytes = bytes.to_vec();
                Some(std::thread::spawn(move || stdin.write_all(&bytes)))
            }
            _ => None,
        };
        let out = child.wait_with_output().map_err(io)?;
        if let Some(w) = writer {
            // A git that stopped reading early has said why on stderr.
            let _ = w.join();
        }
        Ok(out)
    }

    /// Start git with `args` and `index`, its stdin and stdout piped (for
    /// a `--batch` conversation).
    pub(crate) fn spawn<S: AsRef<OsStr>>(
        &self,
        index: &Path,
        args: &[S],
    ) -> Result<Child, GitError> {
        let mut cmd = self.command(index, args);
        cmd.stdin(Stdio::piped()).stderr(Stdio::null());
        cmd.spawn().map_err(|source| GitError::Io {
            args: joined(args),
            source,
        })
    }
}

fn joined<S: AsRef<OsStr>>(args: &[S]) -> String {
    args.iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn failed<S: AsRef<OsStr>>(args: &[S], out: &Output) -> GitError {
    let stderr = String::from_utf8_lossy(&out.stderr);
    GitError::Failed {
        args: joined(args),
        status: out.status,
        stderr: stderr
            .chars()
            .take(400)
            .collect::<String>()
            .trim()
            .to_string(),
    }
}

#[cfg(test)]
mod tests;
