use super::{TestSandbox, config, node, npm_server};
use latch_mcp::{McpServers, ServerConfig, ServerState};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::{Duration, Instant};

fn everything() -> ServerConfig {
    node(npm_server("server-everything"), &["stdio"])
}

fn filesystem(dir: &std::path::Path) -> ServerConfig {
    node(npm_server("server-filesystem"), &[dir.to_str().unwrap()])
}

#[test]
fn two_stdio_servers_list_their_tools_in_a_stable_order_and_answer() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().canonicalize().unwrap();
    let cfg = config(vec![
        ("fs", filesystem(&allowed)),
        ("everything", everything()),
    ]);
    let sandbox = TestSandbox::new(&allowed);
    let mut servers = McpServers::start(&cfg, &allowed, &sandbox).unwrap();
    eprintln!(
        "start-up of two stdio MCP servers (concurrently): {} ms",
        servers.start_time().as_millis()
    );
    assert!(
        servers.start_failures().is_empty(),
        "{:?}",
        servers.start_failures()
    );
    let names: Vec<String> = servers.tools().iter().map(|t| t.name.clone()).collect();
    // Servers in name order, then tools in name order.
    let mut sorted = names.clone();
    sorted.sort_by_key(|n| {
        let rest = n.strip_prefix("mcp__").unwrap();
        let (server, tool) = rest.split_once("__").unwrap();
        (server.to_string(), tool.to_string())
    });
    assert_eq!(names, sorted);
    assert!(
        names.iter().any(|n| n == "mcp__everything__echo"),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n == "mcp__fs__write_file"),
        "{names:?}"
    );
    let echo = servers.tool("mcp__everything__echo").unwrap();
    assert!(echo.read_only, "echo is annotated read-only");
    assert!(!servers.tool("mcp__fs__write_file").unwrap().read_only);
    // The same servers list the same tools, byte for byte.
    let again = McpServers::start(&cfg, &allowed, &sandbox).unwrap();
    assert_eq!(servers.tools(), again.tools());

    let out = servers
        .call("mcp__everything__echo", r#"{"message":"hello there"}"#)
        .unwrap();
    assert_eq!(out.text, "Echo: hello there");
    assert!(!out.is_error);
    let image = servers
        .call("mcp__everything__get-tiny-image", "{}")
        .unwrap();
    assert_eq!(image.images.len(), 1, "{}", image.text);
    assert_eq!(image.images[0].mime_type, "image/png");
    assert!(image.images[0].bytes.starts_with(b"\x89PNG"));
    let target = allowed.join("out.txt");
    let wrote = servers
        .call(
            "mcp__fs__write_file",
            &serde_json::json!({"path": target, "content": "written by MCP"}).to_string(),
        )
        .unwrap();
    assert!(!wrote.is_error, "{}", wrote.text);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "written by MCP");
    // A server-side refusal is an error result, not a broken connection.
    let outside = servers
        .call(
            "mcp__fs__write_file",
            r#"{"path":"/etc/latch-should-not-exist","content":"x"}"#,
        )
        .unwrap();
    assert!(outside.is_error, "{}", outside.text);
    let err = servers.call("mcp__nope__x", "{}").unwrap_err();
    assert_eq!(err.kind(), "unknown-tool");
    assert!(err.to_string().contains("mcp__everything__echo"));
}

