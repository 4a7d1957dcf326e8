//! `read_file`, `write_file` and `edit_file`.
//!
//! Reads are bounded to [`READ_MAX_BYTES`] and [`READ_MAX_TOKENS`] per call
//! and record a file observation (with a whole-file SHA-256 only for files
//! within [`FILE_HASH_MAX_BYTES`]). Writes are guarded: an existing file must
//! have been read in this session and must still hash to what the session
//! last observed — the kernel's [`check_guarded_write`] decides, just before
//! the write, and records an external change on a mismatch. The mutation is
//! committed before the bytes are written, and the written content is
//! observed afterwards so consecutive edits work.

use crate::args::Args;
use crate::error::ToolError;
use crate::paths::{Access, Resolved};
use crate::{Reply, ToolContext};
use latch_engine_sdk::estimate;
use latch_kernel::{
    EventKind, FILE_HASH_MAX_BYTES, FileKnowledge, READ_MAX_BYTES, READ_MAX_TOKENS, bound_head,
    check_guarded_write, commit_mutation, record_checkpoint, sha256_hex,
};
use std::io::{BufRead, BufReader, ErrorKind, Read};

/// Bytes and tokens kept free in a page for its closing line.
const FOOTER_BYTES: usize = 256;
const FOOTER_TOKENS: u32 = 128;
/// Bytes inspected for NUL to tell binary files from text.
const SNIFF_BYTES: usize = 8192;

fn missing(rel: &str) -> ToolError {
    ToolError::Failed(format!(
        "`{rel}` does not exist (use list_files to see what does)"
    ))
}

/// Collects the numbered lines of one page within the read bounds.
struct Pager {
    profile: latch_engine_sdk::types::EstimatorProfile,
    offset: u64,
    limit: Option<u64>,
    out: String,
    tokens: u32,
    first: Option<u64>,
    last: u64,
    total: u64,
    full: bool,
    cut_line: Option<(u64, usize)>,
}

impl Pager {
    fn line(&mut self, n: u64, raw: &[u8]) {
        self.total = n;
        if n < self.offset || self.full {
            return;
        }
        if self
            .limit
            .is_some_and(|l| n >= self.offset.saturating_add(l))
        {
            self.full = true;
            return;
        }
        let text = String::from_utf8_lossy(raw);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let formatted = format!("{n:>6}\t{text}\n");
        let tokens = estimate(self.profile, &formatted);
        let max_bytes = READ_MAX_BYTES - FOOTER_BYTES;
        let max_tokens = READ_MAX_TOKENS - FOOTER_TOKENS;
        if self.out.len() + formatted.len() <= max_bytes && self.tokens + tokens <= max_tokens {
            self.out.push_str(&formatted);
            self.tokens += tokens;
            self.first.get_or_insert(n);
            self.last = n;
        } else if self.first.is_none() {
            // A single line larger than a page: show its beginning.
            let head = bound_head(&formatted, self.profile);
            let mut cut = head.len().min(max_bytes);
            loop {
                while !head.is_char_boundary(cut) {
                    cut -= 1;
                }
                let excess = estimate(self.profile, &head[..cut]).saturating_sub(max_tokens);
                if excess == 0 {
                    break;
                }
                cut = cut.saturating_sub((excess as usize * 4).max(1));
            }
            self.out.push_str(&head[..cut]);
            self.out.push('\n');
            self.first = Some(n);
            self.last = n;
            self.cut_line = Some((n, raw.len()));
            self.full = true;
        } else {
            self.full = true;
        }
    }

    fn finish(mut self, rel: &str, size: u64) -> String {
        if self.total == 0 {
            return format!("[{rel} is empty]");
        }
        let Some(first) = self.first else {
            return format!(
                "[offset {} is past the end of {rel}, which has {} lines]",
                self.offset, self.total
            );
        };
        if let Some((n, len)) = self.cut_line {
            self.out.push_str(&format!(
                "[line {n} is {len} bytes long; only its beginning is shown]\n"
            ));
        }
        if self.last < self.total {
            self.out.push_str(&format!(
                "[lines {first}-{} of {} of {rel} ({size} bytes); continue with offset={}]",
                self.last,
                self.total,
                self.last + 1
            ));
        } else {
            self.out.push_str(&format!(
                "[lines {first}-{} of {} of {rel} ({size} bytes)]",
                self.last, self.total
            ));
        }
        self.out
    }
}

