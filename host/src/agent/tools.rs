//! The agent's tool set: `latch-tools` bound to one session's context.

use super::AgentError;
use super::ToolSet;
use latch_engine_sdk::types::{ToolCall, ToolResult};
use latch_provider::ToolSchema;
use latch_sandbox::{Sandbox, SandboxPolicy};
use latch_tools::ToolContext;
use std::sync::Arc;

/// The standard tools (files, search, shell, validation, task state,
/// completion) for one session.
pub struct StandardTools {
    ctx: ToolContext,
}

impl StandardTools {
    /// Tools working for the session and workspace of `ctx`.
    pub fn new(ctx: ToolContext) -> Self {
        StandardTools { ctx }
    }
}

impl ToolSet for StandardTools {
    fn schemas(&self) -> Vec<ToolSchema> {
        latch_tools::schemas()
            .into_iter()
            .map(|s| ToolSchema {
                name: s.name,
                description: s.description,
                input_schema: s.input_schema,
            })
            .collect()
    }

    fn execute(&mut self, call: &ToolCall) -> ToolResult {
        latch_tools::execute(&self.ctx, call).result
    }

    fn on_resume(&mut self) {
        if let Err(e) = self
            .ctx
            .processes()
            .reconcile(self.ctx.store(), self.ctx.session())
        {
            tracing::warn!("could not settle managed processes of an earlier run: {e}");
        }
    }

    fn use_sandbox(&mut self, policy: &SandboxPolicy) -> Result<(), AgentError> {
        let sandbox = Sandbox::new(policy.clone(), self.ctx.workspace(), self.ctx.session())?;
        self.ctx = self.ctx.clone().with_sandbox(Arc::new(sandbox));
        Ok(())
    }

    fn preview(&self, call: &ToolCall) -> Option<latch_tools::Preview> {
        Some(latch_tools::preview(&self.ctx, call))
    }

    fn execute_escalated(&mut self, call: &ToolCall) -> ToolResult {
        // Outside the sandbox, but with the session's passthrough: the
        // provider keys stay out unless the user named them.
        let free = self
            .ctx
            .sandbox()
            .adjusted(Some(latch_sandbox::SandboxMode::FullAccess), None)
            .unwrap_or_else(|_| Sandbox::full_access());
        let outside = self.ctx.clone().with_sandbox(Arc::new(free));
        latch_tools::execute(&outside, call).result
    }

    fn run_hook(
        &mut self,
        command: &str,
        env: &[(&str, String)],
        timeout: std::time::Duration,
    ) -> latch_tools::HookRun {
        latch_tools::run_hook(&self.ctx, command, env, timeout)
    }

    fn use_cancel(&mut self, cancel: latch_tools::Cancel) {
        self.ctx = self.ctx.clone().with_cancel(cancel);
    }

    fn shutdown(&mut self) {
        self.ctx
            .processes()
            .kill_all(std::time::Duration::from_secs(2));
        // The session's temp dir goes with the tool set, unless a managed
        // process outlived the kill and may still use it.
        let running = self
            .ctx
            .processes()
            .list(self.ctx.session())
            .iter()
            .filter(|p| p.exit.is_none())
            .count();
        if running > 0 {
            tracing::warn!(
                "{running} managed process(es) still run; the session temp dir stays for them"
            );
            return;
        }
        if let Err(e) = self.ctx.sandbox().remove_temp_dir() {
            tracing::warn!("could not remove the session temp dir: {e}");
        }
    }
}
