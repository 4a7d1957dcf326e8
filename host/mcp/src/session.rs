//! MCP tools bound to one session's store: a tool not annotated read-only
//! records a possible-mutation event through the kernel's
//! `run_possible_mutation`, the same rule as `shell` (in a git work tree the
//! generation advances, and older validation goes stale, only when the
//! workspace really changed); the answer
//! becomes an ordinary, bounded tool result, its images stored as
//! artifacts and referenced by [`MediaRef`].

use crate::servers::{ExposedTool, McpServers};
use latch_engine_sdk::types::{EstimatorProfile, MediaRef, ToolCall, ToolResult};
use latch_kernel::{Store, StoreError, bound_tool_output, run_possible_mutation};
use std::sync::Arc;

/// Most characters of a call's arguments recorded in its mutation event.
const MUTATION_ARGS_CHARS: usize = 2_000;

/// The MCP tools of one session.
pub struct McpTools {
    servers: McpServers,
    store: Arc<Store>,
    session: String,
    profile: EstimatorProfile,
    workspace: std::path::PathBuf,
}

impl McpTools {
    /// Bind `servers` to `session` of `store`.
    pub fn new(
        servers: McpServers,
        store: Arc<Store>,
        session: impl Into<String>,
    ) -> Result<McpTools, StoreError> {
        let session = session.into();
        let record = store.session(&session)?;
        Ok(McpTools {
            servers,
            store,
            session,
            profile: record.model.estimator,
            workspace: record.workspace.into(),
        })
    }

    /// The servers.
    pub fn servers(&self) -> &McpServers {
        &self.servers
    }

    /// The servers, to inspect their state.
    pub fn servers_mut(&mut self) -> &mut McpServers {
        &mut self.servers
    }

    /// The exposed tools, in their fixed order.
    pub fn tools(&self) -> &[ExposedTool] {
        self.servers.tools()
    }

    /// True when `name` is one of the exposed tools.
    pub fn handles(&self, name: &str) -> bool {
        self.servers.tool(name).is_some()
    }

    /// Run `call`. Never panics and never fails as a whole: every problem
    /// is an error result naming the server.
    pub fn execute(&mut self, call: &ToolCall) -> ToolResult {
        let failed = |content: String| ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error: true,
            images: Vec::new(),
        };
        let Some(tool) = self.servers.tool(&call.name).cloned() else {
            return failed(format!(
                "`{}` is not an MCP tool of this session",
                call.name
            ));
        };
        let outcome = if tool.read_only {
            self.servers.call(&call.name, &call.arguments_json)
        } else {
            let mut args: String = call
                .arguments_json
                .chars()
                .take(MUTATION_ARGS_CHARS)
                .collect();
            if args.len() < call.arguments_json.len() {
                args.push('…');
            }
            let command = format!("MCP {}.{} {args}", tool.server, tool.tool);
            let servers = &mut self.servers;
            match run_possible_mutation(
                &self.store,
                &self.session,
                &call.name,
                Some(command),
                &self.workspace,
                || servers.call(&call.name, &call.arguments_json),
            ) {
                Ok((outcome, _)) => outcome,
                Err(e) => {
                    return failed(format!(
                        "the possible mutation of `{}` could not be recorded: {e}",
                        call.name
                    ));
                }
            }
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => return failed(bound_tool_output(&e.to_string(), self.profile)),
        };
        let mut images: Vec<MediaRef> = Vec::new();
        let mut notes = Vec::new();
        for image in &outcome.images {
            match self
                .store
                .put_artifact(&image.bytes, Some(&image.mime_type))
            {
                Ok(media) => images.push(media),
                Err(e) => notes.push(format!("[an image could not be stored: {e}]")),
            }
        }
        let mut text = outcome.text;
        for note in notes {
            text.push('\n');
            text.push_str(&note);
        }
        ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: self.store.bound_and_store_output(&text, self.profile),
            is_error: outcome.is_error,
            images,
        }
    }

    /// Stop waiting for a running call as soon as `interrupt` says so; the
    /// call's result then says it was interrupted.
    pub fn use_interrupt(&mut self, interrupt: crate::servers::Interrupt) {
        self.servers.use_interrupt(interrupt);
    }

    /// Close every connection.
    pub fn shutdown(&mut self) {
        self.servers.shutdown();
    }
}
