//! One run: a scripted session played through one engine at one window by
//! the real agent loop, and the record its figures are computed from.

use super::CompareError;
use super::engines::{EngineChoice, recorded};
use super::summarizer::HttpSummarizer;
use crate::agent::tools::StandardTools;
use crate::agent::{Agent, AgentOptions, ToolSet};
use crate::config::Config;
use latch_conformance::compare::baseline::SUMMARY_OUTPUT_TOKENS;
use latch_conformance::compare::report::{CompareReport, EngineRun, SessionBlock};
use latch_conformance::compare::{
    Exchange, Move, RunFigures, RunRecord, ScriptedModel, SessionKind, SessionPlan, Usage, figures,
    plan,
};
use latch_engine_sdk::types::ModelProfile;
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn};
use latch_provider::{Provider, ProviderConfig, ProviderKind, RetryPolicy};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The model the scripted sessions claim to talk to (Anthropic wire format,
/// Anthropic estimator).
pub const MODEL: &str = "claude-sonnet-4-5";
/// Most output tokens per response.
pub const MAX_TOKENS: u32 = 8_192;

/// What to compare.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// Engines as given: `builtin:NAME`, `baseline:summarize` or a path.
    pub engines: Vec<String>,
    /// Sessions to play.
    pub sessions: Vec<SessionKind>,
    /// Context windows in tokens.
    pub windows: Vec<u64>,
    /// Tool steps per session instead of the full length.
    pub steps: Option<usize>,
    /// Reserve tokens instead of the model's default.
    pub reserve_tokens: Option<u64>,
    /// Where relative engine paths resolve.
    pub base: PathBuf,
    /// The configuration (sandbox limits, model defaults).
    pub config: Config,
    /// Write each run's session as a trace into this directory
    /// (`SESSION-WINDOW-ENGINE.jsonl`).
    pub save_traces: Option<PathBuf>,
}

/// The model profile of a run: the configured defaults for [`MODEL`] with
/// this window (and reserve, when given).
pub fn model_profile(
    config: &Config,
    window: u64,
    reserve: Option<u64>,
) -> Result<ModelProfile, CompareError> {
    let mut config = config.clone();
    let o = config.models.entry(MODEL.to_string()).or_default();
    o.context_window_tokens = Some(window);
    if reserve.is_some() {
        o.reserve_tokens = reserve;
    }
    config
        .model_profile("anthropic", MODEL, MAX_TOKENS)
        .map_err(|e| CompareError::Plan(e.to_string()))
}

/// Play every session at every window through every engine, calling
/// `on_block` as each block completes.
pub fn run_compare(
    options: &CompareOptions,
    on_block: &mut dyn FnMut(&SessionBlock),
) -> Result<CompareReport, CompareError> {
    let limits = options.config.limits();
    let choices = options
        .engines
        .iter()
        .map(|spec| EngineChoice::resolve(spec, &options.base, &limits))
        .collect::<Result<Vec<_>, _>>()?;
    let mut report = CompareReport::default();
    for &kind in &options.sessions {
        let plan = plan(kind, options.steps).map_err(CompareError::Plan)?;
        for &window in &options.windows {
            let model = model_profile(&options.config, window, options.reserve_tokens)?;
            let mut runs = Vec::new();
            for (spec, choice) in options.engines.iter().zip(&choices) {
                let dir = tempfile::Builder::new()
                    .prefix("latch-compare-")
                    .tempdir()
                    .map_err(CompareError::io("creating the temporary workspace"))?;
                let outcome = run_in(spec, choice, &plan, &model, dir.path())?;
                if let Some(traces) = &options.save_traces {
                    let name = format!(
                        "{}-{}-{}.jsonl",
                        kind.name(),
                        latch_conformance::compare::report::short_tokens(window),
                        trace_name(spec)
                    );
                    save_trace(dir.path(), &outcome.session, &traces.join(name))?;
                }
                runs.push(EngineRun {
                    engine: spec.clone(),
                    figures: outcome.figures,
                });
            }
            let block = SessionBlock {
                session: kind,
                steps: plan.steps,
                window_tokens: model.context_window_tokens,
                reserve_tokens: model.reserve_tokens,
                runs,
            };
            on_block(&block);
            report.blocks.push(block);
        }
    }
    Ok(report)
}

fn step_of(m: Move) -> ScriptStep {
    match m {
        Move::Calls(calls) => {
            let mut turn = ScriptedTurn::default();
            for c in calls {
                turn = turn.with_tool_call(c.name, c.args);
            }
            turn.into()
        }
        Move::Text(text) => ScriptedTurn::text(text).into(),
    }
}

fn write_files(dir: &Path, plan: &SessionPlan) -> Result<(), CompareError> {
    for (path, content) in &plan.files {
        let full = dir.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent)
                .map_err(CompareError::io(format!("creating {}", parent.display())))?;
        }
        std::fs::write(&full, content)
            .map_err(CompareError::io(format!("writing {}", full.display())))?;
    }
    Ok(())
}

/// A file-name-safe name of an engine spec.
fn trace_name(spec: &str) -> String {
    let base = latch_conformance::compare::report::heading(spec.split("@{").next().unwrap_or(spec));
    base.trim_end_matches(".wasm")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Write the session `id` of the run in `workspace` as a trace at `path`,
/// reading its store read-only.
pub fn save_trace(workspace: &Path, id: &str, path: &Path) -> Result<(), CompareError> {
    let canonical = std::fs::canonicalize(workspace)
        .map_err(CompareError::io("resolving the temporary workspace"))?;
    let store = Store::open_read_only(latch_kernel::default_store_path(&canonical))?;
    let record = store.session(id)?;
    let recording = super::recording::from_store(&store, &record, true)?;
    super::trace::write(&recording, path, false)?;
    Ok(())
}

/// A finished run: what it left behind and the figures computed from it.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// The session the run recorded (in the workspace's store).
    pub session: String,
    /// The captured requests, usage and views.
    pub record: RunRecord,
    /// The figures of `record`.
    pub figures: RunFigures,
}

