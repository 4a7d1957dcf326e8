//! One user turn: the run markers, then model requests and tool calls until
//! the model ends its turn.

use super::{Agent, AgentError, AgentEvent, StoreMedia, TurnOutcome, fill_provider_metrics};
use latch_engine_sdk::types::ToolCall;
use latch_kernel::EventKind;
use latch_provider::{AssistantTurn, CacheHints, ProviderRequest, StopReason, StreamEvent};

impl Agent {
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
                    .map(EventKind::KernelContext)
                    .collect(),
                observer,
            )?;
            let request = ProviderRequest {
                model: self.session.model.model.clone(),
                system: view.system.clone(),
                tools: schemas.clone(),
                cache_breakpoints: CacheHints::for_messages(&view.messages),
                messages: view.messages.clone(),
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
}
