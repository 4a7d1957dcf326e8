//! A local HTTP server that speaks both providers' wire formats from a
//! script: the offline `latch demo` and every provider test run against it
//! over real HTTP.
//!
//! * `POST /v1/messages` answers as the Anthropic Messages API (SSE with
//!   `message_start` … `message_stop`, Anthropic error bodies).
//! * `POST /v1/chat/completions` answers as OpenAI Chat Completions (SSE
//!   chunks, the usage chunk when `stream_options.include_usage` is set,
//!   `data: [DONE]`, OpenAI error bodies).
//! * `POST /v1/responses` answers as the OpenAI Responses API (`response.*`
//!   events, reasoning items with encrypted content when asked for).
//! * `GET /v1/models` and `GET /props`, and with [`Script::as_server`] the
//!   Chat Completions endpoint, answer as llama.cpp's local servers do (see
//!   [`local`]: their refusals, their missing usage, their context limit).
//!
//! Reasoning is signed: a thinking block carries a signature over its text
//! and a reasoning item an encrypted content only this server issued, and a
//! later request that drops or alters what the API requires back (the
//! thinking that opens the last assistant turn of a tool loop, the
//! reasoning item before a function call) is refused as the real services
//! refuse it.
//!
//! Each request consumes the next [`ScriptStep`] of the [`Script`]: a
//! [`ScriptedTurn`] (text, tool calls, usage) or a [`ScriptedFailure`] (429
//! with `retry-after`, 5xx, a refusal with an error body, a stream cut
//! mid-way, an error event inside the stream). Requests are checked as the
//! real services check them (alternating roles, tool results answering the
//! previous calls, at most four `cache_control` breakpoints, ...) and a
//! malformed one gets the provider's 400 without consuming a step. Every
//! request is captured ([`FakeServer::requests`]) for golden tests.
//!
//! Usage is computed by a simulated prompt cache (see the `cache` module
//! notes): the longest common prefix with the previous request, in whole
//! canonical segments priced with the canonical estimator, is the cache
//! read, up to the last breakpoint for Anthropic; the rest is cache
//! creation or uncached input. A cache-friendly (append-only) request
//! sequence therefore shows a high hit rate, and a prefix-rewriting one a
//! low rate.

mod cache;
pub mod local;
mod responses;
mod script;
mod wire;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use latch_engine_sdk::estimate::estimate;
use latch_engine_sdk::types::EstimatorProfile;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use local::ChatServer;
pub use script::{
    Responder, Script, ScriptStep, ScriptedFailure, ScriptedTurn, ScriptedUsage, WireUsage,
};

