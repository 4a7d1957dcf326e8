//! The `latch` command line: argument parsing (clap) and the commands' entry
//! points. Every command runs on the same store and configuration.

pub mod acp_cmd;
pub mod approve;
pub mod clipboard;
pub mod compare_cmd;
pub mod demo;
pub mod demo_team;
pub mod engine_cmd;
pub mod engine_new;
pub mod git_cmd;
pub mod group_cmd;
pub mod integrations;
pub mod latch_dir;
pub mod mcp_cmd;
pub mod render;
pub mod repl_input;
pub mod resume;
pub mod rewind_cmd;
pub mod sandbox_cmd;
pub mod serve_cmd;
pub mod serve_token;
pub mod session_cmd;
pub mod sessions_cmd;
pub mod setup;
pub mod skills_cmd;
pub mod trust_cmd;
pub mod tui_approve;
pub mod tui_cmd;

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
    /// Stop a turn after N model requests (default: no cap; also `[agent]
    /// max_steps`).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_steps: Option<u64>,
    /// When to ask before the agent acts: never, on-request, untrusted or
    /// edits (default: `[permissions] approval`, else on-request).
    #[arg(long, global = true, value_name = "MODE")]
    pub approval: Option<latch_sandbox::ApprovalMode>,
    /// What commands may touch: read-only, workspace-write or full-access
    /// (default: `[sandbox] mode`, else workspace-write).
    #[arg(long, global = true, value_name = "MODE")]
    pub sandbox: Option<latch_sandbox::SandboxMode>,
    /// Trust the workspace's `.latch/config.toml` for this run: apply its
    /// keys that lower safety, move the provider key or start programs
    /// (`latch trust` records it instead).
    #[arg(long, global = true)]
    pub trust_workspace: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// An interactive session in the workspace (the default command).
    #[command(
        after_help = "Slash commands: /help  /context  /compact  /recall <query>  /group  /exit, and custom ones from .latch/commands/*.md\n\nExamples:\n  latch\n  latch --provider openai-compatible --base-url http://localhost:11434/v1 --model qwen2.5-coder chat"
    )]
    Chat {
        /// Keep the line interface even on a terminal (the default on a
        /// terminal is the full-screen UI).
        #[arg(long)]
        plain: bool,
    },
    /// Run one task non-interactively; exits non-zero if the turn fails.
    #[command(
        after_help = "Examples:\n  latch run \"make the failing test pass\"\n  latch run --json \"add a --verbose flag\" > events.jsonl"
    )]
    Run {
        /// The task.
        task: String,
        /// Stream the durable events as JSON lines instead of a transcript.
        #[arg(long)]
        json: bool,
        /// Attach an image (PNG, JPEG, GIF or WebP) to the task; repeatable.
        #[arg(long, value_name = "FILE")]
        image: Vec<PathBuf>,
    },
    /// List a session's user messages, or put the files Latch changed back
    /// to their state before one of them (`--to SEQ`). Files changed outside
    /// Latch since are shown and left alone; history is never deleted.
    #[command(after_help = "Examples:\n  latch rewind 01jd2k\n  latch rewind 01jd2k --to 42")]
    Rewind(rewind_cmd::RewindArgs),
    /// Show which git repository Latch's own git (fingerprint, snapshots,
    /// checkpoints) uses for a session: the one its workspace was in when
    /// the session started. `--adopt` uses the one there now (a repository
    /// a command created is never used otherwise).
    #[command(after_help = "Examples:\n  latch git\n  latch git 01jd2k --adopt")]
    Git(git_cmd::GitArgs),
    /// Resume a session (by id or unique prefix, or the latest one).
    #[command(after_help = "Examples:\n  latch resume --last\n  latch resume 01jd2k")]
    Resume {
        /// Session id or prefix.
        session: Option<String>,
        /// Resume the latest session of the workspace.
        #[arg(long, conflicts_with = "session")]
        last: bool,
        /// Keep the line interface even on a terminal.
        #[arg(long)]
        plain: bool,
    },
    /// List the workspace's sessions (deleted ones are omitted); with
    /// `--store`, every session in that store and its workspace.
    #[command(
        after_help = "Examples:\n  latch sessions\n  latch -C ~/src/project sessions\n  latch sessions --json          # with each session's cost\n  latch sessions --store /tmp/demo.db"
    )]
    Sessions {
        /// Print JSON (with each session's cost).
        #[arg(long)]
        json: bool,
    },
    /// Manage session history.
    #[command(subcommand)]
    History(HistoryCommand),
    /// The `/context` report for a session's next request, without calling
    /// the provider.
    #[command(after_help = "Examples:\n  latch context\n  latch context 01jd2k --json")]
    Context {
        /// Session id or prefix (default: the latest).
        session: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reset a session's working memory (`/compact`); nothing is deleted.
    #[command(after_help = "Examples:\n  latch compact\n  latch compact 01jd2k")]
    Compact {
        /// Session id or prefix (default: the latest).
        session: Option<String>,
    },
    /// Recall original events of a session by full-text search.
    #[command(after_help = "Example:\n  latch recall 01jd2k \"E0425 unresolved name\"")]
    Recall {
        /// Session id or prefix.
        session: String,
        /// Plain words; every word must match.
        query: String,
        /// Most events returned.
        #[arg(long, default_value_t = 10)]
        limit: u32,
    },
    /// A complete offline session on the embedded default engine, with a
    /// scripted model served in the provider's exact wire format.
    #[command(
        after_help = "Examples:\n  latch demo\n  latch demo team      # a parent and two children working in parallel\n  latch demo --keep    # keep the demo project to look at\n  latch demo --store /tmp/demo.db    # record the session in this store"
    )]
    Demo {
        /// The scenario (default: one agent fixes a failing test).
        #[arg(value_enum)]
        scenario: Option<demo::Scenario>,
        /// Keep the demo project directory.
        #[arg(long)]
        keep: bool,
        /// Play the demo in the terminal UI; it stays open on the finished
        /// session until you quit (`q` or `/exit`).
        #[arg(long)]
        tui: bool,
        /// With `--tui`: play at once instead of at a pace to watch.
        #[arg(long, requires = "tui")]
        instant: bool,
    },
    /// Inspect and check context engines.
    #[command(subcommand)]
    Engine(EngineCommand),
    /// The command sandbox: what this machine can enforce.
    #[command(subcommand)]
    Sandbox(sandbox_cmd::SandboxCommand),
    /// A session's agent group: members and their state, tasks with
    /// holder, status and dependencies, pending messages, last activity.
    #[command(
        after_help = "Examples:\n  latch group\n  latch group 01jd2k\n  latch group 01jd2k3m4n5p6q --store postgres://latch@db/groups\n  latch group join 01jd2k3m4n5p6q --store postgres://latch@db/groups --role reviewer",
        args_conflicts_with_subcommands = true
    )]
    Group {
        /// Session id or prefix (the root or any child; default: the
        /// latest); with a shared store, the group's id (its lead's session).
        session: Option<String>,
        /// Join a group from this host.
        #[command(subcommand)]
        action: Option<GroupAction>,
    },
    /// The Agent Skills a session here would see, and the capped list that
    /// goes into its context.
    #[command(after_help = "Examples:\n  latch skills\n  latch skills --json")]
    Skills {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// MCP servers (`[mcp.servers.NAME]`).
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Trust the workspace's `.latch/config.toml`: its keys that lower
    /// safety, change where the provider key goes or start programs apply
    /// from now on, until the file changes.
    #[command(
        after_help = "Examples:\n  latch trust            # show what the config sets, and trust it\n  latch trust --revoke   # forget it: those keys are ignored again"
    )]
    Trust {
        /// Forget the recorded trust of this workspace.
        #[arg(long)]
        revoke: bool,
    },
    /// Serve the workspace's sessions to a browser: HTTP API, SSE, the page.
    #[command(
        after_help = "Prints http://127.0.0.1:PORT/#token=... ; open it in a browser.\n\nExamples:\n  latch serve\n  latch serve --port 0\n  ssh -L 7420:127.0.0.1:7420 host   # then open the printed URL locally"
    )]
    Serve(serve_cmd::ServeArgs),
    /// Speak the Agent Client Protocol on stdio: an editor (Zed, or any
    /// ACP client) drives Latch sessions with its own UI.
    #[command(
        after_help = "Started by the editor, not by hand. In Zed's settings.json:\n  \"agent_servers\": { \"Latch\": { \"command\": \"latch\", \"args\": [\"acp\"] } }"
    )]
    Acp,
}

