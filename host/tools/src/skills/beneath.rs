//! Opening files beneath a skill's directory without a check-then-open
//! race: the kernel resolves the path and refuses any step that leaves the
//! directory or is a symbolic link, in the same call that opens it.
//!
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
//! does it in one call (Linux 5.6+); where the kernel lacks it (or a
//! sandbox filters it), the path is walked one component at a time with
//! `openat(O_NOFOLLOW)` from the directory's descriptor, which refuses a
//! symbolic link at every step just as well. A symbolic link swapped in for
//! any component at any moment therefore makes the open fail; it can never
//! make Latch read outside the skill.

use rustix::fs::{Dir, FileType, Mode, OFlags, ResolveFlags, fstat, open, openat, openat2};
use rustix::io::Errno;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

/// Why a path beneath a directory could not be opened.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BeneathError {
    /// An absolute path, or one with `..`.
    #[error("is not a path inside the directory")]
    Outside,
    /// A component is a symbolic link (or resolves out of the directory).
    #[error("is or passes through a symbolic link")]
    Symlink,
    /// Nothing is there.
    #[error("does not exist")]
    NotFound,
    /// Any other failure.
    #[error("cannot be opened: {0}")]
    Io(String),
}

/// What an opened entry is.
pub enum Opened {
    /// A regular file (or anything else that is not a directory).
    File(File),
    /// A directory, as a descriptor to list.
    Dir(OwnedFd),
}

/// Opens the directory `dir` itself (its last component must not be a
/// symbolic link).
pub fn open_dir(dir: &Path) -> Result<OwnedFd, BeneathError> {
    open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(classify)
}

/// Opens `rel` beneath the directory `root` (a descriptor from
/// [`open_dir`]), following no symbolic link and never leaving it.
pub fn open_beneath(root: &OwnedFd, rel: &Path) -> Result<Opened, BeneathError> {
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(BeneathError::Outside);
    }
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NOFOLLOW;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let fd = match openat2(root, rel, flags, Mode::empty(), resolve) {
        Ok(fd) => fd,
        // No openat2 here (old kernel, or filtered): walk instead.
        Err(Errno::NOSYS) | Err(Errno::PERM) => walk(root, rel, flags)?,
        Err(e) => return Err(classify(e)),
    };
    let stat = fstat(&fd).map_err(classify)?;
    Ok(match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => Opened::Dir(fd),
        _ => Opened::File(File::from(fd)),
    })
}

/// The `openat(O_NOFOLLOW)` walk: one component at a time from `root`.
pub(crate) fn walk(root: &OwnedFd, rel: &Path, last: OFlags) -> Result<OwnedFd, BeneathError> {
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p),
            _ => None,
        })
        .collect();
    let mut current: Option<OwnedFd> = None;
    for (i, part) in parts.iter().enumerate() {
        let at = current.as_ref().unwrap_or(root);
        let flags = if i + 1 == parts.len() {
            last
        } else {
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
        };
        current = Some(openat(at, *part, flags, Mode::empty()).map_err(classify)?);
    }
    match current {
        Some(fd) => Ok(fd),
        // `.` alone: the directory itself.
        None => openat(root, ".", last | OFlags::DIRECTORY, Mode::empty()).map_err(classify),
    }
}

fn classify(e: Errno) -> BeneathError {
    match e {
        Errno::LOOP | Errno::XDEV => BeneathError::Symlink,
        // O_DIRECTORY|O_NOFOLLOW on a symbolic link to a directory.
        Errno::NOTDIR => BeneathError::Symlink,
        Errno::NOENT => BeneathError::NotFound,
        other => BeneathError::Io(std::io::Error::from(other).to_string()),
    }
}

/// Files beneath the directory `fd`, relative, sorted, at most `cap`
/// (the last entry then `…`): read through descriptors, so a symbolic link
/// swapped in is neither followed nor listed into.
pub fn list(fd: &OwnedFd, cap: usize) -> Vec<String> {
    let mut out = Vec::new();
    collect(fd, "", &mut out, 0);
    out.sort();
    if out.len() > cap {
        out.truncate(cap);
        out.push("…".into());
    }
    out
}

/// Directory depth a listing goes down to.
const MAX_DEPTH: usize = 16;
/// Entries a listing reads at most before it stops.
const MAX_ENTRIES: usize = 10_000;

fn collect(fd: &OwnedFd, prefix: &str, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH || out.len() >= MAX_ENTRIES {
        return;
    }
    let Ok(dir) = Dir::read_from(fd) else { return };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." {
            continue;
        }
        let rel = format!("{prefix}{name}");
        match entry.file_type() {
            FileType::Directory => {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                if let Ok(sub) = openat(fd, name.as_str(), flags, Mode::empty()) {
                    collect(&sub, &format!("{rel}/"), out, depth + 1);
                }
            }
            FileType::Symlink => {}
            _ => out.push(rel),
        }
        if out.len() >= MAX_ENTRIES {
            return;
        }
    }
}
