//! Skills and MCP for a session being built: discovery and the capped skill
//! list, the session's MCP servers, and the composed tool set. Warnings
//! (a skipped `SKILL.md`, a server that failed to start, with its stderr
//! tail) go to stderr; the session goes on.

use super::setup::Env;
use crate::agent::ToolSet;
use crate::agent::extended::{ExtendedTools, skill_source};
use crate::config::Config;
use anyhow::Context;
use latch_engine_sdk::types::{ExtensionSource, ModelProfile};
use latch_kernel::SessionRecord;
use latch_mcp::{McpServers, McpTools};
use latch_sandbox::Sandbox;
use latch_tools::skills::{self, Catalog, Discovery};
use std::path::Path;

/// The skills a session in `workspace` sees under `config` (none when
/// `[skills] enabled = false`).
pub fn discover_skills(config: &Config, workspace: &Path) -> Discovery {
    if !config.skills.enabled {
        return Discovery::default();
    }
    skills::discover(workspace, crate::config::user_config_dir().as_deref())
}

/// The skill list for a model's window under `config`.
pub fn skill_catalog(config: &Config, discovery: &Discovery, model: &ModelProfile) -> Catalog {
    let cap = skills::cap_tokens(model.context_window_tokens, config.skills.catalog_percent);
    skills::catalog(&discovery.skills, cap, model.estimator)
}

/// `base` with `load_skill` and the configured MCP servers' tools, and the
/// extension sources of every request (the skill list). The MCP servers
/// start here, at session start (those of a workspace config the user has
/// not trusted were left out when it was loaded).
pub fn attach(
    env: &Env,
    session: &SessionRecord,
    base: Box<dyn ToolSet>,
) -> anyhow::Result<(Box<dyn ToolSet>, Vec<ExtensionSource>)> {
    let config = &env.config.config;
    let discovery = discover_skills(config, &env.workspace);
    for w in &discovery.warnings {
        eprintln!("warning: {w}");
    }
    let catalog = skill_catalog(config, &discovery, &session.model);
    let mcp = if config.mcp.servers.is_empty() {
        None
    } else {
        // A server runs as an ordinary program unless its own `sandbox`
        // asks for the sandbox the session's commands run in (the agent
        // builds the same policy for its tools, see `setup::permissions`),
        // in that mode and with its `network`.
        let sandbox = Sandbox::new(
            config.sandbox.policy(&env.workspace, env.sandbox),
            &env.workspace,
            &session.id,
        )
        .context("cannot set up the sandbox the MCP servers run in")?;
        let servers = McpServers::start(&config.mcp, &env.workspace, &sandbox)?;
        for failure in servers.start_failures() {
            eprintln!("warning: {failure}\n  the session goes on without it");
        }
        Some(
            McpTools::new(servers, env.store.clone(), session.id.clone())
                .context("cannot bind the MCP tools to the session")?,
        )
    };
    let tools = ExtendedTools::new(base, discovery.skills, session.model.estimator, mcp);
    Ok((
        Box::new(tools),
        skill_source(&catalog).into_iter().collect(),
    ))
}
