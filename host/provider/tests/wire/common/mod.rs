//! Shared helpers for the provider tests: requests, providers pointed at the
//! fake server, and event collection.

#![allow(dead_code)]

use std::time::Duration;

use latch_engine_sdk::types::{MediaRef, Message, Part, Role, ToolCall, ToolResult};
use latch_provider::fake::FakeServer;
use latch_provider::{
    CacheHints, OpenAiWire, Provider, ProviderConfig, ProviderKind, ProviderRequest,
    ReasoningOptions, RetryPolicy, StreamEvent, ToolSchema,
};
use serde_json::json;

/// Both API kinds the fake server speaks, as the adapters name them.
pub const KINDS: [ProviderKind; 2] = [ProviderKind::Anthropic, ProviderKind::OpenAiCompatible];

/// A retry policy fast enough for tests.
pub fn fast_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
        max_retry_after: Duration::from_secs(1),
        jitter_percent: 0,
    }
}

/// A provider of `kind` talking to `server` with key `test-key`.
pub fn provider(kind: ProviderKind, server: &FakeServer) -> Provider {
    provider_with(kind, server, fast_retry(4), Some("test-key"))
}

/// A provider with an explicit retry policy and key.
pub fn provider_with(
    kind: ProviderKind,
    server: &FakeServer,
    retry: RetryPolicy,
    key: Option<&str>,
) -> Provider {
    let base_url = match kind {
        ProviderKind::Anthropic => server.anthropic_base_url(),
        _ => server.openai_base_url(),
    };
    let mut config = ProviderConfig::new(kind);
    config.base_url = Some(base_url);
    config.api_key = key.map(str::to_string);
    config.retry = retry;
    config.idle_timeout = Duration::from_secs(10);
    Provider::new(config).expect("valid provider config")
}

/// A provider of `kind` that reasons as `reasoning` says for
/// `test-model`, speaking `wire` when it is OpenAI.
pub fn reasoning_provider(
    kind: ProviderKind,
    server: &FakeServer,
    wire: OpenAiWire,
    reasoning: ReasoningOptions,
) -> Provider {
    let base_url = match kind {
        ProviderKind::Anthropic => server.anthropic_base_url(),
        _ => server.openai_base_url(),
    };
    let mut config = ProviderConfig::new(kind);
    config.base_url = Some(base_url);
    config.api_key = Some("test-key".into());
    config.retry = RetryPolicy::none();
    config.openai_wire = wire;
    config.reasoning.insert("test-model".into(), reasoning);
    Provider::new(config).expect("valid provider config")
}

/// The tool schemas used throughout the tests.
pub fn tools() -> Vec<ToolSchema> {
    vec![
        ToolSchema {
            name: "read_file".into(),
            description: "Read a workspace file.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
        ToolSchema {
            name: "shell".into(),
            description: "Run a shell command.".into(),
            input_schema: json!({"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}),
        },
    ]
}

/// A request over `messages` with Latch's default cache hints.
pub fn request(messages: Vec<Message>) -> ProviderRequest {
    ProviderRequest {
        model: "test-model".into(),
        system: "You are Latch, a coding agent. Work carefully and verify your changes.".into(),
        tools: tools(),
        cache_breakpoints: CacheHints::for_messages(&messages),
        messages,
        max_tokens: 1024,
    }
}

/// A user text message.
pub fn user(text: &str) -> Message {
    Message::text(Role::User, text)
}

/// A message of `role` with `parts`.
pub fn msg(role: Role, parts: Vec<Part>) -> Message {
    Message {
        role,
        parts,
        kernel: None,
        source_seqs: vec![],
    }
}

/// A tool call part.
pub fn call(id: &str, name: &str, args: &str) -> Part {
    Part::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments_json: args.into(),
    })
}

/// A tool result part.
pub fn result(call_id: &str, name: &str, content: &str, is_error: bool) -> Part {
    Part::ToolResult(ToolResult {
        call_id: call_id.into(),
        name: name.into(),
        content: content.into(),
        is_error,
        images: vec![],
    })
}

/// A PNG media reference.
pub fn png(sha: &str) -> MediaRef {
    MediaRef {
        sha256: sha.into(),
        mime_type: "image/png".into(),
        byte_len: 8,
        width: Some(1),
        height: Some(1),
    }
}

/// The eight-byte PNG signature, standing in for image bytes.
pub const PNG_BYTES: &[u8] = b"\x89PNG\r\n\x1a\n";
/// Its base64 encoding.
pub const PNG_BASE64: &str = "iVBORw0KGgo=";

/// Collects stream events.
#[derive(Default)]
pub struct Events(pub Vec<StreamEvent>);

impl Events {
    /// The concatenated text deltas since the last retry.
    pub fn text_since_last_retry(&self) -> String {
        let start = self
            .0
            .iter()
            .rposition(|e| matches!(e, StreamEvent::Retrying { .. }))
            .map_or(0, |i| i + 1);
        self.0[start..]
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The `Retrying` events as (attempt, delay).
    pub fn retries(&self) -> Vec<(u32, Duration)> {
        self.0
            .iter()
            .filter_map(|e| match e {
                StreamEvent::Retrying { attempt, delay, .. } => Some((*attempt, *delay)),
                _ => None,
            })
            .collect()
    }
}
