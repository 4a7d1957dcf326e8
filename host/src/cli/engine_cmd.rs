//! `latch engine info` and `latch engine check`.

use super::GlobalArgs;
use crate::config::Config;
use crate::engine::runtime::EngineSource;
use crate::engine::{ComponentEngine, ContextEngine, EngineRuntime, check_view};
use latch_engine_sdk::MemorySession;
use latch_engine_sdk::types::*;
use std::path::Path;
use std::time::Instant;

/// `latch engine info`.
pub fn info(global: &GlobalArgs, workspace: &Path, spec: &str, json: bool) -> anyhow::Result<i32> {
    let config = Config::load(workspace, global.config.as_deref())?.config;
    let runtime = EngineRuntime::global()?;
    let source = EngineSource::parse(spec, workspace);
    let bytes = match &source {
        EngineSource::Builtin(name) => crate::engine::builtin::builtin_bytes(name)
            .ok_or_else(|| {
                anyhow::anyhow!(crate::engine::LoadError::UnknownBuiltin {
                    name: name.clone(),
                    available: "builtin:continuity".into(),
                })
            })?
            .to_vec(),
        EngineSource::Path(p) => std::fs::read(p)
            .map_err(|e| anyhow::anyhow!("cannot read engine component `{}`: {e}", p.display()))?,
    };
    let info = runtime.inspect_bytes(&source.to_string(), &bytes)?;
    let limits = config.limits();
    if json {
        let value = serde_json::json!({
            "engine": source.to_string(),
            "world": info.world,
            "contract_version": info.contract_version,
            "exports": info.exports,
            "imports": info.imports,
            "size_bytes": info.size_bytes,
            "sha256": info.sha256,
            "limits": limits,
            "sandbox": sandbox_summary(),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(0);
    }
    println!("engine            {source}");
    println!("world             latch:context/{}", info.world);
    println!("contract version  {}", info.contract_version);
    println!(
        "size              {} bytes (sha256 {})",
        info.size_bytes,
        &info.sha256[..16]
    );
    println!("exports");
    for e in &info.exports {
        println!("  {e}");
    }
    println!("imports");
    for i in &info.imports {
        println!("  {i}");
    }
    println!("sandbox limits");
    println!("  deadline        {} ms per call", limits.deadline_ms);
    println!("  memory          {} MiB per instance", limits.memory_mib);
    println!(
        "  output          {} KiB captured per call",
        limits.log_bytes / 1024
    );
    println!("  grants          {}", sandbox_summary());
    Ok(0)
}

fn sandbox_summary() -> &'static str {
    "no files, no environment, no network; deterministic clocks and randomness; stdout/stderr captured"
}

/// `latch engine check`: load, instantiate and materialize against an
/// in-memory session, checking the view as the agent loop would.
pub fn check(global: &GlobalArgs, workspace: &Path, spec: &str, json: bool) -> anyhow::Result<i32> {
    let config = Config::load(workspace, global.config.as_deref())?.config;
    let runtime = EngineRuntime::global()?;
    let source = EngineSource::parse(spec, workspace);
    let mut rows: Vec<(String, bool, String, u128)> = Vec::new();
    let started = Instant::now();
    let loaded = match runtime.load(&source) {
        Ok(l) => {
            rows.push((
                "load".into(),
                true,
                format!("contract {}", l.info.contract_version),
                started.elapsed().as_millis(),
            ));
            l
        }
        Err(e) => {
            rows.push((
                "load".into(),
                false,
                e.to_string(),
                started.elapsed().as_millis(),
            ));
            return report(&source.to_string(), &rows, json);
        }
    };
    let model = ModelProfile::with_defaults("openai", "check-model");
    let mut engine = ComponentEngine::new(loaded, config.limits(), "check-session", model.clone());
    let t = Instant::now();
    match engine.ensure_instance() {
        Ok(()) => rows.push((
            "instantiate".into(),
            true,
            String::new(),
            t.elapsed().as_millis(),
        )),
        Err(e) => {
            rows.push((
                "instantiate".into(),
                false,
                e.to_string(),
                t.elapsed().as_millis(),
            ));
            return report(&source.to_string(), &rows, json);
        }
    }
    let mut session = MemorySession::new("check-session", model.clone());
    session.user("Fix the failing test in src/lib.rs");
    session.tool_exchange(
        "call-1",
        "read_file",
        r#"{"path":"src/lib.rs"}"#,
        "fn add(a: i32, b: i32) -> i32 { a - b }",
    );
    session.assistant("The add function subtracts; I will fix it.");
    let request = ContextRequest {
        system_prompt: "You are a coding agent.".into(),
        session_context: SessionContext {
            workspace: "/workspace".into(),
            repository_instructions: String::new(),
            mode: "check".into(),
        },
        budget: ContextBudget::for_model(&model),
        query: "failing test".into(),
        extensions: vec![],
    };
    let t = Instant::now();
    match engine.materialize(&session, &request) {
        Ok(view) => {
            let elapsed = t.elapsed().as_millis();
            match check_view(model.estimator, &request, &view) {
                Ok(()) => rows.push((
                    "materialize".into(),
                    true,
                    format!(
                        "{} messages, ≈{} tokens",
                        view.messages.len(),
                        view.report.total_tokens
                    ),
                    elapsed,
                )),
                Err((rule, detail)) => rows.push((
                    "materialize".into(),
                    false,
                    format!("{rule}: {detail}"),
                    elapsed,
                )),
            }
        }
        Err(e) => rows.push((
            "materialize".into(),
            false,
            e.to_string(),
            t.elapsed().as_millis(),
        )),
    }
    let t = Instant::now();
    match engine.set_config(r#"{"latch_check_unknown_key": 1}"#) {
        Err(crate::engine::EngineFailure::Config {
            error: ConfigError::UnknownKey(k),
            ..
        }) => rows.push((
            "config rejects unknown key".into(),
            true,
            format!("refused `{k}`"),
            t.elapsed().as_millis(),
        )),
        other => rows.push((
            "config rejects unknown key".into(),
            false,
            format!("expected ConfigError::UnknownKey, got {other:?}"),
            t.elapsed().as_millis(),
        )),
    }
    report(&source.to_string(), &rows, json)
}

fn report(engine: &str, rows: &[(String, bool, String, u128)], json: bool) -> anyhow::Result<i32> {
    let passed = rows.iter().all(|r| r.1);
    if json {
        let cases: Vec<_> = rows
            .iter()
            .map(|(case, ok, detail, ms)| serde_json::json!({"case": case, "result": if *ok {"pass"} else {"fail"}, "detail": detail, "ms": ms}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"engine": engine, "passed": passed, "cases": cases})
            )?
        );
    } else {
        println!("{:<30} {:<6} {:>8}  detail", "case", "result", "time");
        for (case, ok, detail, ms) in rows {
            println!(
                "{:<30} {:<6} {:>6}ms  {}",
                case,
                if *ok { "pass" } else { "FAIL" },
                ms,
                detail
            );
        }
        println!(
            "{engine}: {}",
            if passed {
                "all checks passed"
            } else {
                "FAILED"
            }
        );
    }
    Ok(if passed { 0 } else { 1 })
}
