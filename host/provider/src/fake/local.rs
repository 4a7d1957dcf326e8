//! The fake's local servers: the Chat Completions endpoint answering as
//! llama.cpp's servers answer, as measured against the real ones (see the
//! local-model tier in the README), so the provider and the agent loop are
//! pinned against their behaviour on every `cargo test`.
//!
//! * `llama-cpp-python` (`python -m llama_cpp.server`): an assistant message
//!   with `content: null` is a 500; tools without `tool_choice` are not
//!   shown to the model (it answers in text); no `usage` while streaming; a
//!   prompt past `n_ctx` fails after the stream started, so the body ends
//!   before its first chunk and before `data: [DONE]`, while the same
//!   request not streamed is a 400 `context_length_exceeded` with both
//!   counts; `/v1/models` names the model but no window.
//! * `llama-server` (llama.cpp's own): a prompt past `n_ctx` is a 400
//!   `exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`;
//!   `/v1/models` carries `meta.n_ctx_train` and `/props` the running
//!   `n_ctx`.
//! * Both: tool-call arguments sent back that are not a JSON object are a
//!   500 (the server parses them to render its chat template).

use axum::response::Response;
use latch_engine_sdk::estimate::estimate;
use latch_engine_sdk::types::EstimatorProfile;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::script::ScriptedTurn;
use super::{json_response, sse_response};

/// Which server the Chat Completions endpoint (and `/v1/models`) answers as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChatServer {
    /// OpenAI's API (the default).
    #[default]
    OpenAi,
    /// llama-cpp-python's server (`python -m llama_cpp.server`).
    LlamaCppPython,
    /// llama.cpp's `llama-server`.
    LlamaServer,
}

/// The context window a local server runs with when the script sets none.
pub const DEFAULT_N_CTX: u64 = 4096;

/// The model id the local servers report.
pub const LOCAL_MODEL_ID: &str = "gemma-3-270m-q4_k_m.gguf";

/// The prompt tokens the server counts for `body`: the canonical estimate
/// of its messages and tools (a stand-in for the model's tokenizer).
pub fn prompt_tokens(body: &Value) -> u64 {
    let text = format!("{}{}", body["messages"], body["tools"]);
    estimate(EstimatorProfile::Openai, &text) as u64
}

fn error(status: u16, message: &str, kind: &str, extra: Value) -> Response {
    let mut error = json!({"message": message, "type": kind, "param": null, "code": null});
    if let (Some(e), Value::Object(more)) = (error.as_object_mut(), extra) {
        e.extend(more);
    }
    json_response(status, &json!({"error": error}), &[])
}

