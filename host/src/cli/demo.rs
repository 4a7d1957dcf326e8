//! `latch demo`: a complete offline session on the embedded default engine.
//!
//! It creates a small project with a failing test in a temporary directory and
//! drives the real agent loop, tools, store and engine against a scripted
//! model that the local wire-format server speaks exactly as Anthropic's
//! Messages API does: read, edit, validate, complete. Then it prints the
//! transcript and the `/context` report. `latch demo team` (the
//! [`super::demo_team`] scenario) runs on the same rig ([`DemoRig`]).

use super::render;
use super::session_cmd::printer;
use super::setup::{Env, ProviderChoice, build_agent, new_session};
use crate::config::LoadedConfig;
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use latch_provider::{ProviderConfig, ProviderKind, RetryPolicy};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// The task the demo gives the agent.
pub const DEMO_TASK: &str =
    "`sh test.sh` fails. Find out why, fix it, and prove the fix before you complete.";

/// Files of the demo project.
pub fn write_project(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::write(
        dir.join("AGENTS.md"),
        "This project is plain POSIX sh. Prove every change with `sh test.sh`.\n",
    )?;
    std::fs::write(
        dir.join("src/math.sh"),
        "# Arithmetic helpers.\n\nadd() {\n  echo $(( $1 - $2 ))\n}\n",
    )?;
    std::fs::write(
        dir.join("test.sh"),
        "#!/bin/sh\n. ./src/math.sh\nresult=$(add 2 3)\nif [ \"$result\" = 5 ]; then\n  echo \"ok: add 2 3 = 5\"\nelse\n  echo \"FAIL: add 2 3 = $result, expected 5\"\n  exit 1\nfi\n",
    )?;
    Ok(())
}

