//! The agent loop: user input → durable event → context request → the
//! session's engine → the host's checks on the view → kernel context persisted
//! → exactly the view sent to the provider → the committed assistant turn →
//! tools → results → repeat until the model ends its turn.
//!
//! The loop never falls back to another engine and never adds context of its
//! own behind the engine's back: the provider sees the engine's view, the tool
//! schemas and nothing else.

pub mod calibration;
mod call_ids;
pub mod children;
mod control;
mod error;
pub mod extended;
mod guarded;
pub mod hooks;
pub mod images;
pub mod instructions;
pub mod permissions;
pub mod plan;
pub mod prompt;
pub mod provider_io;
pub mod recall;
mod reground;
mod repair;
mod request_log;
pub mod rewind;
pub mod tool_filter;
pub mod tools;
mod turn;
pub mod window;

pub use children::Delegation;
pub use control::TurnControl;
pub use error::AgentError;
pub use permissions::{Decision, DecisionPort, Permissions};
pub use plan::ModeChoice;
pub use provider_io::ProviderFigures;
pub use tool_filter::ToolFilter;

use crate::engine::{ContextEngine, EngineFailure};
use guarded::GuardedView;
use latch_engine_sdk::estimate::estimate;
use latch_engine_sdk::types::*;
use latch_kernel::{EventKind, SessionRecord, Store, StoreSessionView};
use latch_provider::{MediaResolver, Provider, ToolSchema};
use std::path::PathBuf;
use std::sync::Arc;

/// Options of an agent session.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// Interaction mode, e.g. `interactive`, `run`, `demo`.
    pub mode: String,
    /// Most model requests per turn; `None` (the default) runs a turn until
    /// the model ends it, the user interrupts it or a provider error stops it.
    pub max_steps: Option<usize>,
    /// Most output tokens per response.
    pub max_tokens: u32,
    /// Working-memory mark (`[context] recent_tokens`), overriding the engine's
    /// default.
    pub recent_tokens: Option<u64>,
    /// Approval mode, sandbox and decision port; `None` (the default): no
    /// approvals and the tools' own sandbox.
    pub permissions: Option<Permissions>,
    /// `[tools] allow` / `deny`: which tools the model is offered (all by
    /// default). Children inherit it.
    pub tools: ToolFilter,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            mode: "interactive".into(),
            max_steps: None,
            max_tokens: 8_192,
            recent_tokens: None,
            permissions: None,
            tools: ToolFilter::default(),
        }
    }
}

