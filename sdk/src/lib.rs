//! `latch-engine-sdk`: everything needed to write a Latch context engine in Rust.
//!
//! * [`types`] — the contract's records and variants (generated from `wit/`, with
//!   `serde` and `Clone`/`PartialEq` so views can be compared and serialized).
//! * [`Engine`] — the trait an engine implements; [`SessionView`] — the read-only
//!   session it is given.
//! * [`estimate()`] — the canonical token estimator, identical to the host's.
//! * [`MemorySession`] — an in-memory [`SessionView`] for native unit tests and
//!   benchmarks; [`IndexedSession`] — the same with a word index, for big
//!   sessions.
//! * [`ViewAssembler`] — restores whole views from an engine's continued
//!   ones (what every host does); [`Assembled`] — an engine driven that way.
//! * [`export_engine!`] — turns an [`Engine`] into a WASI component export when the
//!   crate is built for `wasm32-wasip2`.
//!
//! The same engine source compiles natively (tests, benchmarks, linking into the
//! host) and as a component.

extern crate self as latch_engine_sdk;

mod engine;
pub mod estimate;
mod frame;
#[doc(hidden)]
pub mod guest;
mod indexed;
mod memory;
pub mod policy;
mod text;
pub mod validate;
pub mod view;

pub use engine::{Engine, SessionView, default_recall, outline};
pub use estimate::{estimate, estimate_many, image_tokens};
pub use indexed::IndexedSession;
pub use memory::MemorySession;
pub use text::{
    RECALL_TOOL, event_label, event_search_text, kernel_note_label, one_line, render_part_text,
    tokenize_words, truncate_tokens, words,
};
pub use view::{Assembled, KeptTooMany, ViewAssembler};

/// The contract version this SDK implements.
pub const CONTRACT_VERSION: &str = "0.1.0";

/// Default context window when a model does not set one (256k tokens).
pub const DEFAULT_CONTEXT_WINDOW_TOKENS: u64 = 256_000;
/// Default reserve for the model's output plus safety.
pub const DEFAULT_RESERVE_TOKENS: u64 = 16_000;
/// Default working-memory high-water mark (`context.recent_tokens`).
pub const DEFAULT_RECENT_TOKENS: u64 = 64_000;
/// Most events `SessionView::events` returns in one page.
pub const MAX_PAGE: u32 = 1000;
/// Most rows `SessionView::search` returns.
pub const MAX_SEARCH: u32 = 200;
/// Longest `search` query in bytes the host accepts; a longer one is refused.
pub const MAX_SEARCH_QUERY_BYTES: usize = 4 * 1024;
/// Most words in a `search` query the host accepts; more are refused.
pub const MAX_SEARCH_QUERY_WORDS: usize = 64;

