//! What a local OpenAI-compatible server says about itself: the models it
//! serves (`GET {base}/models`) and the context window it runs with.
//!
//! Where the window comes from, best first:
//! * llama.cpp's `llama-server`: `GET /props` (beside `/v1`) reports the
//!   window of each slot as `default_generation_settings.n_ctx`;
//! * vLLM: `max_model_len` on each model of `/v1/models`;
//! * other servers: `context_length` or `n_ctx` on a model;
//! * llama.cpp's model metadata `meta.n_ctx_train` (the window the model
//!   was trained with, which the server may run below: used only when
//!   nothing better is reported).
//!
//! Ollama and llama-cpp-python's server report no window; Latch then keeps
//! the configured or default one and says which.

use std::time::Duration;

use serde_json::Value;

use crate::{Provider, ProviderKind};

/// How long discovery waits for each answer: a server that does not answer
/// this fast is left to the first request to report.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(3);

/// Where a discovered window came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSource {
    /// The server's running context (`/props` `n_ctx`, `max_model_len`,
    /// `context_length`, `n_ctx`).
    Server,
    /// The model's training context (`meta.n_ctx_train`).
    Training,
}

/// What the server reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerInfo {
    /// The ids of the models it serves, in its order.
    pub models: Vec<String>,
    /// The context window, and where it came from.
    pub window: Option<(u64, WindowSource)>,
}

impl ServerInfo {
    /// The window for `model` as `/models` and `/props` reported it.
    pub fn from_answers(models: Option<&Value>, props: Option<&Value>, model: &str) -> ServerInfo {
        let list: Vec<&Value> = models
            .and_then(|m| m.get("data"))
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let ids = list
            .iter()
            .filter_map(|m| m.get("id").and_then(Value::as_str))
            .map(str::to_string)
            .collect::<Vec<_>>();
        let entry = list
            .iter()
            .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
            .or(list.first());
        let u = |v: Option<&Value>| v.and_then(Value::as_u64).filter(|n| *n > 0);
        let running = props
            .and_then(|p| {
                u(p.pointer("/default_generation_settings/n_ctx")).or_else(|| u(p.get("n_ctx")))
            })
            .or_else(|| {
                entry.and_then(|m| {
                    u(m.get("max_model_len"))
                        .or_else(|| u(m.get("context_length")))
                        .or_else(|| u(m.get("n_ctx")))
                        .or_else(|| u(m.pointer("/meta/n_ctx")))
                })
            });
        let trained = entry.and_then(|m| u(m.pointer("/meta/n_ctx_train")));
        ServerInfo {
            models: ids,
            window: running
                .map(|n| (n, WindowSource::Server))
                .or(trained.map(|n| (n, WindowSource::Training))),
        }
    }
}

impl Provider {
    /// Asks an OpenAI-compatible server which models it serves and the
    /// window it runs with (for `model`, or its first model). Every failure
    /// (no such endpoint, not JSON, no answer within
    /// [`DISCOVERY_TIMEOUT`]) is an empty answer: discovery never stops a
    /// session. The hosted providers are not asked.
    pub async fn discover(&self, model: Option<&str>) -> ServerInfo {
        if self.kind() != ProviderKind::OpenAiCompatible {
            return ServerInfo::default();
        }
        let base = self.base_url();
        let models = self.get_json(&format!("{base}/models")).await;
        // `/props` sits at the server's root, beside `/v1`.
        let root = base.strip_suffix("/v1").unwrap_or(base);
        let props = self.get_json(&format!("{root}/props")).await;
        let first = models
            .as_ref()
            .and_then(|m| m.pointer("/data/0/id"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let model = model.map(str::to_string).or(first).unwrap_or_default();
        ServerInfo::from_answers(models.as_ref(), props.as_ref(), &model)
    }

    async fn get_json(&self, url: &str) -> Option<Value> {
        let mut rb = self.client.get(url).timeout(DISCOVERY_TIMEOUT);
        if let Some(k) = self.config.api_key.as_deref().filter(|k| !k.is_empty()) {
            rb = rb.bearer_auth(k);
        }
        let resp = rb.send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let bytes = tokio::time::timeout(DISCOVERY_TIMEOUT, resp.bytes())
            .await
            .ok()?
            .ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_running_window_beats_the_training_window() {
        let llama_server_models = json!({"object": "list", "data": [{
            "id": "gemma-3-270m-q4_k_m.gguf", "object": "model", "owned_by": "llamacpp",
            "meta": {"vocab_type": 1, "n_vocab": 262144, "n_ctx_train": 32768, "n_embd": 640}
        }]});
        let props = json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1});
        let info = ServerInfo::from_answers(Some(&llama_server_models), Some(&props), "x");
        assert_eq!(info.models, ["gemma-3-270m-q4_k_m.gguf"]);
        assert_eq!(info.window, Some((4096, WindowSource::Server)));
        let info = ServerInfo::from_answers(Some(&llama_server_models), None, "x");
        assert_eq!(info.window, Some((32768, WindowSource::Training)));
        let vllm = json!({"data": [{"id": "a", "max_model_len": 8192}, {"id": "b", "max_model_len": 32768}]});
        let info = ServerInfo::from_answers(Some(&vllm), None, "b");
        assert_eq!(info.window, Some((32768, WindowSource::Server)));
        let llama_cpp_python = json!({"object": "list", "data": [{"id": "gemma", "object": "model", "owned_by": "me", "permissions": []}]});
        let info = ServerInfo::from_answers(Some(&llama_cpp_python), None, "gemma");
        assert_eq!((info.models.len(), info.window), (1, None));
        assert_eq!(
            ServerInfo::from_answers(None, None, "m"),
            ServerInfo::default()
        );
    }
}
