//! `latch-mcp` against real MCP servers from npm
//! (`@modelcontextprotocol/server-everything` and
//! `@modelcontextprotocol/server-filesystem`, installed by `.ci/run` into
//! `.ci/cache/npm`): stdio and streamable HTTP, the byte-stable tool list,
//! results, a server that fails to start, and a server killed mid-session.

mod servers;

use latch_mcp::{McpConfig, ServerConfig};
use std::path::PathBuf;

/// The entry script of an npm MCP server package. Missing packages fail the
/// test loudly: CI installs them (`.ci/run`).
pub fn npm_server(package: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.ci/cache/npm");
    let script = root
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        script.is_file(),
        "the MCP test server {package} is not installed at {}: run `bash .ci/run` once, or \
         `npm install --prefix .ci/cache/npm @modelcontextprotocol/{package}@2026.8.31`",
        script.display()
    );
    script
}

/// A stdio server entry running `node SCRIPT ARGS`.
pub fn node(script: PathBuf, args: &[&str]) -> ServerConfig {
    let mut all = vec![script.display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    ServerConfig {
        command: Some("node".into()),
        args: all,
        enabled: true,
        ..Default::default()
    }
}

/// A config of `servers`.
pub fn config(servers: Vec<(&str, ServerConfig)>) -> McpConfig {
    McpConfig {
        servers: servers
            .into_iter()
            .map(|(n, s)| (n.to_string(), s))
            .collect(),
    }
}
