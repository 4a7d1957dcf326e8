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

/// Running sums of a view's entries in view order: what the report adds
/// up. A tally of a view's leading entries can be kept and continued with
/// the entries that follow (see [`crate::sent::Stable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tally {
    instructions: u64,
    state: u64,
    recent: u64,
    recalled: u64,
    episodes: u64,
    extension: u64,
    image_count: u32,
    image_tokens: u64,
    /// The first conversation message's first sequence number.
    first_retained: Option<u64>,
    user_turns: u32,
    /// Tokens of the leading entries that the previous request contained.
    shared: u64,
    /// False once an entry the previous request lacked was counted.
    open: bool,
}

impl Default for Tally {
    fn default() -> Self {
        Self::new()
    }
}

impl Tally {
    /// The tally of no entries.
    pub fn new() -> Self {
        Tally {
            instructions: 0,
            state: 0,
            recent: 0,
            recalled: 0,
            episodes: 0,
            extension: 0,
            image_count: 0,
            image_tokens: 0,
            first_retained: None,
            user_turns: 0,
            shared: 0,
            open: true,
        }
    }

    /// Count `entry`, which the previous request contained if `existed`.
    pub fn add(&mut self, entry: &Entry<'_>, existed: bool) {
        match entry.component {
            Component::Instructions => self.instructions += entry.tokens,
            Component::State => self.state += entry.tokens,
            Component::Recall => self.recalled += entry.tokens,
            Component::Episodes => self.episodes += entry.tokens,
            Component::Extension => self.extension += entry.tokens,
            Component::Recent => {
                self.recent += entry.tokens;
                self.image_count += entry.images.0;
                self.image_tokens += entry.images.1;
                if self.first_retained.is_none() {
                    self.first_retained = entry.message.source_seqs.first().copied();
                }
                self.user_turns += u32::from(entry.user_turn);
            }
        }
        self.open &= existed;
        if self.open {
            self.shared += entry.tokens;
        }
    }

    /// Count each of `entries` with its own `existed`.
    pub fn extend(&mut self, entries: &[Entry<'_>]) {
        for e in entries {
            self.add(e, e.existed);
        }
    }
}

/// The report for a view: `prefix` tallies its leading entries, `entries`
/// are the rest.
pub fn build(prefix: Tally, entries: &[Entry<'_>], facts: Facts) -> ContextReport {
    let mut t = prefix;
    t.extend(entries);
    let Tally {
        instructions,
        state,
        recent,
        recalled,
        episodes,
        extension,
        image_count,
        image_tokens,
        first_retained,
        user_turns,
        shared,
        open: _,
    } = t;
    let instructions = facts.system_tokens + instructions;
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