/// `query` cut to what the host's `search` accepts: at most
/// [`MAX_SEARCH_QUERY_WORDS`] whitespace-separated words and
/// [`MAX_SEARCH_QUERY_BYTES`] bytes, whole words only.
pub fn bounded_query(query: &str) -> String {
    let mut out = String::new();
    for word in query.split_whitespace().take(MAX_SEARCH_QUERY_WORDS) {
        let extra = word.len() + usize::from(!out.is_empty());
        if out.len() + extra > MAX_SEARCH_QUERY_BYTES {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[doc(hidden)]
pub mod bindings {
    //! Generated from `wit/` by wit-bindgen; the types are re-exported from
    //! [`crate::types`].
    wit_bindgen::generate!({
        path: "../wit",
        world: "context-engine",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
        pub_export_macro: true,
        export_macro_name: "__export_context_engine",
        default_bindings_module: "latch_engine_sdk::bindings",
        runtime_path: "latch_engine_sdk::__private::wit_bindgen::rt",
        generate_all,
    });
}

#[doc(hidden)]
pub mod policy_bindings {
    //! Generated from `wit/` for the `child-policy-engine` world; shares the
    //! contract's types with [`crate::bindings`].
    wit_bindgen::generate!({
        path: "../wit",
        world: "child-policy-engine",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
        with: { "latch:context/types@0.1.0": crate::bindings::latch::context::types },
        pub_export_macro: true,
        export_macro_name: "__export_child_policy",
        default_bindings_module: "latch_engine_sdk::policy_bindings",
        runtime_path: "latch_engine_sdk::__private::wit_bindgen::rt",
    });
}

#[doc(hidden)]
pub mod __private {
    pub use wit_bindgen;
}

/// The contract's data types.
pub mod types {
    pub use crate::bindings::exports::latch::context::engine::{
        ConfigError, ContextBudget, ContextReport, ContextRequest, ContextView, EngineError,
        ExtensionSource, SessionContext,
    };
    pub use crate::bindings::latch::context::types::{
        CanonicalState, EstimatorProfile, Event, EventBody, Evidence, ExtensionEvent,
        FailureLineage, FileState, Hypothesis, HypothesisStatus, KernelContextEntry,
        KernelContextKind, KernelNote, KernelNoteKind, KernelTag, MediaRef, Message, ModelProfile,
        OutlinedEvent, Part, Role, SearchHit, SessionInfo, StateEntry, ToolCall, ToolResult,
        ValidationOutcome,
    };

    /// The historical name of [`ContextBudget`], kept as an alias: the
    /// spec's port names the budget of one `materialize` call this way.
    pub type MaterializeBudget = ContextBudget;

    /// The historical name of [`ContextView`], kept as an alias: the spec's
    /// port names what `materialize` returns this way.
    pub type MaterializedContext = ContextView;
}

pub use types::*;

impl ModelProfile {
    /// A profile with Latch's defaults for a provider and model name.
    pub fn with_defaults(provider: &str, model: &str) -> Self {
        let estimator = match provider {
            "anthropic" => EstimatorProfile::Anthropic,
            _ => EstimatorProfile::Openai,
        };
        ModelProfile {
            provider: provider.to_string(),
            model: model.to_string(),
            context_window_tokens: DEFAULT_CONTEXT_WINDOW_TOKENS,
            reserve_tokens: DEFAULT_RESERVE_TOKENS,
            estimator,
        }
    }
}

impl ContextBudget {
    /// The budget Latch uses for a model when nothing overrides it.
    pub fn for_model(model: &ModelProfile) -> Self {
        ContextBudget {
            context_window_tokens: model.context_window_tokens,
            reserve_tokens: model.reserve_tokens,
            recent_tokens: DEFAULT_RECENT_TOKENS,
            tools_tokens: 0,
            extension_tokens: 0,
        }
    }

    /// `context_window_tokens - reserve_tokens`: the hard limit of a request.
    pub fn limit_tokens(&self) -> u64 {
        self.context_window_tokens
            .saturating_sub(self.reserve_tokens)
    }
}

impl CanonicalState {
    /// An empty state at revision 0.
    pub fn empty() -> Self {
        CanonicalState {
            revision: 0,
            goal: None,
            constraints: vec![],
            decisions: vec![],
            hypotheses: vec![],
            files: vec![],
            validations: vec![],
            evidence: vec![],
            failures: vec![],
            disproofs: vec![],
            questions: vec![],
            actions: vec![],
            criteria: vec![],
            notes: vec![],
        }
    }
}

impl Default for CanonicalState {
    fn default() -> Self {
        Self::empty()
    }
}

impl ContextReport {
    /// A report naming `engine` with every figure 0 or unknown and status
    /// `ok`; engines fill in what they measure.
    pub fn empty(engine: impl Into<String>) -> Self {
        ContextReport {
            engine: engine.into(),
            instructions_tokens: 0,
            state_tokens: 0,
            recent_tokens: 0,
            recall_tokens: 0,
            episode_tokens: 0,
            tools_tokens: 0,
            extension_tokens: 0,
            total_tokens: 0,
            limit_tokens: 0,
            reserve_tokens: 0,
            headroom_tokens: 0,
            first_retained_seq: None,
            evicted_tokens: 0,
            event_count: 0,
            episode_count: 0,
            episodes_shown: 0,
            status: "ok".into(),
            epoch_generation: None,
            epoch_user_turns: 0,
            rotation_reason: None,
            retained_after_rotation_tokens: 0,
            image_count: 0,
            image_tokens: 0,
            common_prefix_tokens: 0,
            request_tokens: 0,
            provider_prefix_utilization: None,
            measured_hit_rate: None,
        }
    }
}

impl Message {
    /// A plain text message with no kernel tag.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            parts: vec![Part::Text(text.into())],
            kernel: None,
            source_seqs: vec![],
        }
    }
}

impl Event {
    /// True for events that are provider-visible conversation: user and
    /// assistant messages, tool results and delivered notifications.
    pub fn is_conversation(&self) -> bool {
        matches!(
            self.body,
            EventBody::UserMessage(_)
                | EventBody::AssistantMessage(_)
                | EventBody::ToolResult(_)
                | EventBody::Notification(_)
        )
    }

    /// The provider-visible message of a conversation event (see
    /// [`Event::is_conversation`]), tagged with its sequence number; none for
    /// other events. This is the one rule every engine renders conversation
    /// with: tool results and notifications speak as the user.
    pub fn to_message(&self) -> Option<Message> {
        let (role, parts) = match &self.body {
            EventBody::UserMessage(parts) => (Role::User, parts.clone()),
            EventBody::AssistantMessage(parts) => (Role::Assistant, parts.clone()),
            EventBody::ToolResult(r) => (Role::User, vec![Part::ToolResult(r.clone())]),
            EventBody::Notification(text) => (Role::User, vec![Part::Text(text.clone())]),
            _ => return None,
        };
        Some(Message {
            role,
            parts,
            kernel: None,
            source_seqs: vec![self.seq],
        })
    }

    /// [`Event::to_message`], taking the event's parts instead of cloning them.
    pub fn into_message(self) -> Option<Message> {
        let (role, parts) = match self.body {
            EventBody::UserMessage(parts) => (Role::User, parts),
            EventBody::AssistantMessage(parts) => (Role::Assistant, parts),
            EventBody::ToolResult(r) => (Role::User, vec![Part::ToolResult(r)]),
            EventBody::Notification(text) => (Role::User, vec![Part::Text(text)]),
            _ => return None,
        };
        Some(Message {
            role,
            parts,
            kernel: None,
            source_seqs: vec![self.seq],
        })
    }

    /// True for a user message (an intent boundary).
    pub fn is_user_message(&self) -> bool {
        matches!(self.body, EventBody::UserMessage(_))
    }
}
