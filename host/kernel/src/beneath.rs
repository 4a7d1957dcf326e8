//! File I/O beneath a directory without following a link: every read and
//! write Latch does on the user's behalf in the workspace (the file tools,
//! checkpoints, rewind, the resume settle path, repository instructions,
//! custom commands, skills) goes through here.
//!
//! The kernel resolves each path and refuses any step that leaves the
//! directory or is a symbolic link, in the same call that opens it:
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
//! (Linux 5.6+); where the kernel lacks it (or a filter refuses it), the
//! path is walked one component at a time with `openat(O_NOFOLLOW)` from
//! the directory's descriptor, which refuses a link at every step just as
//! well. A link swapped in for any component at any moment (a directory
//! exchanged with a link by `renameat2(RENAME_EXCHANGE)`, say) therefore
//! makes the call fail; it can never make Latch read or write outside.
//!
//! Writes go through the descriptor that was checked: an existing file is
//! opened once (never through a link), its current bytes read and then
//! replaced through the same descriptor ([`Target`]); a new file is created
//! with `O_EXCL` in a parent directory opened the same way, so a link
//! planted meanwhile makes the creation fail instead of being followed. A
//! file is removed by name from its parent's descriptor, and only when it
//! is a regular file. Reads open with `O_NONBLOCK` and take regular files
//! only, so a FIFO or a device in the workspace cannot stall Latch.

use rustix::fs::{
    AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags, fstat, mkdirat, open, openat, openat2,
    statat, unlinkat,
};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek, Write};
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
    /// Something that is not a regular file is where one was expected (a
    /// directory, a FIFO, a device).
    #[error("is not a regular file")]
    NotAFile,
    /// A file appeared where one was being created.
    #[error("appeared while Latch was creating it")]
    Appeared,
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

/// The components of `rel`, or [`BeneathError::Outside`] for an absolute
/// path or one with `..`.
fn parts(rel: &Path) -> Result<Vec<&OsStr>, BeneathError> {
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(BeneathError::Outside);
    }
    Ok(rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p),
            _ => None,
        })
        .collect())
}

/// `openat2` beneath `root` with no link followed, or the walk where the
/// kernel has no `openat2`.
fn open_at(root: &OwnedFd, rel: &Path, flags: OFlags) -> Result<OwnedFd, BeneathError> {
    parts(rel)?;
    let flags = flags | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NOFOLLOW;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match openat2(root, rel, flags, Mode::empty(), resolve) {
        Ok(fd) => Ok(fd),
        // No openat2 here (old kernel, or filtered): walk instead.
        Err(Errno::NOSYS) | Err(Errno::PERM) => walk(root, rel, flags),
        Err(e) => Err(classify(e)),
    }
}

/// Opens `rel` beneath the directory `root` (a descriptor from
/// [`open_dir`]), following no symbolic link and never leaving it.
pub fn open_beneath(root: &OwnedFd, rel: &Path) -> Result<Opened, BeneathError> {
    let fd = open_at(root, rel, OFlags::RDONLY | OFlags::NONBLOCK)?;
    let stat = fstat(&fd).map_err(classify)?;
    Ok(match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => Opened::Dir(fd),
        _ => Opened::File(File::from(fd)),
    })
}

/// Opens the regular file `rel` beneath `root` for reading.
pub fn open_file(root: &OwnedFd, rel: &Path) -> Result<File, BeneathError> {
    let fd = open_at(root, rel, OFlags::RDONLY | OFlags::NONBLOCK)?;
    regular(fd)
}

/// The bytes of the regular file `rel` beneath `root`; `None` when nothing
/// is there.
pub fn read(root: &OwnedFd, rel: &Path) -> Result<Option<Vec<u8>>, BeneathError> {
    let mut file = match open_file(root, rel) {
        Ok(f) => f,
        Err(BeneathError::NotFound) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| BeneathError::Io(e.to_string()))?;
    Ok(Some(bytes))
}

/// At most `max` bytes of the regular file `rel` of the directory
/// `workspace`, where a link is followed only when its target lies inside
/// `workspace` (as `AGENTS.md` → `docs/AGENTS.md`): the path is resolved
/// by name first, then its real path is opened beneath `workspace` with no
/// link followed, so a link swapped in meanwhile makes it fail. `None`
/// when nothing is there; [`BeneathError::Symlink`] for a link out of the
/// workspace (or one swapped in).
pub fn read_within(
    workspace: &Path,
    rel: &Path,
    max: u64,
) -> Result<Option<Vec<u8>>, BeneathError> {
    parts(rel)?;
    let io = |e: std::io::Error| BeneathError::Io(e.to_string());
    let workspace = std::fs::canonicalize(workspace).map_err(io)?;
    let root = open_dir(&workspace)?;
    let real = match std::fs::canonicalize(workspace.join(rel)) {
        Ok(real) => real,
        // Nothing there, or a link to nothing: nothing to read.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let inside = real
        .strip_prefix(&workspace)
        .map_err(|_| BeneathError::Symlink)?;
    let file = match open_file(&root, inside) {
        Ok(f) => f,
        Err(BeneathError::NotFound) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).map_err(io)?;
    Ok(Some(bytes))
}

/// `fd` as a file when it is a regular one.
fn regular(fd: OwnedFd) -> Result<File, BeneathError> {
    let stat = fstat(&fd).map_err(classify)?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Ok(File::from(fd)),
        _ => Err(BeneathError::NotAFile),
    }
}

