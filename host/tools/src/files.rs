//! `read_file`, `write_file` and `edit_file`.
//!
//! Reads are bounded to [`latch_kernel::READ_MAX_BYTES`] and
//! [`latch_kernel::READ_MAX_TOKENS`] per call (see [`crate::page`]) and record a file
//! observation (with a whole-file SHA-256 only for files
//! within [`FILE_HASH_MAX_BYTES`]). Writes are guarded: an existing file must
//! have been read in this session and must still hash to what the session
//! last observed — the kernel's [`check_guarded_write`] decides, just before
//! the write, and records an external change on a mismatch. The mutation is
//! committed before the bytes are written, and the written content is
//! observed afterwards so consecutive edits work.
//!
//! Every read and write goes through a descriptor opened beneath the
//! workspace without following a link ([`latch_kernel::beneath`]): the path
//! is checked ([`crate::paths`]), then opened once; a write replaces the
//! bytes of the very file whose current bytes the guard checked, or
//! creates a new one with `O_EXCL`. A command that swaps a directory for a
//! link meanwhile (`renameat2(RENAME_EXCHANGE)`) makes the call fail; it can
//! never make Latch read or write outside the workspace.

use crate::args::Args;
use crate::error::ToolError;
use crate::page::{Pager, page_lines};
use crate::paths::{Access, Resolved};
use crate::{Reply, ToolContext};
use latch_kernel::beneath::{self, BeneathError, Opened, Target};
use latch_kernel::{
    EventKind, FILE_HASH_MAX_BYTES, FileKnowledge, check_guarded_write, commit_mutation,
    record_checkpoint, sha256_hex,
};
use std::io::{BufReader, Read};
use std::os::fd::OwnedFd;
use std::path::Path;

/// Bytes inspected for NUL to tell binary files from text.
const SNIFF_BYTES: usize = 8192;

fn missing(rel: &str) -> ToolError {
    ToolError::Failed(format!(
        "`{rel}` does not exist (use list_files to see what does)"
    ))
}

/// What a failed open beneath the workspace means for `rel`.
fn opened_error(rel: &str, e: BeneathError) -> ToolError {
    match e {
        BeneathError::NotFound => missing(rel),
        BeneathError::Symlink | BeneathError::Outside => ToolError::Denied {
            reason: format!(
                "`{rel}` is (or passes through) a symbolic link that changed while Latch \
                 opened it; Latch never reads or writes through a link"
            ),
        },
        BeneathError::NotAFile => ToolError::Failed(format!(
            "`{rel}` is not a regular file (a directory, a FIFO or a device)"
        )),
        BeneathError::Appeared => ToolError::Failed(format!(
            "`{rel}` appeared while Latch was creating it; read it with read_file first"
        )),
        BeneathError::Io(why) => ToolError::Failed(format!("`{rel}` {why}")),
    }
}

/// `read_file {path, offset?, limit?}`.
pub(crate) fn read_file(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let r = ctx.resolve(args.str("path"), Access::Read)?;
    let root = ctx.workspace_dir()?;
    let file = match beneath::open_beneath(&root, Path::new(&r.rel)) {
        Ok(Opened::File(f)) => f,
        Ok(Opened::Dir(_)) => {
            return Err(ToolError::Failed(format!(
                "`{}` is a directory; use list_files to see its contents",
                r.rel
            )));
        }
        Err(e) => return Err(opened_error(&r.rel, e)),
    };
    let meta = file.metadata().map_err(|e| ToolError::io(&r.abs, e))?;
    if !meta.is_file() {
        return Err(opened_error(&r.rel, BeneathError::NotAFile));
    }
    if args.opt_u64("limit") == Some(0) {
        return Err(args.invalid("`limit` must be at least 1"));
    }
    let mut pager = Pager::new(
        ctx.profile(),
        args.opt_u64("offset").unwrap_or(1),
        args.opt_u64("limit"),
    );
    let io = |e| ToolError::io(&r.abs, e);
    let (observation, size, binary) = if meta.len() <= FILE_HASH_MAX_BYTES as u64 {
        let mut bytes = Vec::new();
        (&file).read_to_end(&mut bytes).map_err(io)?;
        let binary = bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0);
        if !binary {
            for (i, line) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
                pager.line(i as u64 + 1, line, line.len() as u64);
            }
        }
        (
            EventKind::file_observed(r.rel.clone(), &bytes),
            bytes.len() as u64,
            binary,
        )
    } else {
        let mut reader = BufReader::new(file);
        let mut sniff = Vec::with_capacity(SNIFF_BYTES);
        (&mut reader)
            .take(SNIFF_BYTES as u64)
            .read_to_end(&mut sniff)
            .map_err(io)?;
        let binary = sniff.contains(&0);
        let size = if binary {
            meta.len()
        } else {
            let mut chained = BufReader::new(std::io::Cursor::new(sniff).chain(reader));
            page_lines(&mut pager, &mut chained).map_err(io)?
        };
        (
            EventKind::FileObserved {
                path: r.rel.clone(),
                sha256: None,
                size,
            },
            size,
            binary,
        )
    };
    ctx.append(observation)?;
    if binary {
        return Ok(Reply::ok(format!(
            "[{} is a binary file ({size} bytes); its contents are not shown]",
            r.rel
        )));
    }
    let quoted = shell_quote(&r.rel);
    Ok(Reply::ok(pager.finish(&r.rel, size, |at| {
        format!(
            "`shell` with `tail -c +{} {quoted} | head -c 16384` reads on from there",
            at + 1
        )
    })))
}