/// Something the loop reports while it runs (for surfaces; never durable by
/// itself).
#[derive(Debug)]
pub enum AgentEvent<'a> {
    /// A transient streamed text delta.
    TextDelta(&'a str),
    /// The provider reported reasoning (never its text). How many tokens
    /// it spent is in the committed usage event (`reasoning_tokens`).
    Reasoning,
    /// The provider is being retried.
    Retrying { attempt: u32, reason: &'a str },
    /// A durable event was committed.
    Committed { seq: u64, event: &'a EventKind },
}

/// What a finished turn produced.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnOutcome {
    /// Model requests made.
    pub steps: usize,
    /// The final assistant text.
    pub final_text: String,
    /// The report of the last view sent.
    pub report: Option<ContextReport>,
}

/// The tools an agent can call: schemas and an executor.
pub trait ToolSet: Send {
    /// Tool schemas, in a byte-stable order (part of the cached prefix).
    fn schemas(&self) -> Vec<ToolSchema>;
    /// Execute one call; the tool commits its own kernel events (mutations
    /// before they execute) and returns the bounded result.
    fn execute(&mut self, call: &ToolCall) -> ToolResult;
    /// The session is being resumed: settle state left by an earlier process
    /// (e.g. managed processes that died with it).
    fn on_resume(&mut self) {}
    /// The agent is shutting down: stop what the tools started.
    fn shutdown(&mut self) {}
    /// Run every command in a sandbox under `policy` (called once, when the
    /// agent is built with [`AgentOptions::permissions`]). A tool set that
    /// spawns nothing has nothing to confine.
    fn use_sandbox(&mut self, _policy: &latch_sandbox::SandboxPolicy) -> Result<(), AgentError> {
        Ok(())
    }
    /// What `call` is about to do, for the approval policy; `None`: nothing
    /// that needs approval.
    fn preview(&self, _call: &ToolCall) -> Option<latch_tools::Preview> {
        None
    }
    /// The MCP tool `call` names, for the approval policy; `None`: not an
    /// MCP tool.
    fn mcp_call(&self, _call: &ToolCall) -> Option<permissions::McpCall> {
        None
    }
    /// Execute a call the user allowed to run outside the sandbox.
    fn execute_escalated(&mut self, call: &ToolCall) -> ToolResult {
        self.execute(call)
    }
    /// Kill running foreground commands when `cancel` is set (called once,
    /// when the agent is built: the agent's [`TurnControl`] sets it on an
    /// interrupt). A tool set that runs no commands ignores it.
    fn use_cancel(&mut self, _cancel: latch_tools::Cancel) {}
    /// Run a hook command with `env` where the tools run commands (the
    /// session's sandbox and workspace). A tool set that runs no commands
    /// cannot run hooks: it says so as the run's output.
    fn run_hook(
        &mut self,
        _command: &str,
        _env: &[(&str, String)],
        _timeout: std::time::Duration,
    ) -> latch_tools::HookRun {
        latch_tools::HookRun {
            exit_code: None,
            output: "this tool set runs no commands, so it cannot run hooks".into(),
        }
    }
}

/// One session's agent.
pub struct Agent {
    store: Arc<Store>,
    session: SessionRecord,
    engine: Box<dyn ContextEngine>,
    provider: Provider,
    tools: Box<dyn ToolSet>,
    /// The tool schemas and their price, fixed for the agent's life (they are
    /// part of the cached prefix).
    schemas: Vec<ToolSchema>,
    tools_tokens: u64,
    /// Every tool of the session before `[tools]` filtered them (to check
    /// the filter's entries against).
    all_tool_names: Vec<String>,
    system_prompt: String,
    /// The session context every request carries: the one the session
    /// started with, so the first provider-visible message never changes.
    session_context: SessionContext,
    /// This process's session context (mode, workspace, instructions now).
    current_context: SessionContext,
    /// The session context the model was last told about (the start, or the
    /// latest update note); a difference from `current_context` is appended
    /// as a note when the next run starts.
    announced_context: SessionContext,
    /// True once the session has a recorded session context.
    context_recorded: bool,
    options: AgentOptions,
    runtime: tokio::runtime::Runtime,
    /// Set when the store failed under an engine call: the engine instance
    /// may hold what it read from incomplete answers, so it is not asked
    /// again; resuming builds a fresh one.
    engine_tainted: Option<String>,
    /// Child agents: their tools and their deliveries (see
    /// [`Agent::with_delegation`]).
    delegation: Option<Box<dyn Delegation>>,
    /// Interrupts and steering from a surface (see [`TurnControl`]).
    control: TurnControl,
    /// Pending permission requests and session grants, folded from the log
    /// when first needed.
    permission_log: Option<latch_kernel::PermissionLog>,
    /// Extension sources of every request (the skill list) and their price
    /// (see [`Agent::with_extensions`]).
    extensions: Vec<ExtensionSource>,
    extension_tokens: u64,
    /// Configured hooks (see [`hooks`]), and whether `session_start` ran.
    hooks: hooks::HookCommands,
    session_started: bool,
    /// The workspace root (images named by `@path` resolve against it).
    workspace: PathBuf,
    /// Images attached for the next user message (see [`Agent::attach_image`]).
    pending_images: Vec<MediaRef>,
    /// Plan mode or not (see [`plan`]), as the session profile records it.
    session_mode: latch_kernel::SessionMode,
    /// Where the session's instructions come from (see [`instructions`]).
    instruction_source: Option<Box<dyn instructions::InstructionSource>>,
    /// The nested directories' instructions the session carries.
    nested: Vec<instructions::NestedInstructions>,
    /// What the last recorded model request carried (see [`request_log`]).
    request_log: request_log::RequestLog,
}

impl Agent {
    /// An agent for `session`, whose engine was built by the supervisor's
    /// factory.
    pub fn new(
        store: Arc<Store>,
        session: SessionRecord,
        workspace: PathBuf,
        engine: Box<dyn ContextEngine>,
        provider: Provider,
        mut tools: Box<dyn ToolSet>,
        options: AgentOptions,
    ) -> Result<Agent, AgentError> {
        if let Some(p) = &options.permissions {
            tools.use_sandbox(&p.sandbox)?;
        }
        let control = TurnControl::default();
        tools.use_cancel(control.tool_cancel());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| AgentError::Runtime(e.to_string()))?;
        let mut schemas = tools.schemas();
        if !schemas
            .iter()
            .any(|s| s.name == latch_engine_sdk::RECALL_TOOL)
        {
            schemas.push(recall::schema());
        }
        if !schemas.iter().any(|s| s.name == plan::PROPOSE_PLAN) {
            schemas.push(plan::schema());
        }
        let all_tool_names = schemas.iter().map(|s| s.name.clone()).collect();
        let schemas = options.tools.apply(schemas);
        let schemas_json = serde_json::to_string(&schemas).unwrap_or_default();
        let tools_tokens = estimate(session.model.estimator, &schemas_json) as u64;
        let session_mode = store
            .session_profile(&session.id)?
            .map(|p| p.mode)
            .unwrap_or_default();
        let current_context =
            prompt::session_context(&workspace, &prompt::mode_text(&options.mode, session_mode));
        let workspace_root = workspace.clone();
        let recorded = store.session_contexts(&session.id)?;
        let context_recorded = recorded.is_some();
        let (session_context, announced_context) = match recorded {
            Some((first, latest)) => (first, latest),
            None => (current_context.clone(), current_context.clone()),
        };
        let mut agent = Agent {
            store,
            all_tool_names,
            schemas,
            tools_tokens,
            system_prompt: prompt::system_prompt(),
            session_context,
            current_context,
            announced_context,
            context_recorded,
            session,
            engine,
            provider,
            tools,
            options,
            runtime,
            engine_tainted: None,
            delegation: None,
            control,
            permission_log: None,
            extensions: Vec::new(),
            extension_tokens: 0,
            hooks: hooks::HookCommands::default(),
            session_started: false,
            workspace: workspace_root,
            pending_images: Vec::new(),
            session_mode: latch_kernel::SessionMode::Act,
            instruction_source: None,
            nested: Vec::new(),
            request_log: request_log::RequestLog::default(),
        };
        agent.apply_mode(session_mode)?;
        agent.replay_nested()?;
        Ok(agent)
    }

    /// The session context every request carries (the session's first).
    pub fn session_context(&self) -> &SessionContext {
        &self.session_context
    }

    /// Resume the session in this process: settle what the tools left from
    /// an earlier process (managed processes that died with it are recorded
    /// as ended), then repair an interrupted run so the log is a valid
    /// continuation. Returns how many repair events were appended.
    pub fn resume(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<usize, AgentError> {
        self.tools.on_resume();
        self.repair_interrupted(observer)
    }

    /// Lend the session to the engine for one call: `call` gets a view that
    /// records store errors, and a store error met during the call becomes
    /// an engine-call error (the engine's answer is discarded).
    fn with_engine<T>(
        &mut self,
        what: &'static str,
        call: impl FnOnce(&mut dyn ContextEngine, &GuardedView) -> Result<T, EngineFailure>,
    ) -> Result<T, AgentError> {
        let engine = self.engine.name().to_string();
        if let Some(reason) = &self.engine_tainted {
            return Err(AgentError::EngineTainted {
                engine,
                reason: reason.clone(),
            });
        }
        let view = GuardedView::new(self.view()?).map_err(|f| AgentError::EngineStore {
            engine: engine.clone(),
            engine_call: what,
            view_call: f.call,
            source: f.error,
        })?;
        let result = call(self.engine.as_mut(), &view);
        if let Some(f) = view.take_failure() {
            self.engine_tainted = Some(format!("the store failed during `{what}`: {}", f.error));
            return Err(AgentError::EngineStore {
                engine,
                engine_call: what,
                view_call: f.call,
                source: f.error,
            });
        }
        Ok(result?)
    }

    /// The session this agent serves.
    pub fn session(&self) -> &SessionRecord {
        &self.session
    }

    /// The workspace it works in.
    pub fn workspace(&self) -> &std::path::Path {
        &self.workspace
    }

    /// The engine's name.
    pub fn engine_name(&self) -> &str {
        self.engine.name()
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    fn view(&self) -> Result<StoreSessionView, AgentError> {
        Ok(StoreSessionView::for_engine(
            self.store.clone(),
            &self.session.id,
            self.engine.name(),
        )?)
    }

    fn append(
        &self,
        event: EventKind,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<u64, AgentError> {
        let seq = self.store.append(&self.session.id, event.clone())?;
        observer(AgentEvent::Committed { seq, event: &event });
        Ok(seq)
    }

    fn append_batch(
        &self,
        events: Vec<EventKind>,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<(), AgentError> {
        if events.is_empty() {
            return Ok(());
        }
        let seqs = self.store.append_batch(&self.session.id, events.clone())?;
        for (seq, event) in seqs.into_iter().zip(&events) {
            observer(AgentEvent::Committed { seq, event });
        }
        Ok(())
    }

    /// Refuses `[tools]` entries that name no tool of the session (call
    /// once the delegation tools joined, before the first request).
    pub fn check_tool_filter(&self) -> Result<(), AgentError> {
        let names: Vec<&str> = self.all_tool_names.iter().map(String::as_str).collect();
        let unknown = self.options.tools.unknown_entries(&names);
        if unknown.is_empty() {
            return Ok(());
        }
        Err(AgentError::ToolFilter(format!(
            "[tools] names {} that no tool of this session has; the tools are: {}",
            unknown
                .iter()
                .map(|u| format!("`{u}`"))
                .collect::<Vec<_>>()
                .join(", "),
            names.join(", ")
        )))
    }

    /// Tokens of the tool schemas under the canonical estimator.
    pub fn tools_tokens(&self) -> u64 {
        self.tools_tokens
    }

    /// The request the loop would send next, for `query`.
    pub fn next_request(&mut self, query: &str) -> Result<ContextRequest, AgentError> {
        let mut budget = self.engine.default_budget()?;
        budget.context_window_tokens = self.session.model.context_window_tokens;
        budget.reserve_tokens = self.session.model.reserve_tokens;
        if let Some(recent) = self.options.recent_tokens {
            budget.recent_tokens = recent;
        }
        budget.tools_tokens = self.tools_tokens();
        // The provider's own count, learnt from its usage reports, tightens
        // the budget (never loosens it below the estimator's).
        calibration::tighten(&mut budget, self.calibration()?);
        budget.extension_tokens = self.extension_tokens;
        Ok(ContextRequest {
            system_prompt: self.system_prompt.clone(),
            session_context: self.session_context.clone(),
            budget,
            query: query.to_string(),
            extensions: self.extensions.clone(),
        })
    }

    /// Materialize and check the next view (without persisting anything).
    pub fn materialize(
        &mut self,
        query: &str,
    ) -> Result<(ContextRequest, ContextView), AgentError> {
        let request = self.next_request(query)?;
        // Every engine adapter checks its views against the request and the
        // session before it returns them (see `engine::ViewGuard`); checked
        // once, at the cost of what is new.
        let result = self.with_engine("materialize", |engine, view| {
            engine.materialize(view, &request)
        });
        match result {
            Ok(ctx_view) => Ok((request, ctx_view)),
            // A request that cannot fit is explained in the host's figures:
            // the window, the reserve and what fits.
            Err(AgentError::Engine(EngineFailure::Engine {
                error: EngineError::BudgetExceeded(message) | EngineError::InvalidRequest(message),
                ..
            })) => Err(self.window_shortfall(&request, message)),
            Err(e) => Err(e),
        }
    }

    /// The refusal of a request that does not fit: with no room for the
    /// instructions, tools and extensions themselves, what fits; else the
    /// engine's reason beside the window's figures.
    fn window_shortfall(&self, request: &ContextRequest, engine_message: String) -> AgentError {
        let profile = self.session.model.estimator;
        let ctx = &request.session_context;
        let instructions = [
            request.system_prompt.as_str(),
            ctx.workspace.as_str(),
            ctx.repository_instructions.as_str(),
            ctx.mode.as_str(),
        ]
        .iter()
        .map(|t| estimate(profile, t) as u64)
        .sum::<u64>();
        let budget = &request.budget;
        let limit = budget
            .context_window_tokens
            .saturating_sub(budget.reserve_tokens);
        let fixed = instructions + budget.tools_tokens + budget.extension_tokens;
        let calibration = self.calibration().ok().flatten().map(|c| c.ratio);
        AgentError::Window(Box::new(window::shortfall(
            &self.session.model.model,
            budget,
            self.session.model.context_window_tokens,
            calibration,
            instructions,
            self.schemas.len(),
            (fixed <= limit).then_some(engine_message),
        )))
    }

    /// The `/context` report for the next request, with the provider-reported
    /// cache metrics of the last request filled in where known.
    pub fn context_report(&mut self) -> Result<ContextReport, AgentError> {
        let query = self.latest_user_text()?;
        let (_, view) = self.materialize(&query)?;
        let mut report = view.report;
        fill_provider_metrics(&mut report, self.last_usage()?);
        Ok(report)
    }

    /// `/compact`: append the reset, then persist the engine's fresh epoch,
    /// sized for the request the next model call makes (system prompt, tool
    /// schemas, configured working memory): the engine starts it from that
    /// request. An engine that starts epochs only in `manual-compact` is
    /// asked there.
    pub fn compact(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<usize, AgentError> {
        self.append(EventKind::ManualCompact, observer)?;
        let query = self.latest_user_text()?;
        let (_, view) = self.materialize(&query)?;
        let mut entries = view.persist;
        if entries.is_empty() {
            entries =
                self.with_engine("manual-compact", |engine, view| engine.manual_compact(view))?;
        }
        let n = entries.len();
        self.append_batch(
            entries
                .into_iter()
                .map(|e| EventKind::kernel_context(self.engine.name(), e))
                .collect(),
            observer,
        )?;
        Ok(n)
    }

    /// Recall original events for a query through the engine. The answer is
    /// checked like a view (see [`crate::engine::guard::accept_recall`]): an
    /// engine that returns more than `limit` events, an event of another
    /// session or an altered one is refused with [`EngineFailure::Rejected`].
    pub fn recall(&mut self, query: &str, limit: u32) -> Result<Vec<Event>, AgentError> {
        self.with_engine("recall", |engine, view| {
            let events = engine.recall(view, query, limit)?;
            crate::engine::guard::accept_recall(engine.name(), view, limit, &events)?;
            Ok(events)
        })
    }

    /// Answer the model's `recall` call through the engine. A bad argument
    /// or an engine error is a tool error the model sees; an answer the host
    /// refuses ends the turn like a refused view, before any of it is
    /// committed.
    pub(crate) fn recall_tool(&mut self, call: &ToolCall) -> Result<ToolResult, AgentError> {
        let args = match recall::parse(call) {
            Ok(args) => args,
            Err(message) => return Ok(recall::failed(call, message)),
        };
        match self.recall(&args.query, args.limit) {
            Ok(events) => Ok(recall::answer(
                call,
                &args.query,
                &events,
                self.session.model.estimator,
            )),
            Err(refused @ AgentError::Engine(EngineFailure::Rejected { .. })) => Err(refused),
            Err(e) => Ok(recall::failed(call, format!("recall failed: {e}"))),
        }
    }

    fn latest_user_text(&self) -> Result<String, AgentError> {
        let events = self.store.events_before(&self.session.id, u64::MAX, 200)?;
        Ok(events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::UserMessage { parts } => Some(
                    parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::Text(t) => Some(t.as_str()),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
                _ => None,
            })
            .unwrap_or_default())
    }

    /// The last provider usage and the common prefix estimated for that same
    /// request.
    pub fn last_usage(&self) -> Result<Option<(latch_provider::Usage, Option<u64>)>, AgentError> {
        let events = self.store.events_before(&self.session.id, u64::MAX, 200)?;
        Ok(events.iter().find_map(|e| provider_io::usage_of(&e.kind)))
    }

    /// The provider-to-estimate ratio of this session's server (provider
    /// and base URL) and model, reduced from the stored usage reports.
    pub fn calibration(&self) -> Result<Option<calibration::Calibration>, AgentError> {
        let kind = self.provider.kind();
        let key = calibration::CalibrationKey {
            provider: kind.name(),
            base_url: self.provider.base_url(),
            default_base_url: kind.default_base_url(),
            model: &self.session.model.model,
        };
        Ok(provider_io::calibration_of(&self.store, &key)?)
    }

    /// The provider's side of `/context`: the figures it reported for the
    /// last request beside Latch's estimate of it, and the calibration.
    pub fn provider_figures(&self) -> Result<ProviderFigures, AgentError> {
        let events = self.store.events_before(&self.session.id, u64::MAX, 200)?;
        let last = events.iter().find_map(|e| match &e.kind {
            k @ EventKind::ProviderUsage {
                estimated_input_tokens,
                ..
            } => provider_io::usage_of(k).map(|(u, _)| (u, *estimated_input_tokens)),
            _ => None,
        });
        Ok(ProviderFigures {
            provider: self.provider.kind().name().to_string(),
            model: self.session.model.model.clone(),
            last: last.map(|(u, _)| u),
            last_estimated_input_tokens: last.and_then(|(_, e)| e),
            calibration: self.calibration()?,
            base_url: self.provider.base_url().to_string(),
        })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.tools.shutdown();
    }
}

/// Fill the provider-reported cache metrics of a report: prefix utilization =
/// cache reads ÷ the estimated common prefix; hit rate = reads ÷ (reads +
/// misses). Unknown categories stay unknown, never zero.
///
/// `usage` is the provider's report of a request together with the common
/// prefix Latch estimated for that same request, so the two are never paired
/// across different requests.
pub fn fill_provider_metrics(
    report: &mut ContextReport,
    usage: Option<(latch_provider::Usage, Option<u64>)>,
) {
    let Some((usage, common_prefix)) = usage else {
        return;
    };
    report.measured_hit_rate = usage.cache_hit_rate();
    report.provider_prefix_utilization = match (usage.cache_read_tokens, common_prefix) {
        (Some(read), Some(prefix)) if prefix > 0 => Some(read as f64 / prefix as f64),
        _ => None,
    };
}

/// Resolves media references from the store's artifacts, so replay always
/// sends the exact captured bytes.
struct StoreMedia(Arc<Store>);

impl MediaResolver for StoreMedia {
    fn resolve(&self, media: &MediaRef) -> Result<Vec<u8>, String> {
        match self.0.artifact_bytes(&media.sha256) {
            Ok(Some(bytes)) => Ok(bytes),
            Ok(None) => Err(format!("artifact {} is not in the store", media.sha256)),
            Err(e) => Err(e.to_string()),
        }
    }
}