/// `read_file {path, offset?, limit?}`.
pub(crate) fn read_file(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let r = ctx.resolve(args.str("path"), Access::Read)?;
    let meta = match std::fs::metadata(&r.abs) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(missing(&r.rel)),
        Err(e) => return Err(ToolError::io(&r.abs, e)),
    };
    if meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "`{}` is a directory; use list_files to see its contents",
            r.rel
        )));
    }
    if args.opt_u64("limit") == Some(0) {
        return Err(args.invalid("`limit` must be at least 1"));
    }
    let mut pager = Pager {
        profile: ctx.profile(),
        offset: args.opt_u64("offset").unwrap_or(1).max(1),
        limit: args.opt_u64("limit"),
        out: String::new(),
        tokens: 0,
        first: None,
        last: 0,
        total: 0,
        full: false,
        cut_line: None,
    };
    let io = |e| ToolError::io(&r.abs, e);
    let (observation, size, binary) = if meta.len() <= FILE_HASH_MAX_BYTES as u64 {
        let bytes = std::fs::read(&r.abs).map_err(io)?;
        let binary = bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0);
        if !binary {
            for (i, line) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
                pager.line(i as u64 + 1, line);
            }
        }
        (
            EventKind::file_observed(r.rel.clone(), &bytes),
            bytes.len() as u64,
            binary,
        )
    } else {
        let file = std::fs::File::open(&r.abs).map_err(io)?;
        let mut reader = BufReader::new(file);
        let mut sniff = Vec::with_capacity(SNIFF_BYTES);
        (&mut reader)
            .take(SNIFF_BYTES as u64)
            .read_to_end(&mut sniff)
            .map_err(io)?;
        let binary = sniff.contains(&0);
        let mut size = 0u64;
        if !binary {
            let mut chained = BufReader::new(std::io::Cursor::new(sniff).chain(reader));
            let mut line = Vec::new();
            let mut n = 0u64;
            loop {
                line.clear();
                let read =
                    read_line_capped(&mut chained, &mut line, LINE_KEEP_BYTES).map_err(io)?;
                if read == 0 {
                    break;
                }
                size += read;
                n += 1;
                pager.line(n, &line);
            }
        } else {
            size = meta.len();
        }
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
    Ok(Reply::ok(pager.finish(&r.rel, size)))
}

/// Most bytes of one line kept in memory: past a page nothing more of the
/// line can be shown, so a multi-GB file without a newline is read in
/// bounded memory.
const LINE_KEEP_BYTES: usize = READ_MAX_BYTES + 4096;

/// Read one line (through its `\n`) from `reader`, keeping at most `cap`
/// bytes of it in `line`; returns how many bytes were consumed (0 at end).
fn read_line_capped(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<u64> {
    let mut consumed = 0u64;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(consumed);
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = cap.saturating_sub(line.len());
        line.extend_from_slice(&buf[..take.min(room)]);
        reader.consume(take);
        consumed += take as u64;
        if done {
            return Ok(consumed);
        }
    }
}

/// The file's current bytes, or none when it does not exist.
fn current_bytes(r: &Resolved) -> Result<Option<Vec<u8>>, ToolError> {
    match std::fs::metadata(&r.abs) {
        Ok(m) if m.is_dir() => Err(ToolError::Failed(format!(
            "`{}` is a directory, not a file",
            r.rel
        ))),
        Ok(_) => std::fs::read(&r.abs)
            .map(Some)
            .map_err(|e| ToolError::io(&r.abs, e)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ToolError::io(&r.abs, e)),
    }
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
/// commit the mutation, write, then observe what was written.
fn commit_and_write(
    ctx: &ToolContext,
    tool: &str,
    r: &Resolved,
    before: Option<&[u8]>,
    content: &[u8],
) -> Result<(), ToolError> {
    record_checkpoint(ctx.store(), ctx.session(), &r.rel, before)?;
    commit_mutation(ctx.store(), ctx.session(), tool, vec![r.rel.clone()], None)?;
    if let Some(parent) = r.abs.parent() {
        std::fs::create_dir_all(parent).map_err(|e| ToolError::io(parent, e))?;
    }
    std::fs::write(&r.abs, content).map_err(|e| ToolError::io(&r.abs, e))?;
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
    let current = current_bytes(&r)?;
    guard(ctx, &r, current.as_deref())?;
    commit_and_write(
        ctx,
        "write_file",
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
    let Some(bytes) = current_bytes(&r)? else {
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
    commit_and_write(ctx, "edit_file", &r, Some(&before), updated.as_bytes())?;
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