fn wait_for(mut done: impl FnMut() -> bool, what: &str) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_server_keeps_its_tools_and_calls_fail_clearly_until_it_reconnects() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().canonicalize().unwrap().join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let cfg = config(vec![("fs", filesystem(&allowed))]);
    let sandbox = TestSandbox::new(dir.path());
    let mut servers = McpServers::start(&cfg, dir.path(), &sandbox).unwrap();
    let before = servers.tools().to_vec();
    assert!(!before.is_empty());
    let pid = servers.pid("fs").expect("a stdio server has a pid");
    // The server dies, and cannot come back while its directory is gone.
    std::fs::remove_dir_all(&allowed).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_for(
        || {
            matches!(
                servers.statuses()[0].state,
                ServerState::Disconnected { .. }
            )
        },
        "the disconnect to be noticed",
    );
    assert_eq!(
        servers.tools(),
        &before[..],
        "the schemas stay for the session"
    );
    let err = servers
        .call("mcp__fs__list_allowed_directories", "{}")
        .unwrap_err();
    assert_eq!(err.kind(), "disconnected");
    let text = err.to_string();
    assert!(
        text.contains("MCP server `fs` is disconnected") && text.contains("reconnect failed"),
        "{text}"
    );
    assert_eq!(servers.tools(), &before[..]);
    // Once the server can start again, the next call reconnects.
    std::fs::create_dir_all(&allowed).unwrap();
    let out = servers
        .call("mcp__fs__list_allowed_directories", "{}")
        .unwrap();
    assert!(out.text.contains("allowed"), "{}", out.text);
    assert_ne!(servers.pid("fs"), Some(pid));
    assert_eq!(servers.tools(), &before[..]);
}

#[test]
fn a_server_that_fails_to_start_is_named_with_its_stderr_tail() {
    let dir = tempfile::tempdir().unwrap();
    let broken = ServerConfig {
        command: Some("node".into()),
        args: vec![
            "-e".into(),
            "console.error('starting'); console.error('boom: MY_API_KEY is not set'); process.exit(3)"
                .into(),
        ],
        enabled: true,
        ..Default::default()
    };
    let missing = ServerConfig {
        command: Some("/nonexistent/mcp-server".into()),
        enabled: true,
        ..Default::default()
    };
    let cfg = config(vec![
        ("broken", broken),
        ("everything", everything()),
        ("missing", missing),
    ]);
    let sandbox = TestSandbox::new(dir.path());
    let mut servers = McpServers::start(&cfg, dir.path(), &sandbox).unwrap();
    let failures: Vec<String> = servers
        .start_failures()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[0].contains("MCP server `broken` failed to start")
            && failures[0].contains("boom: MY_API_KEY is not set"),
        "{}",
        failures[0]
    );
    assert!(
        failures[1].contains("`missing`") && failures[1].contains("/nonexistent/mcp-server"),
        "{}",
        failures[1]
    );
    // The session goes on with the server that started.
    assert!(servers.tools().iter().all(|t| t.server == "everything"));
    assert_eq!(
        servers
            .call("mcp__everything__echo", r#"{"message":"on"}"#)
            .unwrap()
            .text,
        "Echo: on"
    );
}

#[test]
fn a_start_failure_names_the_server_the_command_and_the_likely_cause() {
    let dir = tempfile::tempdir().unwrap();
    // A program that runs but never speaks MCP, and one that is not there.
    let silent = ServerConfig {
        command: Some("node".into()),
        args: vec!["-e".into(), "setInterval(() => {}, 1000)".into()],
        startup_timeout_ms: Some(700),
        enabled: true,
        ..Default::default()
    };
    let absent = ServerConfig {
        command: Some("latch-test-no-such-mcp-server".into()),
        args: vec!["--stdio".into()],
        enabled: true,
        ..Default::default()
    };
    let cfg = config(vec![("absent", absent), ("silent", silent)]);
    let sandbox = TestSandbox::new(dir.path());
    let started = Instant::now();
    let servers = McpServers::start(&cfg, dir.path(), &sandbox).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the start-up timeout holds"
    );
    let failures: Vec<String> = servers
        .start_failures()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    let absent = &failures[0];
    assert!(
        absent.contains("MCP server `absent` failed to start")
            && absent.contains("command: latch-test-no-such-mcp-server --stdio")
            && absent
                .contains("likely cause: `latch-test-no-such-mcp-server` was not found on PATH"),
        "{absent}"
    );
    let silent = &failures[1];
    assert!(
        silent.contains("MCP server `silent` failed to start: no answer within 700 ms")
            && silent.contains("command: node -e 'setInterval(() => {}, 1000)'")
            && silent
                .contains("likely cause: the program runs but did not answer the MCP handshake"),
        "{silent}"
    );
    // Neither ran in a sandbox: none is blamed.
    assert!(!silent.contains("command sandbox"), "{silent}");
}

