//! The Anthropic Messages API (`POST {base}/v1/messages`, streamed).
//!
//! Serialization: tools, then the system prompt as text blocks, then the
//! messages. Consecutive messages of the same role are merged (the API
//! requires alternation) and tool results lead their user message.
//! `cache_control: {"type": "ephemeral"}` marks the last system block (tools
//! come first in Anthropic's cache order, so it covers tools + system), the
//! epoch's stable start and the end of its append-only part, as
//! [`CacheHints`](crate::CacheHints) say.
//!
//! Extended thinking (`[models.X] thinking_budget_tokens`): the body gets
//! `thinking: {type: "enabled", budget_tokens}` and, with tools, the
//! interleaved-thinking beta header. `thinking` and `redacted_thinking`
//! blocks come back as opaque [`ProviderState`] and are replayed as the
//! exact blocks, at their place in the assistant message, because the API
//! refuses a tool-loop continuation whose thinking was dropped or altered.
//!
//! Usage: `input_tokens` on the wire is the uncached input after the last
//! breakpoint, so Latch reports `input = input + cache_creation + cache_read`
//! and `cache_miss = input + cache_creation` (everything not read from the
//! cache).

use std::collections::BTreeMap;

use latch_engine_sdk::types::{Message, Part, Role};
use serde_json::{Map, Value, json};

use crate::error::ProviderError;
use crate::request::{
    AssistantTurn, MediaResolver, OpaqueBlock, ProviderRequest, ProviderState, ReasoningOptions,
    RequestContext, StopReason, StreamEvent, Usage,
};
use crate::sse::SseEvent;
use crate::wire::{Failure, WireStream, encode_image, opt_u64, parse_json};

/// The provider name used in errors and profiles.
pub const PROVIDER: &str = "anthropic";
/// The API version header value Latch speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The wire name of [`ProviderState`] this adapter writes and replays.
pub const WIRE: &str = "anthropic";
/// The beta that lets a model think between tool calls.
pub const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
/// The smallest thinking budget the API accepts.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// The `anthropic-beta` header value for `req`, when one is needed.
pub fn beta_header(
    req: &ProviderRequest,
    reasoning: Option<&ReasoningOptions>,
) -> Option<&'static str> {
    let thinking = reasoning.is_some_and(|r| r.thinking_budget_tokens.is_some());
    (thinking && !req.tools.is_empty()).then_some(INTERLEAVED_THINKING_BETA)
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

struct Block {
    value: Value,
    mark: bool,
    is_result: bool,
    /// A replayed thinking block: never marked for caching.
    opaque: bool,
}

/// The exact JSON body Latch sends for `req` (with `"stream": true`)
/// without provider state or thinking.
pub fn request_body(
    req: &ProviderRequest,
    media: &dyn MediaResolver,
) -> Result<Value, ProviderError> {
    request_body_with(req, &RequestContext::default(), None, media)
}

