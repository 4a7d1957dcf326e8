//! A sliding-window context engine: the smallest complete Latch engine.
//!
//! It sends the session context, then the newest whole conversation units that
//! fit the budget. A unit is a user message, a notification, or an assistant
//! turn together with every tool result that answers it, so a tool call is
//! never separated from its result. It keeps no cache epochs and no canonical
//! state; it is a starting point to copy, not a replacement for the default
//! ContinuityEngine.

use latch_engine_sdk::estimate::message_tokens;
use latch_engine_sdk::types::*;
use latch_engine_sdk::{Engine, SessionView, estimate};

/// The engine's state: the model it serves and its one setting.
pub struct WindowEngine {
    model: ModelProfile,
    estimator: EstimatorProfile,
    /// Most conversation events the engine looks back over.
    max_events: u32,
}

impl Engine for WindowEngine {
    fn new(model: ModelProfile) -> Self {
        WindowEngine {
            estimator: model.estimator,
            model,
            max_events: 2_000,
        }
    }

    fn config(&self) -> String {
        serde_json::json!({ "max_events": self.max_events }).to_string()
    }

    fn set_config(&mut self, json: &str) -> Result<(), ConfigError> {
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| ConfigError::Malformed(e.to_string()))?;
        let map = value
            .as_object()
            .ok_or_else(|| ConfigError::Malformed(format!("expected an object, got {value}")))?;
        let mut max_events = self.max_events;
        for (key, v) in map {
            match key.as_str() {
                "max_events" => {
                    max_events = v
                        .as_u64()
                        .filter(|n| (1..=100_000).contains(n))
                        .ok_or_else(|| {
                            ConfigError::InvalidValue((
                                key.clone(),
                                "expected an integer from 1 to 100000".into(),
                            ))
                        })? as u32;
                }
                other => return Err(ConfigError::UnknownKey(other.to_string())),
            }
        }
        self.max_events = max_events;
        Ok(())
    }

    fn set_estimator(&mut self, profile: EstimatorProfile) {
        self.estimator = profile;
    }

    fn default_budget(&self) -> ContextBudget {
        ContextBudget::for_model(&self.model)
    }

    fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, EngineError> {
        let p = self.estimator;
        let budget = &request.budget;
        let limit = budget.limit_tokens();
        let context = latch_engine_sdk::validate::session_context_message(&request.session_context);
        let system_tokens = estimate(p, &request.system_prompt) as u64;
        let instructions = system_tokens + message_tokens(p, &context);
        let fixed = instructions + budget.tools_tokens;
        if fixed > limit {
            return Err(EngineError::BudgetExceeded(format!(
                "instructions and tools need {fixed} tokens but the limit is {limit}"
            )));
        }
        let room = (limit - fixed).min(budget.recent_tokens.max(1));

        // Walk back from the newest event, collecting whole units.
        let events = session.events_before(u64::MAX, self.max_events);
        let mut units: Vec<Vec<Message>> = Vec::new();
        let mut pending_results: Vec<Message> = Vec::new();
        for event in &events {
            let Some(msg) = event.to_message() else {
                continue;
            };
            match &event.body {
                EventBody::ToolResult(_) => pending_results.push(msg),
                EventBody::AssistantMessage(_) => {
                    let mut unit = vec![msg];
                    pending_results.reverse();
                    unit.append(&mut pending_results);
                    units.push(unit);
                }
                _ => {
                    // A result with no call before it in the window is dropped
                    // so the view never holds an orphan.
                    pending_results.clear();
                    units.push(vec![msg]);
                }
            }
        }
        let mut kept: Vec<Vec<Message>> = Vec::new();
        let mut used = 0u64;
        for unit in units {
            let cost: u64 = unit.iter().map(|m| message_tokens(p, m)).sum();
            if used + cost > room {
                break;
            }
            used += cost;
            kept.push(unit);
        }
        kept.reverse();
        let mut messages = vec![context];
        let mut first_retained = None;
        for unit in kept {
            for m in unit {
                if first_retained.is_none() {
                    first_retained = m.source_seqs.first().copied();
                }
                messages.push(m);
            }
        }
        let (image_count, image_tokens) = messages.iter().fold((0, 0), |(c, t), m| {
            let (mc, mt) = latch_engine_sdk::estimate::message_image_tokens(m);
            (c + mc, t + mt)
        });
        let total = instructions + used + budget.tools_tokens;
        let info = session.info();
        Ok(ContextView {
            system: request.system_prompt.clone(),
            // The window slides, so each view is sent whole.
            kept_messages: 0,
            messages,
            persist: Vec::new(),
            report: ContextReport {
                engine: format!("window {}", env!("CARGO_PKG_VERSION")),
                instructions_tokens: instructions,
                state_tokens: 0,
                recent_tokens: used,
                recall_tokens: 0,
                episode_tokens: 0,
                tools_tokens: budget.tools_tokens,
                extension_tokens: 0,
                total_tokens: total,
                limit_tokens: limit,
                reserve_tokens: budget.reserve_tokens,
                headroom_tokens: limit.saturating_sub(total),
                first_retained_seq: first_retained,
                evicted_tokens: 0,
                event_count: info.event_count,
                episode_count: 0,
                episodes_shown: 0,
                status: "ok".into(),
                epoch_generation: None,
                epoch_user_turns: 0,
                rotation_reason: None,
                retained_after_rotation_tokens: 0,
                image_count,
                image_tokens,
                common_prefix_tokens: 0,
                request_tokens: total,
                provider_prefix_utilization: None,
                measured_hit_rate: None,
            },
        })
    }
}