/// Where a write lands: the existing regular file, opened for reading and
/// writing, or nothing yet.
pub enum Target {
    /// The file, opened once, never through a link.
    Existing(File),
    /// Nothing is there.
    Missing,
}

impl Target {
    /// The current bytes (`None` when missing), read through the open
    /// descriptor.
    pub fn bytes(&mut self) -> Result<Option<Vec<u8>>, BeneathError> {
        let Target::Existing(file) = self else {
            return Ok(None);
        };
        let io = |e: std::io::Error| BeneathError::Io(e.to_string());
        file.rewind().map_err(io)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        Ok(Some(bytes))
    }
}

/// Opens the write target `rel` beneath `root`: a regular file (read and
/// write), or [`Target::Missing`]. A link anywhere on the way (the file
/// itself included) is [`BeneathError::Symlink`]; a directory or another
/// special file is [`BeneathError::NotAFile`].
pub fn open_target(root: &OwnedFd, rel: &Path) -> Result<Target, BeneathError> {
    match open_at(root, rel, OFlags::RDWR | OFlags::NONBLOCK) {
        Ok(fd) => Ok(Target::Existing(regular(fd)?)),
        Err(BeneathError::NotFound) => Ok(Target::Missing),
        Err(e) => Err(e),
    }
}

/// Write `bytes` to `target` (from [`open_target`] on `rel`): an existing
/// file is replaced in place through its descriptor; a missing one is
/// created with `O_EXCL` (its parent directories too when `create_dirs`),
/// so nothing that appeared meanwhile is ever followed or overwritten.
pub fn write(
    root: &OwnedFd,
    rel: &Path,
    target: Target,
    bytes: &[u8],
    create_dirs: bool,
) -> Result<(), BeneathError> {
    let io = |e: std::io::Error| BeneathError::Io(e.to_string());
    let mut file = match target {
        Target::Existing(mut file) => {
            file.rewind().map_err(io)?;
            file.set_len(0).map_err(io)?;
            file
        }
        Target::Missing => {
            let (parent, name) = open_parent(root, rel, create_dirs)?;
            let flags = OFlags::WRONLY
                | OFlags::CREATE
                | OFlags::EXCL
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC
                | OFlags::NOCTTY;
            match openat(&parent, name, flags, Mode::from_raw_mode(0o666)) {
                Ok(fd) => File::from(fd),
                Err(Errno::EXIST) => return Err(BeneathError::Appeared),
                Err(e) => return Err(classify(e)),
            }
        }
    };
    file.write_all(bytes).map_err(io)?;
    file.flush().map_err(io)
}

/// Removes the regular file `rel` beneath `root`, by name from its
/// parent's descriptor; a link, a directory or anything else is left
/// alone ([`BeneathError::Symlink`], [`BeneathError::NotAFile`]).
pub fn remove_file(root: &OwnedFd, rel: &Path) -> Result<(), BeneathError> {
    let (parent, name) = open_parent(root, rel, false)?;
    let stat = statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW).map_err(classify)?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Symlink => return Err(BeneathError::Symlink),
        _ => return Err(BeneathError::NotAFile),
    }
    unlinkat(&parent, name, AtFlags::empty()).map_err(classify)
}

/// The parent directory of `rel` beneath `root` (created one level at a
/// time when `create` and missing) and the last component's name.
fn open_parent<'a>(
    root: &OwnedFd,
    rel: &'a Path,
    create: bool,
) -> Result<(OwnedFd, &'a OsStr), BeneathError> {
    let parts = parts(rel)?;
    let Some((name, dirs)) = parts.split_last() else {
        return Err(BeneathError::Outside);
    };
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut current = openat(root, ".", dir_flags, Mode::empty()).map_err(classify)?;
    for part in dirs {
        current = match openat(&current, *part, dir_flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if create => {
                match mkdirat(&current, *part, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(classify(e)),
                }
                openat(&current, *part, dir_flags, Mode::empty()).map_err(classify)?
            }
            Err(e) => return Err(classify(e)),
        };
    }
    Ok((current, name))
}

/// The `openat(O_NOFOLLOW)` walk: one component at a time from `root`.
fn walk(root: &OwnedFd, rel: &Path, last: OFlags) -> Result<OwnedFd, BeneathError> {
    let parts = parts(rel)?;
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
        // O_RDWR on a directory.
        Errno::ISDIR => BeneathError::NotAFile,
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

#[cfg(test)]
mod tests;
