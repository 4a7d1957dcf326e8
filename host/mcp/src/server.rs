//! One configured MCP server: its connection (rmcp), how a stdio server
//! runs (an ordinary program by default, or in the command sandbox its
//! `sandbox` asks for), the tools it listed when it started (kept for the
//! whole session, whatever happens to the connection), the tail of its
//! stderr, and reconnection.

use crate::config::{ServerConfig, Transport};
use crate::diagnose::{self, Failure, Situation};
use crate::error::{McpError, StartDetail};
use crate::spawn::stdio_command;
use latch_sandbox::{Sandbox, SandboxMode, SandboxPolicy};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;

type Client = RunningService<RoleClient, ()>;

/// Lines of a server's stderr kept for error messages.
const STDERR_LINES: usize = 20;
/// Bytes of one kept stderr line.
const STDERR_LINE_BYTES: usize = 400;

/// A tool as its server listed it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerTool {
    /// The server's name for it.
    pub name: String,
    /// Its description (or title), possibly empty.
    pub description: String,
    /// Its JSON input schema.
    pub input_schema: Value,
    /// True when the server annotates it `readOnlyHint: true`.
    pub read_only: bool,
}

impl ServerTool {
    fn from_json(tool: &Value) -> Option<ServerTool> {
        let name = tool.get("name")?.as_str()?.to_string();
        let description = tool
            .get("description")
            .and_then(Value::as_str)
            .or_else(|| tool.get("title").and_then(Value::as_str))
            .unwrap_or_default()
            .to_string();
        let input_schema = tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"}));
        let read_only = tool
            .pointer("/annotations/readOnlyHint")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Some(ServerTool {
            name,
            description,
            input_schema,
            read_only,
        })
    }
}

/// The connection state of a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerState {
    /// Connected.
    Connected,
    /// It was connected and the connection ended; its tools stay listed.
    Disconnected {
        /// Why.
        reason: String,
    },
    /// It failed to start; it has no tools this session.
    Failed {
        /// The start error, with its stderr tail.
        error: String,
    },
    /// `enabled = false`.
    Disabled,
}

enum Link {
    Up { client: Client, pid: Option<u32> },
    Down { reason: String },
    Failed(McpError),
    Disabled,
}

/// The last lines a stdio server wrote to stderr, and whether its stderr
/// has closed.
#[derive(Clone, Default)]
struct StderrTail(Arc<Mutex<VecDeque<String>>>, Arc<AtomicBool>);

impl StderrTail {
    fn close(&self) {
        self.1.store(true, Ordering::SeqCst);
    }

