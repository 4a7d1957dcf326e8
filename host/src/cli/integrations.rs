//! Skills and MCP for a session being built: discovery and the capped skill
//! list, the session's MCP servers, and the composed tool set
//! ([`ConfiguredTools`], which every session of a tree gets). Warnings (a
//! skipped `SKILL.md`, a server that failed to start, with its stderr
//! tail) go to stderr; the session goes on.

use super::setup::Env;
use crate::agent::ToolSet;
use crate::agent::extended::{ExtendedTools, skill_source};
use crate::agent::tools::StandardTools;
use crate::config::Config;
use crate::supervisor::children::SessionTools;
use anyhow::Context;
use latch_engine_sdk::types::{ExtensionSource, ModelProfile};
use latch_kernel::{SessionRecord, Store};
use latch_mcp::{McpServers, McpTools};
use latch_sandbox::{Sandbox, SandboxMode};
use latch_tools::skills::{self, Catalog, Discovery};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
/// not trusted were left out when it was loaded); a server runs in the
/// session's command sandbox (`sandbox` mode, the rest of the policy from
/// the configuration) only when its own `sandbox` asks for it. Warnings (a skipped `SKILL.md`, a server that failed to start) go to
/// `warn`.
pub fn attach(
    config: &Config,
    workspace: &Path,
    store: &Arc<Store>,
    session: &SessionRecord,
    base: Box<dyn ToolSet>,
    sandbox: SandboxMode,
    warn: &dyn Fn(String),
) -> anyhow::Result<(Box<dyn ToolSet>, Vec<ExtensionSource>)> {
    let discovery = discover_skills(config, workspace);
    for w in &discovery.warnings {
        warn(format!("warning: {w}"));
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
            config.sandbox.policy(workspace, Some(sandbox)),
            workspace,
            &session.id,
        )
        .context("cannot set up the sandbox the MCP servers run in")?;
        let servers = McpServers::start(&config.mcp, workspace, &sandbox)?;
        for failure in servers.start_failures() {
            warn(format!(
                "warning: {failure}\n  the session goes on without it"
            ));
        }
        Some(
            McpTools::new(servers, store.clone(), session.id.clone())
                .context("cannot bind the MCP tools to the session")?,
        )
    };
    let tools = ExtendedTools::new(base, discovery.skills, session.model.estimator, mcp);
    Ok((
        Box::new(tools),
        skill_source(&catalog).into_iter().collect(),
    ))
}

/// The tools the configuration gives every session of a tree (root,
/// spawned children, a child the user resumes): the standard tools, the
/// skills and the MCP servers. Its warnings go to stderr, or, once a
/// screen owns the terminal, to the log.
pub struct ConfiguredTools {
    config: Config,
    workspace: PathBuf,
    store: Arc<Store>,
    /// True when warnings may be printed on stderr.
    stderr: bool,
}

impl ConfiguredTools {
    /// The tools `env`'s configuration gives; warnings on stderr when
    /// `stderr`.
    pub fn new(env: &Env, stderr: bool) -> ConfiguredTools {
        ConfiguredTools {
            config: env.config.config.clone(),
            workspace: env.workspace.clone(),
            store: env.store.clone(),
            stderr,
        }
    }
}

impl SessionTools for ConfiguredTools {
    fn build(
        &self,
        session: &SessionRecord,
        sandbox: SandboxMode,
    ) -> Result<(Box<dyn ToolSet>, Vec<ExtensionSource>), String> {
        let ctx =
            latch_tools::ToolContext::new(self.store.clone(), session.id.clone(), &self.workspace)
                .map_err(|e| e.to_string())?;
        let stderr = self.stderr;
        let warn = move |w: String| {
            if stderr {
                eprintln!("{w}");
            } else {
                tracing::warn!("{w}");
            }
        };
        attach(
            &self.config,
            &self.workspace,
            &self.store,
            session,
            Box::new(StandardTools::new(ctx)),
            sandbox,
            &warn,
        )
        .map_err(|e| format!("{e:#}"))
    }
}
