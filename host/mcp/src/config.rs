//! `[mcp.servers.NAME]`: what a configured MCP server is and how it is
//! reached (a child process over stdio, or a streamable-HTTP URL). Unknown
//! keys are refused, and [`McpConfig::check`] names the server and the key
//! that is wrong and how to fix it.

use latch_sandbox::SandboxMode;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Default time a server has to start and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 30_000;
/// Default time one tool call may take.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 120_000;
/// Longest server name: `mcp__NAME__TOOL` must stay within the providers'
/// 64-character tool-name limit.
pub const MAX_SERVER_NAME: usize = 24;

/// `[mcp]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// The servers, by name (started in name order; their tools are listed
    /// in name order).
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// `[mcp.servers.NAME]`: `command` (+ `args`, `env`) for a stdio server, or
/// `url` (+ `headers`) for a streamable-HTTP server.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// The program of a stdio server (run in the workspace).
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables added to its environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The command sandbox a stdio server runs in, when the user wants it
    /// confined: `read-only`, `workspace-write` or `full-access`. Unset
    /// (the default), the server runs as an ordinary program with the
    /// user's rights, as Claude Code and Codex run the servers a user
    /// configures: `npx` can fetch its package and write `~/.npm`. Its
    /// tools that are not annotated read-only then act outside the
    /// session's sandbox, so the approval mode asks about them.
    pub sandbox: Option<SandboxMode>,
    /// Whether a confined stdio server may use the network (default: the
    /// session's `[sandbox] network`). Only with `sandbox`: an unconfined
    /// server has the network anyway.
    pub network: Option<bool>,
    /// The endpoint of a streamable-HTTP server, e.g.
    /// `http://127.0.0.1:3001/mcp` or `https://mcp.example.com/mcp`.
    pub url: Option<String>,
    /// HTTP headers sent with every request (e.g. `Authorization`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `false` keeps the entry but does not start the server.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Time to start and list tools, in milliseconds (default 30000).
    pub startup_timeout_ms: Option<u64>,
    /// Time one tool call may take, in milliseconds (default 120000).
    pub tool_timeout_ms: Option<u64>,
    /// Files of the workspace this entry runs, as they were when the user
    /// trusted the workspace's config (set by the host, never read from
    /// the file): a stdio server starts, or restarts, only while each is
    /// unchanged.
    #[serde(skip)]
    pub trusted_files: Vec<TrustedFile>,
}

/// A file a trusted server runs, and the hash it had when trusted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedFile {
    /// The file.
    pub path: std::path::PathBuf,
    /// The path shown in messages (relative to the workspace).
    pub shown: String,
    /// SHA-256 (hex) of its bytes when trusted.
    pub sha256: String,
}

impl TrustedFile {
    /// Ok while the file has the bytes it had when trusted; else why the
    /// server may not start, and what to do.
    pub fn unchanged(&self) -> Result<(), String> {
        use sha2::{Digest, Sha256};
        let now = std::fs::File::open(&self.path).and_then(|mut f| {
            let mut h = Sha256::new();
            std::io::copy(&mut f, &mut h)?;
            Ok(hex::encode(h.finalize()))
        });
        match now {
            Ok(now) if now == self.sha256 => Ok(()),
            Ok(_) => Err(format!(
                "{} changed since this workspace's config was trusted, so the server is not \
                 started; review the change, then run `latch trust` (or pass \
                 --trust-workspace)",
                self.shown
            )),
            Err(e) => Err(format!(
                "{} was trusted as part of this workspace's config but cannot be read now \
                 ({e}), so the server is not started",
                self.shown
            )),
        }
    }
}

fn yes() -> bool {
    true
}

/// How a server is reached, once its entry is checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Transport {
    /// A child process speaking MCP over stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to its environment.
        env: BTreeMap<String, String>,
    },
    /// A streamable-HTTP endpoint.
    Http {
        /// The URL.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
}

