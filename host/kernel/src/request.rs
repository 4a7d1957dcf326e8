//! The record of a model request: what the agent loop asked its engine for
//! before the request (everything but the log itself), so that a recorded
//! session can be replayed through another engine under the same request
//! and budget (`latch engine replay`).
//!
//! Stored as the hidden [`crate::EventKind::ModelRequest`] event, committed in
//! the same batch as (and just before) the kernel-context entries the view
//! persisted: every event before it is the log the engine saw, every entry
//! after it up to the response is what the engine wrote for this request.

use latch_engine_sdk::types::{ContextBudget, ExtensionSource};
use serde::{Deserialize, Serialize};

/// One model request as the engine was asked for its view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The engine that was asked (its configured name).
    pub engine: String,
    /// The budget of the request (after calibration), as the engine got it.
    pub budget: ContextBudget,
    /// The recall query (the run's input); `None`: the same as the previous
    /// request of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// What every request of the agent shares; `None`: the same as the
    /// previous request of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<RequestShape>,
}

/// The parts of a request that stay fixed for an agent's life.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestShape {
    /// The session-independent system prompt.
    pub system_prompt: String,
    /// The tool schemas sent, in order (each `{name, description,
    /// input_schema}` as the provider adapter takes them).
    pub tools: Vec<serde_json::Value>,
    /// Extension sources of every request (the skill list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<ExtensionSource>,
    /// The model named in the request.
    pub model: String,
    /// The provider's wire format (`anthropic`, `openai-responses`,
    /// `openai-chat`).
    pub wire: String,
    /// Most output tokens per response.
    pub max_tokens: u32,
}
