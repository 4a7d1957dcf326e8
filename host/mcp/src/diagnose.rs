//! Why an MCP server most likely failed to start, in words a user can act
//! on: a program that is not installed, `npx` blocked by a sandbox the
//! user asked for, npm offline, a first download slower than the start-up
//! timeout, a program that does not speak MCP on stdio, nothing listening
//! at a URL. Pure: what happened and what the server printed in, one
//! sentence out.

use latch_sandbox::{SandboxMode, SandboxPolicy};

/// Most characters of a command line shown in an error.
const COMMAND_CHARS: usize = 300;

/// How a start failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The program could not be run (not found, not executable).
    Spawn(std::io::ErrorKind),
    /// No answer within the start-up timeout.
    Timeout,
    /// The MCP handshake failed (the process ended, or spoke something
    /// else).
    Handshake,
    /// Connected, but listing its tools failed.
    Listing,
}

/// What the failure is judged against.
pub(crate) struct Situation<'a> {
    /// The server's name.
    pub server: &'a str,
    /// The program of a stdio server.
    pub program: Option<&'a str>,
    /// The URL of a streamable-HTTP server.
    pub url: Option<&'a str>,
    /// The sandbox a confined stdio server ran in; none when unconfined.
    pub confined: Option<&'a SandboxPolicy>,
    /// The end of its stderr.
    pub stderr: &'a str,
    /// The error's own message.
    pub message: &'a str,
}

/// `command args…`, each argument quoted when it needs it, cut to a
/// readable length.
pub(crate) fn command_line(command: &str, args: &[String]) -> String {
    let quote = |a: &str| {
        if !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./@:=+,%".contains(c))
        {
            a.to_string()
        } else {
            format!("'{}'", a.replace('\'', "'\\''"))
        }
    };
    let mut line = std::iter::once(quote(command))
        .chain(args.iter().map(|a| quote(a)))
        .collect::<Vec<_>>()
        .join(" ");
    if line.chars().count() > COMMAND_CHARS {
        line = line.chars().take(COMMAND_CHARS).collect::<String>() + "…";
    }
    line
}

/// A launcher that fetches a package before it runs it (and writes a
/// cache under the home directory).
fn fetches_packages(program: &str) -> bool {
    let name = std::path::Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
    matches!(
        name,
        "npx" | "pnpx" | "bunx" | "uvx" | "pipx" | "pnpm" | "yarn" | "npm" | "bun" | "deno"
    )
}

