//! Workspace confinement: every path a tool touches is resolved inside the
//! workspace. `..` that climbs out of it and symbolic links whose target lies
//! outside it are denied; so are writes into Latch's own `.latch/` directory,
//! to the store file, and into any `.git` (a repository's config, hooks and
//! objects are git's: a command that changes them, such as `git commit`,
//! needs the user's approval). The resolved path is only the name a tool
//! then opens beneath the workspace without following a link
//! ([`latch_kernel::beneath`]): a link swapped in after this check makes
//! the open fail.

use crate::error::ToolError;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

/// What the caller means to do with the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read a file or walk a directory.
    Read,
    /// Create or change a file.
    Write,
}

/// A path resolved inside the workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// Absolute path with every existing symbolic link resolved.
    pub(crate) abs: PathBuf,
    /// Workspace-relative path with `/` separators (`.` for the root).
    pub(crate) rel: String,
}

/// Resolve `raw` (relative to `workspace`, or absolute) for `access`.
///
/// `workspace` must be canonical. `store` is the store's database file, which
/// no tool may write.
pub(crate) fn resolve(
    workspace: &Path,
    store: &Path,
    raw: &str,
    access: Access,
) -> Result<Resolved, ToolError> {
    if raw.contains('\0') {
        return Err(ToolError::Failed(format!(
            "the path {raw:?} contains a NUL byte"
        )));
    }
    let given = Path::new(raw);
    let joined = if given.is_absolute() {
        given.to_path_buf()
    } else {
        workspace.join(given)
    };
    let outside = || ToolError::Denied {
        reason: format!("`{raw}` is outside the workspace {}", workspace.display()),
    };
    // Lexical normalization: `.` and `..` are resolved before any symlink.
    let mut normal = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => normal.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if !normal.pop() || !normal.starts_with(workspace) {
                    return Err(outside());
                }
            }
            Component::Normal(n) => normal.push(n),
        }
    }
    if !normal.starts_with(workspace) {
        return Err(outside());
    }

    // Resolve symlinks on the longest existing prefix; the rest does not exist.
    let mut existing = normal.clone();
    let mut missing: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match std::fs::symlink_metadata(&existing) {
            Ok(_) => break,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let Some(name) = existing.file_name().map(|n| n.to_os_string()) else {
                    return Err(ToolError::io(&normal, e));
                };
                missing.push(name);
                existing.pop();
            }
            Err(e) => return Err(ToolError::io(&existing, e)),
        }
    }
    let real = match std::fs::canonicalize(&existing) {
        Ok(r) => r,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(ToolError::Denied {
                reason: format!(
                    "`{raw}` goes through a symbolic link whose target does not exist; \
                     Latch does not follow it"
                ),
            });
        }
        Err(e) => return Err(ToolError::io(&existing, e)),
    };
    if !real.starts_with(workspace) {
        return Err(ToolError::Denied {
            reason: format!(
                "`{raw}` resolves through a symbolic link to {}, outside the workspace {}",
                real.display(),
                workspace.display()
            ),
        });
    }
    let mut abs = real;
    for name in missing.iter().rev() {
        abs.push(name);
    }
    let rel_path = abs.strip_prefix(workspace).expect("checked above");
    let rel = if rel_path.as_os_str().is_empty() {
        ".".to_string()
    } else {
        rel_path
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    };
    if access == Access::Write {
        if rel == "." {
            return Err(ToolError::Failed(
                "the workspace root is a directory, not a file".to_string(),
            ));
        }
        if rel == ".latch" || rel.starts_with(".latch/") {
            return Err(ToolError::Denied {
                reason: format!("`{raw}` is inside .latch/, which belongs to Latch"),
            });
        }
        if let Some(git) = rel.split('/').find(|c| c.eq_ignore_ascii_case(".git")) {
            return Err(ToolError::Denied {
                reason: format!(
                    "`{raw}` is inside {git}/, which belongs to git: the file tools never change a \
                     repository's config, hooks or objects (run git through `shell`; a command \
                     that writes .git, such as `git commit`, asks the user first)"
                ),
            });
        }
        if is_store_file(&abs, store) {
            return Err(ToolError::Denied {
                reason: format!("`{raw}` is Latch's event store"),
            });
        }
    }
    Ok(Resolved { abs, rel })
}

/// True when `abs` is the store's database file or one of its SQLite side
/// files (`-wal`, `-shm`, `-journal`).
fn is_store_file(abs: &Path, store: &Path) -> bool {
    let store = std::fs::canonicalize(store).unwrap_or_else(|_| store.to_path_buf());
    let Some(base) = store.to_str() else {
        return abs == store;
    };
    ["", "-wal", "-shm", "-journal"]
        .iter()
        .any(|suffix| abs == Path::new(&format!("{base}{suffix}")))
}