/// `latch mcp ...`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start every configured MCP server as a session would, and show its
    /// state, start-up time and tools.
    #[command(after_help = "Examples:\n  latch mcp list\n  latch mcp list --json")]
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `latch history ...`.
#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Delete a session from history: listing and resume omit it and its
    /// children; its events, artifacts and mutation evidence remain.
    #[command(after_help = "Example:\n  latch history delete 01jd2k")]
    Delete {
        /// Session id or prefix.
        session: String,
    },
}

/// `latch engine ...`.
#[derive(Debug, Subcommand)]
pub enum EngineCommand {
    /// Print an engine's world, contract version, exports, imports and the
    /// sandbox limits it will run under.
    #[command(
        after_help = "Examples:\n  latch engine info builtin:continuity\n  latch engine info target/wasm32-wasip2/release/my_engine.wasm"
    )]
    Info {
        /// `builtin:NAME` or a path to a component.
        engine: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run the conformance suite against an engine in the sandbox: contract,
    /// budget, protocol, determinism, epochs, recall, config, sandbox and
    /// performance cases; exits non-zero when a required case fails.
    #[command(
        after_help = "Examples:\n  latch engine check builtin:continuity\n  latch engine check my_engine.wasm --json\n  latch engine check my_engine.wasm --config-json '{\"max_events\": 500}' --deadline-ms 1000"
    )]
    Check {
        /// `builtin:NAME` or a path to a component.
        engine: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Engine configuration (a JSON object) applied to every instance.
        #[arg(long, value_name = "JSON")]
        config_json: Option<String>,
        /// Per-call deadline in milliseconds (default: [engine.limits]).
        #[arg(long, value_name = "MS")]
        deadline_ms: Option<u64>,
    },
    /// Play the same scripted sessions through each engine and the real
    /// agent loop against the local wire-format server, and print requests,
    /// extra model calls, cost per step, prefix ratios, peak request size,
    /// rotations and planted-fact survival side by side.
    #[command(
        after_help = "Examples:\n  latch engine compare builtin:continuity baseline:summarize\n  latch engine compare builtin:continuity baseline:summarize my_engine.wasm --session steps80 --window 32k\n  latch engine compare builtin:continuity baseline:summarize --steps 20 --window 24k --json"
    )]
    Compare(compare_cmd::CompareArgs),
    /// Scaffold an engine project in Rust, Python, JavaScript or C that
    /// builds as-is and passes `latch engine check`.
    #[command(
        after_help = "Examples:\n  latch engine new my-engine --lang python\n  latch engine new my-engine --lang c --dir engines/my-engine\n  latch engine new my-engine --lang rust --sdk ../latch/sdk"
    )]
    New {
        /// The engine's name: lowercase letters, digits, `-` and `_`.
        name: String,
        /// The language.
        #[arg(long, value_enum)]
        lang: engine_new::Lang,
        /// Where to create the project (default: `./NAME`).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The SDK a Rust engine depends on (default: the one this `latch`
        /// was built from).
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
}

