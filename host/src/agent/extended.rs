//! Skills and MCP composed into an agent's tools, without touching the
//! context-engine port: [`ExtendedTools`] adds `load_skill` (when the
//! session has skills) and the MCP servers' `mcp__SERVER__TOOL` tools after
//! a base tool set, in a fixed order, and describes each MCP call to the
//! approval policy (server, tool, arguments, read-only annotation, where
//! its server runs); [`Agent::with_extensions`] hands the
//! skill list to the engine as an extension source of every request (the
//! session context's extension slot, priced in `extension-tokens`).

use super::{Agent, AgentError, ToolSet};
use latch_engine_sdk::estimate::estimate;
use latch_engine_sdk::types::{EstimatorProfile, ExtensionSource, ToolCall, ToolResult};
use latch_kernel::bound_tool_output;
use latch_mcp::McpTools;
use latch_provider::ToolSchema;
use latch_tools::skills::{self, LOAD_SKILL, Skill};

/// Tokens added to an extension source's text for its framing.
const EXTENSION_FRAME_TOKENS: u64 = 16;

/// A base tool set plus `load_skill` and MCP tools.
pub struct ExtendedTools {
    base: Box<dyn ToolSet>,
    skills: Vec<Skill>,
    profile: EstimatorProfile,
    mcp: Option<McpTools>,
}

impl ExtendedTools {
    /// `base`, plus `load_skill` over `skills` (offered only when there is
    /// one), plus the tools of `mcp`.
    pub fn new(
        base: Box<dyn ToolSet>,
        skills: Vec<Skill>,
        profile: EstimatorProfile,
        mcp: Option<McpTools>,
    ) -> ExtendedTools {
        ExtendedTools {
            base,
            skills,
            profile,
            mcp,
        }
    }

    /// The MCP tools, when servers are configured.
    pub fn mcp(&mut self) -> Option<&mut McpTools> {
        self.mcp.as_mut()
    }
}

impl ToolSet for ExtendedTools {
    fn schemas(&self) -> Vec<ToolSchema> {
        let mut schemas = self.base.schemas();
        if !self.skills.is_empty() {
            let spec = skills::load_skill_spec();
            schemas.push(ToolSchema {
                name: spec.name,
                description: spec.description,
                input_schema: spec.input_schema,
            });
        }
        if let Some(mcp) = &self.mcp {
            schemas.extend(mcp.tools().iter().map(|t| ToolSchema {
                name: t.name.clone(),
                description: if t.description.is_empty() {
                    format!("(MCP server `{}`) {}", t.server, t.tool)
                } else {
                    format!("(MCP server `{}`) {}", t.server, t.description)
                },
                input_schema: t.input_schema.clone(),
            }));
        }
        schemas
    }

    fn execute(&mut self, call: &ToolCall) -> ToolResult {
        if call.name == LOAD_SKILL && !self.skills.is_empty() {
            let (content, is_error) = match skills::load_skill(&self.skills, &call.arguments_json) {
                Ok(text) => (text, false),
                Err(message) => (message, true),
            };
            return ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: bound_tool_output(&content, self.profile),
                is_error,
                images: Vec::new(),
            };
        }
        if let Some(mcp) = self.mcp.as_mut()
            && mcp.handles(&call.name)
        {
            return mcp.execute(call);
        }
        self.base.execute(call)
    }

    fn on_resume(&mut self) {
        self.base.on_resume();
    }

    fn run_hook(
        &mut self,
        command: &str,
        env: &[(&str, String)],
        timeout: std::time::Duration,
    ) -> latch_tools::HookRun {
        self.base.run_hook(command, env, timeout)
    }

    fn use_cancel(&mut self, cancel: latch_tools::Cancel) {
        // An interrupt also ends a running MCP call.
        if let Some(mcp) = self.mcp.as_mut() {
            let stop = cancel.clone();
            mcp.use_interrupt(std::sync::Arc::new(move || stop.is_cancelled()));
        }
        self.base.use_cancel(cancel);
    }

    fn shutdown(&mut self) {
        // The MCP servers end first: the base removes the session's temp
        // dir, which a confined server uses as its `TMPDIR`.
        if let Some(mcp) = self.mcp.as_mut() {
            mcp.shutdown();
        }
        self.base.shutdown();
    }

    // The base tools' sandbox and approval hooks hold for the composed set:
    // without them an agent with skills or MCP servers would run commands
    // unsandboxed and never ask. MCP tools are asked about through
    // `mcp_call`, as their servers run them.
    fn use_sandbox(&mut self, policy: &latch_sandbox::SandboxPolicy) -> Result<(), AgentError> {
        self.base.use_sandbox(policy)
    }

    fn preview(&self, call: &ToolCall) -> Option<latch_tools::Preview> {
        if self.is_extension(&call.name) {
            return None;
        }
        self.base.preview(call)
    }

    fn mcp_call(&self, call: &ToolCall) -> Option<super::permissions::McpCall> {
        let tool = self.mcp.as_ref()?.servers().tool(&call.name)?;
        Some(super::permissions::McpCall {
            server: tool.server.clone(),
            tool: tool.tool.clone(),
            arguments: call.arguments_json.clone(),
            read_only: tool.read_only,
            confined: tool.confined.clone(),
        })
    }

    fn execute_escalated(&mut self, call: &ToolCall) -> ToolResult {
        if self.is_extension(&call.name) {
            return self.execute(call);
        }
        self.base.execute_escalated(call)
    }
}

impl ExtendedTools {
    /// True for `load_skill` (when offered) and the MCP tools.
    fn is_extension(&self, name: &str) -> bool {
        (name == LOAD_SKILL && !self.skills.is_empty())
            || self.mcp.as_ref().is_some_and(|m| m.handles(name))
    }
}

/// The extension source that lists `catalog` (none when it is empty).
pub fn skill_source(catalog: &skills::Catalog) -> Option<ExtensionSource> {
    (!catalog.text.is_empty()).then(|| ExtensionSource {
        name: skills::CATALOG_SOURCE.to_string(),
        text: catalog.text.clone(),
    })
}

impl Agent {
    /// Give every request these extension sources (e.g. the skill list),
    /// priced into the budget's `extension-tokens`. Call before the first
    /// request.
    pub fn with_extensions(mut self, sources: Vec<ExtensionSource>) -> Agent {
        self.set_extensions(sources);
        // The nested directories' instructions stay.
        self.refresh_nested_source();
        self
    }

    /// Replace the extension sources, priced into the budget.
    pub(crate) fn set_extensions(&mut self, sources: Vec<ExtensionSource>) {
        self.extension_tokens = sources
            .iter()
            .map(|s| {
                estimate(self.session.model.estimator, &s.name) as u64
                    + estimate(self.session.model.estimator, &s.text) as u64
                    + EXTENSION_FRAME_TOKENS
            })
            .sum();
        self.extensions = sources;
    }

    /// The extension sources every request carries.
    pub fn extensions(&self) -> &[ExtensionSource] {
        &self.extensions
    }
}