/// Which API a request was made to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WireFormat {
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /v1/chat/completions`.
    OpenAi,
    /// `POST /v1/responses`.
    Responses,
}

/// A request the server received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapturedRequest {
    /// The endpoint it was sent to.
    pub format: WireFormat,
    /// The request path.
    pub path: String,
    /// Headers, names in lower case.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (a JSON string holding the raw text when the body was
    /// not JSON).
    pub body: Value,
}

/// What a served turn reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedTurn {
    /// The endpoint.
    pub format: WireFormat,
    /// The usage put on the wire.
    pub usage: WireUsage,
}

#[derive(Default)]
struct ServerState {
    script: Script,
    requests: Vec<CapturedRequest>,
    served: Vec<ServedTurn>,
    cache: cache::CacheSim,
    next_id: u64,
    /// Thinking blocks issued, as `(thinking, signature)`.
    thinking: HashSet<(String, String)>,
    /// Reasoning items issued on the Responses wire.
    reasoning: responses::IssuedReasoning,
    /// The tool calls of the last turn served on each wire when the script
    /// chose their ids: a request continuing that turn must send back
    /// every id the server issued.
    issued: HashMap<WireFormat, Issued>,
}

/// The calls of a served turn whose ids the script chose.
struct Issued {
    /// The ids as issued (`""`: none was).
    ids: Vec<String>,
    /// The tool names, in order.
    names: Vec<String>,
}

/// The `(id, name)` of the calls that end `body`'s conversation: the last
/// assistant message's (Anthropic, Chat Completions), the last `n`
/// `function_call` items (Responses).
fn trailing_calls(format: WireFormat, body: &Value, n: usize) -> Vec<(String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    match format {
        WireFormat::Anthropic | WireFormat::OpenAi => {
            let last = body["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "assistant"));
            let Some(last) = last else { return Vec::new() };
            if format == WireFormat::OpenAi {
                last["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| (s(&c["id"]), s(&c["function"]["name"])))
                    .collect()
            } else {
                last["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|b| b["type"] == "tool_use")
                    .map(|b| (s(&b["id"]), s(&b["name"])))
                    .collect()
            }
        }
        WireFormat::Responses => {
            let calls: Vec<(String, String)> = body["input"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|i| i["type"] == "function_call")
                .map(|i| (s(&i["call_id"]), s(&i["name"])))
                .collect();
            calls[calls.len().saturating_sub(n)..].to_vec()
        }
    }
}

/// A request that continues the last served turn (its last calls have the
/// same tools) must carry the ids the server issued for them, as servers
/// that look results up by the ids they issued require.
fn check_echo(format: WireFormat, body: &Value, issued: Option<&Issued>) -> Result<(), String> {
    let Some(issued) = issued else { return Ok(()) };
    let sent = trailing_calls(format, body, issued.ids.len());
    let names: Vec<&String> = sent.iter().map(|(_, n)| n).collect();
    if names != issued.names.iter().collect::<Vec<_>>() {
        return Ok(());
    }
    for ((id, _), want) in sent.iter().zip(&issued.ids) {
        if !want.is_empty() && id != want {
            return Err(format!(
                "tool call id {id:?} was not issued in the previous response: it issued {want:?}"
            ));
        }
    }
    Ok(())
}

type Shared = Arc<Mutex<ServerState>>;

fn lock(s: &Shared) -> MutexGuard<'_, ServerState> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running fake provider on `127.0.0.1` at an ephemeral port.
pub struct FakeServer {
    /// `http://127.0.0.1:PORT`: the Anthropic base URL. The OpenAI base URL
    /// is [`FakeServer::openai_base_url`] (`…/v1`).
    pub base_url: String,
    addr: SocketAddr,
    state: Shared,
    handle: Option<JoinHandle<()>>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for FakeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeServer")
            .field("base_url", &self.base_url)
            .finish()
    }
}

impl FakeServer {
    /// Binds `127.0.0.1:0` and serves `script` on the current tokio runtime.
    pub async fn start(script: Script) -> std::io::Result<FakeServer> {
        let state: Shared = Arc::new(Mutex::new(ServerState {
            script,
            ..ServerState::default()
        }));
        let app = Router::new()
            .route("/v1/messages", post(anthropic_handler))
            .route("/v1/chat/completions", post(openai_handler))
            .route("/v1/responses", post(responses_handler))
            .route("/v1/models", get(models_handler))
            .route("/props", get(props_handler))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = rx.await;
            });
            if let Err(e) = serve.await {
                tracing::warn!("fake provider server stopped: {e}");
            }
        });
        Ok(FakeServer {
            base_url: format!("http://{addr}"),
            addr,
            state,
            handle: Some(handle),
            shutdown: Some(tx),
        })
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL for the Anthropic adapter (same as `base_url`).
    pub fn anthropic_base_url(&self) -> String {
        self.base_url.clone()
    }

    /// The base URL for the OpenAI adapter (`base_url` + `/v1`).
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<CapturedRequest> {
        lock(&self.state).requests.clone()
    }

    /// The usage of every turn served so far, in order.
    pub fn served(&self) -> Vec<ServedTurn> {
        lock(&self.state).served.clone()
    }

    /// Appends a step to the script.
    pub fn push(&self, step: impl Into<ScriptStep>) {
        lock(&self.state).script.push(step);
    }

    /// Steps still queued.
    pub fn remaining(&self) -> usize {
        lock(&self.state).script.steps.len()
    }

    /// Stops accepting connections and waits (briefly) for the server task.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(handle) = self.handle.take() {
            let abort = handle.abort_handle();
            if tokio::time::timeout(std::time::Duration::from_secs(2), handle)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(handle) = self.handle.take() {
            handle.abort();
        }
    }
}

