//! `latch-provider`: Latch's model provider adapters.
//!
//! One entry point, [`Provider::complete`], sends a provider-neutral
//! [`ProviderRequest`] (exactly the context engine's view, plus tool schemas
//! and cache hints) to one of:
//!
//! * the Anthropic Messages API ([`anthropic`]), with extended thinking,
//! * the OpenAI Responses API ([`responses`]), what `openai` speaks by
//!   default, with encrypted reasoning carried forward,
//! * OpenAI Chat Completions or any OpenAI-compatible server such as
//!   Ollama, vLLM or the llama.cpp server ([`openai`]),
//!
//! Opaque provider state (signed thinking, encrypted reasoning) comes back
//! on the [`AssistantTurn`] and is replayed, exactly, through the
//! [`RequestContext`] of later requests.
//!
//! streams the response as transient [`StreamEvent`]s, and returns the
//! committed [`AssistantTurn`] only once the provider's terminal event
//! arrived. Transient failures are retried on a deterministic schedule
//! ([`RetryPolicy`]); everything else is a typed [`ProviderError`] that
//! names the provider and quotes its message.
//!
//! [`fake`] is a local HTTP server that speaks both wire formats from a
//! script; tests and the offline `latch demo` use it.

#![warn(missing_docs)]

pub mod anthropic;
pub mod decode;
pub mod discover;
pub mod error;
pub mod fake;
pub mod openai;
pub mod request;
pub mod responses;
pub mod retry;
pub mod sse;
mod wire;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use serde::{Deserialize, Serialize};

pub use discover::{ServerInfo, WindowSource};
pub use error::ProviderError;
pub use request::{
    AssistantTurn, CacheHints, MediaResolver, NoMedia, OpaqueBlock, ProviderRequest, ProviderState,
    ReasoningOptions, RequestContext, StopReason, StreamEvent, ToolSchema, Usage,
    arguments_are_complete,
};
pub use retry::RetryPolicy;

use decode::{Failure, StreamDecoder};
use openai::MaxTokensField;

/// Which API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// Anthropic's Messages API.
    Anthropic,
    /// OpenAI's Chat Completions API (an API key is required).
    OpenAi,
    /// A server speaking OpenAI's Chat Completions (Ollama, vLLM, llama.cpp
    /// server, ...): a base URL is required, an API key is optional.
    OpenAiCompatible,
}

impl ProviderKind {
    /// The provider's name in errors, config and model profiles.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiCompatible => "openai-compatible",
        }
    }

    /// The environment variable holding the API key.
    pub fn api_key_env(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => "OPENAI_API_KEY",
        }
    }

    /// The environment variable holding the base URL.
    pub fn base_url_env(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "ANTHROPIC_BASE_URL",
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => "OPENAI_BASE_URL",
        }
    }

    /// The base URL used when none is configured (none for compatible
    /// servers: they must be named).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::Anthropic => Some(anthropic::DEFAULT_BASE_URL),
            ProviderKind::OpenAi => Some(openai::DEFAULT_BASE_URL),
            ProviderKind::OpenAiCompatible => None,
        }
    }

    /// True when requests are refused without an API key.
    pub fn requires_api_key(self) -> bool {
        !matches!(self, ProviderKind::OpenAiCompatible)
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ProviderKind {
    type Err = ProviderError;

    /// Parses `anthropic`, `openai`, or `openai-compatible` (also
    /// `ollama`, `vllm`, `llamacpp`/`llama.cpp`, which are compatible servers).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "anthropic" => Ok(ProviderKind::Anthropic),
            "openai" => Ok(ProviderKind::OpenAi),
            "openai-compatible" | "openai_compatible" | "ollama" | "vllm" | "llamacpp"
            | "llama.cpp" | "local" => Ok(ProviderKind::OpenAiCompatible),
            other => Err(ProviderError::Config(format!(
                "unknown provider {other:?}: expected anthropic, openai or openai-compatible"
            ))),
        }
    }
}

/// Which OpenAI API `provider.kind = "openai"` speaks (`[provider] wire`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpenAiWire {
    /// The Responses API (the default).
    #[default]
    Responses,
    /// Chat Completions, for servers that only speak it.
    Chat,
}

