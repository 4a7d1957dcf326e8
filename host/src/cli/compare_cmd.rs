//! `latch engine compare`: the command line over [`crate::compare`].

use super::GlobalArgs;
use crate::compare::{CompareOptions, run_compare};
use crate::config::Config;
use latch_conformance::compare::SessionKind;
use std::path::Path;

/// The context windows compared by default.
pub const DEFAULT_WINDOWS: [u64; 3] = [32_000, 128_000, 256_000];

/// `latch engine compare` arguments.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Engines to compare: `builtin:continuity`, `baseline:summarize`, or a
    /// path to a component; `ENGINE@{JSON}` configures an engine, e.g.
    /// `builtin:continuity@{"rotation":"cost"}`.
    #[arg(required = true, value_name = "ENGINE")]
    pub engines: Vec<String>,
    /// Sessions to play (repeatable; default: both): `steps80`, `mixed500`.
    #[arg(long = "session", value_name = "NAME")]
    pub sessions: Vec<String>,
    /// Context windows, comma-separated, e.g. `32k,256k` (default:
    /// 32k,128k,256k).
    #[arg(long = "window", value_name = "TOKENS", value_delimiter = ',')]
    pub windows: Vec<String>,
    /// Play each session with this many tool steps instead of its full
    /// length (at least 6).
    #[arg(long, value_name = "N")]
    pub steps: Option<usize>,
    /// Reserve this many tokens instead of the model's default.
    #[arg(long, value_name = "TOKENS")]
    pub reserve_tokens: Option<u64>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Replay these traces (`latch export SESSION --trace FILE`) through
    /// the engines instead of playing the scripted sessions (repeatable;
    /// every session a trace carries is replayed; with --window, at each
    /// window instead of the recorded one).
    #[arg(long = "trace", value_name = "FILE", conflicts_with_all = ["sessions", "steps", "save_traces"])]
    pub traces: Vec<std::path::PathBuf>,
    /// Write each run's session as a trace into DIR
    /// (`SESSION-WINDOW-ENGINE.jsonl`), to replay later or share.
    #[arg(long, value_name = "DIR")]
    pub save_traces: Option<std::path::PathBuf>,
}

/// Parse `32k`, `1.5k`, `1m` or `32000` as a token count.
pub fn parse_tokens(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let (number, scale) = match t.strip_suffix('k') {
        Some(n) => (n, 1_000.0),
        None => match t.strip_suffix('m') {
            Some(n) => (n, 1_000_000.0),
            None => (t.as_str(), 1.0),
        },
    };
    match number.parse::<f64>() {
        Ok(n) if n > 0.0 && n.is_finite() => Ok((n * scale).round() as u64),
        _ => Err(format!(
            "`{text}` is not a token count; write it as 32k, 128000 or 1m"
        )),
    }
}

/// `latch engine compare --trace`: each trace replayed through the
/// engines (at each `--window`, or at its recorded budget). Exit code 1
/// when an engine had a view refused or failed.
fn compare_traces(workspace: &Path, config: &Config, args: &CompareArgs) -> anyhow::Result<i32> {
    let windows: Vec<Option<u64>> = if args.windows.is_empty() {
        vec![None]
    } else {
        args.windows
            .iter()
            .map(|w| parse_tokens(w).map(Some))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("--window: {e}"))?
    };
    let mut code = 0;
    let mut reports = Vec::new();
    for path in &args.traces {
        let recording = crate::compare::trace::read(path)?;
        for window in &windows {
            if !args.json && !reports.is_empty() {
                println!();
            }
            let options = crate::compare::replay::ReplayOptions {
                window_tokens: *window,
                reserve_tokens: args.reserve_tokens,
                prices: Some(config.price_table()),
            };
            let (report, c) = super::replay_cmd::print_replay(
                workspace,
                config,
                &recording,
                &args.engines,
                &options,
                args.json,
                false,
            )?;
            code = code.max(c);
            reports.push(report);
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    if code != 0 {
        eprintln!("some views were refused or failed (see above)");
    }
    Ok(code)
}

/// `latch engine compare`. Exit code 0 when every run finished its session.
pub fn compare(global: &GlobalArgs, workspace: &Path, args: CompareArgs) -> anyhow::Result<i32> {
    let config = Config::load(workspace, global.config.as_deref())?.config;
    if !args.traces.is_empty() {
        return compare_traces(workspace, &config, &args);
    }
    let sessions = if args.sessions.is_empty() {
        SessionKind::ALL.to_vec()
    } else {
        args.sessions
            .iter()
            .map(|s| SessionKind::parse(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!(e))?
    };
    let windows = if args.windows.is_empty() {
        DEFAULT_WINDOWS.to_vec()
    } else {
        args.windows
            .iter()
            .map(|w| parse_tokens(w))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("--window: {e}"))?
    };
    let options = CompareOptions {
        engines: args.engines,
        sessions,
        windows,
        steps: args.steps,
        reserve_tokens: args.reserve_tokens,
        base: workspace.to_path_buf(),
        config,
        save_traces: args.save_traces.clone(),
    };
    if let Some(dir) = &options.save_traces {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    let json = args.json;
    let mut first = true;
    let report = run_compare(&options, &mut |block| {
        if !json {
            if !first {
                println!();
            }
            first = false;
            print!("{}", block.table());
        }
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    if report.complete() {
        Ok(0)
    } else {
        eprintln!("some runs stopped before the end of their session (see above)");
        Ok(1)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_tokens;

    #[test]
    fn token_counts_take_suffixes_and_refuse_nonsense() {
        assert_eq!(parse_tokens("32k"), Ok(32_000));
        assert_eq!(parse_tokens("1.5K"), Ok(1_500));
        assert_eq!(parse_tokens("1m"), Ok(1_000_000));
        assert_eq!(parse_tokens("128000"), Ok(128_000));
        let err = parse_tokens("lots").unwrap_err();
        assert!(err.contains("`lots`") && err.contains("32k"), "{err}");
        assert!(parse_tokens("0").is_err());
        assert!(parse_tokens("-3k").is_err());
    }
}
