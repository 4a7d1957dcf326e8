//! The session's MCP servers: started together at session start on a
//! runtime of their own, their tools exposed as `mcp__SERVER__TOOL` in a
//! byte-stable order (server name, then tool name), fixed for the session.

use crate::config::McpConfig;
use crate::content::{CallOutcome, outcome_of};
use crate::error::McpError;
use crate::server::{Server, ServerState};
use latch_sandbox::Sandbox;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::{Duration, Instant};

/// Longest tool name the providers accept.
pub const MAX_TOOL_NAME: usize = 64;

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq)]
pub struct ExposedTool {
    /// `mcp__SERVER__TOOL` (characters outside `[A-Za-z0-9_-]` become `_`;
    /// a name past 64 characters is cut and given a hash suffix).
    pub name: String,
    /// The server.
    pub server: String,
    /// The server's name for the tool.
    pub tool: String,
    /// The description the model sees.
    pub description: String,
    /// The tool's JSON input schema, as the server listed it.
    pub input_schema: Value,
    /// True when the server annotates it read-only; every other tool may
    /// change the workspace or the world.
    pub read_only: bool,
    /// The command sandbox its server runs in; none when the server runs
    /// unconfined (an ordinary program, the default) or is a `url` server:
    /// then its tools act outside the session's sandbox.
    pub confined: Option<latch_sandbox::SandboxPolicy>,
}

/// One server as `latch mcp list` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerStatus {
    /// The server.
    pub name: String,
    /// Its state.
    pub state: ServerState,
    /// Its exposed tools (kept after a disconnect).
    pub tools: Vec<ExposedTool>,
    /// How long its start took.
    pub start_time: Duration,
    /// How a stdio server runs: its sandbox (e.g. "`workspace-write`,
    /// network off") or "none" (an ordinary program); none for a `url`
    /// server.
    pub sandbox: Option<String>,
}

/// Tells a running call that the user interrupted the turn (polled while
/// the call runs).
pub type Interrupt = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// How often a running call looks at the interrupt.
const INTERRUPT_POLL: Duration = Duration::from_millis(20);

/// The session's MCP servers.
pub struct McpServers {
    // Declared before the runtime: connections end inside it.
    servers: Vec<Server>,
    tools: Vec<ExposedTool>,
    start_time: Duration,
    interrupt: Option<Interrupt>,
    runtime: tokio::runtime::Runtime,
}

/// The exposed name of `tool` on `server`.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!("mcp__{server}__{clean}");
    if name.len() <= MAX_TOOL_NAME {
        return name;
    }
    let hash = hex::encode(Sha256::digest(tool.as_bytes()));
    format!("{}_{}", &name[..MAX_TOOL_NAME - 9], &hash[..8])
}

impl McpServers {
    /// Start every enabled server of `config` at once, in `workspace`; a
    /// stdio server runs as an ordinary program unless its own `sandbox`
    /// asks for `sandbox` (the session's) in that mode (and its `network`
    /// setting). Never fails as a whole: a
    /// server that fails to start is kept with its error (see
    /// [`McpServers::start_failures`]) and has no tools.
    pub fn start(
        config: &McpConfig,
        workspace: &Path,
        sandbox: &Sandbox,
    ) -> Result<McpServers, McpError> {
        config.check()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("latch-mcp")
            .enable_all()
            .build()
            .map_err(|e| McpError::Start {
                server: "*".into(),
                message: format!("cannot start the MCP runtime: {e}"),
                detail: Box::default(),
                sandbox: None,
                stderr_tail: String::new(),
            })?;
        let started = Instant::now();
        let servers = runtime.block_on(futures::future::join_all(config.servers.iter().map(
            |(name, server)| Server::start(name.clone(), server.clone(), workspace, sandbox),
        )));
        let start_time = started.elapsed();
        let mut tools = Vec::new();
        for server in &servers {
            let mut names = std::collections::BTreeSet::new();
            for t in &server.tools {
                let name = exposed_name(&server.name, &t.name);
                if !names.insert(name.clone()) {
                    continue;
                }
                tools.push(ExposedTool {
                    name,
                    server: server.name.clone(),
                    tool: t.name.clone(),
                    description: t.description.clone(),
                    input_schema: t.input_schema.clone(),
                    read_only: t.read_only,
                    confined: server.confinement().cloned(),
                });
            }
        }
        Ok(McpServers {
            runtime,
            servers,
            tools,
            start_time,
            interrupt: None,
        })
    }

    /// The exposed tools, in their fixed order.
    pub fn tools(&self) -> &[ExposedTool] {
        &self.tools
    }

