//! How a stdio MCP server's process is made. Every stdio server is spawned
//! through [`stdio_command`], the one place where the command sandbox
//! (`latch-sandbox`) confines it, exactly as it confines `shell`.

use latch_sandbox::{Sandbox, SandboxError};
use std::collections::BTreeMap;
use std::path::Path;

/// The command that runs a stdio server (`command` with `args`) in
/// `workspace`, confined by `sandbox`: Landlock and namespaces installed
/// before `exec`, `TMPDIR` the session's temp dir, and Latch's variables
/// whose names look secret left out of its environment (see
/// `latch_sandbox::env`). The server's own configured `env` is set after
/// that filter: the user put it there. Stdin, stdout and stderr are set
/// by the caller; the process is killed when the command's child is
/// dropped.
pub fn stdio_command(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    workspace: &Path,
    sandbox: &Sandbox,
) -> Result<tokio::process::Command, SandboxError> {
    let mut cmd = std::process::Command::new(command);
    cmd.args(args).current_dir(workspace);
    let mut cmd = sandbox.command(cmd)?;
    cmd.envs(env);
    let mut cmd = tokio::process::Command::from(cmd);
    // The server dies with its connection (rmcp kills it on drop) and never
    // outlives Latch.
    cmd.kill_on_drop(true);
    Ok(cmd)
}
