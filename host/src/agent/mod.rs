//! The agent loop: user input → durable event → context request → the
//! session's engine → the host's checks on the view → kernel context persisted
//! → exactly the view sent to the provider → the committed assistant turn →
//! tools → results → repeat until the model ends its turn.
//!
//! The loop never falls back to another engine and never adds context of its
//! own behind the engine's back: the provider sees the engine's view, the tool
//! schemas and nothing else.

pub mod prompt;
pub mod tools;

use crate::engine::{ContextEngine, EngineFailure, check_view};
use latch_engine_sdk::estimate::estimate;
use latch_engine_sdk::types::*;
use latch_kernel::{EventKind, SessionRecord, Store, StoreError, StoreSessionView};
use latch_provider::{
    AssistantTurn, CacheHints, MediaResolver, Provider, ProviderError, ProviderRequest, StopReason,
    StreamEvent, ToolSchema,
};
use std::path::PathBuf;
use std::sync::Arc;

/// How a turn failed. Nothing already committed is lost.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The engine failed or returned a view the host refused.
    #[error(transparent)]
    Engine(#[from] EngineFailure),
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The store failed.
    #[error("event store: {0}")]
    Store(#[from] StoreError),
    /// The model kept calling tools past the step limit.
    #[error(
        "the turn stopped after {0} model requests without finishing; continue with another message"
    )]
    StepLimit(usize),
    /// The async runtime could not start.
    #[error("could not start the I/O runtime: {0}")]
    Runtime(String),
}

/// Options of an agent session.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// Interaction mode, e.g. `interactive`, `run`, `demo`.
    pub mode: String,
    /// Most model requests per turn.
    pub max_steps: usize,
    /// Most output tokens per response.
    pub max_tokens: u32,
    /// Working-memory mark (`[context] recent_tokens`), overriding the engine's
    /// default.
    pub recent_tokens: Option<u64>,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            mode: "interactive".into(),
            max_steps: 50,
            max_tokens: 8_192,
            recent_tokens: None,
        }
    }
}