/// The `latch` binary after logging is set up: parse `args` (the first is
/// the program name), run the command and return the exit code. An error is
/// printed escaped line by line: it may carry an engine's words.
pub fn main_with(args: Vec<String>) -> i32 {
    use clap::Parser;
    let cli = Cli::parse_from(args);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let text = format!("{e:#}");
            eprintln!(
                "error: {}",
                render::error_text(&text, 4 * render::MAX_PRINTED_CHARS)
            );
            2
        }
    }
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
        Some(Command::Engine(EngineCommand::Check {
            engine,
            json,
            config_json,
            deadline_ms,
        })) => engine_cmd::check(
            &cli.global,
            &workspace,
            &engine,
            json,
            config_json.as_deref(),
            deadline_ms,
        ),
        Some(Command::Engine(EngineCommand::Compare(args))) => {
            compare_cmd::compare(&cli.global, &workspace, args)
        }
        Some(Command::Engine(EngineCommand::New {
            name,
            lang,
            dir,
            sdk,
        })) => engine_new::run(&name, lang, dir.as_deref(), sdk.as_deref()),
        None => interactive(&cli.global, &workspace, None, false),
        Some(Command::Chat { plain }) => interactive(&cli.global, &workspace, None, plain),
        Some(Command::Run { task, json, image }) => {
            session_cmd::run(&cli.global, &workspace, &task, json, &image)
        }
        Some(Command::Rewind(args)) => rewind_cmd::run(&cli.global, &workspace, &args),
        Some(Command::Git(args)) => git_cmd::run(&cli.global, &workspace, &args),
        Some(Command::Resume {
            session,
            last,
            plain,
        }) => {
            let selector = if last { None } else { session };
            interactive(&cli.global, &workspace, Some(selector), plain)
        }
        Some(Command::Sessions { json }) => sessions_cmd::sessions(&cli.global, &workspace, json),
        Some(Command::History(HistoryCommand::Delete { session })) => {
            session_cmd::history_delete(&cli.global, &workspace, &session)
        }
        Some(Command::Context { session, json }) => {
            session_cmd::context(&cli.global, &workspace, session.as_deref(), json)
        }
        Some(Command::Compact { session }) => {
            session_cmd::compact(&cli.global, &workspace, session.as_deref())
        }
        Some(Command::Recall {
            session,
            query,
            limit,
        }) => session_cmd::recall(&cli.global, &workspace, &session, &query, limit),
        Some(Command::Demo {
            scenario,
            keep,
            tui: false,
            ..
        }) => demo::run_scenario(scenario, keep, cli.global.store.as_deref()),
        Some(Command::Demo {
            scenario,
            keep,
            tui: true,
            instant,
        }) => demo::demo_tui(scenario, keep, cli.global.store.as_deref(), instant),
        Some(Command::Sandbox(cmd)) => sandbox_cmd::run(&cli.global, &workspace, cmd),
        Some(Command::Group { session, action }) => {
            // `--store postgres://…` names the shared group store; a path
            // stays the local event store.
            let (global, shared) = group_cmd::split_store(&cli.global);
            match action {
                Some(GroupAction::Join {
                    group_id,
                    role,
                    task,
                }) => group_cmd::join(
                    &global,
                    &workspace,
                    &group_id,
                    shared.as_deref(),
                    &role,
                    task.as_deref(),
                ),
                None => group_cmd::group_shared(
                    &global,
                    &workspace,
                    session.as_deref(),
                    shared.as_deref(),
                ),
            }
        }
        Some(Command::Skills { json }) => skills_cmd::skills(&cli.global, &workspace, json),
        Some(Command::Mcp(McpCommand::List { json })) => {
            mcp_cmd::list(&cli.global, &workspace, json)
        }
        Some(Command::Serve(args)) => serve_cmd::run(&cli.global, &workspace, &args),
        Some(Command::Acp) => acp_cmd::run(&cli.global),
        Some(Command::Trust { revoke }) => trust_cmd::run(&cli.global, &workspace, revoke),
    }
}

/// An interactive session: the terminal UI on a terminal, the line REPL
/// with `--plain` or when stdin or stdout is not a terminal.
fn interactive(
    global: &GlobalArgs,
    workspace: &std::path::Path,
    resume: Option<Option<String>>,
    plain: bool,
) -> anyhow::Result<i32> {
    if plain || !tui_cmd::on_terminal() {
        session_cmd::chat(global, workspace, resume)
    } else {
        tui_cmd::chat(global, workspace, resume)
    }
}

/// `latch group join`: agent groups across hosts.
#[derive(Debug, clap::Subcommand)]
pub enum GroupAction {
    /// Join the group `<group-id>` (its lead's session id) as a new member
    /// session on this host, through a shared group store, and work its
    /// task list (claim, do, complete) until nothing is ready; it leaves
    /// the group when its turn ends.
    Join {
        /// The group's id: its lead's session id.
        group_id: String,
        /// The member's role.
        #[arg(long, default_value = "worker")]
        role: String,
        /// More for the member to do besides the task list.
        #[arg(long, value_name = "TEXT")]
        task: Option<String>,
    },
}
