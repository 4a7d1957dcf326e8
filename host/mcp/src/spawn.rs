//! How a stdio MCP server's process is made. Every stdio server is spawned
//! through [`stdio_command`], the one place where a command sandbox wraps
//! it.

use crate::config::Transport;
use std::path::Path;

/// The command that runs a stdio server in `workspace`, or `None` for an
/// HTTP server. Its environment is Latch's plus the configured `env`;
/// stdin, stdout and stderr are set by the caller.
pub fn stdio_command(transport: &Transport, workspace: &Path) -> Option<tokio::process::Command> {
    let Transport::Stdio { command, args, env } = transport else {
        return None;
    };
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).envs(env).current_dir(workspace);
    // The server dies with its connection (rmcp kills it on drop) and never
    // outlives Latch.
    cmd.kill_on_drop(true);
    Some(cmd)
}