latch_engine_sdk::export_engine!(WindowEngine);

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::MemorySession;

    fn request(recent: u64) -> ContextRequest {
        ContextRequest {
            system_prompt: "You are a coding agent.".into(),
            session_context: SessionContext {
                workspace: "/w".into(),
                repository_instructions: String::new(),
                mode: "run".into(),
            },
            budget: ContextBudget {
                context_window_tokens: 10_000,
                reserve_tokens: 1_000,
                recent_tokens: recent,
                tools_tokens: 100,
                extension_tokens: 0,
            },
            query: String::new(),
            extensions: vec![],
        }
    }

    fn engine() -> WindowEngine {
        WindowEngine::new(ModelProfile::with_defaults("openai", "m"))
    }

    #[test]
    fn keeps_newest_units_within_budget() {
        let mut s = MemorySession::new("s", ModelProfile::with_defaults("openai", "m"));
        for i in 0..50 {
            s.user(&format!("question {i} {}", "x".repeat(200)));
            s.assistant(&format!("answer {i}"));
        }
        let view = engine().materialize(&s, &request(500)).unwrap();
        assert!(view.report.total_tokens <= view.report.limit_tokens);
        assert!(view.report.recent_tokens <= 500);
        let last = view.messages.last().unwrap();
        assert_eq!(last.source_seqs, vec![100], "the newest event is kept");
        assert!(view.messages.len() < 101, "old units were dropped");
    }

    #[test]
    fn never_splits_a_tool_unit() {
        let mut s = MemorySession::new("s", ModelProfile::with_defaults("openai", "m"));
        s.user("start");
        for i in 0..40 {
            s.tool_exchange(&format!("c{i}"), "read_file", "{}", &"y".repeat(100));
        }
        for recent in [30, 60, 90, 200, 1000] {
            let view = engine().materialize(&s, &request(recent)).unwrap();
            let body = &view.messages[1..];
            if let Some(first) = body.first() {
                assert!(
                    !matches!(first.parts[0], Part::ToolResult(_)),
                    "a view never starts with an orphan tool result (recent={recent})"
                );
            }
        }
    }

    #[test]
    fn config_round_trips_and_rejects_unknown_keys() {
        let mut e = engine();
        e.set_config(r#"{"max_events": 10}"#).unwrap();
        assert_eq!(e.config(), r#"{"max_events":10}"#);
        assert_eq!(
            e.set_config(r#"{"max_event": 10}"#),
            Err(ConfigError::UnknownKey("max_event".into()))
        );
        assert!(matches!(
            e.set_config(r#"{"max_events": 0}"#),
            Err(ConfigError::InvalidValue(_))
        ));
    }
}