    /// The exposed tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&ExposedTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The servers that failed to start, with their errors.
    pub fn start_failures(&self) -> Vec<McpError> {
        self.servers
            .iter()
            .filter_map(|s| s.start_failure().cloned())
            .collect()
    }

    /// How long starting all servers took (they start concurrently).
    pub fn start_time(&self) -> Duration {
        self.start_time
    }

    /// Every server with its state and tools, in name order.
    pub fn statuses(&mut self) -> Vec<ServerStatus> {
        let mut out = Vec::new();
        for server in &mut self.servers {
            let tools = self
                .tools
                .iter()
                .filter(|t| t.server == server.name)
                .cloned()
                .collect();
            out.push(ServerStatus {
                name: server.name.clone(),
                state: server.state(),
                tools,
                start_time: server.start_time,
                sandbox: server.sandbox_label(),
            });
        }
        out
    }

    /// The process id of a connected stdio server.
    pub fn pid(&self, server: &str) -> Option<u32> {
        self.servers
            .iter()
            .find(|s| s.name == server)
            .and_then(|s| s.pid())
    }

    /// Call the exposed tool `name` with `arguments_json` (a JSON object,
    /// or empty for none).
    pub fn call(&mut self, name: &str, arguments_json: &str) -> Result<CallOutcome, McpError> {
        let Some(tool) = self.tool(name).cloned() else {
            return Err(McpError::UnknownTool {
                name: name.to_string(),
                available: self
                    .tools
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let arguments = parse_arguments(name, arguments_json)?;
        let server = self
            .servers
            .iter_mut()
            .find(|s| s.name == tool.server)
            .expect("every exposed tool has its server");
        let interrupt = self.interrupt.clone();
        let interrupted = async move {
            match interrupt {
                Some(stop) => {
                    while !stop() {
                        tokio::time::sleep(INTERRUPT_POLL).await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        let call = server.call(&tool.tool, arguments);
        // Dropping the call on an interrupt sends the server
        // `notifications/cancelled`.
        let answer = self.runtime.block_on(async {
            match futures::future::select(Box::pin(call), Box::pin(interrupted)).await {
                futures::future::Either::Left((answer, _)) => Some(answer),
                futures::future::Either::Right(((), _)) => None,
            }
        });
        match answer {
            Some(answer) => Ok(outcome_of(&answer?)),
            None => Err(McpError::Interrupted {
                server: tool.server.clone(),
                tool: tool.tool.clone(),
            }),
        }
    }

    /// Stop waiting for a running call as soon as `interrupt` says so (the
    /// agent's interrupt: Esc, `POST …/interrupt`).
    pub fn use_interrupt(&mut self, interrupt: Interrupt) {
        self.interrupt = Some(interrupt);
    }

    /// Close every connection (stdio servers end).
    pub fn shutdown(&mut self) {
        let servers = &mut self.servers;
        self.runtime.block_on(async {
            futures::future::join_all(servers.iter_mut().map(|s| s.shutdown())).await;
        });
    }
}

impl Drop for McpServers {
    fn drop(&mut self) {
        self.shutdown();
        // Whatever is left is dropped inside the runtime (a child process is
        // killed by a task of it).
        let _inside = self.runtime.enter();
        self.servers.clear();
    }
}

fn parse_arguments(tool: &str, json: &str) -> Result<Map<String, Value>, McpError> {
    if json.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(other) => Err(McpError::Arguments {
            tool: tool.to_string(),
            message: format!("got {other}"),
        }),
        Err(e) => Err(McpError::Arguments {
            tool: tool.to_string(),
            message: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_names_are_provider_safe() {
        assert_eq!(exposed_name("fs", "write_file"), "mcp__fs__write_file");
        assert_eq!(exposed_name("e", "get-sum"), "mcp__e__get-sum");
        assert_eq!(exposed_name("e", "a.b c"), "mcp__e__a_b_c");
        let long = exposed_name("server", &"t".repeat(80));
        assert_eq!(long.len(), MAX_TOOL_NAME);
        assert_ne!(long, exposed_name("server", &"t".repeat(81)));
    }

    #[test]
    fn arguments_must_be_an_object() {
        assert!(parse_arguments("t", "").unwrap().is_empty());
        assert_eq!(parse_arguments("t", r#"{"a":1}"#).unwrap().len(), 1);
        let e = parse_arguments("t", "[1]").unwrap_err();
        assert_eq!(e.kind(), "arguments");
        assert!(e.to_string().contains("JSON object"));
    }
}