impl FromStr for OpenAiWire {
    type Err = ProviderError;

    /// Parses `responses` or `chat`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "responses" => Ok(OpenAiWire::Responses),
            "chat" | "chat-completions" => Ok(OpenAiWire::Chat),
            other => Err(ProviderError::Config(format!(
                "unknown wire {other:?} in [provider] wire: expected \"responses\" (the default for openai) or \"chat\""
            ))),
        }
    }
}

/// The wire format a provider's requests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    Responses,
    /// Chat Completions, with the field that carries the output limit.
    Chat(MaxTokensField),
}

impl Wire {
    /// `anthropic`, `openai-responses` or `openai-chat`.
    pub fn name(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::Responses => "openai-responses",
            Wire::Chat(_) => "openai-chat",
        }
    }
}

/// How to reach a provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    /// Which API.
    pub kind: ProviderKind,
    /// Base URL (`https://api.anthropic.com`, `https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`, ...); `None` uses the kind's default.
    pub base_url: Option<String>,
    /// API key; `None` sends none (refused up front where one is required).
    pub api_key: Option<String>,
    /// Retry schedule.
    pub retry: RetryPolicy,
    /// Most time to establish a connection.
    pub connect_timeout: Duration,
    /// Most time without any bytes from a streaming response before the turn
    /// counts as interrupted.
    pub idle_timeout: Duration,
    /// The OpenAI API `openai` speaks (ignored by the other kinds:
    /// compatible servers always get Chat Completions).
    pub openai_wire: OpenAiWire,
    /// How each model reasons, by model name (`[models.X]`).
    pub reasoning: BTreeMap<String, ReasoningOptions>,
}

impl ProviderConfig {
    /// A configuration with defaults and nothing read from the environment.
    pub fn new(kind: ProviderKind) -> Self {
        ProviderConfig {
            kind,
            base_url: None,
            api_key: None,
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(300),
            openai_wire: OpenAiWire::default(),
            reasoning: BTreeMap::new(),
        }
    }

    /// A configuration whose key and base URL come from explicit values
    /// (config file, command line) or else the conventional environment
    /// variables ([`ProviderKind::api_key_env`], [`ProviderKind::base_url_env`]).
    pub fn from_env(kind: ProviderKind, api_key: Option<&str>, base_url: Option<&str>) -> Self {
        let env = |name: &str| std::env::var(name).ok();
        ProviderConfig {
            api_key: api_key_with(kind, api_key, env),
            base_url: base_url_with(kind, base_url, env),
            ..Self::new(kind)
        }
    }
}

/// The API key for `kind`: `explicit` when given and non-empty, else the
/// kind's environment variable.
pub fn api_key_from_env(kind: ProviderKind, explicit: Option<&str>) -> Option<String> {
    api_key_with(kind, explicit, |n| std::env::var(n).ok())
}