/// The exact JSON body Latch sends for `req` (with `"stream": true`), with
/// the opaque state of `ctx` replayed and thinking as `reasoning` says.
pub fn request_body_with(
    req: &ProviderRequest,
    ctx: &RequestContext,
    reasoning: Option<&ReasoningOptions>,
    media: &dyn MediaResolver,
) -> Result<Value, ProviderError> {
    let hints = req.cache_breakpoints;
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert("max_tokens".into(), json!(req.max_tokens));
    body.insert("stream".into(), json!(true));
    if let Some(budget) = reasoning.and_then(|r| r.thinking_budget_tokens) {
        if budget < MIN_THINKING_BUDGET || budget >= req.max_tokens {
            return Err(ProviderError::Config(format!(
                "[models.{}] thinking_budget_tokens = {budget} must be at least {MIN_THINKING_BUDGET} and below the output limit ({} tokens, [provider] max_tokens)",
                req.model, req.max_tokens
            )));
        }
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }

    let mut tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description,
                "input_schema": t.input_schema,
            })
        })
        .collect();
    if !req.system.is_empty() {
        let mut block = json!({"type": "text", "text": req.system});
        if hints.system {
            block["cache_control"] = ephemeral();
        }
        body.insert("system".into(), Value::Array(vec![block]));
    } else if hints.system
        && let Some(last) = tools.last_mut()
    {
        last["cache_control"] = ephemeral();
    }
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }

    let mut merged: Vec<(Role, Vec<Block>)> = Vec::new();
    for (i, m) in req.messages.iter().enumerate() {
        let mark = hints.stable_prefix_end == Some(i) || hints.epoch_end == Some(i);
        let replay = ctx.replay.get(&i).filter(|s| s.wire == WIRE);
        let mut blocks = message_blocks(m, replay, media)?;
        if blocks.is_empty() {
            // An empty message: its breakpoint falls on the block before it.
            if mark && let Some(b) = merged.last_mut().and_then(|(_, bs)| bs.last_mut()) {
                b.mark = true;
            }
            continue;
        }
        if mark
            && let Some(b) = blocks
                .iter_mut()
                .rev()
                .find(|b| !b.opaque)
                .or_else(|| merged.last_mut().and_then(|(_, bs)| bs.last_mut()))
        {
            b.mark = true;
        }
        match merged.last_mut() {
            Some((role, bs)) if *role == m.role => bs.extend(blocks),
            _ => merged.push((m.role, blocks)),
        }
    }
    let messages: Vec<Value> = merged
        .into_iter()
        .map(|(role, blocks)| {
            // Tool results must open a user message; the rest keeps its order.
            let (results, rest): (Vec<Block>, Vec<Block>) =
                blocks.into_iter().partition(|b| b.is_result);
            let content: Vec<Value> = results
                .into_iter()
                .chain(rest)
                .map(|mut b| {
                    if b.mark {
                        b.value["cache_control"] = ephemeral();
                    }
                    b.value
                })
                .collect();
            json!({"role": role_name(role), "content": content})
        })
        .collect();
    body.insert("messages".into(), Value::Array(messages));
    Ok(Value::Object(body))
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn image_block(
    media: &dyn MediaResolver,
    m: &latch_engine_sdk::types::MediaRef,
) -> Result<Value, ProviderError> {
    Ok(json!({
        "type": "image",
        "source": {"type": "base64", "media_type": m.mime_type, "data": encode_image(media, m)?},
    }))
}

fn text_block(text: String) -> Block {
    Block {
        value: json!({"type": "text", "text": text}),
        mark: false,
        is_result: false,
        opaque: false,
    }
}

fn message_blocks(
    m: &Message,
    replay: Option<&ProviderState>,
    media: &dyn MediaResolver,
) -> Result<Vec<Block>, ProviderError> {
    let mut out = Vec::new();
    let mut opaque: Vec<(usize, Value)> = match (replay, m.role) {
        (Some(state), Role::Assistant) => state.values().collect(),
        _ => Vec::new(),
    };
    opaque.reverse();
    let mut flush = |out: &mut Vec<Block>, upto: usize| {
        while opaque.last().is_some_and(|(at, _)| *at <= upto) {
            let (_, value) = opaque.pop().expect("checked");
            out.push(Block {
                value,
                mark: false,
                is_result: false,
                opaque: true,
            });
        }
    };
    for (index, part) in m.parts.iter().enumerate() {
        flush(&mut out, index);
        match (part, m.role) {
            // The API refuses empty text blocks.
            (Part::Text(t), _) if t.is_empty() => {}
            (Part::Text(t), _) => out.push(text_block(t.clone())),
            (Part::Image(img), Role::User) => out.push(Block {
                value: image_block(media, img)?,
                mark: false,
                is_result: false,
                opaque: false,
            }),
            (Part::ToolCall(c), Role::Assistant) => out.push(Block {
                value: json!({
                    "type": "tool_use",
                    "id": c.id,
                    "name": c.name,
                    "input": crate::wire::tool_arguments(&c.arguments_json),
                }),
                mark: false,
                is_result: false,
                opaque: false,
            }),
            (Part::ToolResult(r), Role::User) => {
                let mut block = json!({"type": "tool_result", "tool_use_id": r.call_id});
                if r.images.is_empty() {
                    if !r.content.is_empty() {
                        block["content"] = json!(r.content);
                    }
                } else {
                    let mut content = Vec::new();
                    if !r.content.is_empty() {
                        content.push(json!({"type": "text", "text": r.content}));
                    }
                    for img in &r.images {
                        content.push(image_block(media, img)?);
                    }
                    block["content"] = Value::Array(content);
                }
                if r.is_error {
                    block["is_error"] = json!(true);
                }
                out.push(Block {
                    value: block,
                    mark: false,
                    is_result: true,
                    opaque: false,
                });
            }
            // Parts the API does not allow in this role are rendered as text.
            (other, _) => out.push(text_block(latch_engine_sdk::render_part_text(other))),
        }
    }
    flush(&mut out, usize::MAX);
    Ok(out)
}

