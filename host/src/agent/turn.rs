//! One user turn: the run markers, then model requests and tool calls until
//! the model ends its turn, the configured step cap (none by default) is
//! reached, or a provider error stops it. Each tool result is committed the
//! moment its call finishes; an answer cut off at the output limit is
//! continued, not taken for the end of the turn, and a tool call cut off
//! with it (or whose arguments are not JSON) is answered with an error the
//! model can act on, never run.

use super::call_ids;
use super::hooks::HookPoint;
use super::permissions::Permit;
use super::provider_io::{self, RequestFigures};
use super::{Agent, AgentError, AgentEvent, StoreMedia, TurnOutcome, fill_provider_metrics};
use latch_engine_sdk::types::{SessionContext, ToolCall, ToolResult};
use latch_kernel::{EventKind, StoreError};
use latch_provider::{
    AssistantTurn, CacheHints, ProviderError, ProviderRequest, StopReason, StreamEvent, Usage,
};

/// Consecutive answers cut off at the output limit that are continued before
/// the turn reports the truncation.
pub const MAX_TRUNCATED_CONTINUATIONS: usize = 3;

/// Source of the notes the loop itself appends.
pub const LATCH_NOTE_SOURCE: &str = "latch";

/// What the model is told when its answer was cut off.
fn truncation_note(max_tokens: u32) -> String {
    format!(
        "[Latch] Your previous answer was cut off at the output limit ({max_tokens} tokens). \
         Continue exactly where it stopped; split long output into smaller steps."
    )
}

/// The note that tells the model its session context changed since it was
/// last told; `None` when nothing changed.
pub fn context_update_note(told: &SessionContext, now: &SessionContext) -> Option<String> {
    let mut changes = Vec::new();
    if told.mode != now.mode {
        changes.push(format!(
            "Mode: {} (this session started in mode {}; this note supersedes it)",
            now.mode, told.mode
        ));
    }
    if told.workspace != now.workspace {
        changes.push(format!("Workspace: {}", now.workspace));
    }
    if told.repository_instructions != now.repository_instructions {
        changes.push(if now.repository_instructions.is_empty() {
            "Repository instructions: none any more".to_string()
        } else {
            format!(
                "Repository instructions changed; they now read:\n{}",
                now.repository_instructions
            )
        });
    }
    (!changes.is_empty()).then(|| {
        format!(
            "[Latch] The session context changed since it was last stated:\n{}",
            changes.join("\n")
        )
    })
}

/// The calls of a turn, and which of them are cut off: every call whose
/// arguments are not a complete JSON object, and, when the answer stopped
/// at the output limit, its last call (whatever it holds, it may be
/// unfinished). All calls stay in order; the cut-off ones are never run.
fn split_cut_calls(calls: Vec<ToolCall>, stop: &StopReason) -> (Vec<ToolCall>, Vec<ToolCall>) {
    let last = calls.len().checked_sub(1);
    let cut = calls
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            !latch_provider::arguments_are_complete(&c.arguments_json)
                || (*stop == StopReason::MaxTokens && Some(*i) == last)
        })
        .map(|(_, c)| c.clone())
        .collect();
    (calls, cut)
}

/// The error result a cut-off call gets: what happened, that nothing ran,
/// and what to do, with the start of what the model wrote.
fn cut_call_result(call: &ToolCall, stop: &StopReason, max_tokens: u32) -> ToolResult {
    let shown: String = call.arguments_json.chars().take(200).collect();
    let more = if shown.len() < call.arguments_json.len() {
        "…"
    } else {
        ""
    };
    let why = if *stop == StopReason::MaxTokens {
        format!(
            "your answer was cut off at the output limit ({max_tokens} tokens) while you were writing this call"
        )
    } else {
        "its arguments are not a complete JSON object".to_string()
    };
    ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: format!(
            "[Latch] This call to `{}` was not run: {why}. Nothing was executed. \
             Call it again with complete JSON arguments; split large content into \
             smaller calls. The arguments began: {shown}{more}",
            call.name
        ),
        is_error: true,
        images: Vec::new(),
    }
}

