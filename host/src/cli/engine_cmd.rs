//! `latch engine info` and `latch engine check`.

use super::GlobalArgs;
use super::render::{MAX_PRINTED_CHARS, terminal_safe};
use crate::config::Config;
use crate::engine::EngineRuntime;
use crate::engine::conformance::ComponentCandidate;
use crate::engine::runtime::EngineSource;
use latch_conformance::Options;
use std::path::Path;
use std::time::Instant;

/// An engine-provided string, ready for the terminal.
fn safe(text: &str) -> String {
    terminal_safe(text, MAX_PRINTED_CHARS)
}

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
    println!("world             latch:context/{}", safe(&info.world));
    println!("contract version  {}", safe(&info.contract_version));
    println!(
        "size              {} bytes (sha256 {})",
        info.size_bytes,
        &info.sha256[..16]
    );
    println!("exports");
    for e in &info.exports {
        println!("  {}", safe(e));
    }
    println!("imports");
    for i in &info.imports {
        println!("  {}", safe(i));
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

/// `latch engine check`: load the engine and run the conformance suite
/// against it in the sandbox, as the agent loop would run it. Exit code 0
/// only when every required case passes.
pub fn check(
    global: &GlobalArgs,
    workspace: &Path,
    spec: &str,
    json: bool,
    config_json: Option<&str>,
    deadline_ms: Option<u64>,
) -> anyhow::Result<i32> {
    let config = Config::load(workspace, global.config.as_deref())?.config;
    let mut limits = config.limits();
    if let Some(ms) = deadline_ms {
        limits.deadline_ms = ms.max(1);
    }
    if let Some(text) = config_json {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v) if v.is_object() => {}
            _ => anyhow::bail!("--config-json must be a JSON object, got `{text}`"),
        }
    }
    let runtime = EngineRuntime::global()?;
    let source = EngineSource::parse(spec, workspace);
    let started = Instant::now();
    let loaded = match runtime.load(&source) {
        Ok(l) => l,
        Err(e) => {
            // Nothing to run: report the load failure as the contract case.
            let ms = started.elapsed().as_millis() as u64;
            if json {
                let value = serde_json::json!({
                    "engine": source.to_string(),
                    "passed": false,
                    "cases": [{"case": "contract", "required": true, "status": "fail", "ms": ms,
                               "summary": "the component does not load", "evidence": [e.to_string()]}],
                });
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                println!("engine check: {source}");
                println!(
                    "{:<12} {:<6} {:>6}ms  the component does not load",
                    "contract", "FAIL", ms
                );
                println!("{:<29}- {}", "", safe(&e.to_string()));
                println!("{source}: FAILED (contract)");
            }
            return Ok(1);
        }
    };
    let options = Options {
        deadline_ms: limits.deadline_ms,
        config_json: config_json.map(str::to_string),
        system_prompt: Some(crate::agent::prompt::system_prompt()),
        ..Options::default()
    };
    let candidate = ComponentCandidate::new(loaded, limits, config_json.map(str::to_string));
    let report = latch_conformance::run(&candidate, &options);
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table_with(safe));
    }
    Ok(if report.passed { 0 } else { 1 })
}