enum StreamBlock {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
        start_input: Option<Value>,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(String),
    Other,
}

/// Parsing state of one Anthropic response stream.
#[derive(Default)]
pub(crate) struct AnthropicStream {
    blocks: BTreeMap<u64, StreamBlock>,
    input: Option<u64>,
    cache_read: Option<u64>,
    cache_creation: Option<u64>,
    output: Option<u64>,
    stop_reason: Option<String>,
    started: bool,
    stopped: bool,
}

impl AnthropicStream {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn merge_usage(&mut self, u: &Value) {
        if let Some(v) = opt_u64(u.get("input_tokens")) {
            self.input = Some(v);
        }
        if let Some(v) = opt_u64(u.get("cache_read_input_tokens")) {
            self.cache_read = Some(v);
        }
        if let Some(v) = opt_u64(u.get("cache_creation_input_tokens")) {
            self.cache_creation = Some(v);
        }
        if let Some(v) = opt_u64(u.get("output_tokens")) {
            self.output = Some(v);
        }
    }

    fn usage(&self) -> Usage {
        map_usage(
            self.input,
            self.output,
            self.cache_read,
            self.cache_creation,
        )
    }
}

/// Maps Anthropic's reported categories to [`Usage`].
pub fn map_usage(
    input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_creation: Option<u64>,
) -> Usage {
    Usage {
        // Saturating: a provider's figures are outside input and may be
        // anything up to u64::MAX.
        input_tokens: input.map(|u| {
            u.saturating_add(cache_creation.unwrap_or(0))
                .saturating_add(cache_read.unwrap_or(0))
        }),
        output_tokens: output,
        cache_read_tokens: cache_read,
        cache_creation_tokens: cache_creation,
        cache_miss_tokens: input.map(|u| u.saturating_add(cache_creation.unwrap_or(0))),
        reasoning_tokens: None,
    }
}

fn protocol(message: impl Into<String>) -> Failure {
    Failure::Fatal(ProviderError::Protocol {
        provider: PROVIDER,
        message: message.into(),
    })
}

