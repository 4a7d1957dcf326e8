//! Pieces both wire formats share: image encoding and the stream-state
//! interface the transport drives.

use base64::Engine as _;
use latch_engine_sdk::types::MediaRef;

use crate::error::ProviderError;
use crate::request::{AssistantTurn, MediaResolver, StreamEvent};
use crate::sse::SseEvent;

/// Resolves an image and returns its bytes base64-encoded (standard alphabet,
/// padded), as both APIs expect.
pub(crate) fn encode_image(
    media: &dyn MediaResolver,
    m: &MediaRef,
) -> Result<String, ProviderError> {
    let bytes = media.resolve(m).map_err(|message| ProviderError::Media {
        sha256: m.sha256.clone(),
        mime_type: m.mime_type.clone(),
        message,
    })?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// How a streamed event ended the attempt.
#[derive(Debug)]
pub enum Failure {
    /// The provider reported a transient failure; the request may be retried.
    Retryable(String),
    /// The call is over.
    Fatal(ProviderError),
}

/// The parsing state of one streamed response.
pub(crate) trait WireStream: Send {
    /// Consumes one SSE event, forwarding transient events to `emit`.
    fn on_sse(
        &mut self,
        ev: &SseEvent,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), Failure>;
    /// True once the terminal event arrived.
    fn is_complete(&self) -> bool;
    /// True when a clean end of the body right now may stand in for the
    /// terminal event (some OpenAI-compatible servers omit `[DONE]`).
    fn may_end_without_terminal(&self) -> bool {
        false
    }
    /// The committed turn; only called once the stream is complete.
    fn into_turn(self: Box<Self>) -> Result<AssistantTurn, ProviderError>;
}

/// Parses an SSE data payload as JSON, naming the provider on failure.
pub(crate) fn parse_json(provider: &'static str, data: &str) -> Result<serde_json::Value, Failure> {
    serde_json::from_str(data).map_err(|e| {
        Failure::Fatal(ProviderError::Protocol {
            provider,
            message: format!("invalid JSON in stream event ({e}): {}", shorten(data)),
        })
    })
}

fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(200).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// A tool call's arguments as they go back on the wire: always a JSON
/// object. Empty arguments are `{}`; arguments that are not a JSON object
/// (a call cut off at the output limit, or written by a model that does not
/// produce JSON, possibly recorded by an older Latch) are carried as
/// `{"_raw": "<text>"}`, so the request stays valid JSON for servers that
/// parse what they get back (llama.cpp's servers answer 500 otherwise) and
/// the model still sees what it wrote.
pub(crate) fn tool_arguments(arguments_json: &str) -> serde_json::Value {
    if arguments_json.trim().is_empty() {
        return serde_json::json!({});
    }
    match serde_json::from_str::<serde_json::Value>(arguments_json) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        _ => serde_json::json!({"_raw": arguments_json}),
    }
}

/// [`tool_arguments`] as the JSON text the OpenAI APIs carry: the
/// recorded text itself when it is already a JSON object (byte for byte,
/// so the cached prefix stays the same), else the repaired object.
pub(crate) fn tool_arguments_text(arguments_json: &str) -> String {
    if crate::request::arguments_are_complete(arguments_json) {
        arguments_json.to_string()
    } else {
        tool_arguments(arguments_json).to_string()
    }
}

/// A JSON number as u64; `null`, absent or negative values are unknown.
pub(crate) fn opt_u64(v: Option<&serde_json::Value>) -> Option<u64> {
    v.and_then(|v| v.as_u64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_arguments_are_always_an_object() {
        assert_eq!(tool_arguments(""), json!({}));
        assert_eq!(tool_arguments("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(tool_arguments("[1]"), json!({"_raw": "[1]"}));
        let cut = r#"{"path":"a.txt","content":"hel"#;
        assert_eq!(tool_arguments(cut), json!({"_raw": cut}));
        // Complete arguments go back byte for byte; cut ones as JSON.
        assert_eq!(tool_arguments_text("{\"a\": 1}"), "{\"a\": 1}");
        assert_eq!(tool_arguments_text(""), "{}");
        let sent: serde_json::Value = serde_json::from_str(&tool_arguments_text(cut)).unwrap();
        assert_eq!(sent, json!({"_raw": cut}));
    }
}
