//! The durable record of each model request ([`RequestRecord`]): the engine
//! asked, the budget, and — on the agent's first request, or when it
//! changed — the query and what every request of the agent shares (system
//! prompt, tool schemas, extension sources, model, wire, output limit).
//! `latch engine replay` asks other engines for their views under exactly
//! these requests.

use latch_engine_sdk::types::ContextRequest;
use latch_kernel::{EventKind, RequestRecord, RequestShape};
use latch_provider::ToolSchema;

/// What the agent recorded last, so unchanged parts are not repeated.
#[derive(Debug, Default)]
pub(crate) struct RequestLog {
    shape: Option<RequestShape>,
    query: Option<String>,
}

impl RequestLog {
    /// The event recording `request`, asked of `engine` with `tools`, as
    /// `model` over `wire` with `max_tokens`.
    pub(crate) fn record(
        &mut self,
        engine: &str,
        request: &ContextRequest,
        tools: &[ToolSchema],
        model: &str,
        wire: &str,
        max_tokens: u32,
    ) -> EventKind {
        let shape = RequestShape {
            system_prompt: request.system_prompt.clone(),
            tools: tools
                .iter()
                .map(|t| serde_json::to_value(t).unwrap_or(serde_json::Value::Null))
                .collect(),
            extensions: request.extensions.clone(),
            model: model.to_string(),
            wire: wire.to_string(),
            max_tokens,
        };
        let shape = (self.shape.as_ref() != Some(&shape)).then(|| {
            self.shape = Some(shape.clone());
            shape
        });
        let query = (self.query.as_deref() != Some(request.query.as_str())).then(|| {
            self.query = Some(request.query.clone());
            request.query.clone()
        });
        EventKind::ModelRequest(RequestRecord {
            engine: engine.to_string(),
            budget: request.budget,
            query,
            shape,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::{ContextBudget, SessionContext};

    fn request(query: &str) -> ContextRequest {
        ContextRequest {
            system_prompt: "You are Latch.".into(),
            session_context: SessionContext {
                workspace: "/w".into(),
                repository_instructions: String::new(),
                mode: "run".into(),
            },
            budget: ContextBudget {
                context_window_tokens: 32_000,
                reserve_tokens: 8_000,
                recent_tokens: 64_000,
                tools_tokens: 10,
                extension_tokens: 0,
            },
            query: query.into(),
            extensions: vec![],
        }
    }

    #[test]
    fn shape_and_query_are_recorded_when_new_or_changed() {
        let tools = [ToolSchema {
            name: "shell".into(),
            description: "run".into(),
            input_schema: serde_json::json!({"type": "object"}),
        }];
        let mut log = RequestLog::default();
        let record = |log: &mut RequestLog, q: &str, max: u32| match log.record(
            "builtin:continuity",
            &request(q),
            &tools,
            "m",
            "anthropic",
            max,
        ) {
            EventKind::ModelRequest(r) => r,
            other => panic!("{other:?}"),
        };
        let first = record(&mut log, "fix it", 100);
        assert_eq!(first.query.as_deref(), Some("fix it"));
        let shape = first.shape.expect("the first request records the shape");
        assert_eq!(shape.tools[0]["name"], "shell");
        assert_eq!(shape.system_prompt, "You are Latch.");
        let again = record(&mut log, "fix it", 100);
        assert_eq!((again.query, again.shape), (None, None));
        let next = record(&mut log, "and now", 100);
        assert_eq!(next.query.as_deref(), Some("and now"));
        assert!(next.shape.is_none());
        assert_eq!(
            record(&mut log, "and now", 200).shape.unwrap().max_tokens,
            200
        );
        assert_eq!(next.budget.tools_tokens, 10);
    }
}