/// The base URL for `kind`: `explicit` when given and non-empty, else the
/// kind's environment variable, else `None` (the kind's default applies).
pub fn base_url_from_env(kind: ProviderKind, explicit: Option<&str>) -> Option<String> {
    base_url_with(kind, explicit, |n| std::env::var(n).ok())
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn api_key_with(
    kind: ProviderKind,
    explicit: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    non_empty(explicit.map(str::to_string)).or_else(|| non_empty(env(kind.api_key_env())))
}

fn base_url_with(
    kind: ProviderKind,
    explicit: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    non_empty(explicit.map(str::to_string)).or_else(|| non_empty(env(kind.base_url_env())))
}

/// A configured provider: cheap to clone, safe to share between sessions.
#[derive(Debug, Clone)]
pub struct Provider {
    config: ProviderConfig,
    base_url: String,
    client: reqwest::Client,
}

enum AttemptError {
    Retryable {
        reason: String,
        status: Option<u16>,
        retry_after: Option<retry::RequestedDelay>,
    },
    Fatal(ProviderError),
}

impl Provider {
    /// Checks the configuration and builds the HTTP client (HTTPS through
    /// rustls with the platform's and Mozilla's root certificates).
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderError> {
        let kind = config.kind;
        let base_url = match config.base_url.as_deref().or(kind.default_base_url()) {
            Some(b) => b.trim().trim_end_matches('/').to_string(),
            None => {
                return Err(ProviderError::Config(format!(
                    "{kind} needs a base URL (for example http://localhost:11434/v1): set --base-url, {} or [provider] base_url",
                    kind.base_url_env()
                )));
            }
        };
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(ProviderError::Config(format!(
                "{kind} base URL {base_url:?} must start with http:// or https://"
            )));
        }
        if kind.requires_api_key() && config.api_key.as_deref().is_none_or(str::is_empty) {
            return Err(ProviderError::MissingApiKey {
                provider: kind.name(),
                env_var: kind.api_key_env(),
            });
        }
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .user_agent(concat!("latch/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Provider {
            config,
            base_url,
            client,
        })
    }

    /// Which API this provider speaks.
    pub fn kind(&self) -> ProviderKind {
        self.config.kind
    }

    /// The base URL requests go to (no trailing slash).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The configuration this provider was built from.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The wire format this provider's requests use.
    pub fn wire(&self) -> Wire {
        match (self.config.kind, self.config.openai_wire) {
            (ProviderKind::Anthropic, _) => Wire::Anthropic,
            (ProviderKind::OpenAi, OpenAiWire::Responses) => Wire::Responses,
            (ProviderKind::OpenAi, OpenAiWire::Chat) => {
                Wire::Chat(MaxTokensField::MaxCompletionTokens)
            }
            (ProviderKind::OpenAiCompatible, _) => Wire::Chat(MaxTokensField::MaxTokens),
        }
    }

    /// The URL of the completion endpoint.
    pub fn endpoint(&self) -> String {
        match self.wire() {
            Wire::Anthropic => format!("{}/v1/messages", self.base_url),
            Wire::Responses => format!("{}/responses", self.base_url),
            Wire::Chat(_) => format!("{}/chat/completions", self.base_url),
        }
    }

    /// How `model` reasons, when `[models.X]` says.
    pub fn reasoning(&self, model: &str) -> Option<&ReasoningOptions> {
        self.config.reasoning.get(model)
    }

    /// The exact JSON body [`Provider::complete`] sends for `req`.
    pub fn request_body(
        &self,
        req: &ProviderRequest,
        media: &dyn MediaResolver,
    ) -> Result<serde_json::Value, ProviderError> {
        self.request_body_with(req, &RequestContext::default(), media)
    }

    /// The exact JSON body [`Provider::complete_with`] sends for `req` in
    /// `ctx`.
    pub fn request_body_with(
        &self,
        req: &ProviderRequest,
        ctx: &RequestContext,
        media: &dyn MediaResolver,
    ) -> Result<serde_json::Value, ProviderError> {
        let reasoning = self.reasoning(&req.model);
        match self.wire() {
            Wire::Anthropic => anthropic::request_body_with(req, ctx, reasoning, media),
            Wire::Responses => responses::request_body(req, ctx, reasoning, media),
            Wire::Chat(field) => openai::request_body(req, media, field),
        }
    }

    /// Sends `req` with no provider state and no cache key; see
    /// [`Provider::complete_with`].
    pub async fn complete(
        &self,
        req: &ProviderRequest,
        media: &dyn MediaResolver,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<AssistantTurn, ProviderError> {
        self.complete_with(req, &RequestContext::default(), media, on_event)
            .await
    }

    /// Sends `req`, streams the response to `on_event`, and returns the
    /// committed turn.
    ///
    /// Retryable failures (429, 5xx, connection errors, a connection lost
    /// mid-stream, overload reported in the stream) are retried per the
    /// [`RetryPolicy`], announced with [`StreamEvent::Retrying`]. A response
    /// whose body ends cleanly before its terminal event is
    /// [`ProviderError::Interrupted`] and nothing of it is returned.
    /// A refusal as too long ([`ProviderError::ContextTooLong`]) is never
    /// retried.
    pub async fn complete_with(
        &self,
        req: &ProviderRequest,
        ctx: &RequestContext,
        media: &dyn MediaResolver,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<AssistantTurn, ProviderError> {
        let body = serde_json::to_vec(&self.request_body_with(req, ctx, media)?)
            .map_err(|e| ProviderError::Config(format!("cannot serialize the request: {e}")))?;
        let beta = match self.wire() {
            Wire::Anthropic => anthropic::beta_header(req, self.reasoning(&req.model)),
            _ => None,
        };
        let url = self.endpoint();
        let policy = self.config.retry;
        let max_attempts = policy.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            match self.attempt(&url, &body, beta, on_event).await {
                Ok(turn) => return Ok(turn),
                Err(AttemptError::Fatal(e)) => return Err(e),
                Err(AttemptError::Retryable {
                    reason,
                    status,
                    retry_after,
                }) => {
                    if attempt >= max_attempts {
                        return Err(ProviderError::RetriesExhausted {
                            provider: self.config.kind.name(),
                            attempts: attempt,
                            status,
                            last: reason,
                        });
                    }
                    attempt += 1;
                    let wait = policy.wait(attempt, retry_after.as_ref());
                    let delay = wait.delay;
                    let reason = match wait.capped {
                        Some(note) => format!("{reason} ({note})"),
                        None => reason,
                    };
                    // `surfaced`: every surface shows the retry from the
                    // event below, so the log line is for the log file.
                    tracing::warn!(
                        provider = self.config.kind.name(),
                        surfaced = true,
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        "retrying: {reason}"
                    );
                    on_event(StreamEvent::Retrying {
                        attempt,
                        delay,
                        reason,
                    });
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    fn hint(&self, status: u16) -> Option<String> {
        let kind = self.config.kind;
        match status {
            401 | 403 => Some(format!("set {} or [provider] api_key", kind.api_key_env())),
            404 => Some(format!(
                "check the model name and the base URL ({})",
                self.base_url
            )),
            413 => Some("the request is larger than the provider accepts".to_string()),
            _ => None,
        }
    }

    async fn attempt(
        &self,
        url: &str,
        body: &[u8],
        beta: Option<&'static str>,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<AssistantTurn, AttemptError> {
        let kind = self.config.kind;
        let provider = kind.name();
        let mut rb = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body.to_vec());
        let key = self.config.api_key.as_deref().filter(|k| !k.is_empty());
        match kind {
            ProviderKind::Anthropic => {
                rb = rb.header("anthropic-version", anthropic::ANTHROPIC_VERSION);
                if let Some(b) = beta {
                    rb = rb.header("anthropic-beta", b);
                }
                if let Some(k) = key {
                    rb = rb.header("x-api-key", k);
                }
            }
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => {
                if let Some(k) = key {
                    rb = rb.bearer_auth(k);
                }
            }
        }
        let resp = match rb.send().await {
            Ok(r) => r,
            Err(e) if e.is_builder() => {
                return Err(AttemptError::Fatal(ProviderError::Transport {
                    provider,
                    url: url.to_string(),
                    message: error_chain(&e),
                }));
            }
            Err(e) => {
                return Err(AttemptError::Retryable {
                    reason: format!("cannot reach {url}: {}", error_chain(&e)),
                    status: None,
                    retry_after: None,
                });
            }
        };
        let status = resp.status();
        if !status.is_success() {
            return Err(self.refused(resp).await);
        }
        if is_json(resp.headers()) {
            let text = resp.text().await.unwrap_or_default();
            return Err(AttemptError::Fatal(ProviderError::Protocol {
                provider,
                message: format!(
                    "expected an event stream but got a JSON body: {}",
                    error::error_message_from_body(&text)
                ),
            }));
        }

        let mut decoder = StreamDecoder::new(self.wire(), kind);
        let mut stream = resp.bytes_stream();
        let idle = self.config.idle_timeout;
        let ended = |f: Failure| match f {
            Failure::Fatal(e) => AttemptError::Fatal(e),
            Failure::Retryable(reason) => AttemptError::Retryable {
                reason,
                status: None,
                retry_after: None,
            },
        };
        loop {
            let chunk = match tokio::time::timeout(idle, stream.next()).await {
                Err(_) => {
                    return Err(AttemptError::Fatal(ProviderError::Interrupted {
                        provider,
                        reason: format!("no data for {} s", idle.as_secs_f64()),
                    }));
                }
                Ok(None) => {
                    let answered = decoder.saw_events();
                    return match decoder.finish() {
                        // A compatible server that ends the stream before
                        // its first chunk failed before generating: the
                        // same request not streamed says why (llama-cpp-
                        // python's too-long prompt is a 400 with both
                        // counts there, and nothing at all here).
                        Err(Failure::Fatal(e))
                            if e.is_interrupted()
                                && !answered
                                && kind == ProviderKind::OpenAiCompatible =>
                        {
                            Err(self.diagnose(url, body, e).await)
                        }
                        other => other.map_err(ended),
                    };
                }
                // A connection lost mid-stream (a server killed or
                // restarted, a proxy dropping it) is retried as configured:
                // nothing of the attempt was committed, its deltas are void.
                Ok(Some(Err(e))) => {
                    return Err(AttemptError::Retryable {
                        reason: format!("connection lost mid-stream: {}", error_chain(&e)),
                        status: None,
                        retry_after: None,
                    });
                }
                Ok(Some(Ok(bytes))) => bytes,
            };
            if let Some(turn) = decoder.push(&chunk, on_event).map_err(ended)? {
                return Ok(turn);
            }
        }
    }
}

impl Provider {
    /// How a non-success response ends the attempt: too long (with the
    /// provider's figures), retryable, or refused.
    async fn refused(&self, resp: reqwest::Response) -> AttemptError {
        let provider = self.config.kind.name();
        let status = resp.status();
        let retry_after = retry::retry_after(resp.headers());
        let text = resp.text().await.unwrap_or_default();
        let message = error::error_message_from_body(&text);
        let code = status.as_u16();
        let status_text = status.canonical_reason().unwrap_or("").to_string();
        if matches!(code, 400 | 413 | 422) && error::is_context_length(&text) {
            let (reported_tokens, limit_tokens) = error::context_figures_of(&text, &message);
            return AttemptError::Fatal(ProviderError::ContextTooLong {
                provider,
                message,
                reported_tokens,
                limit_tokens,
            });
        }
        if retry::is_retryable_status(code) {
            let kind_note = error::error_kind_from_body(&text)
                .map(|k| format!(" [{k}]"))
                .unwrap_or_default();
            return AttemptError::Retryable {
                reason: format!("{code} {status_text}{kind_note}: {message}"),
                status: Some(code),
                retry_after,
            };
        }
        AttemptError::Fatal(ProviderError::Rejected {
            provider,
            status: code,
            status_text,
            message,
            hint: self.hint(code),
        })
    }

    /// Why a compatible server's stream ended before its first chunk: the
    /// same request, not streamed, answered as any refusal is (a server
    /// refuses a prompt past its window before it evaluates anything, so
    /// the answer is quick; one that starts evaluating within
    /// [`DIAGNOSIS_TIMEOUT`] accepted the request). An answer means the
    /// request itself was fine: the stream stays `interrupted`
    /// (`stream_error`), with that said.
    async fn diagnose(&self, url: &str, body: &[u8], stream_error: ProviderError) -> AttemptError {
        let Ok(serde_json::Value::Object(mut probe)) = serde_json::from_slice(body) else {
            return AttemptError::Fatal(stream_error);
        };
        probe.insert("stream".into(), serde_json::Value::Bool(false));
        probe.remove("stream_options");
        let probe = serde_json::Value::Object(probe).to_string();
        let send = || {
            let mut rb = self
                .client
                .post(url)
                .timeout(DIAGNOSIS_TIMEOUT)
                .header(CONTENT_TYPE, "application/json")
                .body(probe.clone());
            if let Some(k) = self.config.api_key.as_deref().filter(|k| !k.is_empty()) {
                rb = rb.bearer_auth(k);
            }
            rb.send()
        };
        // The broken stream's connection may have gone back to the pool
        // closed by the server (llama-cpp-python closes it after the error):
        // a second try gets a fresh one.
        let answer = match send().await {
            Err(e) if !e.is_timeout() => send().await,
            other => other,
        };
        match answer {
            Ok(resp) if !resp.status().is_success() => match self.refused(resp).await {
                // A transient failure is reported as the stream's own.
                AttemptError::Retryable { .. } => AttemptError::Fatal(stream_error),
                fatal => fatal,
            },
            Err(e) if !e.is_timeout() => AttemptError::Fatal(match stream_error {
                ProviderError::Interrupted { provider, reason } => ProviderError::Interrupted {
                    provider,
                    reason: format!(
                        "{reason}, before its first chunk (asking again without streaming failed \
                         too: {})",
                        error_chain(&e)
                    ),
                },
                other => other,
            }),
            _ => AttemptError::Fatal(match stream_error {
                ProviderError::Interrupted { provider, reason } => ProviderError::Interrupted {
                    provider,
                    reason: format!(
                        "{reason}, before its first chunk (the same request not streamed was \
                         accepted; the server's log says why the stream failed)"
                    ),
                },
                other => other,
            }),
        }
    }
}

/// How long [`Provider::complete_with`] waits for the unstreamed answer
/// that says why a compatible server's stream broke before its first chunk.
pub const DIAGNOSIS_TIMEOUT: Duration = Duration::from_secs(10);

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// An error with its sources, so "error sending request" says why.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        src = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_urls_prefer_explicit_values_then_environment() {
        let env = |n: &str| match n {
            "ANTHROPIC_API_KEY" => Some("env-key".to_string()),
            "OPENAI_BASE_URL" => Some("http://localhost:11434/v1".to_string()),
            _ => None,
        };
        let k = ProviderKind::Anthropic;
        assert_eq!(api_key_with(k, Some("cfg"), env).as_deref(), Some("cfg"));
        assert_eq!(api_key_with(k, Some(" "), env).as_deref(), Some("env-key"));
        assert_eq!(api_key_with(ProviderKind::OpenAi, None, env), None);
        assert_eq!(
            base_url_with(ProviderKind::OpenAiCompatible, None, env).as_deref(),
            Some("http://localhost:11434/v1")
        );
        assert_eq!(base_url_with(k, None, env), None);
    }

    #[test]
    fn configuration_problems_are_explained() {
        let e = Provider::new(ProviderConfig::new(ProviderKind::Anthropic)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no API key for anthropic: set ANTHROPIC_API_KEY or [provider] api_key"
        );
        let e = Provider::new(ProviderConfig::new(ProviderKind::OpenAiCompatible)).unwrap_err();
        assert!(e.to_string().contains("needs a base URL"), "{e}");
        let mut c = ProviderConfig::new(ProviderKind::OpenAiCompatible);
        c.base_url = Some("http://127.0.0.1:8080/v1/".into());
        let p = Provider::new(c).unwrap();
        assert_eq!(p.endpoint(), "http://127.0.0.1:8080/v1/chat/completions");
        let mut c = ProviderConfig::new(ProviderKind::OpenAi);
        c.api_key = Some("k".into());
        assert_eq!(
            Provider::new(c.clone()).unwrap().endpoint(),
            "https://api.openai.com/v1/responses"
        );
        c.openai_wire = "chat".parse().unwrap();
        assert_eq!(
            Provider::new(c).unwrap().endpoint(),
            "https://api.openai.com/v1/chat/completions"
        );
        let e = "graphql".parse::<OpenAiWire>().unwrap_err().to_string();
        assert!(e.contains("[provider] wire") && e.contains("chat"), "{e}");
        assert_eq!(
            "ollama".parse::<ProviderKind>().unwrap(),
            ProviderKind::OpenAiCompatible
        );
        assert!("gemini".parse::<ProviderKind>().is_err());
    }

    #[test]
    fn complete_is_send() {
        fn assert_send<T: Send>(_: T) {}
        let mut c = ProviderConfig::new(ProviderKind::OpenAiCompatible);
        c.base_url = Some("http://127.0.0.1:9/v1".into());
        let p = Provider::new(c).unwrap();
        let req = ProviderRequest {
            model: "m".into(),
            system: String::new(),
            tools: vec![],
            messages: vec![],
            max_tokens: 1,
            cache_breakpoints: CacheHints::none(),
        };
        let mut sink = |_e: StreamEvent| {};
        assert_send(p.complete(&req, &NoMedia, &mut sink));
    }
}
