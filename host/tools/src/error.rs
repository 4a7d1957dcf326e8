//! The tools' error type. Every failure of a tool call becomes an `is_error`
//! tool result whose text is this error's message; none of them panics the
//! agent loop.

use latch_kernel::{GuardError, StoreError};
use std::path::PathBuf;

/// Why a tool call failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The model called a tool that does not exist.
    #[error("unknown tool `{name}`; the available tools are: {available}")]
    UnknownTool {
        /// The name it used.
        name: String,
        /// The tool names, comma-separated.
        available: String,
    },
    /// The arguments are not what the tool's schema asks for.
    #[error("invalid arguments for `{tool}`: {problem}. Expected arguments: {expected}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What was wrong.
        problem: String,
        /// The tool's signature, e.g. `read_file(path: string, offset?: integer)`.
        expected: String,
    },
    /// Policy refused the call (workspace confinement, the hard-deny list).
    /// A `tool_denied` event is recorded with the reason.
    #[error("denied: {reason}")]
    Denied {
        /// Why.
        reason: String,
    },
    /// The call was well-formed but cannot be carried out (a missing file, an
    /// `old_string` that does not occur, an unknown process id, ...).
    #[error("{0}")]
    Failed(String),
    /// A file-system or process error.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file, directory or command involved.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The write guard refused an edit (the file changed since it was read).
    #[error(transparent)]
    Guard(#[from] GuardError),
}

impl ToolError {
    /// A [`ToolError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> ToolError {
        ToolError::Io {
            path: path.into(),
            source,
        }
    }
}
