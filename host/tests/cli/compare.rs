//! `latch engine compare` end to end: short scripted sessions at a small
//! window (so the continuity engine rotates and the baseline compacts)
//! through the real agent loop, tools, store and the local wire-format
//! server; the figures are checked against the captured requests, and the
//! command line against its JSON and table output.
//!
//! The full sessions (80 and 500 steps at 32k, 128k and 256k) are too slow
//! for CI; they are `#[ignore]`d here and run with
//! `cargo test --release -p latch --test cli compare:: -- --ignored --nocapture`.

use latch::compare::driver::model_profile;
use latch::compare::{EngineChoice, run_one};
use latch::config::Config;
use latch_conformance::compare::baseline::{SUMMARY_OUTPUT_TOKENS, SUMMARY_PREFIX};
use latch_conformance::compare::metrics::{cost, prefix_ratios};
use latch_conformance::compare::wire::request_text;
use latch_conformance::compare::{FactId, SessionKind, Survival, is_summary_request, plan};
use std::path::Path;
use std::process::Command;

const WINDOW: u64 = 24_000;
const RESERVE: u64 = 4_000;
const STEPS: usize = 16;

#[test]
fn figures_agree_with_the_captured_requests_for_continuity_and_the_baseline() {
    let config = Config::default();
    let model = model_profile(&config, WINDOW, Some(RESERVE)).unwrap();
    let plan = plan(SessionKind::Steps80, Some(STEPS)).unwrap();
    for spec in ["builtin:continuity", "baseline:summarize"] {
        let choice = EngineChoice::resolve(spec, Path::new("."), &config.limits()).unwrap();
        let out = run_one(spec, &choice, &plan, &model).unwrap();
        let (f, r) = (&out.figures, &out.record);
        assert_eq!(f.error, None, "{spec}");
        let summaries: Vec<usize> = (0..r.exchanges.len())
            .filter(|&i| is_summary_request(&r.exchanges[i].body))
            .collect();
        assert_eq!(f.requests, r.exchanges.len(), "{spec}");
        assert_eq!(f.extra_model_calls, summaries.len(), "{spec}");
        assert_eq!(f.agent_requests + summaries.len(), f.requests, "{spec}");
        // Every step, the two closing texts and the question (plus one
        // answer after recalls) are the agent's requests.
        assert!(
            (STEPS + 3..=STEPS + 4).contains(&f.agent_requests),
            "{spec}: {} agent requests",
            f.agent_requests
        );
        assert_eq!(
            r.generations.len(),
            f.agent_requests,
            "one view per request"
        );
        let bodies: Vec<_> = r.exchanges.iter().map(|e| &e.body).collect();
        assert_eq!(r.request_tokens.len(), f.requests, "one size per request");
        assert_eq!(
            f.peak_request_tokens,
            *r.request_tokens.iter().max().unwrap()
        );
        for (i, size) in r.request_tokens.iter().enumerate() {
            let cap = if summaries.contains(&i) {
                WINDOW - SUMMARY_OUTPUT_TOKENS
            } else {
                WINDOW - RESERVE
            };
            assert!(
                *size <= cap,
                "{spec}: request {i} has {size} tokens, over {cap}"
            );
        }
        let ratios = prefix_ratios(r.profile, &bodies);
        assert_eq!(
            f.prefix_ratio_mean,
            ratios.iter().sum::<f64>() / ratios.len() as f64
        );
        let per_step: f64 = r
            .exchanges
            .iter()
            .map(|e| cost(&e.usage).anthropic_style)
            .sum::<f64>()
            / f.agent_requests as f64;
        assert!((f.cost_per_step.anthropic_style - per_step).abs() < 1e-6);
        assert!(f.cost_per_step.openai_style > 0.0);
        assert!(r.exchanges.iter().all(|e| e.usage.input_tokens
            + e.usage.cache_read_tokens
            + e.usage.cache_creation_tokens
            > 0));
        match spec {
            "baseline:summarize" => {
                assert!(!summaries.is_empty(), "the baseline compacted at {WINDOW}");
                assert_eq!(f.rotations, summaries.len(), "one generation per summary");
                for &i in &summaries {
                    let next = request_text(&r.exchanges[i + 1].body);
                    assert!(
                        next.contains(SUMMARY_PREFIX),
                        "the summary follows its request"
                    );
                    assert!(
                        next.contains(&plan.turns[0].user),
                        "the first task is kept verbatim"
                    );
                }
                assert_eq!(f.tool_errors, 0, "every scripted call succeeds");
                assert_eq!(f.facts[0], (FactId::Constraint, Survival::Visible));
                assert_eq!(f.facts[1], (FactId::CodeWord, Survival::Visible));
            }
            _ => {
                assert!(summaries.is_empty(), "continuity makes no extra model call");
                assert!(f.rotations >= 1, "continuity rotated at {WINDOW}");
            }
        }
    }
}