    /// Wait (at most `limit`) until the stream has closed, so a dying
    /// process's last words are in the tail.
    async fn settle(&self, limit: Duration) {
        let start = Instant::now();
        while !self.1.load(Ordering::SeqCst) && start.elapsed() < limit {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn push(&self, line: &str) {
        let mut line = line.trim_end().to_string();
        if line.len() > STDERR_LINE_BYTES {
            let mut cut = STDERR_LINE_BYTES;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push('…');
        }
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    fn text(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Make ring rustls's process-wide crypto provider (once), so the HTTP
/// client can build its TLS configuration for `https://` URLs; a provider
/// another part of the process installed first is kept.
fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// How a stdio server runs, in messages: "`workspace-write`, network
/// off", or "none" for an ordinary program.
fn describe(sandbox: &Sandbox) -> String {
    if sandbox.mode() == SandboxMode::FullAccess {
        return "none".into();
    }
    format!(
        "`{}`, network {}",
        sandbox.mode(),
        if sandbox.policy().network {
            "on"
        } else {
            "off"
        }
    )
}

/// An unconfined server is a program the user chose, but it still does
/// not inherit Latch's variables whose names look secret (the provider
/// keys among them), as a confined one does not: only those of its own
/// `env` and of `[sandbox] env_passthrough`.
fn hide_secrets(
    cmd: &mut tokio::process::Command,
    own: &std::collections::BTreeMap<String, String>,
    passthrough: &[String],
) {
    let names = std::env::vars_os().map(|(name, _)| name);
    for name in latch_sandbox::env::hidden(names, passthrough) {
        if !own.keys().any(|k| std::ffi::OsStr::new(k) == name) {
            cmd.env_remove(name);
        }
    }
}

/// A start failure: how it failed and the message.
type StartFailure = (Failure, String);

/// One configured server.
pub(crate) struct Server {
    pub(crate) name: String,
    config: ServerConfig,
    workspace: PathBuf,
    /// How a stdio server runs: unconfined (`full-access`) unless its
    /// `sandbox` asks for the command sandbox; none for a `url` server, or
    /// when it could not be set up (the start failure says why).
    sandbox: Option<Sandbox>,
    /// The tools listed when it started, fixed for the session.
    pub(crate) tools: Vec<ServerTool>,
    link: Link,
    tail: StderrTail,
    /// How long the start took (spawn, handshake, tool listing).
    pub(crate) start_time: Duration,
}

impl Server {
    /// Start `name`: spawn (a stdio server as an ordinary program, or
    /// confined by the session's `sandbox` set to the server's own
    /// `sandbox` and `network`) or connect, initialize, list its tools, all
    /// within the start-up timeout. A failure is kept as the server's
    /// state, never returned: the session goes on without it.
    pub(crate) async fn start(
        name: String,
        config: ServerConfig,
        workspace: &Path,
        sandbox: &Sandbox,
    ) -> Server {
        let mut server = Server {
            name,
            config,
            workspace: workspace.to_path_buf(),
            sandbox: None,
            tools: Vec::new(),
            link: Link::Disabled,
            tail: StderrTail::default(),
            start_time: Duration::ZERO,
        };
        if !server.config.enabled {
            return server;
        }
        if server.config.command.is_some() {
            // A server the user configured is a program the user chose to
            // run (as with Claude Code and Codex); the command sandbox is
            // an opt-in per server.
            let mode = server.config.sandbox.unwrap_or(SandboxMode::FullAccess);
            match sandbox.adjusted(Some(mode), server.config.network) {
                Ok(sandbox) => server.sandbox = Some(sandbox),
                Err(e) => {
                    server.link = Link::Failed(McpError::Start {
                        server: server.name.clone(),
                        message: e.to_string(),
                        detail: Box::new(StartDetail {
                            command: server.command_line(),
                            hint: None,
                        }),
                        sandbox: None,
                        stderr_tail: String::new(),
                    });
                    return server;
                }
            }
        }
        let started = Instant::now();
        server.link = match server.connect().await {
            Ok((client, pid, tools)) => {
                server.tools = tools;
                Link::Up { client, pid }
            }
            Err(failure) => Link::Failed(server.start_error(failure).await),
        };
        server.start_time = started.elapsed();
        server
    }

    /// The command line of a stdio server, or the URL of an HTTP one.
    fn command_line(&self) -> Option<String> {
        match (&self.config.command, &self.config.url) {
            (Some(c), _) => Some(diagnose::command_line(c, &self.config.args)),
            (None, Some(url)) => Some(url.clone()),
            (None, None) => None,
        }
    }

    /// The sandbox policy of a confined stdio server; none when it runs
    /// unconfined or is a `url` server.
    pub(crate) fn confinement(&self) -> Option<&SandboxPolicy> {
        self.sandbox
            .as_ref()
            .filter(|s| s.mode() != SandboxMode::FullAccess)
            .map(Sandbox::policy)
    }

    async fn start_error(&self, (failure, message): StartFailure) -> McpError {
        // A dying process's last words: wait for its stderr to close.
        self.tail.settle(Duration::from_secs(2)).await;
        let stderr = self.tail.text();
        let hint = diagnose::likely_cause(
            failure,
            &Situation {
                server: &self.name,
                program: self.config.command.as_deref(),
                url: self.config.url.as_deref(),
                confined: self.confinement(),
                stderr: &stderr,
                message: &message,
            },
        );
        McpError::Start {
            server: self.name.clone(),
            message,
            detail: Box::new(StartDetail {
                command: self.command_line(),
                hint,
            }),
            sandbox: self.confinement().and(self.sandbox.as_ref()).map(describe),
            stderr_tail: stderr,
        }
    }

    /// The sandbox it runs in, for listings; none for a `url` server.
    pub(crate) fn sandbox_label(&self) -> Option<String> {
        self.sandbox.as_ref().map(describe)
    }

    /// Connect, initialize and list the tools within the start-up timeout.
    async fn connect(&self) -> Result<(Client, Option<u32>, Vec<ServerTool>), StartFailure> {
        let timeout = self.config.startup_timeout();
        match tokio::time::timeout(timeout, self.connect_inner()).await {
            Ok(result) => result,
            Err(_) => Err((
                Failure::Timeout,
                format!(
                    "no answer within {} ms (startup_timeout_ms in [mcp.servers.{}])",
                    timeout.as_millis(),
                    self.name
                ),
            )),
        }
    }

    async fn connect_inner(&self) -> Result<(Client, Option<u32>, Vec<ServerTool>), StartFailure> {
        let handshake = |m: String| (Failure::Handshake, m);
        let transport = self
            .config
            .transport(&self.name)
            .map_err(|e| handshake(e.message))?;
        let (client, pid) = match &transport {
            Transport::Stdio { command, args, env } => {
                // What the user trusted is what runs: checked at every start
                // and restart, since a command or an edit may rewrite it
                // while the session goes on.
                for file in &self.config.trusted_files {
                    file.unchanged().map_err(|m| {
                        self.tail.close();
                        (Failure::Spawn(std::io::ErrorKind::Other), m)
                    })?;
                }
                let sandbox = self
                    .sandbox
                    .as_ref()
                    .ok_or_else(|| handshake("its sandbox is not set up".to_string()))?;
                let mut cmd = stdio_command(command, args, env, &self.workspace, sandbox)
                    .map_err(|e| handshake(e.to_string()))?;
                if sandbox.mode() == SandboxMode::FullAccess {
                    hide_secrets(&mut cmd, env, &sandbox.policy().env_passthrough);
                }
                self.tail.1.store(false, Ordering::SeqCst);
                let (process, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| {
                        self.tail.close();
                        (
                            Failure::Spawn(e.kind()),
                            format!("cannot run `{command}`: {e}"),
                        )
                    })?;
                let pid = process.id();
                if stderr.is_none() {
                    self.tail.close();
                }
                if let Some(stderr) = stderr {
                    let tail = self.tail.clone();
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tail.push(&line);
                        }
                        tail.close();
                    });
                }
                let client = ()
                    .serve(process)
                    .await
                    .map_err(|e| handshake(format!("the MCP handshake failed: {e}")))?;
                (client, pid)
            }
            Transport::Http { url, headers } => {
                // No process, no stderr.
                self.tail.close();
                install_tls_provider();
                let mut map = HashMap::new();
                for (k, v) in headers {
                    let name = http::HeaderName::try_from(k.as_str())
                        .map_err(|e| handshake(format!("header `{k}`: {e}")))?;
                    let value = http::HeaderValue::try_from(v.as_str())
                        .map_err(|e| handshake(format!("header `{k}`: {e}")))?;
                    map.insert(name, value);
                }
                let config =
                    StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(map);
                let transport = StreamableHttpClientTransport::from_config(config);
                let client = ()
                    .serve(transport)
                    .await
                    .map_err(|e| handshake(format!("the MCP handshake with {url} failed: {e}")))?;
                (client, None)
            }
        };
        let listed = client
            .list_all_tools()
            .await
            .map_err(|e| (Failure::Listing, format!("listing its tools failed: {e}")))?;
        let mut tools: Vec<ServerTool> = listed
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .filter_map(|t| ServerTool::from_json(&t))
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools.dedup_by(|a, b| a.name == b.name);
        Ok((client, pid, tools))
    }

    /// The state, for listings.
    pub(crate) fn state(&mut self) -> ServerState {
        self.notice_disconnect();
        match &self.link {
            Link::Up { .. } => ServerState::Connected,
            Link::Down { reason } => ServerState::Disconnected {
                reason: reason.clone(),
            },
            Link::Failed(e) => ServerState::Failed {
                error: e.to_string(),
            },
            Link::Disabled => ServerState::Disabled,
        }
    }

    /// The start error, when it failed to start.
    pub(crate) fn start_failure(&self) -> Option<&McpError> {
        match &self.link {
            Link::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// The process id of a connected stdio server.
    pub(crate) fn pid(&self) -> Option<u32> {
        match &self.link {
            Link::Up { pid, .. } => *pid,
            _ => None,
        }
    }

    /// Mark the link down when its transport has closed.
    fn notice_disconnect(&mut self) {
        if let Link::Up { client, .. } = &self.link
            && (client.is_closed() || client.peer().is_transport_closed())
        {
            self.link = Link::Down {
                reason: "the connection closed".into(),
            };
        }
    }

    /// Connect again after a disconnect. The tools listed at the start stay
    /// the session's tools.
    async fn reconnect(&mut self) -> Result<(), String> {
        match self.connect().await {
            Ok((client, pid, _)) => {
                self.link = Link::Up { client, pid };
                Ok(())
            }
            Err((_, message)) => Err(message),
        }
    }

    fn disconnected(&self, reason: String, reconnect: String) -> McpError {
        McpError::Disconnected {
            server: self.name.clone(),
            reason,
            reconnect,
            stderr_tail: self.tail.text(),
        }
    }

    /// Call `tool` with `arguments`. A server found disconnected is
    /// reconnected first; a call whose connection breaks fails (its outcome
    /// unknown) after one reconnect attempt.
    pub(crate) async fn call(
        &mut self,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, McpError> {
        self.notice_disconnect();
        match &self.link {
            Link::Up { .. } => {}
            Link::Down { reason } => {
                let reason = reason.clone();
                if let Err(e) = self.reconnect().await {
                    self.link = Link::Down {
                        reason: reason.clone(),
                    };
                    return Err(self.disconnected(
                        reason,
                        format!("a reconnect failed: {e}; the call was not made"),
                    ));
                }
            }
            Link::Failed(e) => return Err(e.clone()),
            Link::Disabled => {
                return Err(McpError::Call {
                    server: self.name.clone(),
                    tool: tool.to_string(),
                    message: format!(
                        "the server is disabled (enabled = false in [mcp.servers.{}])",
                        self.name
                    ),
                });
            }
        }
        let Link::Up { client, .. } = &self.link else {
            unreachable!("the link is up here");
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        let timeout = self.config.tool_timeout();
        let answer = tokio::time::timeout(timeout, client.call_tool(params)).await;
        match answer {
            Err(_) => Err(McpError::Timeout {
                server: self.name.clone(),
                tool: tool.to_string(),
                timeout_ms: timeout.as_millis() as u64,
            }),
            Ok(Ok(result)) => serde_json::to_value(result).map_err(|e| McpError::Call {
                server: self.name.clone(),
                tool: tool.to_string(),
                message: format!("its answer could not be read: {e}"),
            }),
            Ok(Err(ServiceError::McpError(data))) => Err(McpError::Call {
                server: self.name.clone(),
                tool: tool.to_string(),
                message: data.message.to_string(),
            }),
            Ok(Err(e)) => {
                let reason = format!("the connection broke during `{tool}`: {e}");
                self.link = Link::Down {
                    reason: reason.clone(),
                };
                let reconnect = match self.reconnect().await {
                    Ok(()) => "it was reconnected, but the call's outcome is unknown: check before calling it again".to_string(),
                    Err(e) => {
                        self.link = Link::Down {
                            reason: reason.clone(),
                        };
                        format!("a reconnect failed: {e}")
                    }
                };
                Err(self.disconnected(reason, reconnect))
            }
        }
    }

    /// Close the connection (a stdio server's process ends).
    pub(crate) async fn shutdown(&mut self) {
        if let Link::Up { client, .. } = std::mem::replace(
            &mut self.link,
            Link::Down {
                reason: "Latch shut it down".into(),
            },
        ) {
            let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
        }
    }
}
