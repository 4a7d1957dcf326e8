//! Provider-neutral request and response types.
//!
//! A [`ProviderRequest`] is exactly what the context engine's view says the
//! model should see (system prompt, messages) plus the tool schemas and the
//! cache hints; an adapter serializes it for one wire format. While a
//! response streams, the caller receives transient [`StreamEvent`]s; only the
//! final [`AssistantTurn`] is ever committed.

use std::collections::BTreeMap;
use std::time::Duration;

use latch_engine_sdk::types::{KernelContextKind, MediaRef, Message, Part};
use serde::{Deserialize, Serialize};

/// One tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// Tool name, as the model calls it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the tool's arguments object.
    pub input_schema: serde_json::Value,
}

/// Where the request's cacheable prefix ends.
///
/// Anthropic caches explicitly at `cache_control` breakpoints; OpenAI and
/// OpenAI-compatible servers cache prefixes automatically and ignore these
/// hints. Indices refer to [`ProviderRequest::messages`]; out-of-range indices
/// are ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheHints {
    /// Put a breakpoint after the system prompt. Tools come before the system
    /// prompt in Anthropic's cache order, so this caches tools + system: the
    /// session-independent stable prefix.
    pub system: bool,
    /// Index of the last message of the epoch's stable start (normally the
    /// kernel snapshot that opened the current cache epoch). A breakpoint
    /// here keeps the epoch start cached even when many blocks were appended
    /// since the previous request.
    pub stable_prefix_end: Option<usize>,
    /// Index of the last message of the epoch's append-only part (normally
    /// the last message): the next request extends this prefix.
    pub epoch_end: Option<usize>,
}

impl CacheHints {
    /// No breakpoints at all.
    pub fn none() -> Self {
        CacheHints::default()
    }

    /// The hints Latch uses for an engine's view: a breakpoint after the
    /// system prompt, one at the newest kernel snapshot (the start of the
    /// current cache epoch), and one at the last message.
    pub fn for_messages(messages: &[Message]) -> Self {
        let stable_prefix_end = messages.iter().rposition(|m| {
            m.kernel
                .as_ref()
                .is_some_and(|k| k.kind == KernelContextKind::Snapshot)
        });
        let epoch_end = messages.len().checked_sub(1);
        CacheHints {
            system: true,
            // A snapshot that is also the last message needs one breakpoint.
            stable_prefix_end: stable_prefix_end.filter(|i| Some(*i) != epoch_end),
            epoch_end,
        }
    }
}

/// A provider-neutral model request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderRequest {
    /// Model name as the provider knows it.
    pub model: String,
    /// The session-independent system prompt (may be empty).
    pub system: String,
    /// Tool schemas, in a stable order.
    pub tools: Vec<ToolSchema>,
    /// The provider-visible messages of the engine's view, in order.
    pub messages: Vec<Message>,
    /// Most tokens the model may generate.
    pub max_tokens: u32,
    /// Where the cacheable prefix ends.
    pub cache_breakpoints: CacheHints,
}

/// Token usage as the provider reported it.
///
/// A category the provider did not report is `None`, never `0`: the measured
/// cache hit rate, `cache_read / (cache_read + cache_miss)`, is unknown unless
/// both were reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// All input (prompt) tokens of the request, cached or not.
    pub input_tokens: Option<u64>,
    /// Generated tokens.
    pub output_tokens: Option<u64>,
    /// Input tokens served from the provider's prompt cache.
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the provider's prompt cache (Anthropic).
    pub cache_creation_tokens: Option<u64>,
    /// Input tokens not served from the cache (written to it or not).
    pub cache_miss_tokens: Option<u64>,
    /// Output tokens the model spent reasoning (part of `output_tokens`),
    /// when the provider says so.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// `cache_read / (cache_read + cache_miss)`, when both are known and the
    /// denominator is not zero.
    pub fn cache_hit_rate(&self) -> Option<f64> {
        let read = self.cache_read_tokens?;
        let miss = self.cache_miss_tokens?;
        let total = read + miss;
        (total > 0).then(|| read as f64 / total as f64)
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model wants its tool calls run.
    ToolUse,
    /// The output hit `max_tokens`.
    MaxTokens,
    /// Anything else, with the provider's own word for it.
    Other(String),
}

