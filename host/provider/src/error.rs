//! The errors a provider call can end with.
//!
//! Every error names the provider; rejections quote the provider's own
//! message, so a user can act on them without reading logs.

use thiserror::Error;

/// Why a provider call failed. No variant carries a partial turn: deltas
/// streamed before a failure are void.
#[derive(Debug, Error)]
pub enum ProviderError {
    /// The provider refused the request (400, 401, 403, 404, 413, 422, ...).
    /// Retrying the same request would fail the same way.
    #[error("{provider} rejected the request ({status} {status_text}): {message}{}", hint_suffix(.hint))]
    Rejected {
        /// Provider name (`anthropic`, `openai`, `openai-compatible`).
        provider: &'static str,
        /// HTTP status code.
        status: u16,
        /// Canonical reason phrase of the status.
        status_text: String,
        /// The provider's error message (from its JSON error body when it
        /// sent one, else the body text).
        message: String,
        /// What the user can do about it, when Latch knows.
        hint: Option<String>,
    },
    /// Retryable failures (429, 5xx, connection errors, overload) persisted
    /// through every allowed attempt.
    #[error("{provider} failed after {attempts} attempts: {last}")]
    RetriesExhausted {
        /// Provider name.
        provider: &'static str,
        /// Attempts made.
        attempts: u32,
        /// HTTP status of the last attempt, if it got a response.
        status: Option<u16>,
        /// Description of the last failure.
        last: String,
    },
    /// The response stream ended before its terminal event; the partial
    /// response is discarded.
    #[error("{provider} response was interrupted before the turn completed: {reason}")]
    Interrupted {
        /// Provider name.
        provider: &'static str,
        /// What was observed.
        reason: String,
    },
    /// The provider reported an error inside the stream that is not retryable.
    #[error("{provider} reported an error mid-stream ({kind}): {message}")]
    Stream {
        /// Provider name.
        provider: &'static str,
        /// The provider's error type.
        kind: String,
        /// The provider's message.
        message: String,
    },
    /// The provider refused the request as longer than the model's context
    /// window. Never retried unchanged: the caller must send less.
    #[error("{provider} refused the request as too long for the model's context window{}: {message}", figures(.reported_tokens, .limit_tokens))]
    ContextTooLong {
        /// Provider name.
        provider: &'static str,
        /// The provider's own message.
        message: String,
        /// The request's size in the provider's tokens, when it said.
        reported_tokens: Option<u64>,
        /// The window in the provider's tokens, when it said.
        limit_tokens: Option<u64>,
    },
    /// No API key was configured for a provider that needs one.
    #[error("no API key for {provider}: set {env_var} or [provider] api_key")]
    MissingApiKey {
        /// Provider name.
        provider: &'static str,
        /// The environment variable that would supply it.
        env_var: &'static str,
    },
    /// An image referenced by the request could not be read.
    #[error("cannot send image {sha256} ({mime_type}): {message}")]
    Media {
        /// The artifact's hash.
        sha256: String,
        /// Its MIME type.
        mime_type: String,
        /// Why it could not be resolved.
        message: String,
    },
    /// The provider sent something that is not its documented wire format.
    #[error("{provider} sent a response Latch cannot parse: {message}")]
    Protocol {
        /// Provider name.
        provider: &'static str,
        /// What was wrong.
        message: String,
    },
    /// The request could not be sent at all (bad URL, TLS setup, ...).
    #[error("cannot reach {provider} at {url}: {message}")]
    Transport {
        /// Provider name.
        provider: &'static str,
        /// The URL the request was for.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The provider configuration is unusable.
    #[error("invalid provider configuration: {0}")]
    Config(String),
}

fn figures(reported: &Option<u64>, limit: &Option<u64>) -> String {
    match (reported, limit) {
        (Some(r), Some(l)) => format!(" ({r} tokens > {l})"),
        (Some(r), None) => format!(" ({r} tokens)"),
        _ => String::new(),
    }
}

/// True when an error body or message says the prompt exceeds the
/// context window (Anthropic's "prompt is too long", OpenAI's
/// `context_length_exceeded`, and the wording compatible servers use).
pub(crate) fn is_context_length(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "prompt is too long",
        "maximum context length",
        "exceeds the context window",
        "context window",
        // llama.cpp's `llama-server`: "the request exceeds the available
        // context size, try increasing it" (type `exceed_context_size_error`).
        "exceed_context_size_error",
        "exceeds the available context size",
        // llama-cpp-python: "Requested tokens (N) exceed context window of M".
        "exceed context window",
    ]
    .iter()
    .any(|p| lower.contains(p))
}

/// The `N tokens > M` figures of a context-length message (Anthropic:
/// "prompt is too long: 208310 tokens > 200000 maximum"; OpenAI Chat:
/// "maximum context length is 128000 tokens. However, your messages
/// resulted in 130000 tokens").
pub(crate) fn context_figures(message: &str) -> (Option<u64>, Option<u64>) {
    let numbers: Vec<u64> = message
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    if let Some(i) = message.find(" tokens > ")
        && let [.., r] = numbers_before(&message[..i])[..]
    {
        let limit = message[i + 10..]
            .split(|c: char| !c.is_ascii_digit())
            .find_map(|w| w.parse().ok());
        return (Some(r), limit);
    }
    if message.contains("maximum context length") && numbers.len() >= 2 {
        return (Some(numbers[1]), Some(numbers[0]));
    }
    if message.contains("exceed context window") && numbers.len() >= 2 {
        return (Some(numbers[0]), Some(numbers[1]));
    }
    (None, None)
}

