//! The `/context` report: every component's tokens with exact sums, and the
//! epoch diagnostics.
//!
//! Each provider-visible message belongs to exactly one component, and each
//! component is the sum of the canonical prices of its messages, so
//! `total = instructions + state + recent + recall + tools + extension`
//! equals what the host checks and nothing is counted twice.
//!
//! Estimated architecture cacheability compares this request with the
//! previous one on the canonical serialization (system, tool schemas,
//! messages). The previous request is the one the latest assistant message
//! answered; because an epoch is append-only, the messages it contained are
//! exactly this view's messages whose durable events precede that assistant
//! message, so the figure is derived from the log alone.

use latch_engine_sdk::types::*;

use crate::sent::Shown;

/// Which report component a message belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    /// The session-context message (with the system prompt: instructions).
    Instructions,
    /// Snapshot, state updates, re-ground instructions.
    State,
    /// Verbatim conversation.
    Recent,
    /// Recalled originals.
    Recall,
    /// The episode index (part of recall).
    Episodes,
    /// Extension sources.
    Extension,
}

impl Component {
    /// The component of a kernel-context kind.
    pub fn of_kind(kind: KernelContextKind) -> Component {
        match kind {
            KernelContextKind::Snapshot
            | KernelContextKind::StateUpdate
            | KernelContextKind::Reground => Component::State,
            KernelContextKind::Extension => Component::Extension,
            KernelContextKind::Recall => Component::Recall,
            KernelContextKind::ArchiveIndex => Component::Episodes,
        }
    }
}

/// A view message borrowed from the engine's caches, or owned (boxed, so
/// that an entry stays small: a view has thousands of them).
#[derive(Clone, Debug)]
pub enum Held<'a> {
    /// Borrowed from the epoch cache or the priced request.
    Borrowed(&'a Message),
    /// Built for this view (kernel context not yet persisted).
    Owned(Box<Message>),
}

impl Held<'_> {
    /// The message, owned.
    pub fn into_owned(self) -> Message {
        match self {
            Held::Borrowed(m) => m.clone(),
            Held::Owned(m) => *m,
        }
    }
}

impl std::ops::Deref for Held<'_> {
    type Target = Message;
    fn deref(&self) -> &Message {
        match self {
            Held::Borrowed(m) => m,
            Held::Owned(m) => m,
        }
    }
}

/// One message of the view with what the report needs about it.
#[derive(Clone, Debug)]
pub struct Entry<'a> {
    /// The message, borrowed from the engine's caches where it can be.
    pub message: Held<'a>,
    /// What identifies it across views (see [`crate::sent`]).
    pub shown: Shown,
    /// Its component.
    pub component: Component,
    /// Its canonical price.
    pub tokens: u64,
    /// Its images and their visual tokens (conversation only; kernel
    /// context carries none).
    pub images: (u32, u64),
    /// True when the previous request already contained it.
    pub existed: bool,
    /// True for a user turn.
    pub user_turn: bool,
}

/// Facts the report needs beyond the messages.
#[derive(Clone, Debug)]
pub struct Facts {
    /// Engine name and version.
    pub engine: String,
    /// Estimated tokens of the system prompt.
    pub system_tokens: u64,
    /// Tool schemas.
    pub tools_tokens: u64,
    /// The request limit.
    pub limit_tokens: u64,
    /// The reserve.
    pub reserve_tokens: u64,
    /// Whether a previous request exists.
    pub has_previous: bool,
    /// Tokens that left working memory since the previous request.
    pub evicted_tokens: u64,
    /// Events in the session.
    pub event_count: u64,
    /// Episodes in the session.
    pub episode_count: u32,
    /// Episodes shown by the visible index.
    pub episodes_shown: u32,
    /// Short status.
    pub status: String,
    /// Cache epoch generation.
    pub generation: u64,
    /// Why the epoch started.
    pub rotation_reason: Option<String>,
    /// Conversation tokens retained when the epoch started.
    pub retained_after_rotation_tokens: u64,
}

/// The report for `entries`, in one pass over them.
pub fn build(entries: &[Entry<'_>], facts: Facts) -> ContextReport {
    let (mut instructions, mut state, mut recent) = (facts.system_tokens, 0u64, 0u64);
    let (mut recalled, mut episodes, mut extension) = (0u64, 0u64, 0u64);
    let mut image_count = 0u32;
    let mut image_tokens = 0u64;
    let mut first_retained = None;
    let mut user_turns = 0u32;
    let mut shared = 0u64;
    let mut prefix_open = true;
    for e in entries {
        match e.component {
            Component::Instructions => instructions += e.tokens,
            Component::State => state += e.tokens,
            Component::Recall => recalled += e.tokens,
            Component::Episodes => episodes += e.tokens,
            Component::Extension => extension += e.tokens,
            Component::Recent => {
                recent += e.tokens;
                image_count += e.images.0;
                image_tokens += e.images.1;
                if first_retained.is_none() {
                    first_retained = e.message.source_seqs.first().copied();
                }
                user_turns += u32::from(e.user_turn);
            }
        }
        prefix_open &= e.existed;
        if prefix_open {
            shared += e.tokens;
        }
    }
    let recall = recalled + episodes;
    let total = instructions + state + recent + recall + facts.tools_tokens + extension;
    let common = if facts.has_previous {
        facts.system_tokens + facts.tools_tokens + shared
    } else {
        0
    };
    ContextReport {
        engine: facts.engine,
        instructions_tokens: instructions,
        state_tokens: state,
        recent_tokens: recent,
        recall_tokens: recall,
        episode_tokens: episodes,
        tools_tokens: facts.tools_tokens,
        extension_tokens: extension,
        total_tokens: total,
        limit_tokens: facts.limit_tokens,
        reserve_tokens: facts.reserve_tokens,
        headroom_tokens: facts.limit_tokens.saturating_sub(total),
        first_retained_seq: first_retained,
        evicted_tokens: facts.evicted_tokens,
        event_count: facts.event_count,
        episode_count: facts.episode_count,
        episodes_shown: facts.episodes_shown,
        status: facts.status,
        epoch_generation: Some(facts.generation),
        epoch_user_turns: user_turns,
        rotation_reason: facts.rotation_reason,
        retained_after_rotation_tokens: facts.retained_after_rotation_tokens,
        image_count,
        image_tokens,
        common_prefix_tokens: common.min(total),
        request_tokens: total,
        provider_prefix_utilization: None,
        measured_hit_rate: None,
    }
}