impl WireStream for AnthropicStream {
    fn on_sse(
        &mut self,
        ev: &SseEvent,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), Failure> {
        let data = parse_json(PROVIDER, &ev.data)?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        match kind {
            "message_start" => {
                self.started = true;
                if let Some(u) = data.pointer("/message/usage") {
                    self.merge_usage(u);
                    emit(StreamEvent::Usage(self.usage()));
                }
            }
            "content_block_start" => {
                let index = data
                    .get("index")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| protocol("content_block_start without an index"))?;
                let cb = data.get("content_block").cloned().unwrap_or(Value::Null);
                let block = match cb.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = cb
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        if !text.is_empty() {
                            emit(StreamEvent::TextDelta(text.clone()));
                        }
                        StreamBlock::Text(text)
                    }
                    Some("tool_use") => {
                        let id = cb
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        let name = cb
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        if id.is_empty() || name.is_empty() {
                            return Err(protocol("tool_use block without an id or a name"));
                        }
                        emit(StreamEvent::ToolCallStarted {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        let start_input = cb
                            .get("input")
                            .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
                            .cloned();
                        StreamBlock::Tool {
                            id,
                            name,
                            json: String::new(),
                            start_input,
                        }
                    }
                    Some("thinking") => {
                        emit(StreamEvent::ReasoningActivity);
                        let text = |k: &str| cb.get(k).and_then(Value::as_str).unwrap_or("");
                        StreamBlock::Thinking {
                            thinking: text("thinking").to_string(),
                            signature: text("signature").to_string(),
                        }
                    }
                    Some("redacted_thinking") => {
                        emit(StreamEvent::ReasoningActivity);
                        let data = cb.get("data").and_then(Value::as_str).unwrap_or("");
                        StreamBlock::Redacted(data.to_string())
                    }
                    _ => StreamBlock::Other,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let index = data.get("index").and_then(Value::as_u64);
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                let block = index.and_then(|i| self.blocks.get_mut(&i));
                match (delta.get("type").and_then(Value::as_str), block) {
                    (Some("text_delta"), Some(StreamBlock::Text(t))) => {
                        let piece = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        t.push_str(piece);
                        emit(StreamEvent::TextDelta(piece.to_string()));
                    }
                    (Some("input_json_delta"), Some(StreamBlock::Tool { id, json, .. })) => {
                        let piece = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        json.push_str(piece);
                        emit(StreamEvent::ToolArgumentsDelta {
                            id: id.clone(),
                            delta: piece.to_string(),
                        });
                    }
                    (Some("thinking_delta"), Some(StreamBlock::Thinking { thinking, .. })) => {
                        let piece = delta.get("thinking").and_then(Value::as_str).unwrap_or("");
                        thinking.push_str(piece);
                        emit(StreamEvent::ReasoningActivity);
                    }
                    (Some("signature_delta"), Some(StreamBlock::Thinking { signature, .. })) => {
                        let piece = delta.get("signature").and_then(Value::as_str).unwrap_or("");
                        signature.push_str(piece);
                    }
                    (Some("thinking_delta") | Some("signature_delta"), _) => {
                        return Err(protocol(
                            "a thinking delta for a block that is not a thinking block",
                        ));
                    }
                    (Some("text_delta") | Some("input_json_delta"), None) => {
                        return Err(protocol(
                            "content_block_delta for a block that never started",
                        ));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_string());
                }
                if let Some(u) = data.get("usage") {
                    self.merge_usage(u);
                    emit(StreamEvent::Usage(self.usage()));
                }
            }
            "message_stop" => {
                if !self.started {
                    return Err(protocol("message_stop before message_start"));
                }
                self.stopped = true;
            }
            "error" => {
                let etype = data
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_string();
                let message = data
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("(no message)")
                    .to_string();
                return Err(match etype.as_str() {
                    "overloaded_error" | "api_error" | "rate_limit_error" => {
                        Failure::Retryable(format!("{etype}: {message}"))
                    }
                    _ => Failure::Fatal(ProviderError::Stream {
                        provider: PROVIDER,
                        kind: etype,
                        message,
                    }),
                });
            }
            // "ping", "content_block_stop" and event types added later.
            _ => {}
        }
        Ok(())
    }

    fn is_complete(&self) -> bool {
        self.stopped
    }