/// Something the loop reports while it runs (for surfaces; never durable by
/// itself).
#[derive(Debug)]
pub enum AgentEvent<'a> {
    /// A transient streamed text delta.
    TextDelta(&'a str),
    /// The provider reported reasoning (never its text).
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
    system_prompt: String,
    session_context: SessionContext,
    options: AgentOptions,
    runtime: tokio::runtime::Runtime,
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
        tools: Box<dyn ToolSet>,
        options: AgentOptions,
    ) -> Result<Agent, AgentError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| AgentError::Runtime(e.to_string()))?;
        let schemas = tools.schemas();
        let schemas_json = serde_json::to_string(&schemas).unwrap_or_default();
        let tools_tokens = estimate(session.model.estimator, &schemas_json) as u64;
        Ok(Agent {
            store,
            schemas,
            tools_tokens,
            system_prompt: prompt::system_prompt(),
            session_context: prompt::session_context(&workspace, &options.mode),
            session,
            engine,
            provider,
            tools,
            options,
            runtime,
        })
    }

    /// The session this agent serves.
    pub fn session(&self) -> &SessionRecord {
        &self.session
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
        Ok(ContextRequest {
            system_prompt: self.system_prompt.clone(),
            session_context: self.session_context.clone(),
            budget,
            query: query.to_string(),
            extensions: vec![],
        })
    }

    /// Materialize and check the next view (without persisting anything).
    pub fn materialize(
        &mut self,
        query: &str,
    ) -> Result<(ContextRequest, ContextView), AgentError> {
        let request = self.next_request(query)?;
        let view = self.view()?;
        let ctx_view = self.engine.materialize(&view, &request)?;
        check_view(self.session.model.estimator, &request, &ctx_view).map_err(
            |(rule, detail)| EngineFailure::Rejected {
                engine: self.engine.name().to_string(),
                rule,
                detail,
            },
        )?;
        Ok((request, ctx_view))
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

    /// `/compact`: append the reset, then persist the engine's fresh epoch.
    pub fn compact(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<usize, AgentError> {
        self.append(EventKind::ManualCompact, observer)?;
        let view = self.view()?;
        let entries = self.engine.manual_compact(&view)?;
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

    /// Recall original events for a query through the engine.
    pub fn recall(&mut self, query: &str, limit: u32) -> Result<Vec<Event>, AgentError> {
        let view = self.view()?;
        Ok(self.engine.recall(&view, query, limit)?)
    }

    /// Make the log a valid continuation after a crash: an unfinished run is
    /// marked interrupted and every unanswered tool call gets an error result.
    /// Returns how many events were appended.
    pub fn repair_interrupted(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<usize, AgentError> {
        let events = self.store.events(&self.session.id, 0, u64::MAX, u32::MAX)?;
        let mut open_run = false;
        let mut open_calls: Vec<ToolCall> = Vec::new();
        for e in &events {
            match &e.kind {
                EventKind::RunStarted { .. } => open_run = true,
                EventKind::RunFinished { .. } | EventKind::RunInterrupted { .. } => {
                    open_run = false
                }
                EventKind::AssistantMessage { parts } => {
                    open_calls = parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::ToolCall(c) => Some(c.clone()),
                            _ => None,
                        })
                        .collect();
                }
                EventKind::ToolResult(r) => open_calls.retain(|c| c.id != r.call_id),
                EventKind::UserMessage { .. } => open_calls.clear(),
                _ => {}
            }
        }
        let mut repairs: Vec<EventKind> = open_calls
            .into_iter()
            .map(|c| {
                EventKind::ToolResult(ToolResult {
                    call_id: c.id,
                    name: c.name,
                    content: "interrupted: Latch stopped before this tool call finished. Any effect it had is in the workspace; check and re-run it if needed.".into(),
                    is_error: true,
                    images: vec![],
                })
            })
            .collect();
        if open_run {
            repairs.push(EventKind::RunInterrupted {
                reason: "the previous run stopped before it finished (found on resume)".into(),
            });
        }
        let n = repairs.len();
        self.append_batch(repairs, observer)?;
        Ok(n)
    }

    /// Run one user turn to its end.
    pub fn run_turn(
        &mut self,
        input: &str,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<TurnOutcome, AgentError> {
        self.repair_interrupted(observer)?;
        self.append(
            EventKind::RunStarted {
                mode: self.options.mode.clone(),
            },
            observer,
        )?;
        self.append(
            EventKind::UserMessage {
                parts: vec![Part::Text(input.to_string())],
            },
            observer,
        )?;
        match self.drive(input, observer) {
            Ok(outcome) => {
                self.append(
                    EventKind::RunFinished {
                        outcome: "completed".into(),
                    },
                    observer,
                )?;
                Ok(outcome)
            }
            Err(e) => {
                // Committed history stays; the run is marked interrupted.
                let _ = self.append(
                    EventKind::RunInterrupted {
                        reason: e.to_string(),
                    },
                    observer,
                );
                Err(e)
            }
        }
    }

    fn drive(
        &mut self,
        query: &str,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<TurnOutcome, AgentError> {
        let schemas = self.schemas.clone();
        for step in 1..=self.options.max_steps {
            let (_, view) = self.materialize(query)?;
            // Kernel context is durable before the request that shows it.
            self.append_batch(
                view.persist
                    .iter()
                    .cloned()
                    .map(|e| EventKind::kernel_context(self.engine.name(), e))
                    .collect(),
                observer,
            )?;
            let request = ProviderRequest {
                model: self.session.model.model.clone(),
                system: view.system.clone(),
                tools: schemas.clone(),
                cache_breakpoints: CacheHints::for_messages(&view.messages),
                messages: latch_engine_sdk::validate::framed(&view.messages),
                max_tokens: self.options.max_tokens,
            };
            let media = StoreMedia(self.store.clone());
            let turn: AssistantTurn = {
                let provider = &self.provider;
                let mut on_event = |e: StreamEvent| match e {
                    StreamEvent::TextDelta(t) => observer(AgentEvent::TextDelta(&t)),
                    StreamEvent::ReasoningActivity => observer(AgentEvent::Reasoning),
                    StreamEvent::Retrying {
                        attempt, reason, ..
                    } => observer(AgentEvent::Retrying {
                        attempt,
                        reason: &reason,
                    }),
                    _ => {}
                };
                self.runtime
                    .block_on(provider.complete(&request, &media, &mut on_event))?
            };
            let calls: Vec<ToolCall> = turn.tool_calls().cloned().collect();
            let usage = &turn.usage;
            self.append_batch(
                vec![
                    EventKind::AssistantMessage {
                        parts: turn.parts.clone(),
                    },
                    EventKind::ProviderUsage {
                        input_tokens: usage.input_tokens.unwrap_or(0),
                        output_tokens: usage.output_tokens.unwrap_or(0),
                        cache_read_tokens: usage.cache_read_tokens,
                        cache_creation_tokens: usage.cache_creation_tokens,
                        cache_miss_tokens: usage.cache_miss_tokens,
                        common_prefix_tokens: Some(view.report.common_prefix_tokens),
                    },
                ],
                observer,
            )?;
            if calls.is_empty() || turn.stop_reason == StopReason::EndTurn && calls.is_empty() {
                let prefix = view.report.common_prefix_tokens;
                let mut report = view.report;
                fill_provider_metrics(&mut report, Some((*usage, Some(prefix))));
                return Ok(TurnOutcome {
                    steps: step,
                    final_text: turn.text(),
                    report: Some(report),
                });
            }
            let mut results = Vec::with_capacity(calls.len());
            for call in &calls {
                results.push(EventKind::ToolResult(self.tools.execute(call)));
            }
            // The results of one assistant turn commit together.
            self.append_batch(results, observer)?;
        }
        Err(AgentError::StepLimit(self.options.max_steps))
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
        Ok(events.iter().find_map(|e| match &e.kind {
            EventKind::ProviderUsage {
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_creation_tokens,
                cache_miss_tokens,
                common_prefix_tokens,
            } => Some((
                latch_provider::Usage {
                    input_tokens: Some(*input_tokens),
                    output_tokens: Some(*output_tokens),
                    cache_read_tokens: *cache_read_tokens,
                    cache_creation_tokens: *cache_creation_tokens,
                    cache_miss_tokens: *cache_miss_tokens,
                },
                *common_prefix_tokens,
            )),
            _ => None,
        }))
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
