//! `latch-mcp`: Latch's MCP client, on the official `rmcp` crate.
//!
//! * [`config`] — `[mcp.servers.NAME]`: `command` + `args` + `env` (stdio)
//!   or `url` + `headers` (streamable HTTP), checked with errors that name
//!   the server.
//! * [`spawn`] — the one function that makes a stdio server's process
//!   ([`stdio_command`]): an ordinary program by default, as the peers run
//!   the servers a user configures, or confined by the command sandbox
//!   (`latch-sandbox`) when the server's own `sandbox` asks for it.
//! * [`McpServers`] — the session's servers, started together at session
//!   start; their tools as `mcp__SERVER__TOOL` in a byte-stable order, kept
//!   for the session when a server disconnects (calls then fail clearly and
//!   a reconnect is tried); a server that fails to start is reported by
//!   name with its command, the likely cause and its stderr tail, and the
//!   session goes on without it.
//! * [`McpTools`] — the tools bound to a session's store: possible
//!   mutations committed before a tool runs, results as ordinary tool
//!   results, images as artifacts.
#![warn(missing_docs)]

pub mod config;
mod content;
mod diagnose;
mod error;
mod server;
mod servers;
mod session;
pub mod spawn;

pub use config::{ConfigError, McpConfig, ServerConfig, Transport, TrustedFile};
pub use content::{CallOutcome, Image, outcome_of};
pub use error::{McpError, StartDetail};
pub use server::{ServerState, ServerTool};
pub use servers::{ExposedTool, Interrupt, MAX_TOOL_NAME, McpServers, ServerStatus, exposed_name};
pub use session::McpTools;
pub use spawn::stdio_command;
