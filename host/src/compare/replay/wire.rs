//! The provider request a replayed view would have been: the view, the
//! recorded tool schemas, model and output limit, framed and with the cache
//! hints exactly as the agent loop sends a view. What a provider adapter
//! serializes from it is what the model would have been sent.

use latch_engine_sdk::types::ContextView;
use latch_engine_sdk::validate::framed;
use latch_kernel::RequestShape;
use latch_provider::{CacheHints, ProviderRequest, ToolSchema};

/// The provider request of `view`, asked under `shape`.
pub fn provider_request(shape: &RequestShape, view: &ContextView) -> ProviderRequest {
    ProviderRequest {
        model: shape.model.clone(),
        system: view.system.clone(),
        tools: shape
            .tools
            .iter()
            .filter_map(|t| serde_json::from_value::<ToolSchema>(t.clone()).ok())
            .collect(),
        cache_breakpoints: CacheHints::for_messages(&view.messages),
        messages: framed(&view.messages),
        max_tokens: shape.max_tokens,
    }
}