    fn into_turn(self: Box<Self>) -> Result<AssistantTurn, ProviderError> {
        let usage = self.usage();
        let mut parts = Vec::new();
        let mut opaque = Vec::new();
        for (_, block) in self.blocks {
            match block {
                StreamBlock::Thinking {
                    thinking,
                    signature,
                } => opaque.push(OpaqueBlock {
                    before_part: parts.len(),
                    json: json!({"type": "thinking", "thinking": thinking, "signature": signature})
                        .to_string(),
                }),
                StreamBlock::Redacted(data) => opaque.push(OpaqueBlock {
                    before_part: parts.len(),
                    json: json!({"type": "redacted_thinking", "data": data}).to_string(),
                }),
                StreamBlock::Text(t) if !t.is_empty() => parts.push(Part::Text(t)),
                StreamBlock::Tool {
                    id,
                    name,
                    json,
                    start_input,
                } => {
                    let arguments_json = if !json.is_empty() {
                        json
                    } else if let Some(v) = start_input {
                        v.to_string()
                    } else {
                        "{}".to_string()
                    };
                    parts.push(Part::ToolCall(latch_engine_sdk::types::ToolCall {
                        id,
                        name,
                        arguments_json,
                    }));
                }
                _ => {}
            }
        }
        let stop_reason = match self.stop_reason.as_deref() {
            Some("end_turn") | Some("stop_sequence") => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_string()),
            None => StopReason::Other("unspecified".to_string()),
        };
        Ok(AssistantTurn {
            parts,
            stop_reason,
            usage,
            provider_state: (!opaque.is_empty()).then(|| ProviderState {
                wire: WIRE.to_string(),
                blocks: opaque,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_keeps_unknown_categories_unknown() {
        let u = map_usage(Some(10), Some(5), Some(100), Some(20));
        assert_eq!(u.input_tokens, Some(130));
        assert_eq!(u.cache_miss_tokens, Some(30));
        assert_eq!(u.cache_hit_rate(), Some(100.0 / 130.0));
        let u = map_usage(Some(10), None, None, None);
        assert_eq!(u.input_tokens, Some(10));
        assert_eq!(u.output_tokens, None);
        assert_eq!(u.cache_read_tokens, None);
        assert_eq!(u.cache_creation_tokens, None);
        assert_eq!(u.cache_hit_rate(), None);
        assert_eq!(map_usage(None, None, Some(3), None).cache_miss_tokens, None);
    }

    #[test]
    fn redacted_thinking_is_kept_and_replayed_first() {
        let mut stream = AnthropicStream::new();
        let mut sink = |_e: StreamEvent| {};
        for data in [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "redacted_thinking", "data": "EnCrYpTeD"}}),
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "input_json_delta", "partial_json": r#"{"cmd":"ls"}"#}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}),
            json!({"type": "message_stop"}),
        ] {
            let ev = SseEvent {
                event: String::new(),
                data: data.to_string(),
            };
            assert!(stream.on_sse(&ev, &mut sink).is_ok());
        }
        let turn = Box::new(stream).into_turn().unwrap();
        let state = turn.provider_state.clone().unwrap();
        assert_eq!(state.blocks.len(), 1);
        assert_eq!(state.blocks[0].before_part, 0);
        let req = ProviderRequest {
            model: "m".into(),
            system: String::new(),
            tools: vec![],
            messages: vec![
                Message::text(Role::User, "go"),
                Message {
                    role: Role::Assistant,
                    parts: turn.parts.clone(),
                    kernel: None,
                    source_seqs: vec![],
                },
            ],
            max_tokens: 100,
            cache_breakpoints: crate::CacheHints::none(),
        };
        let ctx = RequestContext {
            replay: [(1, state)].into_iter().collect(),
            cache_key: None,
        };
        let body = request_body_with(&req, &ctx, None, &crate::NoMedia).unwrap();
        let content = &body["messages"][1]["content"];
        assert_eq!(
            content[0],
            json!({"type": "redacted_thinking", "data": "EnCrYpTeD"})
        );
        assert_eq!(content[1]["type"], "tool_use");
        // Without the context nothing opaque is sent.
        let plain = request_body(&req, &crate::NoMedia).unwrap();
        assert_eq!(plain["messages"][1]["content"][0]["type"], "tool_use");
    }
}