async fn anthropic_handler(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    handle(s, WireFormat::Anthropic, "/v1/messages", headers, body)
}

async fn openai_handler(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    handle(s, WireFormat::OpenAi, "/v1/chat/completions", headers, body)
}

async fn models_handler(State(s): State<Shared>) -> Response {
    let st = lock(&s);
    let (server, n_ctx) = (st.script.chat_server, st.n_ctx());
    json_response(200, &local::models(server, n_ctx), &[])
}

async fn props_handler(State(s): State<Shared>) -> Response {
    let st = lock(&s);
    match local::props(st.script.chat_server, st.n_ctx()) {
        Some(props) => json_response(200, &props, &[]),
        None => json_response(404, &serde_json::json!({"detail": "Not Found"}), &[]),
    }
}

impl ServerState {
    fn n_ctx(&self) -> u64 {
        self.script.n_ctx.unwrap_or(local::DEFAULT_N_CTX)
    }
}

async fn responses_handler(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    handle(s, WireFormat::Responses, "/v1/responses", headers, body)
}

/// The fake's signature over a thinking block's text: only blocks it
/// issued, unaltered, verify.
fn sign(text: &str, n: u64) -> String {
    use base64::Engine as _;
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("latch-fake-provider:{n}:{text}"));
    base64::engine::general_purpose::STANDARD.encode(digest)
}