/// The figures of a context-length refusal: from the body's own fields
/// where the server sends them (`llama-server`: `n_prompt_tokens` and
/// `n_ctx` beside the message), else from the message text.
pub(crate) fn context_figures_of(body: &str, message: &str) -> (Option<u64>, Option<u64>) {
    let (reported, limit) = context_figures(message);
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return (reported, limit);
    };
    let field = |name: &str| {
        v.pointer(&format!("/error/{name}"))
            .or_else(|| v.get(name))
            .and_then(serde_json::Value::as_u64)
    };
    (
        field("n_prompt_tokens").or(reported),
        field("n_ctx").or(limit),
    )
}

fn numbers_before(s: &str) -> Vec<u64> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect()
}

fn hint_suffix(hint: &Option<String>) -> String {
    match hint {
        Some(h) => format!(" — {h}"),
        None => String::new(),
    }
}

impl ProviderError {
    /// The provider the error concerns, when it names one.
    pub fn provider(&self) -> Option<&'static str> {
        match self {
            ProviderError::Rejected { provider, .. }
            | ProviderError::RetriesExhausted { provider, .. }
            | ProviderError::Interrupted { provider, .. }
            | ProviderError::Stream { provider, .. }
            | ProviderError::ContextTooLong { provider, .. }
            | ProviderError::MissingApiKey { provider, .. }
            | ProviderError::Protocol { provider, .. }
            | ProviderError::Transport { provider, .. } => Some(provider),
            ProviderError::Media { .. } | ProviderError::Config(_) => None,
        }
    }

    /// True for [`ProviderError::Interrupted`]: the turn was cut short and
    /// nothing of it was committed.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, ProviderError::Interrupted { .. })
    }
}

/// Extracts the human message from a provider's JSON error body.
///
/// Understands Anthropic (`{"type":"error","error":{"message":..}}`), OpenAI
/// (`{"error":{"message":..}}`), plain `{"message":..}`, `{"error":"..."}` and
/// FastAPI-style `{"detail":..}`; anything else is quoted as text, shortened.
pub fn error_message_from_body(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        let candidates = [
            v.pointer("/error/message"),
            v.get("message"),
            v.get("error"),
            v.get("detail"),
        ];
        for c in candidates.into_iter().flatten() {
            match c {
                serde_json::Value::String(s) if !s.is_empty() => return s.clone(),
                serde_json::Value::Null => {}
                serde_json::Value::Object(_) => {}
                other => return other.to_string(),
            }
        }
    }
    let text = body.trim();
    if text.is_empty() {
        return "(no error message in the response body)".to_string();
    }
    let mut short: String = text.chars().take(500).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

/// The error `type` from a provider's JSON error body, when it has one.
pub(crate) fn error_kind_from_body(body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    v.pointer("/error/type")
        .or_else(|| v.pointer("/error/code"))
        .and_then(|t| t.as_str())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_found_in_every_known_shape() {
        let anthropic = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        assert_eq!(error_message_from_body(anthropic), "invalid x-api-key");
        assert_eq!(
            error_kind_from_body(anthropic).as_deref(),
            Some("authentication_error")
        );
        let openai = r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
        assert_eq!(
            error_message_from_body(openai),
            "Incorrect API key provided"
        );
        assert_eq!(
            error_message_from_body(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(
            error_message_from_body(r#"{"detail":"Not Found"}"#),
            "Not Found"
        );
        assert_eq!(error_message_from_body("upstream down"), "upstream down");
        assert!(error_message_from_body("").contains("no error message"));
    }

    #[test]
    fn context_length_refusals_are_recognized_with_their_figures() {
        let a = "prompt is too long: 208310 tokens > 200000 maximum";
        assert!(is_context_length(a));
        assert_eq!(context_figures(a), (Some(208310), Some(200000)));
        let o = "This model's maximum context length is 128000 tokens. However, your messages resulted in 130021 tokens.";
        assert!(is_context_length(o));
        assert_eq!(context_figures(o), (Some(130021), Some(128000)));
        let r = r#"{"error":{"code":"context_length_exceeded","message":"Your input exceeds the context window of this model."}}"#;
        assert!(is_context_length(r));
        assert_eq!(
            context_figures("Your input exceeds the context window of this model."),
            (None, None)
        );
        assert!(!is_context_length("invalid x-api-key"));
        // llama-server, with its counts as fields of the error.
        let l = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5210,"n_ctx":4096}}"#;
        assert!(is_context_length(l));
        let m = error_message_from_body(l);
        assert_eq!(context_figures_of(l, &m), (Some(5210), Some(4096)));
        // llama-cpp-python's own words.
        let p = "Requested tokens (9000) exceed context window of 8192";
        assert!(is_context_length(p));
        assert_eq!(context_figures(p), (Some(9000), Some(8192)));
    }

    #[test]
    fn rejection_reads_as_one_sentence() {
        let e = ProviderError::Rejected {
            provider: "anthropic",
            status: 401,
            status_text: "Unauthorized".into(),
            message: "invalid x-api-key".into(),
            hint: Some("set ANTHROPIC_API_KEY or [provider] api_key".into()),
        };
        assert_eq!(
            e.to_string(),
            "anthropic rejected the request (401 Unauthorized): invalid x-api-key — set ANTHROPIC_API_KEY or [provider] api_key"
        );
    }
}