/// The scripted model: what a capable model would do on the demo task.
pub fn demo_script() -> Script {
    let req = "sh test.sh passes";
    Script::new([
        ScriptedTurn::text("I'll record the goal and the proof it needs, then look at the code.")
            .with_tool_call("set_goal", r#"{"text":"Make `sh test.sh` pass"}"#)
            .with_tool_call("require_validation", format!(r#"{{"requirement":"{req}"}}"#))
            .with_tool_call("read_file", r#"{"path":"test.sh"}"#)
            .with_tool_call("read_file", r#"{"path":"src/math.sh"}"#),
        ScriptedTurn::text("First, confirm the failure.")
            .with_tool_call("validate", format!(r#"{{"requirement":"{req}","command":"sh test.sh"}}"#)),
        ScriptedTurn::text("`add` subtracts its arguments. Fixing the operator.")
            .with_tool_call("add_hypothesis", r#"{"text":"add() uses - instead of +"}"#)
            .with_tool_call(
                "edit_file",
                r#"{"path":"src/math.sh","old_string":"echo $(( $1 - $2 ))","new_string":"echo $(( $1 + $2 ))"}"#,
            ),
        ScriptedTurn::text("Validating after the last edit.")
            .with_tool_call("validate", format!(r#"{{"requirement":"{req}","command":"sh test.sh"}}"#)),
        ScriptedTurn::tool_call("complete", r#"{"summary":"add() used subtraction; it now adds. `sh test.sh` passes at the current workspace generation."}"#),
        ScriptedTurn::text("Done: `add` now adds, `sh test.sh` passes, and the kernel certified completion."),
    ])
}

/// The scenarios of `latch demo`, beyond the default single-agent one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// A parent delegates two fixes to two children working in parallel
    /// (one fails once and recovers), waits, and proves the result.
    Team,
}

/// `latch demo [SCENARIO]`.
pub fn run_scenario(
    scenario: Option<Scenario>,
    keep: bool,
    store: Option<&Path>,
) -> anyhow::Result<i32> {
    match scenario {
        None => demo(keep, store),
        Some(Scenario::Team) => super::demo_team::demo_team(keep, store),
    }
}

/// What every offline demo runs on: a project in a temporary directory,
/// the scripted model served over HTTP on its own I/O runtime, the store,
/// the embedded default engine and the provider pointed at the server.
pub struct DemoRig {
    /// The project directory (removed on drop unless kept).
    pub dir: tempfile::TempDir,
    /// Its canonical path.
    pub workspace: std::path::PathBuf,
    /// The I/O runtime the server runs on.
    pub io: tokio::runtime::Runtime,
    /// The scripted model.
    pub server: FakeServer,
    /// Where the store lives.
    pub store_path: std::path::PathBuf,
    /// Workspace, store and (default) configuration.
    pub env: Env,
    /// The provider, pointed at the server's Anthropic endpoint.
    pub provider: ProviderChoice,
}

impl DemoRig {
    /// Write the project with `write`, start `script`, open the store (in
    /// the project unless `store` names one).
    pub fn start(
        write: impl FnOnce(&Path) -> std::io::Result<()>,
        script: Script,
        store: Option<&Path>,
    ) -> anyhow::Result<DemoRig> {
        let dir = tempfile::Builder::new().prefix("latch-demo-").tempdir()?;
        let workspace = std::fs::canonicalize(dir.path())?;
        write(&workspace)?;
        // The scripted model runs on its own I/O threads for the whole demo.
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let server = io.block_on(FakeServer::start(script))?;
        let store_path = match store {
            Some(path) => path.to_path_buf(),
            None => latch_kernel::default_store_path(&workspace),
        };
        let env = Env {
            workspace: workspace.clone(),
            // `Store::open` creates the parent directories.
            store: Arc::new(latch_kernel::Store::open(&store_path)?),
            // The demo always runs on the embedded default engine.
            config: LoadedConfig::default(),
            max_steps: None,
            // The default sandbox (workspace-write) and approval (on-request).
            approval: None,
            sandbox: None,
        };
        let provider = ProviderChoice {
            kind: ProviderKind::Anthropic,
            model: "claude-sonnet-4-5".into(),
            config: ProviderConfig {
                base_url: Some(server.anthropic_base_url()),
                api_key: Some("demo-key".into()),
                retry: RetryPolicy::default(),
                ..ProviderConfig::new(ProviderKind::Anthropic)
            },
            max_tokens: 4_096,
            server: Default::default(),
        };
        Ok(DemoRig {
            dir,
            workspace,
            io,
            server,
            store_path,
            env,
            provider,
        })
    }
}

/// Run the demo; `keep` leaves the project directory in place, and `store`
/// (`--store PATH`) records the session there instead of in the project.
pub fn demo(keep: bool, store: Option<&Path>) -> anyhow::Result<i32> {
    let started = Instant::now();
    let DemoRig {
        dir,
        workspace,
        io,
        server,
        store_path,
        env,
        provider,
    } = DemoRig::start(write_project, demo_script(), store)?;
    let session = new_session(&env, &provider)?;
    println!("Latch demo — workspace {}", workspace.display());
    println!(
        "session {} · engine builtin:continuity · scripted model over the Anthropic wire format at {}",
        session.id,
        server.anthropic_base_url()
    );
    let mut agent = build_agent(&env, session, &provider, "demo")?;
    let mut out = printer(false);
    let outcome = agent.run_turn(DEMO_TASK, &mut out);
    let report = agent.context_report();
    let figures = agent.provider_figures();
    let requests = server.requests().len();
    io.block_on(server.shutdown());
    let outcome = outcome?;
    let fixed = std::fs::read_to_string(workspace.join("src/math.sh"))?;
    println!("\n── /context ──");
    print!("{}", render::report_table(&report?));
    print!("{}", render::provider_table(&figures?));
    println!(
        "\n{} model requests, {} steps; src/math.sh now reads `{}`",
        requests,
        outcome.steps,
        fixed
            .lines()
            .find(|l| l.contains("echo"))
            .unwrap_or("")
            .trim()
    );
    println!(
        "store: {} ({} events)",
        store_path.display(),
        agent.store().total_event_count()?
    );
    if keep {
        let kept = dir.keep();
        println!("project kept at {}", kept.display());
    }
    println!("demo finished in {:.1} s", started.elapsed().as_secs_f64());
    Ok(0)
}

/// How far apart `latch demo --tui` streams the scripted model's events.
pub const DEMO_PACE: std::time::Duration = std::time::Duration::from_millis(120);

/// `latch demo --tui`: the demo played in the terminal UI, which stays open
/// on the finished session until the user quits (`q` or `/exit`); `team`
/// plays the parent and its two children, with the agents and the GROUP
/// block in the sidebar.
pub fn demo_tui(
    scenario: Option<Scenario>,
    keep: bool,
    store: Option<&Path>,
    instant: bool,
) -> anyhow::Result<i32> {
    let team = matches!(scenario, Some(Scenario::Team));
    // Played at a pace a person can follow, unless asked to play at once.
    let paced = |script: Script| {
        if instant {
            script
        } else {
            script.with_pace(DEMO_PACE)
        }
    };
    // The team demo: its children run on workers of their own; their
    // reports, the agent tree and the GROUP block reach the screen from the
    // log as they commit.
    let (rig, task, name) = if team {
        (
            DemoRig::start(
                super::demo_team::write_team_project,
                paced(super::demo_team::team_script()),
                store,
            )?,
            super::demo_team::TEAM_TASK,
            "demo team",
        )
    } else {
        (
            DemoRig::start(write_project, paced(demo_script()), store)?,
            DEMO_TASK,
            "demo",
        )
    };
    let session = new_session(&rig.env, &rig.provider)?;
    let title = format!(
        "{name} {} · scripted {} · builtin:continuity",
        session.id, rig.provider.model
    );
    let agent = build_agent(&rig.env, session, &rig.provider, "demo")?;
    let code = super::tui_cmd::open(
        agent,
        rig.env.workspace_key(),
        title,
        Some(task.to_string()),
        true,
        rig.env.config.config.price_table(),
    )?;
    rig.io.block_on(rig.server.shutdown());
    if keep {
        println!("project kept at {}", rig.dir.keep().display());
    }
    Ok(code)
}