impl Agent {
    /// Run one user turn to its end.
    pub fn run_turn(
        &mut self,
        input: &str,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<TurnOutcome, AgentError> {
        // Images are read and stored first: a bad one stops the turn before
        // anything is recorded.
        let parts = self.user_parts(input)?;
        self.repair_interrupted(observer)?;
        self.start_controlled_turn();
        if !self.session_started {
            self.session_started = true;
            self.run_hooks(HookPoint::SessionStart, None, &[], observer)?;
        }
        // The session context is recorded when it is new or changed; the
        // first recorded one stays the first provider-visible message, and a
        // change reaches the model as an appended note.
        let told = self.announced_context.clone();
        let first_run = !self.context_recorded;
        let changed = !first_run && told != self.current_context;
        self.append(
            EventKind::RunStarted {
                mode: self.options.mode.clone(),
                context: (first_run || changed).then(|| self.current_context.clone()),
            },
            observer,
        )?;
        if changed && let Some(text) = context_update_note(&told, &self.current_context) {
            self.append(
                EventKind::NotificationDelivered {
                    source: LATCH_NOTE_SOURCE.into(),
                    text,
                },
                observer,
            )?;
        }
        self.announced_context = self.current_context.clone();
        self.context_recorded = true;
        self.append(EventKind::UserMessage { parts }, observer)?;
        self.run_hooks(
            HookPoint::UserMessage,
            None,
            &[("LATCH_PROMPT", input.to_string())],
            observer,
        )?;
        match self.drive(input, observer) {
            Ok(outcome) => {
                self.run_hooks(
                    HookPoint::TurnEnd,
                    None,
                    &[("LATCH_FINAL_TEXT", outcome.final_text.clone())],
                    observer,
                )?;
                self.append(
                    EventKind::RunFinished {
                        outcome: "completed".into(),
                    },
                    observer,
                )?;
                Ok(outcome)
            }
            Err(e) => {
                // Committed history stays; calls left without a result are
                // answered as interrupted and the run is marked interrupted.
                let _ = self.answer_open_calls(observer);
                if matches!(e, AgentError::Interrupted) {
                    self.delegation_interrupted();
                }
                let marked = self.append(
                    EventKind::RunInterrupted {
                        reason: e.to_string(),
                    },
                    observer,
                );
                // A holder that lost the lease wrote nothing: the turn ends
                // with the refusal, which names who drives the session now.
                match marked {
                    Err(lost @ AgentError::Store(StoreError::LeaseLost { .. })) => Err(lost),
                    _ => Err(e),
                }
            }
        }
    }

    fn drive(
        &mut self,
        query: &str,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<TurnOutcome, AgentError> {
        let schemas = self.schemas.clone();
        let mut truncated = 0;
        let mut step = 0;
        loop {
            step += 1;
            if let Some(max) = self.options.max_steps
                && step > max
            {
                return Err(AgentError::StepLimit(max));
            }
            // A safe boundary: every earlier call has its result.
            self.safe_boundary(observer)?;
            self.check_interrupt()?;
            self.deliver_steering(observer)?;
            // Repeated failure: the kernel asks the model to re-ground.
            self.reground(observer)?;
            let (context_request, view) = self.materialize(query)?;
            // Kernel context is durable before the request that shows it,
            // tagged with the engine that wrote it, after the record of the
            // request it answers (what replay asks other engines again).
            let author = self.engine.name().to_string();
            let wire = self.provider.wire();
            let record = self.request_log.record(
                &author,
                &context_request,
                &schemas,
                &self.session.model.model,
                wire.name(),
                self.options.max_tokens,
            );
            self.append_batch(
                std::iter::once(record)
                    .chain(
                        view.persist
                            .iter()
                            .cloned()
                            .map(|e| EventKind::kernel_context(&author, e)),
                    )
                    .collect(),
                observer,
            )?;
            let mut request = ProviderRequest {
                model: self.session.model.model.clone(),
                system: view.system.clone(),
                tools: schemas.clone(),
                cache_breakpoints: CacheHints::for_messages(&view.messages),
                messages: latch_engine_sdk::validate::framed(&view.messages),
                max_tokens: self.options.max_tokens,
            };
            // The provider gets back the call ids it issued, where its API
            // pairs results with them.
            call_ids::to_wire(&self.store, &self.session.id, wire, &mut request.messages)?;
            let media = StoreMedia(self.store.clone());
            let ctx =
                provider_io::request_context(&self.store, &self.session.id, &request.messages)?;
            let figures = RequestFigures {
                provider: self.provider.kind().name(),
                model: &self.session.model.model,
                base_url: self.provider.base_url(),
                // The host's own count of the view it sends, never the
                // engine's report of it: calibration of every session of
                // this model is reduced from these figures.
                estimated_input_tokens: latch_engine_sdk::validate::request_tokens(
                    self.session.model.estimator,
                    &view,
                    context_request.budget.tools_tokens,
                ),
                common_prefix_tokens: view.report.common_prefix_tokens,
            };
            let result = {
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
                // Esc drops the request in flight (see `TurnControl`).
                self.interruptible(provider.complete_with(&request, &ctx, &media, &mut on_event))?
            };
            let mut turn: AssistantTurn = match result {
                Ok(turn) => turn,
                Err(source @ ProviderError::ContextTooLong { .. }) => {
                    // Refused as too long: never retried unchanged. The
                    // provider's count is recorded so calibration tightens
                    // the next request's budget.
                    let reported = match &source {
                        ProviderError::ContextTooLong {
                            reported_tokens, ..
                        } => *reported_tokens,
                        _ => None,
                    };
                    let usage = Usage {
                        input_tokens: reported,
                        ..Usage::default()
                    };
                    self.append(provider_io::usage_event(&usage, &figures), observer)?;
                    return Err(AgentError::ContextTooLong {
                        estimated_tokens: figures.estimated_input_tokens,
                        model: self.session.model.model.clone(),
                        window: self.session.model.context_window_tokens,
                        source: Box::new(source),
                    });
                }
                Err(e) => return Err(e.into()),
            };
            // Session-unique call ids before anything runs or is committed;
            // the provider's own ride beside the message.
            let provider_ids = call_ids::assign(&self.store, &self.session.id, &mut turn)?;
            let calls: Vec<ToolCall> = turn.tool_calls().cloned().collect();
            let usage = &turn.usage;
            self.append_batch(
                provider_io::turn_events(&turn, &figures, wire, provider_ids),
                observer,
            )?;
            // A call cut off at the output limit, or whose arguments are not
            // a JSON object, never runs: its result tells the model why.
            let (calls, cut) = split_cut_calls(calls, &turn.stop_reason);
            if !cut.is_empty() {
                truncated += 1;
                if truncated > MAX_TRUNCATED_CONTINUATIONS {
                    self.append_batch(
                        cut.iter()
                            .map(|c| {
                                EventKind::ToolResult(cut_call_result(
                                    c,
                                    &turn.stop_reason,
                                    self.options.max_tokens,
                                ))
                            })
                            .collect(),
                        observer,
                    )?;
                    return Err(AgentError::Truncated {
                        max_tokens: self.options.max_tokens,
                        times: truncated,
                    });
                }
            }
            if calls.is_empty() && cut.is_empty() && turn.stop_reason == StopReason::MaxTokens {
                // Cut off, not finished: the model is told and continues.
                truncated += 1;
                if truncated > MAX_TRUNCATED_CONTINUATIONS {
                    return Err(AgentError::Truncated {
                        max_tokens: self.options.max_tokens,
                        times: truncated,
                    });
                }
                self.append(
                    EventKind::NotificationDelivered {
                        source: LATCH_NOTE_SOURCE.into(),
                        text: truncation_note(self.options.max_tokens),
                    },
                    observer,
                )?;
                continue;
            }
            if cut.is_empty() {
                truncated = 0;
            }
            // Children still at work when the model ends its turn: their
            // reports continue it.
            if calls.is_empty() && cut.is_empty() && self.settle_children(observer)? {
                continue;
            }
            if calls.is_empty() && cut.is_empty() {
                let prefix = view.report.common_prefix_tokens;
                let mut report = view.report;
                fill_provider_metrics(&mut report, Some((*usage, Some(prefix))));
                return Ok(TurnOutcome {
                    steps: step,
                    final_text: turn.text(),
                    report: Some(report),
                });
            }
            // Each result is durable the moment its call finishes: a crash
            // during a later call loses none of the earlier ones. A cut-off
            // call is answered in its place, after the calls before it ran.
            for call in &calls {
                if !self.options.tools.offers(&call.name) {
                    let result = ToolResult {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        content: super::ToolFilter::refusal(&call.name),
                        is_error: true,
                        images: Vec::new(),
                    };
                    self.append(EventKind::ToolResult(result), observer)?;
                    continue;
                }
                if cut.iter().any(|c| c.id == call.id) {
                    let result = cut_call_result(call, &turn.stop_reason, self.options.max_tokens);
                    self.append(EventKind::ToolResult(result), observer)?;
                    continue;
                }
                self.check_interrupt()?;
                if let Some(denied) = self.pre_tool_hooks(call, observer)? {
                    self.append(EventKind::ToolResult(denied), observer)?;
                    continue;
                }
                // Plan mode: nothing that changes the workspace runs.
                if let Some(refused) = self.plan_gate(call) {
                    self.append(EventKind::ToolResult(refused), observer)?;
                    continue;
                }
                if self.delegated_call(call, observer)? {
                    continue;
                }
                let planning = self.session_mode().is_plan();
                let result = if call.name == latch_engine_sdk::RECALL_TOOL {
                    self.recall_tool(call)?
                } else if call.name == super::plan::PROPOSE_PLAN {
                    match self.propose_plan(call, observer)? {
                        Some(result) => result,
                        // Its result is committed with the decision.
                        None => continue,
                    }
                } else {
                    match self.permit(call, observer)? {
                        Permit::Run => self.tools.execute(call),
                        Permit::RunEscalated => self.tools.execute_escalated(call),
                        // The denial and the call's result are committed.
                        Permit::Denied => continue,
                    }
                };
                let result = if planning && call.name == "shell" {
                    ToolResult {
                        content: format!("{}\n{}", result.content, super::plan::READ_ONLY_NOTE),
                        ..result
                    }
                } else {
                    result
                };
                self.append(EventKind::ToolResult(result.clone()), observer)?;
                if !result.is_error {
                    self.load_nested(call, observer)?;
                }
                self.post_tool_hooks(call, &result, observer)?;
            }
        }
    }
}
