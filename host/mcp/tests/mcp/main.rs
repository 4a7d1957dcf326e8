//! `latch-mcp` against real MCP servers from npm
//! (`@modelcontextprotocol/server-everything` and
//! `@modelcontextprotocol/server-filesystem`, installed by `.ci/run` into
//! `.ci/cache/npm`): stdio and streamable HTTP, the byte-stable tool list,
//! results, servers that fail to start (named with their command and the
//! likely cause), and a server killed mid-session; stdio servers run as
//! ordinary programs by default, and what the command sandbox refuses a
//! server whose own `sandbox` setting confines it.

mod sandboxed;
mod servers;

use latch_mcp::{McpConfig, ServerConfig};
use latch_sandbox::{Sandbox, SandboxPolicy};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The default sandbox of a session in `workspace` (`workspace-write`,
/// network off), with a temp dir of its own removed when the test ends.
pub struct TestSandbox(pub Sandbox);

impl TestSandbox {
    /// A fresh one.
    pub fn new(workspace: &Path) -> TestSandbox {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let session = format!(
            "mcp-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        TestSandbox(
            Sandbox::new(SandboxPolicy::default(), workspace, &session)
                .expect("this machine enforces the default sandbox"),
        )
    }
}

impl std::ops::Deref for TestSandbox {
    type Target = Sandbox;
    fn deref(&self) -> &Sandbox {
        &self.0
    }
}

impl Drop for TestSandbox {
    fn drop(&mut self) {
        let _ = self.0.remove_temp_dir();
    }
}

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
