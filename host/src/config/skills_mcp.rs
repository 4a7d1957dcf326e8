//! `[skills]` and `[mcp]`: Agent Skills discovery and the MCP servers a
//! session starts. The MCP tables are `latch_mcp::McpConfig` (servers under
//! `[mcp.servers.NAME]`); unknown keys are refused like everywhere else.

use serde::Deserialize;

pub use latch_mcp::{McpConfig, ServerConfig as McpServerConfig};

/// `[skills]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SkillsConfig {
    /// `false` turns skills off: no list, no `load_skill` (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Share of the context window the skill list may take, in percent
    /// (default 2; at most 50).
    #[serde(default = "default_percent", deserialize_with = "percent")]
    pub catalog_percent: u32,
}

fn yes() -> bool {
    true
}

fn default_percent() -> u32 {
    latch_tools::skills::DEFAULT_CATALOG_PERCENT
}

fn percent<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = u32::deserialize(d)?;
    if n > 50 {
        return Err(serde::de::Error::custom(
            "[skills] catalog_percent is a share of the context window: at most 50 (default 2)",
        ));
    }
    Ok(n)
}

impl Default for SkillsConfig {
    fn default() -> Self {
        SkillsConfig {
            enabled: true,
            catalog_percent: default_percent(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    #[test]
    fn skills_and_mcp_parse_and_refuse_unknown_keys() {
        let text = r#"
[skills]
catalog_percent = 3
[mcp.servers.everything]
command = "node"
args = ["server.js", "stdio"]
env = { A = "1" }
sandbox = "full-access"
network = true
[mcp.servers.remote]
url = "http://127.0.0.1:3001/mcp"
headers = { Authorization = "Bearer x" }
"#;
        let c = Config::parse(text, Path::new("c.toml")).unwrap();
        assert_eq!(c.skills.catalog_percent, 3);
        assert_eq!(c.mcp.servers.len(), 2);
        assert!(c.mcp.check().is_ok());
        let everything = &c.mcp.servers["everything"];
        assert_eq!(
            (everything.sandbox, everything.network),
            (Some(latch_sandbox::SandboxMode::FullAccess), Some(true))
        );
        assert_eq!(c.mcp.servers["remote"].sandbox, None);
        let err = Config::parse(
            "[mcp.servers.x]\ncommand = \"node\"\nsandbox = \"danger\"\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("danger") && err.contains("workspace-write") && err.contains("line 3"),
            "{err}"
        );
        let err = Config::parse("[mcp.servers.x]\ncomand = \"node\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("comand") && err.contains("line 2"), "{err}");
        let err = Config::parse("[skills]\ncatalog_percent = 80\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("at most 50"), "{err}");
        let c = Config::parse("", Path::new("c.toml")).unwrap();
        assert!(c.skills.enabled && c.mcp.servers.is_empty());
    }
}