#[test]
fn the_mixed_session_plays_every_tool_without_an_error() {
    let config = Config::default();
    let model = model_profile(&config, WINDOW, Some(RESERVE)).unwrap();
    let plan = plan(SessionKind::Mixed500, Some(23)).unwrap();
    let spec = "baseline:summarize";
    let choice = EngineChoice::resolve(spec, Path::new("."), &config.limits()).unwrap();
    let out = run_one(spec, &choice, &plan, &model).unwrap();
    assert_eq!(out.figures.error, None);
    assert_eq!(
        out.figures.tool_errors, 0,
        "reads, edits, shell, grep, validate, task state"
    );
    assert_eq!(
        out.figures.agent_requests,
        23 + 3,
        "every fact visible: no recall"
    );
    let names: std::collections::BTreeSet<String> = out
        .record
        .exchanges
        .iter()
        .flat_map(|e| latch_conformance::compare::wire::tool_exchanges(&e.body))
        .map(|x| x.name)
        .collect();
    for tool in [
        "read_file",
        "edit_file",
        "shell",
        "grep",
        "validate",
        "list_files",
        "add_action",
    ] {
        assert!(names.contains(tool), "{tool} was never called: {names:?}");
    }
}

fn latch(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latch"));
    cmd.arg("-C").arg(dir);
    let home = dir.join(".test-home");
    cmd.env("LATCH_CONFIG_DIR", home.join("config"))
        .env("LATCH_CACHE_DIR", home.join("cache"));
    cmd
}

#[test]
fn the_command_prints_json_and_tables_and_names_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = latch(dir.path())
        .args([
            "engine",
            "compare",
            "builtin:continuity",
            "baseline:summarize",
        ])
        .args(["--session", "steps80", "--steps", "16", "--window", "24k"])
        .args(["--reserve-tokens", &RESERVE.to_string(), "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let block = &json["blocks"][0];
    assert_eq!(block["window_tokens"], 24_000);
    assert_eq!(block["reserve_tokens"], RESERVE);
    assert_eq!(block["runs"][0]["engine"], "builtin:continuity");
    assert_eq!(block["runs"][0]["figures"]["extra_model_calls"], 0);
    assert!(
        block["runs"][1]["figures"]["extra_model_calls"]
            .as_u64()
            .unwrap()
            >= 1
    );
    assert_eq!(block["runs"][1]["figures"]["facts"][1][1], "visible");

    let out = latch(dir.path())
        .args([
            "engine",
            "compare",
            "baseline:summarize",
            "--session",
            "steps80",
        ])
        .args([
            "--steps",
            "6",
            "--window",
            "24k",
            "--reserve-tokens",
            "4000",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    for line in [
        "session steps80 (6 steps) · window 24k · reserve 4k",
        "baseline:summarize",
        "extra model calls",
        "cost/step OpenAI-style",
        "cost/step Anthropic-style",
        "prefix ratio p10",
        "fact: rejected hypothesis",
    ] {
        assert!(table.contains(line), "`{line}` missing from:\n{table}");
    }

    for (args, named) in [
        (vec!["baseline:nope"], "baseline:summarize"),
        (vec!["baseline:summarize", "--window", "lots"], "`lots`"),
        (
            vec!["baseline:summarize", "--session", "steps9"],
            "steps80 and mixed500",
        ),
        (vec!["baseline:summarize", "--steps", "3"], "at least 6"),
        (vec!["no/such/engine.wasm"], "engine.wasm"),
    ] {
        let out = latch(dir.path())
            .args(["engine", "compare"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
    }
}

/// The full comparison of the issue: both sessions at 32k, 128k and 256k for
/// the default engine and the baseline (add a component path with
/// `LATCH_COMPARE_EXTRA=path/to/engine.wasm`). Local tier: minutes in a
/// release build.
#[test]
#[ignore = "full sessions take minutes; run with --release -- --ignored --nocapture"]
fn full_sessions_at_every_window() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = latch(dir.path());
    cmd.args([
        "engine",
        "compare",
        "builtin:continuity",
        "baseline:summarize",
    ]);
    if let Ok(extra) = std::env::var("LATCH_COMPARE_EXTRA") {
        cmd.arg(extra);
    }
    let out = cmd.output().unwrap();
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