/// `path` quoted for `sh` where it needs quoting.
fn shell_quote(path: &str) -> String {
    if path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-/+".contains(c))
    {
        path.to_string()
    } else {
        format!("'{}'", path.replace('\'', "'\\''"))
    }
}

/// The file at `r`, opened beneath the workspace to be written, and its
/// current bytes (none when it does not exist).
fn open_target(root: &OwnedFd, r: &Resolved) -> Result<(Target, Option<Vec<u8>>), ToolError> {
    let mut target = beneath::open_target(root, Path::new(&r.rel)).map_err(|e| match e {
        BeneathError::NotAFile => ToolError::Failed(format!(
            "`{}` is a directory (or another special file), not a file",
            r.rel
        )),
        e => opened_error(&r.rel, e),
    })?;
    let current = target.bytes().map_err(|e| opened_error(&r.rel, e))?;
    Ok((target, current))
}

/// The write guard: an existing file must have been observed in this session
/// and still hash to what the session last knew.
fn guard(ctx: &ToolContext, r: &Resolved, current: Option<&[u8]>) -> Result<(), ToolError> {
    let knowledge = ctx
        .store()
        .with_kernel(ctx.session(), |k| k.file(&r.rel).cloned())?;
    match (current, &knowledge) {
        (Some(_), None) => {
            return Err(ToolError::Failed(format!(
                "`{}` exists but has not been read in this session; read it with read_file \
                 before changing it",
                r.rel
            )));
        }
        // Its deletion is already recorded and reported: creating it anew is fine.
        (
            None,
            Some(FileKnowledge::ChangedExternally {
                actual_sha256: None,
                ..
            }),
        ) => return Ok(()),
        _ => {}
    }
    let hash = current.map(sha256_hex);
    check_guarded_write(ctx.store(), ctx.session(), &r.rel, hash.as_deref())?;
    Ok(())
}

/// Record what the write replaces (a checkpoint `rewind` restores from),
/// commit the mutation, write through `target`, then observe what was
/// written.
fn commit_and_write(
    ctx: &ToolContext,
    tool: &str,
    (root, target): (&OwnedFd, Target),
    r: &Resolved,
    before: Option<&[u8]>,
    content: &[u8],
) -> Result<(), ToolError> {
    record_checkpoint(ctx.store(), ctx.session(), &r.rel, before)?;
    commit_mutation(ctx.store(), ctx.session(), tool, vec![r.rel.clone()], None)?;
    beneath::write(root, Path::new(&r.rel), target, content, true)
        .map_err(|e| opened_error(&r.rel, e))?;
    ctx.append(EventKind::file_observed(r.rel.clone(), content))?;
    Ok(())
}

fn line_count(text: &str) -> usize {
    text.lines().count()
}

/// `write_file {path, content}`.
pub(crate) fn write_file(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let r = ctx.resolve(args.str("path"), Access::Write)?;
    let content = args.str("content");
    let root = ctx.workspace_dir()?;
    let (target, current) = open_target(&root, &r)?;
    guard(ctx, &r, current.as_deref())?;
    commit_and_write(
        ctx,
        "write_file",
        (&root, target),
        &r,
        current.as_deref(),
        content.as_bytes(),
    )?;
    let verb = if current.is_some() {
        "replaced"
    } else {
        "created"
    };
    Ok(Reply::ok(format!(
        "{verb} {} ({} bytes, {} lines)",
        r.rel,
        content.len(),
        line_count(content)
    )))
}

/// `edit_file {path, old_string, new_string, replace_all?}`.
pub(crate) fn edit_file(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let r = ctx.resolve(args.str("path"), Access::Write)?;
    let old = args.str("old_string");
    let new = args.str("new_string");
    let replace_all = args.flag("replace_all");
    if old.is_empty() {
        return Err(args.invalid(
            "`old_string` must not be empty (use write_file to create or replace a whole file)",
        ));
    }
    if old == new {
        return Err(args.invalid("`old_string` and `new_string` are identical"));
    }
    let root = ctx.workspace_dir()?;
    let (target, current) = open_target(&root, &r)?;
    let Some(bytes) = current else {
        return Err(ToolError::Failed(format!(
            "`{}` does not exist; create it with write_file",
            r.rel
        )));
    };
    guard(ctx, &r, Some(&bytes))?;
    let before = bytes.clone();
    let text = String::from_utf8(bytes).map_err(|_| {
        ToolError::Failed(format!(
            "`{}` is not UTF-8 text; edit_file cannot change it",
            r.rel
        ))
    })?;
    let count = text.matches(old).count();
    if count == 0 {
        return Err(ToolError::Failed(format!(
            "old_string does not occur in `{}`; re-read the file and copy the text exactly, \
             whitespace and indentation included",
            r.rel
        )));
    }
    if count > 1 && !replace_all {
        return Err(ToolError::Failed(format!(
            "old_string occurs {count} times in `{}`; include more surrounding lines to make it \
             unique, or set replace_all to replace every occurrence",
            r.rel
        )));
    }
    let first_line = text[..text.find(old).unwrap_or(0)].matches('\n').count() + 1;
    let updated = if replace_all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    commit_and_write(
        ctx,
        "edit_file",
        (&root, target),
        &r,
        Some(&before),
        updated.as_bytes(),
    )?;
    let what = if count == 1 {
        format!("1 occurrence at line {first_line}")
    } else {
        format!("{count} occurrences, the first at line {first_line}")
    };
    Ok(Reply::ok(format!(
        "edited {}: replaced {what} ({} bytes, {} lines now)",
        r.rel,
        updated.len(),
        line_count(&updated)
    )))
}