fn json_response(status: u16, body: &Value, extra: &[(&str, String)]) -> Response {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json");
    for (k, v) in extra {
        b = b.header(*k, v.as_str());
    }
    b.body(Body::from(body.to_string()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn error_response(format: WireFormat, status: u16, message: &str) -> Response {
    json_response(status, &wire::error_body(format, status, message), &[])
}

/// The events of a turn, each sent `pace` after the one before.
fn paced_sse_response(events: Vec<String>, pace: std::time::Duration) -> Response {
    use futures::StreamExt;
    let items = futures::stream::iter(events).then(move |e| async move {
        tokio::time::sleep(pace).await;
        Ok::<Bytes, std::io::Error>(Bytes::from(e))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(items))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn sse_response(events: Vec<String>, abort: bool) -> Response {
    use futures::StreamExt;
    let items: Vec<Result<Bytes, std::io::Error>> =
        events.into_iter().map(|e| Ok(Bytes::from(e))).collect();
    // The break comes after a pause, so the events before it are on the
    // wire first and the client sees a response that stops mid-way.
    let cut = futures::stream::iter(abort.then_some(())).then(|()| async {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        Err::<Bytes, _>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "scripted stream cut",
        ))
    });
    let items = futures::stream::iter(items).chain(cut);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(items))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn output_tokens(turn: &ScriptedTurn) -> u64 {
    let p = EstimatorProfile::Anthropic;
    let text = turn.text.as_deref().map_or(0, |t| estimate(p, t) as u64);
    text + turn
        .tool_calls
        .iter()
        .map(|(n, a)| estimate(p, n) as u64 + estimate(p, a) as u64)
        .sum::<u64>()
}

fn handle(s: Shared, format: WireFormat, path: &str, headers: HeaderMap, raw: Bytes) -> Response {
    let header_map: BTreeMap<String, String> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let parsed = serde_json::from_slice::<Value>(&raw);
    let captured = CapturedRequest {
        format,
        path: path.to_string(),
        headers: header_map.clone(),
        body: match &parsed {
            Ok(v) => v.clone(),
            Err(_) => Value::String(String::from_utf8_lossy(&raw).into_owned()),
        },
    };
    let mut st = lock(&s);
    st.requests.push(captured.clone());

    if let Some(key) = st.script.api_key.clone() {
        let sent = match format {
            WireFormat::Anthropic => header_map.get("x-api-key").cloned(),
            WireFormat::OpenAi | WireFormat::Responses => header_map
                .get("authorization")
                .and_then(|a| a.strip_prefix("Bearer ").map(str::to_string)),
        };
        if sent.as_deref() != Some(key.as_str()) {
            let message = match format {
                WireFormat::Anthropic => "invalid x-api-key",
                WireFormat::OpenAi | WireFormat::Responses => "Incorrect API key provided.",
            };
            return error_response(format, 401, message);
        }
    }
    let body = match parsed {
        Ok(v) if v.is_object() => v,
        _ => return error_response(format, 400, "the request body is not a JSON object"),
    };
    let check = match format {
        WireFormat::Anthropic => {
            if !header_map.contains_key("anthropic-version") {
                Err("anthropic-version: header is required".to_string())
            } else {
                wire::check_anthropic(&body, &st.thinking)
            }
        }
        WireFormat::OpenAi => wire::check_openai(&body),
        WireFormat::Responses => responses::check(&body, &st.reasoning),
    };
    // A local server answers what it refuses before OpenAI's own checks
    // (it also answers a non-streamed request, which OpenAI's fake does not).
    if format == WireFormat::OpenAi
        && let Some(refused) = local::refusal(st.script.chat_server, st.n_ctx(), &body)
    {
        return refused;
    }
    if let Err(message) = check.and_then(|()| check_echo(format, &body, st.issued.get(&format))) {
        return error_response(format, 400, &message);
    }

    let step = match st.script.steps.pop_front() {
        Some(step) => step,
        None => match st.script.responder.clone() {
            Some(f) => {
                // The responder runs without the lock so it may be slow.
                drop(st);
                let step = f(&captured);
                st = lock(&s);
                step
            }
            None => {
                return error_response(
                    format,
                    400,
                    "the fake provider's script is exhausted: no scripted turn is left for this request",
                );
            }
        },
    };
    let model = body["model"].as_str().unwrap_or("").to_string();
    st.next_id += 1;
    let n = st.next_id;
    let response_id = match format {
        WireFormat::Anthropic => format!("msg_fake_{n}"),
        WireFormat::OpenAi => format!("chatcmpl-fake-{n}"),
        WireFormat::Responses => format!("resp_fake_{n}"),
    };

    match step {
        ScriptStep::Turn(turn) => {
            let turn = match format {
                WireFormat::OpenAi => local::played(st.script.chat_server, &body, turn),
                _ => turn,
            };
            let events = turn_events(&mut st, format, &body, &turn, &model, &response_id);
            match st.script.pace {
                Some(pace) => paced_sse_response(events, pace),
                None => sse_response(events, false),
            }
        }
        ScriptStep::Fail(ScriptedFailure::RateLimited { retry_after }) => {
            let body = wire::error_body(format, 429, "Rate limited: too many requests, slow down.");
            let extra: Vec<(&str, String)> = retry_after
                .map(|r| vec![("retry-after", r)])
                .unwrap_or_default();
            json_response(429, &body, &extra)
        }
        ScriptStep::Fail(ScriptedFailure::RateLimitedWith { headers }) => {
            let body = wire::error_body(format, 429, "Rate limited: too many requests, slow down.");
            let extra: Vec<(&str, String)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect();
            json_response(429, &body, &extra)
        }
        ScriptStep::Fail(ScriptedFailure::ServerError { status, message })
        | ScriptStep::Fail(ScriptedFailure::Reject { status, message }) => {
            error_response(format, status, &message)
        }
        ScriptStep::Fail(ScriptedFailure::CutStream {
            turn,
            after_events,
            abort,
        }) => {
            let mut events = turn_events(&mut st, format, &body, &turn, &model, &response_id);
            events.truncate(after_events);
            sse_response(events, abort)
        }
        ScriptStep::Fail(ScriptedFailure::StreamError { kind, message }) => {
            let events = match format {
                WireFormat::Anthropic => {
                    wire::anthropic_error_events(&model, &response_id, &kind, &message)
                }
                WireFormat::OpenAi => {
                    wire::openai_error_events(&model, &response_id, &kind, &message)
                }
                WireFormat::Responses => {
                    responses::error_events(&model, &response_id, &kind, &message)
                }
            };
            sse_response(events, false)
        }
    }
}

fn turn_events(
    st: &mut ServerState,
    format: WireFormat,
    body: &Value,
    turn: &ScriptedTurn,
    model: &str,
    response_id: &str,
) -> Vec<String> {
    let reasoning_out = if turn.reasoning {
        estimate(EstimatorProfile::Openai, REASONING_TEXT) as u64
    } else {
        0
    };
    let out = output_tokens(turn) + reasoning_out;
    let usage = match turn.usage {
        ScriptedUsage::Reported(u) => u,
        ScriptedUsage::Computed => match format {
            WireFormat::Anthropic => st.cache.anthropic(body, out),
            WireFormat::OpenAi => st.cache.openai(body, out),
            WireFormat::Responses => WireUsage {
                reasoning_tokens: Some(reasoning_out),
                ..st.cache.responses(body, out)
            },
        },
    };
    let mut tool_ids = Vec::new();
    for i in 0..turn.tool_calls.len() {
        st.next_id += 1;
        tool_ids.push(match turn.call_ids.get(i) {
            // As scripted: a repeated id, or none (empty: left off the wire).
            Some(scripted) => scripted.clone().unwrap_or_default(),
            None => match format {
                WireFormat::Anthropic => format!("toolu_fake_{}", st.next_id),
                WireFormat::OpenAi | WireFormat::Responses => {
                    format!("call_fake_{}", st.next_id)
                }
            },
        });
    }
    if turn.call_ids.is_empty() {
        st.issued.remove(&format);
    } else {
        st.issued.insert(
            format,
            Issued {
                ids: tool_ids.clone(),
                names: turn.tool_calls.iter().map(|(n, _)| n.clone()).collect(),
            },
        );
    }
    st.served.push(ServedTurn { format, usage });
    st.next_id += 1;
    let n = st.next_id;
    match format {
        WireFormat::Anthropic => {
            let thinking = turn.reasoning.then(|| {
                let signed = (REASONING_TEXT.to_string(), sign(REASONING_TEXT, n));
                st.thinking.insert(signed.clone());
                signed
            });
            let thinking = thinking.as_ref().map(|(t, s)| (t.as_str(), s.as_str()));
            wire::anthropic_events(turn, model, response_id, &tool_ids, usage, thinking)
        }
        WireFormat::OpenAi => {
            let include_usage = body["stream_options"]["include_usage"] == Value::Bool(true)
                && local::streams_usage(st.script.chat_server);
            wire::openai_events(turn, model, response_id, &tool_ids, usage, include_usage)
        }
        WireFormat::Responses => {
            let id = format!("rs_fake_{n}");
            let wants_encrypted = body["include"]
                .as_array()
                .is_some_and(|a| a.iter().any(|v| v == "reasoning.encrypted_content"));
            let encrypted = (turn.reasoning && wants_encrypted).then(|| {
                let e = format!("gAAAA{}", sign(&id, n));
                st.reasoning.items.insert(id.clone(), e.clone());
                for call in &tool_ids {
                    st.reasoning.calls.insert(call.clone(), id.clone());
                }
                e
            });
            let reasoning = turn
                .reasoning
                .then_some((id.as_str(), encrypted.as_deref()));
            responses::events(turn, model, response_id, &tool_ids, usage, reasoning)
        }
    }
}

/// The reasoning text a scripted reasoning turn "thinks" (never to be shown
/// or stored searchably by a client).
pub const REASONING_TEXT: &str = "Considering the request.";