/// Play `plan` through one engine with `model` in a temporary workspace,
/// and compute its figures. Set-up failures are errors; a failure during
/// the session stops the run and is reported in its figures.
pub fn run_one(
    spec: &str,
    choice: &EngineChoice,
    plan: &SessionPlan,
    model: &ModelProfile,
) -> Result<RunOutcome, CompareError> {
    let dir = tempfile::Builder::new()
        .prefix("latch-compare-")
        .tempdir()
        .map_err(CompareError::io("creating the temporary workspace"))?;
    run_in(spec, choice, plan, model, dir.path())
}

/// [`run_one`] in the empty directory `dir`, which keeps the project and
/// the store (`.latch/latch.db`) the run leaves.
pub fn run_in(
    spec: &str,
    choice: &EngineChoice,
    plan: &SessionPlan,
    model: &ModelProfile,
    dir: &Path,
) -> Result<RunOutcome, CompareError> {
    let started = Instant::now();
    let workspace =
        std::fs::canonicalize(dir).map_err(CompareError::io("resolving the workspace"))?;
    write_files(&workspace, plan)?;
    let store_path = latch_kernel::default_store_path(&workspace);
    if let Some(parent) = store_path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(CompareError::io("creating the store directory"))?;
    }
    let store = Arc::new(Store::open(&store_path)?);
    let session = store.create_session(&workspace.display().to_string(), None, model)?;

    // The scripted model answers on its own I/O thread.
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(CompareError::io("starting the I/O runtime"))?;
    let scripted = Arc::new(Mutex::new(ScriptedModel::new(plan.clone())));
    let responder = scripted.clone();
    let script = Script::default().with_responder(move |req| {
        let mv = responder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .respond(&req.body);
        step_of(mv)
    });
    let server = io
        .block_on(FakeServer::start(script))
        .map_err(CompareError::io("starting the local wire-format server"))?;
    let provider_config = ProviderConfig {
        base_url: Some(server.anthropic_base_url()),
        api_key: Some("compare-key".into()),
        retry: RetryPolicy::default(),
        ..ProviderConfig::new(ProviderKind::Anthropic)
    };

    let ctx = latch_tools::ToolContext::new(store.clone(), session.id.clone(), &workspace)
        .map_err(|e| CompareError::Tools(e.to_string()))?;
    let tools = StandardTools::new(ctx);
    let schemas = tools.schemas();
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let engine = choice.create(spec, &session.id, model, || {
        let summarizer = HttpSummarizer::new(
            Provider::new(provider_config.clone())?,
            MODEL,
            schemas,
            SUMMARY_OUTPUT_TOKENS as u32,
            store.clone(),
            model.estimator,
            sizes.clone(),
        )
        .map_err(CompareError::io("starting the summarizer's runtime"))?;
        Ok(Box::new(summarizer) as Box<dyn latch_conformance::compare::Summarizer>)
    })?;
    let generations = Arc::new(Mutex::new(Vec::new()));
    let engine = recorded(engine, model.estimator, sizes.clone(), generations.clone());
    // No step cap (the default): a 500-step turn runs to its end.
    let options = AgentOptions {
        mode: "run".into(),
        max_tokens: MAX_TOKENS,
        ..AgentOptions::default()
    };
    let mut agent = Agent::new(
        store.clone(),
        session.clone(),
        workspace.clone(),
        engine,
        Provider::new(provider_config)?,
        Box::new(tools),
        options,
    )?;

    let mut error = None;
    for turn in &plan.turns {
        if let Err(e) = agent.run_turn(&turn.user, &mut |_| {}) {
            error = Some(e.to_string());
            break;
        }
    }
    let mut question_at = None;
    if error.is_none() {
        question_at = Some(server.requests().len());
        if let Err(e) = agent.run_turn(&plan.question, &mut |_| {}) {
            error = Some(e.to_string());
        }
    }
    drop(agent);
    let events = store.events(&session.id, 0, u64::MAX, u32::MAX)?;
    let agent_requests = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ProviderUsage { .. }))
        .count();
    let tool_errors = events
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::ToolResult(r) if r.is_error))
        .count();
    let requests = server.requests();
    let served = server.served();
    io.block_on(server.shutdown());
    if requests.len() != served.len() && error.is_none() {
        error = Some(format!(
            "the provider answered {} of {} requests",
            served.len(),
            requests.len()
        ));
    }
    let exchanges = requests
        .into_iter()
        .zip(served)
        .map(|(r, s)| Exchange {
            body: r.body,
            usage: Usage {
                input_tokens: s.usage.input_tokens.unwrap_or(0),
                cache_read_tokens: s.usage.cache_read_tokens.unwrap_or(0),
                cache_creation_tokens: s.usage.cache_creation_tokens.unwrap_or(0),
            },
        })
        .collect();
    let generations = generations
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let record = RunRecord {
        profile: model.estimator,
        exchanges,
        agent_requests,
        request_tokens: sizes.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        generations,
        tool_errors,
        question_at,
        seconds: started.elapsed().as_secs_f64(),
        error,
    };
    Ok(RunOutcome {
        session: session.id.clone(),
        figures: figures(&record),
        record,
    })
}
