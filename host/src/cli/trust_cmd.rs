//! `latch trust [--revoke]`: record (or forget) that the user trusts the
//! workspace's `.latch/config.toml`, printing exactly the keys that then
//! apply; and the plain REPL's question before a session starts. What
//! needs trust and where the answer is kept is decided in
//! [`crate::config::trust`]; this module only shows it and asks.

use super::GlobalArgs;
use crate::config::Config;
use crate::config::trust::{TRUST_FLAG, TrustGrant, TrustStore, WorkspaceTrust};
use anyhow::Context;
use std::io::{IsTerminal, Write};
use std::path::Path;

/// `latch trust [--revoke]`.
pub fn run(global: &GlobalArgs, workspace: &Path, revoke: bool) -> anyhow::Result<i32> {
    let workspace = std::fs::canonicalize(workspace)
        .with_context(|| format!("the workspace {} does not exist", workspace.display()))?;
    if global.config.is_some() {
        eprintln!(
            "note: --config files are always trusted; `latch trust` is about {}",
            workspace.join(".latch/config.toml").display()
        );
    }
    let store = TrustStore::user()?;
    if revoke {
        let was = store.revoke(&workspace)?;
        if !was {
            println!("{} was not trusted; nothing to revoke", workspace.display());
            return Ok(0);
        }
        let trust = Config::load(&workspace, None)?.trust;
        println!("revoked: {} is no longer trusted", workspace.display());
        if !trust.keys.is_empty() {
            print!(
                "these keys of {} are ignored again:\n{}",
                trust.file.display(),
                trust.listing()
            );
        }
        return Ok(0);
    }
    let trust = Config::load_with(&workspace, None, TrustGrant::ThisRun)?.trust;
    if trust.file.as_os_str().is_empty() {
        println!(
            "{} has no .latch/config.toml: nothing to trust",
            workspace.display()
        );
        return Ok(0);
    }
    if trust.keys.is_empty() {
        println!(
            "{} sets no key that needs trust (nothing in it lowers safety, moves the provider \
             key or starts a program): nothing to record",
            trust.file.display()
        );
        return Ok(0);
    }
    store.trust(&trust.workspace, &trust.config_sha256)?;
    print!(
        "trusted {} (sha256 {}) for {}\nthese keys now apply, until the file changes:\n{}",
        trust.file.display(),
        &trust.config_sha256[..12],
        trust.workspace.display(),
        trust.listing()
    );
    println!(
        "recorded in {}; `latch trust --revoke` forgets it",
        store.path().display()
    );
    Ok(0)
}

/// The plain REPL's question: on a terminal, show the keys and read `y`
/// (trust this config) or `n` (ignore them for this run). Not on a
/// terminal, or at the end of input, the answer is no: nothing ever waits
/// for an answer that cannot come.
pub fn ask_on_terminal(trust: &WorkspaceTrust) -> bool {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return false;
    }
    eprintln!();
    for line in trust.question().lines() {
        eprintln!("{}", super::render::terminal_safe(line, 2_000));
    }
    loop {
        eprint!(
            "Trust this config? [y]es: apply them (asked again if the file changes) / \
             [n]o: ignore them for this run: "
        );
        let _ = std::io::stderr().flush();
        let line = match super::repl_input::read_answer() {
            Ok(Some(line)) => line,
            Ok(None) | Err(_) => return false,
        };
        match parse_answer(&line) {
            Some(answer) => return answer,
            None => eprintln!("answer y or n ({TRUST_FLAG} trusts it for one run)"),
        }
    }
}

/// The terminal's question about a resumed session's recorded endpoint
/// that nothing trusted names: yes resumes with it (and remembers it), no
/// or no terminal refuses. Asked on stderr before any screen starts.
pub fn ask_endpoint_on_terminal(unnamed: &super::resume::UnnamedEndpoint) -> bool {
    if !std::io::stdin().is_terminal() {
        return false;
    }
    eprintln!();
    for line in unnamed.question().lines() {
        eprintln!("{}", super::render::terminal_safe(line, 2_000));
    }
    loop {
        eprint!("Send your API key to this endpoint and resume? [y]es / [n]o: ");
        let _ = std::io::stderr().flush();
        let line = match super::repl_input::read_answer() {
            Ok(Some(line)) => line,
            Ok(None) | Err(_) => return false,
        };
        match parse_answer(&line) {
            Some(answer) => return answer,
            None => eprintln!("answer y or n (--base-url URL names it for one run)"),
        }
    }
}

/// `y`/`yes` → trust, `n`/`no` → not; anything else asks again.
pub fn parse_answer(line: &str) -> Option<bool> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(true),
        "n" | "no" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse() {
        assert_eq!(parse_answer("y\n"), Some(true));
        assert_eq!(parse_answer(" YES "), Some(true));
        assert_eq!(parse_answer("n"), Some(false));
        assert_eq!(parse_answer("maybe"), None);
        assert_eq!(parse_answer(""), None);
    }
}
