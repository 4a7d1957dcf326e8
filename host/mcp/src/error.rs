//! Why an MCP server or call failed. Every error names the server.

/// What a start failure says beyond its message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StartDetail {
    /// The command line of a stdio server (`npx -y ...`), or the URL of a
    /// streamable-HTTP server.
    pub command: Option<String>,
    /// The likely cause and what to do about it, when Latch can tell.
    pub hint: Option<String>,
}

/// A failure of one MCP server or one of its calls.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum McpError {
    /// The configuration entry cannot be used.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The server did not start (spawn, handshake or tool listing failed or
    /// timed out); the message names the command, the likely cause and the
    /// end of what a stdio server printed on stderr.
    #[error(
        "MCP server `{server}` failed to start: {message}{}{}{}{}",
        command_line(&.detail.command),
        cause(&.detail.hint),
        confined(.server, .sandbox),
        tail(.stderr_tail)
    )]
    Start {
        /// The server.
        server: String,
        /// What went wrong.
        message: String,
        /// Its command line and the likely cause.
        detail: Box<StartDetail>,
        /// The sandbox a confined stdio server ran in (e.g.
        /// "`workspace-write`, network off"); none when it ran unconfined.
        sandbox: Option<String>,
        /// The last lines of its standard error (stdio servers).
        stderr_tail: String,
    },
    /// The server is disconnected; its tools stay listed for the session.
    #[error(
        "MCP server `{server}` is disconnected ({reason}); {reconnect}. Its tools stay listed for this session{}",
        tail(.stderr_tail)
    )]
    Disconnected {
        /// The server.
        server: String,
        /// Why the connection ended.
        reason: String,
        /// What the reconnect attempt gave.
        reconnect: String,
        /// The last lines of its standard error (stdio servers).
        stderr_tail: String,
    },
    /// No tool of that name is exposed.
    #[error("no MCP tool `{name}` in this session (the MCP tools are: {available})")]
    UnknownTool {
        /// The name called.
        name: String,
        /// The exposed names.
        available: String,
    },
    /// The arguments are not a JSON object.
    #[error("the arguments of `{tool}` must be a JSON object: {message}")]
    Arguments {
        /// The exposed tool name.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// The call did not finish in time.
    #[error("MCP server `{server}`: `{tool}` did not answer within {timeout_ms} ms")]
    Timeout {
        /// The server.
        server: String,
        /// The server's tool name.
        tool: String,
        /// The limit.
        timeout_ms: u64,
    },
    /// The user interrupted the turn while the call ran: Latch stopped
    /// waiting and told the server to cancel it. The text begins with
    /// `interrupted:`, which marks the call interrupted on every surface.
    #[error(
        "interrupted: the user stopped the turn while MCP server `{server}` ran `{tool}`; Latch \
         told the server to cancel it, so whatever it did so far is unknown"
    )]
    Interrupted {
        /// The server.
        server: String,
        /// The server's tool name.
        tool: String,
    },
    /// The server answered the call with a protocol error.
    #[error("MCP server `{server}`: `{tool}` failed: {message}")]
    Call {
        /// The server.
        server: String,
        /// The server's tool name.
        tool: String,
        /// The server's message.
        message: String,
    },
}

impl McpError {
    /// A stable short name of the error's kind.
    pub fn kind(&self) -> &'static str {
        match self {
            McpError::Config(_) => "config",
            McpError::Start { .. } => "start",
            McpError::Disconnected { .. } => "disconnected",
            McpError::UnknownTool { .. } => "unknown-tool",
            McpError::Arguments { .. } => "arguments",
            McpError::Timeout { .. } => "timeout",
            McpError::Interrupted { .. } => "interrupted",
            McpError::Call { .. } => "call",
        }
    }
}

fn command_line(command: &Option<String>) -> String {
    match command {
        Some(c) => format!("\n  command: {c}"),
        None => String::new(),
    }
}

fn cause(hint: &Option<String>) -> String {
    match hint {
        Some(h) => format!("\n  likely cause: {h}"),
        None => String::new(),
    }
}

/// The note of a start failure inside the sandbox: what confined it and how
/// to give the server more.
fn confined(server: &str, sandbox: &Option<String>) -> String {
    match sandbox {
        None => String::new(),
        Some(sandbox) => format!(
            "\n  it ran in the command sandbox ({sandbox}) that `sandbox` in [mcp.servers.{server}] \
             asks for; a server that must write outside the workspace or reach the network needs \
             `network = true`, a `[sandbox] writable_roots` entry, or no `sandbox` at all (it then \
             runs as an ordinary program, the default)"
        ),
    }
}

fn tail(stderr_tail: &str) -> String {
    if stderr_tail.trim().is_empty() {
        String::new()
    } else {
        format!(
            "\n  its stderr ended with:\n{}",
            indent(stderr_tail.trim_end())
        )
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
