//! `latch agents`: the agents users defined for this workspace
//! (`.latch/agents/NAME.md`, `~/.config/latch/agents/NAME.md`), where each
//! came from and what it runs with, and the files left out with the line
//! at fault.

use super::GlobalArgs;
use super::render::terminal_safe;
use crate::config::agents::AgentCatalog;
use std::path::Path;

/// `latch agents [--json]`: exit status 1 when a file was left out.
pub fn run(_global: &GlobalArgs, workspace: &Path, json: bool) -> anyhow::Result<i32> {
    let workspace = std::fs::canonicalize(workspace).map_err(|e| {
        anyhow::anyhow!("the workspace {} does not exist: {e}", workspace.display())
    })?;
    let catalog = AgentCatalog::discover(&workspace, crate::config::user_config_dir().as_deref());
    if json {
        let out = serde_json::json!({
            "agents": catalog.agents().map(|a| serde_json::json!({
                "name": a.name,
                "description": a.description,
                "scope": a.scope.name(),
                "path": a.path,
                "tools": a.tools,
                "disallowed_tools": a.deny,
                "not_in_latch": a.dropped,
                "model": a.model,
                "sandbox": a.sandbox.map(|s| s.name()),
                "approval": a.approval.map(|s| s.name()),
                "engine": a.engine,
            })).collect::<Vec<_>>(),
            "errors": catalog.errors.iter().map(|e| serde_json::json!({
                "path": e.path,
                "line": e.line,
                "message": e.message,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for line in catalog.listing() {
            println!("{}", terminal_safe(&line, 4_096));
        }
    }
    Ok(if catalog.errors.is_empty() { 0 } else { 1 })
}