#[test]
fn streamable_http_against_server_everything() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new("node")
        .arg(npm_server("server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let stderr = child.0.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    loop {
        let line = lines
            .next()
            .expect("the HTTP server printed its port")
            .unwrap();
        if line.contains("listening") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let server = ServerConfig {
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        enabled: true,
        ..Default::default()
    };
    let sandbox = TestSandbox::new(Path::new("."));
    let mut servers =
        McpServers::start(&config(vec![("web", server)]), Path::new("."), &sandbox).unwrap();
    assert!(
        servers.start_failures().is_empty(),
        "{:?}",
        servers.start_failures()
    );
    assert!(servers.tool("mcp__web__echo").is_some());
    let out = servers
        .call("mcp__web__echo", r#"{"message":"over http"}"#)
        .unwrap();
    assert_eq!(out.text, "Echo: over http");
    drop(servers);
}

/// A child process killed when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn https_urls_are_spoken_with_tls_and_a_failure_names_the_server_and_the_url() {
    // A closed port, and a listener that answers in plain HTTP where a TLS
    // handshake is expected.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let plain_port = plain.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in plain.incoming().flatten() {
            use std::io::Write;
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let https = |port: u16| ServerConfig {
        url: Some(format!("https://127.0.0.1:{port}/mcp")),
        enabled: true,
        startup_timeout_ms: Some(10_000),
        ..Default::default()
    };
    let sandbox = TestSandbox::new(Path::new("."));
    let servers = McpServers::start(
        &config(vec![
            ("closed", https(closed)),
            ("plain", https(plain_port)),
        ]),
        Path::new("."),
        &sandbox,
    )
    .unwrap();
    let failures: Vec<String> = servers
        .start_failures()
        .iter()
        .map(|e| e.to_string())
        .collect();
    eprintln!("{failures:#?}");
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[0].contains("MCP server `closed` failed to start")
            && failures[0].contains(&format!("https://127.0.0.1:{closed}/mcp")),
        "{}",
        failures[0]
    );
    assert!(
        failures[1].contains("MCP server `plain` failed to start")
            && failures[1].contains(&format!("https://127.0.0.1:{plain_port}/mcp")),
        "{}",
        failures[1]
    );
}

#[test]
fn a_trusted_script_rewritten_mid_session_is_not_restarted() {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let script = ws.join("server.js");
    std::fs::write(
        &script,
        format!(
            "import(require('url').pathToFileURL({:?}).href);\n",
            npm_server("server-everything").display()
        ),
    )
    .unwrap();
    let mut trusted = node(script.clone(), &["stdio"]);
    trusted.trusted_files = vec![latch_mcp::TrustedFile {
        path: script.clone(),
        shown: "server.js".into(),
        sha256: hex::encode(Sha256::digest(std::fs::read(&script).unwrap())),
    }];
    let cfg = config(vec![("local", trusted)]);
    let sandbox = TestSandbox::new(&ws);
    let mut servers = McpServers::start(&cfg, &ws, &sandbox).unwrap();
    assert!(
        servers.start_failures().is_empty(),
        "{:?}",
        servers.start_failures()
    );
    let pid = servers.pid("local").unwrap();
    // A command rewrites the trusted script, then the server dies.
    std::fs::write(
        &script,
        "require('fs').writeFileSync('payload-ran', 'x');\n",
    )
    .unwrap();
    assert!(
        std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    wait_for(
        || {
            matches!(
                servers.statuses()[0].state,
                ServerState::Disconnected { .. }
            )
        },
        "the disconnect to be noticed",
    );
    let err = servers
        .call("mcp__local__echo", r#"{"message":"x"}"#)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("server.js changed since this workspace's config was trusted"),
        "{err}"
    );
    assert!(!ws.join("payload-ran").exists(), "the rewritten script ran");
}
