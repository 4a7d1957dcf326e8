//! `latch mcp list`: every configured MCP server started as a session
//! would start it (an ordinary program, or in the sandbox its `sandbox`
//! asks for), with its state, start-up time, sandbox and tools; the
//! servers of an untrusted workspace config named as not started; and the
//! tool-schema tokens per server behind `/context`.

use super::GlobalArgs;
use super::render::terminal_safe;
use anyhow::Context;
use latch_engine_sdk::estimate;
use latch_engine_sdk::types::EstimatorProfile;
use latch_mcp::{McpServers, ServerState};
use latch_provider::ToolSchema;
use latch_sandbox::Sandbox;
use std::path::Path;

/// The label of the tools that are not an MCP server's.
pub const BUILT_IN: &str = "built-in";

/// Tool-schema tokens per source: [`BUILT_IN`] first, then each MCP server
/// in the order its tools appear (`mcp__SERVER__TOOL`).
pub fn tool_tokens_by_server(
    schemas: &[ToolSchema],
    profile: EstimatorProfile,
) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = vec![(BUILT_IN.to_string(), 0)];
    for s in schemas {
        let source = s
            .name
            .strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"))
            .map(|(server, _)| server.to_string())
            .unwrap_or_else(|| BUILT_IN.to_string());
        let tokens = estimate(profile, &serde_json::to_string(s).unwrap_or_default()) as u64;
        match out.iter_mut().find(|(name, _)| *name == source) {
            Some(entry) => entry.1 += tokens,
            None => out.push((source, tokens)),
        }
    }
    out
}

/// The `/context` lines of tool-schema tokens per MCP server (empty when
/// the session has no MCP tools).
pub fn tool_tokens_table(schemas: &[ToolSchema], profile: EstimatorProfile) -> String {
    let rows = tool_tokens_by_server(schemas, profile);
    if rows.len() < 2 {
        return String::new();
    }
    let mut s = String::from("  tool schemas by source\n");
    for (name, tokens) in rows {
        let label = if name == BUILT_IN {
            name
        } else {
            format!("MCP server {name}")
        };
        s.push_str(&format!(
            "    {:<32} ≈{tokens}\n",
            terminal_safe(&label, 60)
        ));
    }
    s
}

/// `latch mcp list [--json]`.
pub fn list(global: &GlobalArgs, workspace: &Path, json: bool) -> anyhow::Result<i32> {
    let workspace = std::fs::canonicalize(workspace).map_err(|e| {
        anyhow::anyhow!("the workspace {} does not exist: {e}", workspace.display())
    })?;
    let loaded = super::setup::load_config(global, &workspace)?;
    let config = loaded.config;
    // Servers of a workspace config that is not trusted are not started.
    let held_back: Vec<String> = loaded
        .trust
        .held_back()
        .iter()
        .filter_map(|k| match k.path.as_slice() {
            [mcp, servers, name] if mcp == "mcp" && servers == "servers" => Some(name.clone()),
            _ => None,
        })
        .collect();
    for name in &held_back {
        println!(
            "{}  not started: {} is not trusted (`latch trust` trusts it, {} for one run)",
            terminal_safe(name, 60),
            loaded.trust.file.display(),
            crate::config::trust::TRUST_FLAG
        );
    }
    if config.mcp.servers.is_empty() {
        if held_back.is_empty() {
            println!(
                "no MCP servers are configured; add one to .latch/config.toml (or your own \
                 ~/.config/latch/config.toml), e.g.\n  \
                 [mcp.servers.everything]\n  command = \"npx\"\n  args = [\"-y\", \"@modelcontextprotocol/server-everything\"]"
            );
        }
        return Ok(0);
    }
    // The session's sandbox (`--sandbox` over `[sandbox]`), which a server
    // whose `sandbox` asks for it runs in, with a temp dir of its own
    // removed afterwards.
    let sandbox = Sandbox::new(
        config.sandbox.policy(&workspace, global.sandbox),
        &workspace,
        &format!("mcp-list-{}", std::process::id()),
    )
    .context("cannot set up the sandbox the MCP servers run in")?;
    let mut servers = McpServers::start(&config.mcp, &workspace, &sandbox)?;
    let statuses = servers.statuses();
    servers.shutdown();
    drop(servers);
    if let Err(e) = sandbox.remove_temp_dir() {
        eprintln!("warning: could not remove the sandbox temp dir: {e}");
    }
    let profile = EstimatorProfile::Anthropic;
    if json {
        let out: Vec<serde_json::Value> = statuses
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "state": state_name(&s.state),
                    "error": match &s.state { ServerState::Failed { error } => Some(error.clone()), _ => None },
                    "start_ms": s.start_time.as_millis() as u64,
                    "sandbox": s.sandbox,
                    "tools": s.tools.iter().map(|t| serde_json::json!({
                        "name": t.name, "tool": t.tool, "read_only": t.read_only,
                        "description": t.description,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    for s in &statuses {
        let schemas: Vec<ToolSchema> = s
            .tools
            .iter()
            .map(|t| ToolSchema {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
            })
            .collect();
        let tokens: u64 = schemas
            .iter()
            .map(|t| estimate(profile, &serde_json::to_string(t).unwrap_or_default()) as u64)
            .sum();
        println!(
            "{}  {}  started in {} ms  {} tools ≈{tokens} schema tokens{}",
            terminal_safe(&s.name, 60),
            state_name(&s.state),
            s.start_time.as_millis(),
            s.tools.len(),
            s.sandbox
                .as_deref()
                .map(|b| format!("  sandbox {b}"))
                .unwrap_or_default()
        );
        if let ServerState::Failed { error } = &s.state {
            // Line by line: the error's lines (command, likely cause,
            // stderr) stay lines.
            for line in error.lines().take(60) {
                println!("  {}", terminal_safe(line, 1_000));
            }
        }
        for t in &s.tools {
            let description: String = t
                .description
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            println!(
                "  {:<40} {:<10} {}",
                terminal_safe(&t.name, 80),
                if t.read_only {
                    "read-only"
                } else {
                    "may change"
                },
                terminal_safe(&description, 100)
            );
        }
    }
    Ok(0)
}

fn state_name(state: &ServerState) -> &'static str {
    match state {
        ServerState::Connected => "connected",
        ServerState::Disconnected { .. } => "disconnected",
        ServerState::Failed { .. } => "failed",
        ServerState::Disabled => "disabled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(name: &str) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: format!("the tool {name}"),
            input_schema: json!({"type": "object"}),
        }
    }

    #[test]
    fn schema_tokens_are_grouped_per_server() {
        let schemas = [
            schema("read_file"),
            schema("mcp__everything__echo"),
            schema("mcp__everything__get-sum"),
            schema("mcp__fs__write_file"),
            schema("recall"),
        ];
        let p = EstimatorProfile::Anthropic;
        let rows = tool_tokens_by_server(&schemas, p);
        let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["built-in", "everything", "fs"]);
        let one = |s: &ToolSchema| estimate(p, &serde_json::to_string(s).unwrap()) as u64;
        assert_eq!(rows[0].1, one(&schemas[0]) + one(&schemas[4]));
        assert_eq!(rows[1].1, one(&schemas[1]) + one(&schemas[2]));
        assert_eq!(rows[2].1, one(&schemas[3]));
        let table = tool_tokens_table(&schemas, p);
        assert!(table.contains("MCP server everything") && table.contains("MCP server fs"));
        assert!(
            tool_tokens_table(&schemas[..1], p).is_empty(),
            "nothing without MCP tools"
        );
    }
}
