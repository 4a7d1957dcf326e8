//! One page of numbered lines within the read bounds ([`READ_MAX_BYTES`] and
//! [`READ_MAX_TOKENS`]), shared by `read_file` and `read_artifact`, and the
//! line reader that feeds it in bounded memory: past a page nothing more of
//! a line can be shown, so a multi-GB input without a newline costs a page
//! of memory, not its size.

use latch_engine_sdk::estimate;
use latch_engine_sdk::types::EstimatorProfile;
use latch_kernel::{READ_MAX_BYTES, READ_MAX_TOKENS, bound_head};
use std::io::{BufRead, ErrorKind};

/// Bytes and tokens kept free in a page for its closing lines.
const FOOTER_BYTES: usize = 512;
const FOOTER_TOKENS: u32 = 192;

/// Most bytes of one line kept in memory (a page and a margin).
pub(crate) const LINE_KEEP_BYTES: usize = READ_MAX_BYTES + 4096;

/// A line too long for a page: only its beginning is shown.
struct CutLine {
    n: u64,
    /// Byte offset of the line in the input.
    start: u64,
    /// The line's full length in bytes (its newline included).
    len: u64,
    /// How many of its bytes the page shows.
    shown: u64,
}

/// Collects the numbered lines of one page within the read bounds.
pub(crate) struct Pager {
    profile: EstimatorProfile,
    offset: u64,
    limit: Option<u64>,
    out: String,
    tokens: u32,
    first: Option<u64>,
    last: u64,
    total: u64,
    /// Bytes of the input before the next line.
    at: u64,
    full: bool,
    cut_line: Option<CutLine>,
}

impl Pager {
    /// A page starting at line `offset` (1-based), with at most `limit`
    /// lines when given.
    pub(crate) fn new(profile: EstimatorProfile, offset: u64, limit: Option<u64>) -> Pager {
        Pager {
            profile,
            offset: offset.max(1),
            limit,
            out: String::new(),
            tokens: 0,
            first: None,
            last: 0,
            total: 0,
            at: 0,
            full: false,
            cut_line: None,
        }
    }

    /// Line `n` of the input: `raw` holds its first bytes (all of them, or
    /// at least a page's worth), `len` its full length in bytes.
    pub(crate) fn line(&mut self, n: u64, raw: &[u8], len: u64) {
        self.total = n;
        let start = self.at;
        self.at += len;
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
        let prefix = format!("{n:>6}\t");
        let formatted = format!("{prefix}{text}\n");
        let tokens = estimate(self.profile, &formatted);
        let max_bytes = READ_MAX_BYTES - FOOTER_BYTES;
        let max_tokens = READ_MAX_TOKENS - FOOTER_TOKENS;
        if (raw.len() as u64) == len
            && self.out.len() + formatted.len() <= max_bytes
            && self.tokens + tokens <= max_tokens
        {
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
            self.cut_line = Some(CutLine {
                n,
                start,
                len,
                shown: cut.saturating_sub(prefix.len()) as u64,
            });
            self.full = true;
        } else {
            self.full = true;
        }
    }

    /// The page and its closing line, for the input called `name` of `size`
    /// bytes. `read_on(offset)` says how to read a line cut at byte `offset`
    /// of the input further, where a way exists.
    pub(crate) fn finish(
        mut self,
        name: &str,
        size: u64,
        read_on: impl Fn(u64) -> String,
    ) -> String {
        if self.total == 0 {
            return format!("[{name} is empty]");
        }
        let Some(first) = self.first else {
            return format!(
                "[offset {} is past the end of {name}, which has {} lines]",
                self.offset, self.total
            );
        };
        if let Some(c) = &self.cut_line {
            let more = read_on(c.start + c.shown);
            self.out.push_str(&format!(
                "[line {} is {} bytes long; only its first {} bytes are shown{}{more}]\n",
                c.n,
                c.len,
                c.shown,
                if more.is_empty() { "" } else { "; " },
            ));
        }
        if self.last < self.total {
            self.out.push_str(&format!(
                "[lines {first}-{} of {} of {name} ({size} bytes); continue with offset={}]",
                self.last,
                self.total,
                self.last + 1
            ));
        } else {
            self.out.push_str(&format!(
                "[lines {first}-{} of {} of {name} ({size} bytes)]",
                self.last, self.total
            ));
        }
        self.out
    }
}

/// Feed every line of `reader` to `pager`, keeping at most
/// [`LINE_KEEP_BYTES`] of each line in memory; returns the bytes read.
pub(crate) fn page_lines(pager: &mut Pager, reader: &mut impl BufRead) -> std::io::Result<u64> {
    let mut line = Vec::new();
    let mut n = 0u64;
    let mut size = 0u64;
    loop {
        line.clear();
        let read = read_line_capped(reader, &mut line, LINE_KEEP_BYTES)?;
        if read == 0 {
            return Ok(size);
        }
        size += read;
        n += 1;
        pager.line(n, &line, read);
    }
}

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