/// A configuration entry that cannot be used.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
#[error("[mcp.servers.{server}]: {message}")]
pub struct ConfigError {
    /// The server's name as configured.
    pub server: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl ServerConfig {
    /// The transport of this entry, or what is wrong with it.
    pub fn transport(&self, name: &str) -> Result<Transport, ConfigError> {
        let err = |message: String| ConfigError {
            server: name.to_string(),
            message,
        };
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => Err(err(
                "set either `command` (a stdio server) or `url` (a streamable-HTTP server), not both"
                    .into(),
            )),
            (None, None) => Err(err(
                "set `command = \"...\"` (a stdio server) or `url = \"http://...\"` (a streamable-HTTP server)"
                    .into(),
            )),
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(err("`command` is empty".into()));
                }
                if !self.headers.is_empty() {
                    return Err(err(
                        "`headers` apply to `url` servers only; pass a stdio server settings through `env`"
                            .into(),
                    ));
                }
                if self.network.is_some() && self.sandbox.is_none() {
                    return Err(err(
                        "`network` applies to a server confined with `sandbox = \"read-only\"` or \
                         `\"workspace-write\"`; without `sandbox` the server runs as an ordinary \
                         program and has the network. Add `sandbox = \"workspace-write\"` or \
                         remove `network`"
                            .into(),
                    ));
                }
                Ok(Transport::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                    env: self.env.clone(),
                })
            }
            (None, Some(url)) => {
                if !url.starts_with("http://") && !url.starts_with("https://") {
                    return Err(err(format!(
                        "`url` must start with http:// or https:// (got `{url}`)"
                    )));
                }
                if !self.args.is_empty() || !self.env.is_empty() {
                    return Err(err(
                        "`args` and `env` apply to `command` servers only".into(),
                    ));
                }
                if self.sandbox.is_some() || self.network.is_some() {
                    return Err(err(
                        "`sandbox` and `network` apply to `command` servers only (Latch runs \
                         no process for a `url` server); remove them"
                            .into(),
                    ));
                }
                for (k, v) in &self.headers {
                    if http::HeaderName::try_from(k.as_str()).is_err()
                        || http::HeaderValue::try_from(v.as_str()).is_err()
                    {
                        return Err(err(format!("header `{k}` is not a valid HTTP header")));
                    }
                }
                Ok(Transport::Http {
                    url: url.clone(),
                    headers: self.headers.clone(),
                })
            }
        }
    }

    /// The start-up timeout.
    pub fn startup_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.startup_timeout_ms
                .unwrap_or(DEFAULT_STARTUP_TIMEOUT_MS)
                .max(1),
        )
    }

    /// The per-call timeout.
    pub fn tool_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.tool_timeout_ms
                .unwrap_or(DEFAULT_TOOL_TIMEOUT_MS)
                .max(1),
        )
    }
}

/// Check a server name: 1–24 characters of `[A-Za-z0-9_-]`, no `__` (the
/// separator of exposed tool names).
pub fn check_name(name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_SERVER_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.contains("__");
    if ok {
        Ok(())
    } else {
        Err(ConfigError {
            server: name.to_string(),
            message: format!(
                "a server name is 1-{MAX_SERVER_NAME} characters of letters, digits, `-` and `_`, \
                 without `__` (it becomes part of the tool names mcp__NAME__TOOL); rename the table"
            ),
        })
    }
}

impl McpConfig {
    /// Check every entry: names and transports.
    pub fn check(&self) -> Result<(), ConfigError> {
        for (name, server) in &self.servers {
            check_name(name)?;
            server.transport(name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_needs_exactly_one_transport() {
        assert!(McpConfig::default().check().is_ok());
        let mut s = ServerConfig {
            enabled: true,
            ..Default::default()
        };
        let e = s.transport("x").unwrap_err();
        assert!(e.to_string().contains("[mcp.servers.x]") && e.message.contains("command"));
        s.command = Some("node".into());
        s.url = Some("http://a/mcp".into());
        assert!(s.transport("x").unwrap_err().message.contains("not both"));
        s.command = None;
        s.url = Some("ftp://a".into());
        assert!(s.transport("x").unwrap_err().message.contains("https://"));
        s.url = Some("https://a/mcp".into());
        assert!(
            matches!(s.transport("x"), Ok(Transport::Http { url, .. }) if url == "https://a/mcp")
        );
        s.network = Some(true);
        let e = s.transport("x").unwrap_err();
        assert!(e.message.contains("`command` servers only"), "{e}");
        s.network = None;
        s.url = None;
        s.command = Some("npx".into());
        s.network = Some(true);
        let e = s.transport("x").unwrap_err();
        assert!(
            e.message
                .contains("`network` applies to a server confined with `sandbox"),
            "{e}"
        );
        s.sandbox = Some(SandboxMode::WorkspaceWrite);
        assert!(s.transport("x").is_ok());
        s.sandbox = None;
        s.network = None;
        s.command = None;
        s.url = Some("http://a/mcp".into());
        s.headers.insert("bad header".into(), "v".into());
        assert!(s.transport("x").unwrap_err().message.contains("bad header"));
    }

    #[test]
    fn server_names_fit_tool_names() {
        assert!(check_name("everything").is_ok());
        assert!(check_name("fs-1_a").is_ok());
        for bad in ["", "a__b", "has space", "dot.ted", &"x".repeat(25)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
