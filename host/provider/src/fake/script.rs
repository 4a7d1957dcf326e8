//! The fake server's script: what the "model" answers, in order.

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::CapturedRequest;

/// Token counts the fake server puts on the wire, in the provider's own
/// categories. A `None` field is omitted from the response.
///
/// `input_tokens` is the provider's native input figure: for Anthropic the
/// uncached input after the last breakpoint (`input_tokens`), for OpenAI all
/// prompt tokens (`prompt_tokens`). `cache_creation_tokens` only exists on
/// the Anthropic wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireUsage {
    /// Anthropic `input_tokens` / OpenAI `prompt_tokens`.
    pub input_tokens: Option<u64>,
    /// Anthropic `output_tokens` / OpenAI `completion_tokens`.
    pub output_tokens: Option<u64>,
    /// Anthropic `cache_read_input_tokens` / OpenAI
    /// `prompt_tokens_details.cached_tokens`.
    pub cache_read_tokens: Option<u64>,
    /// Anthropic `cache_creation_input_tokens`.
    pub cache_creation_tokens: Option<u64>,
    /// Responses `output_tokens_details.reasoning_tokens` (only that wire
    /// reports it).
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

/// The usage a scripted turn reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScriptedUsage {
    /// Computed from the request by the simulated prompt cache (see
    /// [`super`]) and the canonical estimator.
    #[default]
    Computed,
    /// Exactly these figures (all `None`: no usage at all).
    Reported(WireUsage),
}

/// One scripted model answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptedTurn {
    /// Assistant text, streamed in a few deltas.
    pub text: Option<String>,
    /// Tool calls as `(name, arguments_json)`; the server assigns the ids
    /// (`toolu_fake_N` / `call_fake_N`).
    pub tool_calls: Vec<(String, String)>,
    /// Usage to report.
    pub usage: ScriptedUsage,
    /// Stream a reasoning (thinking) block first.
    pub reasoning: bool,
    /// Override the wire stop reason (`max_tokens`, `length`, ...); by
    /// default it is the tool-use reason when there are tool calls, else the
    /// end-of-turn reason.
    pub stop_reason: Option<String>,
    /// The ids issued for the first tool calls, as a server that does not
    /// number them uniquely would: `Some(id)` issues exactly `id` (even one
    /// issued before), `None` issues no id at all. Calls past the list get
    /// the server's own unique ids.
    #[serde(default)]
    pub call_ids: Vec<Option<String>>,
}

impl ScriptedTurn {
    /// A turn that only says `text`.
    pub fn text(text: impl Into<String>) -> Self {
        ScriptedTurn {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    /// A turn that calls one tool.
    pub fn tool_call(name: impl Into<String>, arguments_json: impl Into<String>) -> Self {
        ScriptedTurn::default().with_tool_call(name, arguments_json)
    }

    /// Adds a tool call.
    pub fn with_tool_call(
        mut self,
        name: impl Into<String>,
        arguments_json: impl Into<String>,
    ) -> Self {
        self.tool_calls.push((name.into(), arguments_json.into()));
        self
    }

    /// Sets the text.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Sets the usage.
    pub fn with_usage(mut self, usage: ScriptedUsage) -> Self {
        self.usage = usage;
        self
    }

    /// Streams a reasoning block first.
    pub fn with_reasoning(mut self) -> Self {
        self.reasoning = true;
        self
    }

    /// Issues these ids for the first tool calls (`None`: no id).
    pub fn with_call_ids(mut self, ids: impl IntoIterator<Item = Option<String>>) -> Self {
        self.call_ids = ids.into_iter().collect();
        self
    }

    /// Overrides the wire stop reason.
    pub fn with_stop_reason(mut self, reason: impl Into<String>) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }
}

/// A scripted failure, answered in the provider's wire format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScriptedFailure {
    /// 429 with a rate-limit error body and, when given, this `retry-after`
    /// header value (seconds, e.g. `"1"` or `"0.05"`).
    RateLimited {
        /// The `retry-after` header value.
        retry_after: Option<String>,
    },
    /// 429 with a rate-limit error body and exactly these extra headers
    /// (`retry-after-ms`, an HTTP-date `retry-after`, hostile values, ...).
    RateLimitedWith {
        /// Header names and values, sent as given.
        headers: Vec<(String, String)>,
    },
    /// A server error (500, 503, 529, ...) with an error body.
    ServerError {
        /// HTTP status.
        status: u16,
        /// The error message in the body.
        message: String,
    },
    /// A refusal (400, 401, 403, 404, ...) with an error body.
    Reject {
        /// HTTP status.
        status: u16,
        /// The error message in the body.
        message: String,
    },
    /// Streams `turn` but stops after `after_events` SSE events: with
    /// `abort`, the connection breaks; without it, the body ends cleanly
    /// but without the terminal event.
    CutStream {
        /// The turn whose stream is cut.
        turn: ScriptedTurn,
        /// How many SSE events are sent.
        after_events: usize,
        /// Break the connection instead of ending the body.
        abort: bool,
    },
    /// A 200 stream that starts, then reports an error event
    /// (`overloaded_error` is retryable for Anthropic).
    StreamError {
        /// The error type, e.g. `overloaded_error`.
        kind: String,
        /// Its message.
        message: String,
    },
}