/// The answer a local server gives `body` before any turn is generated
/// (a refusal, or a stream that breaks), or `None` to answer with the
/// script's next turn.
pub(crate) fn refusal(server: ChatServer, n_ctx: u64, body: &Value) -> Option<Response> {
    if server == ChatServer::OpenAi {
        return None;
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    for m in &messages {
        if m["role"] != "assistant" {
            continue;
        }
        if server == ChatServer::LlamaCppPython && m.get("content").is_some_and(Value::is_null) {
            return Some(error(
                500,
                "7 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', 'input': None}",
                "internal_server_error",
                json!({}),
            ));
        }
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            let args = call["function"]["arguments"].as_str().unwrap_or("");
            if !matches!(serde_json::from_str::<Value>(args), Ok(Value::Object(_))) {
                let message = match server {
                    ChatServer::LlamaServer => format!(
                        "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error: {args}"
                    ),
                    _ => "Expecting ',' delimiter: line 1 column 30 (char 29)".to_string(),
                };
                return Some(error(500, &message, "server_error", json!({})));
            }
        }
    }
    // llama-cpp-python refuses a prompt of `n_ctx` tokens or more (the
    // output limit is not counted); llama-server one past `n_ctx`.
    let tokens = prompt_tokens(body);
    let streamed = body["stream"] == json!(true);
    if server == ChatServer::LlamaCppPython && !streamed {
        // Not streamed, the same failure is a formatted 400 (or, when the
        // prompt fits, an answer): what Latch asks to learn why a stream
        // broke before its first chunk.
        let max = body["max_tokens"].as_u64().unwrap_or(16);
        return Some(if tokens >= n_ctx {
            error(
                400,
                &format!(
                    "This model's maximum context length is {n_ctx} tokens. However, you requested {} tokens ({tokens} in the messages, {max} in the completion). Please reduce the length of the messages or completion.",
                    tokens + max
                ),
                "invalid_request_error",
                json!({"code": "context_length_exceeded"}),
            )
        } else {
            json_response(
                200,
                &json!({"id": "chatcmpl-local", "object": "chat.completion", "created": 0,
                        "model": LOCAL_MODEL_ID, "choices": [{"index": 0, "finish_reason": "length",
                        "message": {"role": "assistant", "content": "A"}}],
                        "usage": {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1}}),
                &[],
            )
        });
    }
    if tokens <= n_ctx {
        return None;
    }
    Some(match server {
        ChatServer::LlamaServer => error(
            400,
            "the request exceeds the available context size, try increasing it",
            "exceed_context_size_error",
            json!({"code": 400, "n_prompt_tokens": tokens, "n_ctx": n_ctx}),
        ),
        // The stream has started when the prompt is measured: the server
        // logs `Requested tokens (N) exceed context window of M` and the
        // body ends without a chunk and without `data: [DONE]`.
        _ => sse_response(Vec::new(), false),
    })
}

/// The turn as the local server plays it: llama-cpp-python does not show
/// the model tools it was not told to choose from (`tool_choice`), so the
/// model answers in text.
pub(crate) fn played(server: ChatServer, body: &Value, turn: ScriptedTurn) -> ScriptedTurn {
    let told = body.get("tool_choice").is_some_and(|c| !c.is_null());
    if server == ChatServer::LlamaCppPython && !told && !turn.tool_calls.is_empty() {
        return ScriptedTurn {
            text: Some(
                turn.text
                    .unwrap_or_else(|| "I would read the file, but I have no tools.".into()),
            ),
            tool_calls: Vec::new(),
            call_ids: Vec::new(),
            ..turn
        };
    }
    turn
}

/// True when the server streams `usage` (llama-cpp-python does not).
pub(crate) fn streams_usage(server: ChatServer) -> bool {
    server != ChatServer::LlamaCppPython
}

/// `GET /v1/models` as each server answers it.
pub(crate) fn models(server: ChatServer, n_ctx: u64) -> Value {
    match server {
        ChatServer::OpenAi => json!({"object": "list", "data": [
            {"id": "fake-model", "object": "model", "created": 0, "owned_by": "latch"}
        ]}),
        ChatServer::LlamaCppPython => json!({"object": "list", "data": [
            {"id": LOCAL_MODEL_ID, "object": "model", "owned_by": "me", "permissions": []}
        ]}),
        ChatServer::LlamaServer => json!({"object": "list", "data": [{
            "id": LOCAL_MODEL_ID, "object": "model", "created": 0, "owned_by": "llamacpp",
            "meta": {"vocab_type": 1, "n_vocab": 262144, "n_ctx_train": 32768.max(n_ctx),
                     "n_embd": 640, "n_params": 268098176, "size": 253073920}
        }]}),
    }
}

/// `GET /props` (llama-server only).
pub(crate) fn props(server: ChatServer, n_ctx: u64) -> Option<Value> {
    (server == ChatServer::LlamaServer).then(|| {
        json!({
            "default_generation_settings": {"n_ctx": n_ctx, "params": {"n_predict": -1}},
            "total_slots": 1,
            "model_path": format!("/models/{LOCAL_MODEL_ID}"),
        })
    })
}
