//! The `latch` command line: argument parsing (clap) and the commands' entry
//! points. Every command runs on the same store and configuration.

pub mod engine_cmd;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Latch: a coding agent whose context management is a swappable, sandboxed
/// WebAssembly component.
#[derive(Debug, Parser)]
#[command(name = "latch", version, about, long_about = None, after_help = EXAMPLES)]
pub struct Cli {
    /// Options every command shares.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command (default: an interactive session).
    #[command(subcommand)]
    pub command: Option<Command>,
}

const EXAMPLES: &str = "Examples:
  latch demo                               an offline session on the embedded engine
  latch run \"make the failing test pass\"   one task, non-interactive
  latch engine info builtin:continuity      what the default engine implements
  latch engine check my_engine.wasm         load, sandbox and exercise an engine";

/// Options shared by every command.
#[derive(Debug, Args, Clone, Default)]
pub struct GlobalArgs {
    /// The workspace (default: the current directory).
    #[arg(long, short = 'C', global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// The event store (default: `.latch/latch.db` in the workspace).
    #[arg(long, global = true, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// A config file to use instead of the user and workspace files.
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The model name.
    #[arg(long, global = true)]
    pub model: Option<String>,
    /// The provider: anthropic, openai or openai-compatible.
    #[arg(long, global = true)]
    pub provider: Option<String>,
    /// The provider's base URL (also OPENAI_BASE_URL / ANTHROPIC_BASE_URL).
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect and check context engines.
    #[command(subcommand)]
    Engine(EngineCommand),
}

/// `latch engine ...`.
#[derive(Debug, Subcommand)]
pub enum EngineCommand {
    /// Print an engine's world, contract version, exports, imports and the
    /// sandbox limits it will run under.
    #[command(after_help = "Examples:\n  latch engine info builtin:continuity\n  latch engine info target/wasm32-wasip2/release/my_engine.wasm")]
    Info {
        /// `builtin:NAME` or a path to a component.
        engine: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Load an engine in the sandbox and exercise it against generated
    /// sessions; exits non-zero when a required check fails.
    #[command(after_help = "Examples:\n  latch engine check builtin:continuity\n  latch engine check my_engine.wasm --json")]
    Check {
        /// `builtin:NAME` or a path to a component.
        engine: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Run the parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    let workspace = match &cli.global.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir()?,
    };
    match cli.command {
        Some(Command::Engine(EngineCommand::Info { engine, json })) => {
            engine_cmd::info(&cli.global, &workspace, &engine, json)
        }
        Some(Command::Engine(EngineCommand::Check { engine, json })) => {
            engine_cmd::check(&cli.global, &workspace, &engine, json)
        }
        None => {
            anyhow::bail!("interactive sessions are not available in this build; see `latch --help`")
        }
    }
}
