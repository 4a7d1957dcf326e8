//! Session traces: a recorded session tree in a documented, versioned JSONL
//! format (`docs/trace-format.md`) that engine authors can share and
//! replay without the store it came from.
//!
//! A trace is one JSON object per line, each with a `type`:
//!
//! * `latch-trace` — the header, always the first line: `version`
//!   ([`VERSION`]), `root` (the replayed root session), `redacted`, `latch`
//!   (the version that wrote it);
//! * `session` — a session (`id`, `parent`, `workspace`, `model`, and
//!   `replayed`: false for a session that only contributes workspace-wide
//!   events), before any of its events;
//! * `artifact` — metadata of an image the events cite;
//! * `event` — a durable event (`seq`, `session`, `time_ms`, `event` as the
//!   store keeps it: `{"kind", "data"}`), in rising `seq`: every kind
//!   engines see, and the `model_request` records replay asks again;
//! * `hidden` — an engine-hidden event whose content is not carried
//!   (`seq`, `session`, `time_ms`, `kind`), so the counts engines see stay
//!   right.
//!
//! [`write`] writes one from a [`Recording`](super::recording::Recording),
//! [`read`] reads one back into a `Recording` and refuses a malformed one with its line and field.

pub mod read;
pub mod redact;
pub mod write;

pub use read::{read, read_str};
pub use write::{to_string as write_string, write};

use std::path::PathBuf;

/// The trace format version this Latch writes and reads.
pub const VERSION: u32 = 1;
/// The `type` of the header line.
pub const HEADER_TYPE: &str = "latch-trace";

/// Why a trace could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read or written.
    #[error("trace {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line is not what the format says.
    #[error(
        "trace {path} line {line}, field `{field}`: {message} (the format is described in \
         docs/trace-format.md)"
    )]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// The field, as a path into the line's JSON (`event.data.parts[0]`),
        /// or `(line)` when the line is not JSON at all.
        field: String,
        /// What is wrong and what would be right.
        message: String,
    },
}

impl TraceError {
    /// The line of a malformed trace.
    pub fn line(&self) -> Option<usize> {
        match self {
            TraceError::Malformed { line, .. } => Some(*line),
            TraceError::Io { .. } => None,
        }
    }

    /// The field of a malformed trace.
    pub fn field(&self) -> Option<&str> {
        match self {
            TraceError::Malformed { field, .. } => Some(field),
            TraceError::Io { .. } => None,
        }
    }
}