/// A transient streaming event. Deltas are for display only: they are never
/// committed, and a failed or retried attempt voids the deltas before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StreamEvent {
    /// A piece of assistant text.
    TextDelta(String),
    /// The model started a tool call.
    ToolCallStarted {
        /// Provider-assigned call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// A piece of a tool call's JSON arguments.
    ToolArgumentsDelta {
        /// The call id from [`StreamEvent::ToolCallStarted`].
        id: String,
        /// The next fragment of the arguments text.
        delta: String,
    },
    /// The provider reported reasoning activity (its content is not kept).
    ReasoningActivity,
    /// Usage so far (cumulative; the last one is final).
    Usage(Usage),
    /// The attempt failed with a retryable error; everything streamed since
    /// the last `Retrying` (or the start) is void, and a new attempt starts
    /// after `delay`.
    Retrying {
        /// The attempt about to start (2 for the first retry).
        attempt: u32,
        /// How long the adapter waits first.
        delay: Duration,
        /// Why the previous attempt failed.
        reason: String,
    },
}

/// The committed result of one model request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantTurn {
    /// Text and tool calls, in the order the model produced them.
    pub parts: Vec<Part>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// What the provider reported.
    pub usage: Usage,
    /// Opaque blocks the provider requires back unchanged (signed thinking,
    /// encrypted reasoning); `None` when there were none. Never shown,
    /// never searchable, never the engine's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_state: Option<ProviderState>,
}

/// Opaque provider state of one assistant message: the blocks a provider
/// sent that are not conversation (Anthropic `thinking` /
/// `redacted_thinking` blocks with their signatures, OpenAI Responses
/// `reasoning` items with `encrypted_content`) and that it requires back,
/// unchanged, when the conversation continues.
///
/// Each block is kept as the exact JSON text Latch assembled from the
/// stream and is replayed as those bytes; Latch never reads its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderState {
    /// The wire format that produced the blocks (`anthropic`,
    /// `openai-responses`); blocks are only replayed to the same one.
    pub wire: String,
    /// The blocks, in the order the provider sent them.
    pub blocks: Vec<OpaqueBlock>,
}

/// One opaque block and where it sat among the message's visible parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpaqueBlock {
    /// How many of the message's visible parts came before it.
    pub before_part: usize,
    /// The block's exact JSON text.
    pub json: String,
}

impl ProviderState {
    /// The blocks as JSON values (a block that is not JSON is left out;
    /// Latch only stores blocks it serialized itself).
    pub(crate) fn values(&self) -> impl Iterator<Item = (usize, serde_json::Value)> + '_ {
        self.blocks.iter().filter_map(|b| {
            serde_json::from_str(&b.json)
                .ok()
                .map(|v| (b.before_part, v))
        })
    }
}

/// Per-session request context beside the engine's view: the opaque
/// provider state of the view's assistant messages and the prompt-cache
/// routing key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestContext {
    /// Provider state by index into [`ProviderRequest::messages`] (assistant
    /// messages only).
    pub replay: BTreeMap<usize, ProviderState>,
    /// Routes requests that share a prefix to the same cache (OpenAI
    /// Responses `prompt_cache_key`); Latch sets the session id.
    pub cache_key: Option<String>,
}

/// How a model reasons, per model (`[models.X]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningOptions {
    /// Anthropic extended thinking: the thinking budget in tokens (at least
    /// 1024 and below `max_tokens`); `None` leaves thinking off.
    pub thinking_budget_tokens: Option<u32>,
    /// OpenAI reasoning effort (`minimal`, `low`, `medium`, `high`);
    /// `None` sends no reasoning settings (for models that do not reason).
    pub reasoning_effort: Option<String>,
}

impl AssistantTurn {
    /// The tool calls of the turn, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &latch_engine_sdk::types::ToolCall> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    /// All text of the turn, concatenated.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// True when `arguments_json` is a complete JSON object, the only thing a
/// tool can be called with. A call whose arguments are not (cut off at the
/// output limit, or not JSON at all) is never run.
pub fn arguments_are_complete(arguments_json: &str) -> bool {
    matches!(
        serde_json::from_str::<serde_json::Value>(arguments_json),
        Ok(serde_json::Value::Object(_))
    )
}

/// Resolves an image reference to its bytes (normally from the artifact
/// store). Adapters base64-encode the bytes into the request.
pub trait MediaResolver: Send + Sync {
    /// The bytes of `media`, or a readable reason they are unavailable.
    fn resolve(&self, media: &MediaRef) -> Result<Vec<u8>, String>;
}

impl<F> MediaResolver for F
where
    F: Fn(&MediaRef) -> Result<Vec<u8>, String> + Send + Sync,
{
    fn resolve(&self, media: &MediaRef) -> Result<Vec<u8>, String> {
        self(media)
    }
}

/// A resolver for requests without images: every lookup fails.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoMedia;

impl MediaResolver for NoMedia {
    fn resolve(&self, media: &MediaRef) -> Result<Vec<u8>, String> {
        Err(format!(
            "no media resolver is configured (image {})",
            media.sha256
        ))
    }
}
