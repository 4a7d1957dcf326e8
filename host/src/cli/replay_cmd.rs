//! `latch engine replay`: a recorded session (from the workspace's store,
//! opened read-only, or from a trace) played again through each engine,
//! over [`crate::compare::replay`].

use super::GlobalArgs;
use super::compare_cmd::parse_tokens;
use super::read_only;
use crate::compare::recording::{Recording, from_store, open_session};
use crate::compare::replay::{ReplayEngine, ReplayOptions, replay};
use crate::compare::trace;
use crate::config::Config;
use latch_conformance::compare::replay::ReplayReport;
use std::path::Path;

/// `latch engine replay` arguments.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// A session id or unique prefix in the workspace's store, or a trace
    /// file (`latch export SESSION --trace FILE`).
    #[arg(value_name = "SESSION|TRACE")]
    pub session: String,
    /// Engines to replay through: `builtin:continuity`,
    /// `baseline:summarize`, or a path to a component; `ENGINE@{JSON}`
    /// configures an engine.
    #[arg(required = true, value_name = "ENGINE")]
    pub engines: Vec<String>,
    /// Replay the session's child agents too.
    #[arg(long)]
    pub tree: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also print each request's tokens, engine by engine.
    #[arg(long)]
    pub requests: bool,
    /// Ask every engine with this context window instead of the recorded
    /// one (e.g. `32k`).
    #[arg(long, value_name = "TOKENS")]
    pub window: Option<String>,
    /// ... and this reserve (e.g. `2k`).
    #[arg(long, value_name = "TOKENS")]
    pub reserve_tokens: Option<String>,
}

/// True when `arg` names a trace file rather than a session.
pub fn is_trace(arg: &str) -> bool {
    Path::new(arg).is_file() || arg.ends_with(".jsonl") || arg.contains('/')
}

/// The recording `arg` names: a trace file, or a session of the
/// workspace's store (with its descendants when `tree`).
pub fn recording(
    global: &GlobalArgs,
    workspace: &Path,
    arg: &str,
    tree: bool,
) -> anyhow::Result<Recording> {
    if is_trace(arg) {
        let mut r = trace::read(Path::new(arg))?;
        if !tree {
            r.sessions.truncate(1);
        }
        return Ok(r);
    }
    let (store, key) = read_only::open(global, workspace)?;
    let record = open_session(&store, &key, Some(arg))?;
    Ok(from_store(&store, &record, tree)?)
}

/// Replay `recording` through `engines` and print the report; exit code 1
/// when an engine had a view refused or failed.
pub fn print_replay(
    workspace: &Path,
    config: &Config,
    recording: &Recording,
    engines: &[String],
    options: &ReplayOptions,
    json: bool,
    per_request: bool,
) -> anyhow::Result<(ReplayReport, i32)> {
    let limits = config.limits();
    let engines = engines
        .iter()
        .map(|spec| ReplayEngine::from_spec(spec, workspace, &limits))
        .collect::<Result<Vec<_>, _>>()?;
    let report = replay(recording, &engines, options, &mut |_| {})?;
    if !json {
        print!("{}", report.table());
        if per_request {
            println!();
            print!("{}", report.per_request_table());
        }
    }
    let clean = report
        .engines
        .iter()
        .all(|e| e.summary().refused + e.summary().failed == 0);
    Ok((report, if clean { 0 } else { 1 }))
}

/// `latch engine replay`.
pub fn run(global: &GlobalArgs, workspace: &Path, args: &ReplayArgs) -> anyhow::Result<i32> {
    let config = Config::load(workspace, global.config.as_deref())?.config;
    let recording = recording(global, workspace, &args.session, args.tree)?;
    let options = ReplayOptions {
        window_tokens: args
            .window
            .as_deref()
            .map(parse_tokens)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--window: {e}"))?,
        reserve_tokens: args
            .reserve_tokens
            .as_deref()
            .map(parse_tokens)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--reserve-tokens: {e}"))?,
        prices: Some(config.price_table()),
    };
    let (report, code) = print_replay(
        workspace,
        &config,
        &recording,
        &args.engines,
        &options,
        args.json,
        args.requests,
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    if code != 0 {
        eprintln!("some views were refused or failed (see above)");
    }
    Ok(code)
}