/// One step of a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScriptStep {
    /// Answer with a turn.
    Turn(ScriptedTurn),
    /// Fail.
    Fail(ScriptedFailure),
}

impl From<ScriptedTurn> for ScriptStep {
    fn from(t: ScriptedTurn) -> Self {
        ScriptStep::Turn(t)
    }
}

impl From<ScriptedFailure> for ScriptStep {
    fn from(f: ScriptedFailure) -> Self {
        ScriptStep::Fail(f)
    }
}

/// Computes the next step from the request when the queue is empty.
pub type Responder = Arc<dyn Fn(&CapturedRequest) -> ScriptStep + Send + Sync>;

/// What the fake server answers: a queue of steps, each consumed by one
/// request to either endpoint, then an optional responder. With neither
/// left, requests get a 400 saying the script is exhausted.
#[derive(Clone, Default)]
pub struct Script {
    pub(crate) steps: VecDeque<ScriptStep>,
    pub(crate) responder: Option<Responder>,
    pub(crate) api_key: Option<String>,
    pub(crate) pace: Option<std::time::Duration>,
    pub(crate) chat_server: super::local::ChatServer,
    pub(crate) n_ctx: Option<u64>,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Script")
            .field("steps", &self.steps)
            .field("responder", &self.responder.is_some())
            .field("api_key", &self.api_key.is_some())
            .finish()
    }
}

impl Script {
    /// A script of these steps, in order.
    pub fn new<S: Into<ScriptStep>>(steps: impl IntoIterator<Item = S>) -> Self {
        Script {
            steps: steps.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Answers requests beyond the queued steps by calling `f` on the
    /// captured request (for scripted sessions that react to tool results).
    pub fn with_responder(
        mut self,
        f: impl Fn(&CapturedRequest) -> ScriptStep + Send + Sync + 'static,
    ) -> Self {
        self.responder = Some(Arc::new(f));
        self
    }

    /// Refuses requests without this key (`x-api-key` or `Authorization:
    /// Bearer`) with the provider's 401, as the real services do.
    pub fn expect_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Streams each scripted turn's events this far apart (a demo a
    /// person can watch); without it they are sent at once.
    pub fn with_pace(mut self, pace: std::time::Duration) -> Self {
        self.pace = Some(pace);
        self
    }

    /// Answers Chat Completions (and `/v1/models`, `/props`) as `server`
    /// does (see the `local` module): llama.cpp's servers refuse what they
    /// refuse and report what they report.
    pub fn as_server(mut self, server: super::local::ChatServer) -> Self {
        self.chat_server = server;
        self
    }

    /// The context window (`n_ctx`) a local server runs with (default
    /// [`super::local::DEFAULT_N_CTX`]); a longer prompt is refused as that
    /// server refuses it.
    pub fn with_context_window(mut self, n_ctx: u64) -> Self {
        self.n_ctx = Some(n_ctx);
        self
    }

    /// Appends a step.
    pub fn push(&mut self, step: impl Into<ScriptStep>) {
        self.steps.push_back(step.into());
    }
}
