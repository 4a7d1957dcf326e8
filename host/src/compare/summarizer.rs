//! The baseline's summary request over real HTTP: the same provider
//! connection, model, system prompt and tool schemas as the agent, so the
//! extra call is priced and cached as a peer's would be.

use latch_conformance::compare::{Summarizer, SummaryRequest};
use latch_engine_sdk::estimate::{estimate, message_tokens};
use latch_engine_sdk::types::{EstimatorProfile, MediaRef};
use latch_kernel::Store;
use latch_provider::{CacheHints, MediaResolver, Provider, ProviderRequest, ToolSchema};
use std::sync::{Arc, Mutex};

/// Sends a [`SummaryRequest`] to the provider and returns the answer's text.
pub struct HttpSummarizer {
    provider: Provider,
    model: String,
    tools: Vec<ToolSchema>,
    max_tokens: u32,
    media: StoreMedia,
    runtime: tokio::runtime::Runtime,
    profile: EstimatorProfile,
    sizes: Arc<Mutex<Vec<u64>>>,
}

impl HttpSummarizer {
    /// A summarizer talking to `provider` as `model`, offering `tools` (the
    /// agent's schemas, so the cached prefix is shared). The size of each
    /// request under `profile` is appended to `sizes`.
    pub fn new(
        provider: Provider,
        model: &str,
        tools: Vec<ToolSchema>,
        max_tokens: u32,
        store: Arc<Store>,
        profile: EstimatorProfile,
        sizes: Arc<Mutex<Vec<u64>>>,
    ) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(HttpSummarizer {
            provider,
            model: model.to_string(),
            tools,
            max_tokens,
            media: StoreMedia(store),
            runtime,
            profile,
            sizes,
        })
    }
}

impl Summarizer for HttpSummarizer {
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, String> {
        let req = ProviderRequest {
            model: self.model.clone(),
            system: request.system.clone(),
            tools: self.tools.clone(),
            cache_breakpoints: CacheHints::for_messages(&request.messages),
            messages: request.messages.clone(),
            max_tokens: self.max_tokens,
        };
        let p = self.profile;
        let tools = serde_json::to_string(&self.tools).unwrap_or_default();
        let size = estimate(p, &req.system) as u64
            + req
                .messages
                .iter()
                .map(|m| message_tokens(p, m))
                .sum::<u64>()
            + estimate(p, &tools) as u64;
        self.sizes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(size);
        let turn = self
            .runtime
            .block_on(self.provider.complete(&req, &self.media, &mut |_| {}))
            .map_err(|e| e.to_string())?;
        Ok(turn.text())
    }
}

/// Media of the summarized history, from the store's artifacts.
struct StoreMedia(Arc<Store>);

impl MediaResolver for StoreMedia {
    fn resolve(&self, media: &MediaRef) -> Result<Vec<u8>, String> {
        match self.0.artifact_bytes(&media.sha256) {
            Ok(Some(bytes)) => Ok(bytes),
            Ok(None) => Err(format!("artifact {} is not in the store", media.sha256)),
            Err(e) => Err(e.to_string()),
        }
    }
}
