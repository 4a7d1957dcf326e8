use super::{TestSandbox, config, node, npm_server};
use latch_mcp::{McpServers, ServerConfig};
use latch_sandbox::SandboxMode;

fn filesystem(dir: &std::path::Path) -> ServerConfig {
    node(npm_server("server-filesystem"), &[dir.to_str().unwrap()])
}

#[test]
fn a_stdio_server_runs_as_an_ordinary_program_unless_its_sandbox_confines_it() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let outside = outside.path().canonicalize().unwrap();
    let target = outside.join("escape.txt");
    let write = serde_json::json!({"path": target, "content": "from MCP"}).to_string();
    let sandbox = TestSandbox::new(&ws);

    // With `sandbox = "workspace-write"` the server may serve the
    // directory but the kernel refuses the write.
    let mut confined = filesystem(&outside);
    confined.sandbox = Some(SandboxMode::WorkspaceWrite);
    let mut servers = McpServers::start(&config(vec![("fs", confined)]), &ws, &sandbox).unwrap();
    assert!(
        servers.start_failures().is_empty(),
        "{:?}",
        servers.start_failures()
    );
    assert_eq!(
        servers.statuses()[0].sandbox.as_deref(),
        Some("`workspace-write`, network off")
    );
    assert!(
        servers
            .tool("mcp__fs__write_file")
            .unwrap()
            .confined
            .is_some()
    );
    let out = servers.call("mcp__fs__write_file", &write).unwrap();
    assert!(out.is_error, "the write must fail: {}", out.text);
    assert!(
        out.text.to_lowercase().contains("permission denied")
            || out.text.contains("EACCES")
            || out.text.contains("EPERM"),
        "{}",
        out.text
    );
    assert!(
        !target.exists(),
        "nothing was written outside the workspace"
    );
    drop(servers);

    // Without `sandbox` (the default) it is a program the user configured,
    // run with the user's rights, as Claude Code and Codex run it.
    let mut servers =
        McpServers::start(&config(vec![("fs", filesystem(&outside))]), &ws, &sandbox).unwrap();
    assert_eq!(servers.statuses()[0].sandbox.as_deref(), Some("none"));
    assert!(
        servers
            .tool("mcp__fs__write_file")
            .unwrap()
            .confined
            .is_none()
    );
    let out = servers.call("mcp__fs__write_file", &write).unwrap();
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "from MCP");
}

#[test]
fn a_confined_server_that_fails_to_start_is_told_which_sandbox_and_keeps_its_own_env() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("cache.json");
    // A server that writes a cache outside the workspace as it starts (as
    // `npx` does under ~/.npm), after printing a variable of its own env
    // whose name looks secret: it is set after the sandbox's filter.
    let script = format!(
        "console.error('own token: ' + process.env.SERVICE_TOKEN); \
         try {{ require('fs').writeFileSync({:?}, '{{}}') }} \
         catch (e) {{ console.error('cannot write the cache: ' + e.code); process.exit(1) }}",
        target.display().to_string()
    );
    let mut server = ServerConfig {
        command: Some("node".into()),
        args: vec!["-e".into(), script],
        enabled: true,
        ..Default::default()
    };
    server
        .env
        .insert("SERVICE_TOKEN".into(), "configured-by-the-user".into());
    server.sandbox = Some(SandboxMode::WorkspaceWrite);
    let sandbox = TestSandbox::new(ws.path());
    let servers = McpServers::start(&config(vec![("cache", server)]), ws.path(), &sandbox).unwrap();
    let failures = servers.start_failures();
    assert_eq!(failures.len(), 1);
    let text = failures[0].to_string();
    assert!(
        text.contains("MCP server `cache` failed to start")
            && text.contains("command: node -e")
            && text.contains("command sandbox (`workspace-write`, network off)")
            && text.contains("likely cause: the sandbox of [mcp.servers.cache] refused a write")
            && text.contains("no `sandbox` at all"),
        "{text}"
    );
    assert!(
        text.contains("own token: configured-by-the-user")
            && text.contains("cannot write the cache: EACCES"),
        "{text}"
    );
    assert!(!target.exists());
}
