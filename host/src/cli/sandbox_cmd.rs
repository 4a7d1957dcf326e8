//! `latch sandbox check`: what this machine can enforce (the Landlock ABI,
//! network isolation), the configured modes, and the self-test — a write
//! outside the workspace, a read of `~/.ssh`, a TCP connect to 127.0.0.1, a
//! Unix socket outside the workspace, `TIOCSTI`, the controlling terminal
//! and a `setsid` child left behind, each run as a probe process (`latch
//! sandbox probe`, hidden) inside a `workspace-write` sandbox and each of
//! which must be refused (see [`latch_sandbox::check`]).

use super::GlobalArgs;
use crate::config::Config;
use clap::Subcommand;
use latch_sandbox::check::{self, ProbeOp};
use std::path::Path;
use std::process::Command;

/// `latch sandbox ...`.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Print what this machine can enforce and run the self-test (a write
    /// outside the workspace, a read of ~/.ssh, a TCP connect to 127.0.0.1,
    /// a Unix socket outside the workspace, TIOCSTI, the controlling
    /// terminal, a setsid child outliving its command: each must be
    /// refused); exits 1 when one is not.
    #[command(after_help = "Example:\n  latch sandbox check")]
    Check,
    /// One probe of the self-test (run by `check` inside the sandbox).
    #[command(hide = true)]
    Probe {
        /// write, read, connect, unix-connect, tiocsti,
        /// controlling-terminal or survivor.
        op: String,
        /// The path or `host:port`.
        target: String,
    },
}

/// Run a `latch sandbox` command.
pub fn run(global: &GlobalArgs, workspace: &Path, cmd: SandboxCommand) -> anyhow::Result<i32> {
    match cmd {
        SandboxCommand::Probe { op, target } => {
            let Some(op) = ProbeOp::parse(&op) else {
                anyhow::bail!(
                    "unknown probe `{op}`: use write, read, connect, unix-connect, tiocsti, \
                     controlling-terminal or survivor"
                );
            };
            Ok(match check::probe(op, &target) {
                Ok(()) => {
                    println!("succeeded");
                    0
                }
                Err(e) => {
                    println!("{e}");
                    1
                }
            })
        }
        SandboxCommand::Check => check_cmd(global, workspace),
    }
}

fn check_cmd(global: &GlobalArgs, workspace: &Path) -> anyhow::Result<i32> {
    let caps = check::capabilities();
    match &caps.landlock_abi {
        Ok(0) => println!("Landlock:          not offered by this kernel"),
        Ok(v) => println!("Landlock:          ABI {v} (file-system rules are enforced)"),
        Err(e) => println!("Landlock:          unavailable: {e}"),
    }
    match &caps.namespaces {
        Ok(()) => println!(
            "namespaces:        available (unprivileged user, network, mount and PID namespaces: \
             no network, each command killed whole)"
        ),
        Err(e) => println!("namespaces:        unavailable: {e}"),
    }
    match Config::load(workspace, global.config.as_deref()) {
        Ok(loaded) => {
            let c = &loaded.config;
            println!(
                "configured:        sandbox {}, network {}, approval {}",
                global.sandbox.unwrap_or(c.sandbox.mode),
                if c.sandbox.network { "on" } else { "off" },
                global.approval.unwrap_or(c.permissions.approval)
            );
        }
        Err(e) => println!("configured:        the configuration is invalid: {e}"),
    }
    if !matches!(caps.landlock_abi, Ok(v) if v > 0) {
        println!(
            "\nread-only and workspace-write cannot be enforced here; Latch refuses to run \
             commands in them. Use --sandbox full-access to run commands unsandboxed, knowingly."
        );
        return Ok(1);
    }
    let scratch = tempfile::tempdir()?;
    let real_ssh = dirs::home_dir().filter(|h| h.join(".ssh").exists());
    let stand_in = scratch.path().join("home");
    let home = match &real_ssh {
        Some(h) => h.clone(),
        None => {
            std::fs::create_dir_all(stand_in.join(".ssh"))?;
            std::fs::write(stand_in.join(".ssh/id_ed25519"), "stand-in key\n")?;
            stand_in.clone()
        }
    };
    let ws = scratch.path().join("workspace");
    std::fs::create_dir_all(&ws)?;
    let exe = std::env::current_exe()?;
    let probe = |op: ProbeOp, target: &str| {
        let mut c = Command::new(&exe);
        c.args(["sandbox", "probe", op.name(), target]);
        c
    };
    println!("\nself-test in workspace-write (network off):");
    let results = match check::self_test(&ws, Some(&home), &probe) {
        Ok(r) => r,
        Err(e) => {
            println!("  could not set up the sandbox: {e}");
            return Ok(1);
        }
    };
    let mut all = true;
    for r in &results {
        all &= r.refused;
        println!(
            "  {} {:<42} {}: {}",
            if r.refused {
                "✓ refused"
            } else {
                "✗ ALLOWED"
            },
            r.what,
            r.target,
            r.detail.lines().last().unwrap_or_default()
        );
    }
    if real_ssh.is_none() {
        println!(
            "  (~/.ssh does not exist here: the read probe used a stand-in home with the same rules)"
        );
    }
    println!(
        "{}",
        if all {
            "\nthe sandbox holds on this machine"
        } else {
            "\nthe sandbox does NOT hold on this machine: do not rely on it"
        }
    );
    Ok(if all { 0 } else { 1 })
}