/// The likely cause of `failure` and what to do, when it can be told.
pub(crate) fn likely_cause(failure: Failure, s: &Situation) -> Option<String> {
    let server = s.server;
    let lower = s.stderr.to_lowercase();
    let said = |needles: &[&str]| needles.iter().any(|n| lower.contains(&n.to_lowercase()));
    if let Some(url) = s.url {
        let message = s.message.to_lowercase();
        return Some(
            if message.contains("refused") || message.contains("connect") {
                format!("nothing answered at {url}: is the server running and is the URL right?")
            } else if message.contains("401") || message.contains("403") {
                format!(
                    "{url} refused the request: check the `headers` (e.g. Authorization) of \
                 [mcp.servers.{server}]"
                )
            } else if failure == Failure::Timeout {
                format!(
                    "{url} did not answer in time: check that it is an MCP streamable-HTTP endpoint \
                 (often ending in /mcp), or raise `startup_timeout_ms`"
                )
            } else {
                format!("{url} did not speak MCP over streamable HTTP (is it the right path?)")
            },
        );
    }
    let program = s.program.unwrap_or("the command");
    let fetches = fetches_packages(program);
    let offline_sandbox = s
        .confined
        .is_some_and(|p| p.mode != SandboxMode::FullAccess && !p.network);
    let write_sandbox = s
        .confined
        .is_some_and(|p| p.mode != SandboxMode::FullAccess);
    match failure {
        Failure::Spawn(std::io::ErrorKind::NotFound) if program.contains('/') => Some(format!(
            "`{program}` does not exist: check the path in `command` of [mcp.servers.{server}]"
        )),
        Failure::Spawn(std::io::ErrorKind::NotFound) => Some(format!(
            "`{program}` was not found on PATH: install it{} or set `command` to its full path",
            if fetches {
                " (npx, npm and node come with Node.js)"
            } else {
                ""
            }
        )),
        Failure::Spawn(std::io::ErrorKind::PermissionDenied) => Some(format!(
            "`{program}` may not be run: check that it is an executable file{}",
            if write_sandbox {
                ", readable inside the sandbox"
            } else {
                ""
            }
        )),
        Failure::Spawn(_) => None,
        _ if said(&["enotcached", "only-if-cached"]) => Some(
            "npm is offline (`--offline` or `npm_config_offline`) and the package is not in its \
             cache: install it once with the network on, or into the workspace's node_modules"
                .to_string(),
        ),
        _ if fetches && offline_sandbox => Some(format!(
            "`{program}` downloads the package and writes its cache under your home directory, \
             which the sandbox of [mcp.servers.{server}] blocks (network off, writes only in the \
             workspace): remove `sandbox` to run it as an ordinary program, or add `network = \
             true` and a `[sandbox] writable_roots` entry for its cache"
        )),
        _ if write_sandbox
            && said(&[
                "eacces",
                "erofs",
                "permission denied",
                "read-only file system",
            ]) =>
        {
            Some(format!(
                "the sandbox of [mcp.servers.{server}] refused a write the server needs: add a \
                 `[sandbox] writable_roots` entry for that place, or remove `sandbox`"
            ))
        }
        _ if said(&[
            "enotfound",
            "eai_again",
            "econnrefused",
            "getaddrinfo",
            "network",
        ]) =>
        {
            Some(if offline_sandbox {
                format!(
                    "the server needs the network, which the sandbox of [mcp.servers.{server}] \
                     turns off: add `network = true`, or remove `sandbox`"
                )
            } else {
                "the server could not reach the network (see its stderr below)".to_string()
            })
        }
        Failure::Timeout if fetches => Some(format!(
            "the first `{program}` start downloads the package, which can take longer than the \
             start-up timeout: raise `startup_timeout_ms` in [mcp.servers.{server}], or install \
             the package once and point `command` at it"
        )),
        Failure::Timeout => Some(
            "the program runs but did not answer the MCP handshake: check that it speaks MCP \
             over stdin/stdout (some servers need an argument such as `stdio`) and writes \
             nothing else to stdout"
                .to_string(),
        ),
        Failure::Handshake | Failure::Listing if lower.trim().is_empty() => Some(
            "the process ended (or closed its output) before the MCP handshake without a word \
             on stderr: run the command by hand to see what it does"
                .to_string(),
        ),
        Failure::Handshake | Failure::Listing => Some(
            "the process ended (or closed its output) before the MCP handshake: its stderr \
             below says why"
                .to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn situation<'a>(
        program: &'a str,
        confined: Option<&'a SandboxPolicy>,
        stderr: &'a str,
    ) -> Situation<'a> {
        Situation {
            server: "everything",
            program: Some(program),
            url: None,
            confined,
            stderr,
            message: "",
        }
    }

    #[test]
    fn each_failure_gets_a_cause_a_user_can_act_on() {
        let confined = SandboxPolicy::default();
        let cause = |f, s: &Situation| likely_cause(f, s).unwrap();
        let c = cause(
            Failure::Spawn(std::io::ErrorKind::NotFound),
            &situation("npx", None, ""),
        );
        assert!(
            c.contains("`npx` was not found on PATH") && c.contains("Node.js"),
            "{c}"
        );
        let c = cause(Failure::Timeout, &situation("npx", Some(&confined), ""));
        assert!(
            c.contains("blocks (network off") && c.contains("remove `sandbox`"),
            "{c}"
        );
        let c = cause(Failure::Timeout, &situation("/usr/bin/npx", None, ""));
        assert!(c.contains("raise `startup_timeout_ms`"), "{c}");
        let c = cause(Failure::Timeout, &situation("my-server", None, ""));
        assert!(c.contains("speaks MCP over stdin/stdout"), "{c}");
        let c = cause(
            Failure::Handshake,
            &situation("npx", None, "npm error code ENOTCACHED"),
        );
        assert!(c.contains("npm is offline"), "{c}");
        let c = cause(
            Failure::Handshake,
            &situation("node", Some(&confined), "Error: EACCES: permission denied"),
        );
        assert!(c.contains("refused a write"), "{c}");
        let c = cause(Failure::Handshake, &situation("node", None, ""));
        assert!(c.contains("without a word"), "{c}");
        let url = Situation {
            url: Some("http://127.0.0.1:9/mcp"),
            program: None,
            message: "error sending request: Connection refused",
            ..situation("", None, "")
        };
        let c = cause(Failure::Handshake, &url);
        assert!(
            c.contains("nothing answered at http://127.0.0.1:9/mcp"),
            "{c}"
        );
    }

    #[test]
    fn command_lines_are_quoted_and_cut() {
        assert_eq!(
            command_line(
                "npx",
                &[
                    "-y".into(),
                    "@modelcontextprotocol/server-everything".into()
                ]
            ),
            "npx -y @modelcontextprotocol/server-everything"
        );
        assert_eq!(
            command_line("node", &["-e".into(), "it's here".into()]),
            "node -e 'it'\\''s here'"
        );
        assert!(command_line("x", &["a".repeat(400)]).ends_with('…'));
    }
}
