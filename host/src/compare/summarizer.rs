//! The baseline's summary request over real HTTP: the same provider
//! connection, model, system prompt and tool schemas as the agent, so the
//! extra call is priced and cached as a peer's would be.

use latch_conformance::compare::{Summarizer, SummaryRequest};
use latch_engine_sdk::types::MediaRef;
use latch_kernel::Store;
use latch_provider::{CacheHints, MediaResolver, Provider, ProviderRequest, ToolSchema};
use std::sync::Arc;

/// Sends a [`SummaryRequest`] to the provider and returns the answer's text.
pub struct HttpSummarizer {
    provider: Provider,
    model: String,
    tools: Vec<ToolSchema>,
    max_tokens: u32,
    media: StoreMedia,
    runtime: tokio::runtime::Runtime,
}

impl HttpSummarizer {
    /// A summarizer talking to `provider` as `model`, offering `tools` (the
    /// agent's schemas, so the cached prefix is shared).
    pub fn new(
        provider: Provider,
        model: &str,
        tools: Vec<ToolSchema>,
        max_tokens: u32,
        store: Arc<Store>,
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
