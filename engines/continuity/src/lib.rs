//! The reference Latch context engine: **ContinuityEngine**.
//!
//! Context is disposable; memory is durable. Before every model request the
//! engine materializes a fresh view from the session's durable log:
//!
//! 1. the system prompt (unchanged) and the session context as the first
//!    message, so system and tools stay cacheable across sessions;
//! 2. the current **cache epoch**: a snapshot group (canonical task state,
//!    extension sources, an episode index of the archive, recalled
//!    originals), then whole conversation units and kernel-context deltas in
//!    log order. Within an epoch the view is append-only, which is what makes
//!    the provider's prefix cache work;
//! 3. new kernel-context entries, returned in `persist` for the host to
//!    append before sending, and read back from the log afterwards.
//!
//! When the epoch's conversation passes its rotation point (or the hard
//! budget), one hysteretic rotation keeps the newest whole units up to
//! `retain_percent` of that point (and, within the working-memory
//! threshold, every unit the model has not been shown yet: the results of
//! its last tool calls, what was delivered or said after them) and starts
//! a new generation with a fresh snapshot group: state, the user's earlier
//! messages verbatim (the first
//! task always, then the newest, within `user_tokens`), an episode index
//! that points at what the model's `recall` tool will find, and recalled
//! originals. The rotation point is the working-memory threshold, or under
//! `rotation = "cost"` the point where a fresh epoch becomes cheaper than
//! re-reading a grown one from the provider's cache
//! ([`budget::cost_rotation_point`]). `/compact` starts an epoch with no
//! conversation the model has seen retained.
//!
//! Every decision is a function of the log and the request: the instance
//! keeps caches keyed by a sequence watermark so a warm request costs work in
//! proportion to what is new, and a fresh instance on the same log returns
//! the same bytes.
//!
//! Modules: [`budget`] (allocation), [`epoch`] (the loader fold), [`state`]
//! (canonical rendering), [`episodes`] (segmentation, scoring, incremental
//! builder), [`recall`], [`report`], [`config`], [`render`], and
//! [`testkit`] (a generated-session driver shared with the host's tests).

pub mod budget;
pub mod config;
pub mod episodes;
pub mod epoch;
pub mod recall;
pub mod render;
pub mod report;
pub mod sent;
pub mod state;
pub mod testkit;

use std::cell::RefCell;
use std::collections::BTreeSet;

use latch_engine_sdk::estimate::message_tokens;
use latch_engine_sdk::types::*;
use latch_engine_sdk::validate::canon::frame_kernel_text;
use latch_engine_sdk::{Engine, SessionView, estimate};

use budget::{Plan, retained_from, retention_target};
use config::Config;
use episodes::{EpisodeBuilder, Segmenter};
use epoch::{EpochFold, Item, Unit};
use render::{NO_EXTENSIONS, SEP, SnapshotHeader, kernel_message, state_update_line};
use report::{Component, Entry, Facts, Held, Tally};
use sent::{Shown, Stable};

/// The engine's name in reports.
pub const ENGINE_NAME: &str = "continuity";

/// Caches rebuilt from the log: the epoch fold and the episode builders, with
/// the session they belong to.
#[derive(Clone, Debug)]
struct Cache {
    session_id: String,
    fold: EpochFold,
    /// The current epoch's episodes, segmented from its retained start
    /// (the whole log before the first epoch): the report counts them.
    epoch_episodes: Segmenter,
    /// Episodes of the whole log, for the archive index, and the sequence
    /// number they are folded up to (exclusive). Built from the log's
    /// outline the first time a snapshot is written, then caught up from the
    /// outline at each later snapshot: requests in between never touch them.
    episodes: RefCell<Option<(EpisodeBuilder, u64)>>,
    /// The canonical state, fetched again only when the session's state
    /// revision moves.
    state: Option<CanonicalState>,
    /// The last rendered state: its revision, the room it was rendered for,
    /// the body and the price of a state update carrying it.
    rendered: Option<(u64, u64, String, u64)>,
    /// What the previous successful view showed (see [`sent`]).
    sent: Vec<Shown>,
    /// The part of the previous view the next one begins with, unless the
    /// epoch changed (see [`sent::Stable`]).
    stable: Option<Stable>,
    /// View messages the last view built (the rest it knew unchanged).
    built: usize,
    /// The epoch's searches and their rendered hits (see
    /// [`recall::SearchMemo`]).
    searches: RefCell<recall::SearchMemo>,
    /// The last request's instructions and extensions, priced.
    priced: Option<PricedRequest>,
}

/// A request's instructions and extensions with their prices, kept while
/// they stay the same (comparing is far cheaper than estimating).
#[derive(Clone, Debug)]
struct PricedRequest {
    system_prompt: String,
    session_context: SessionContext,
    extensions: Vec<ExtensionSource>,
    /// The session-context message, its price, and its version (moves
    /// only when the message changes; see [`sent::Shown::Context`]).
    ctx: Message,
    ctx_tokens: u64,
    context_version: u64,
    /// The system prompt's price.
    system_tokens: u64,
    /// The extension sources as one entry's text, and its price (0 when
    /// there are none).
    extensions_text: String,
    extension_tokens: u64,
}

impl PricedRequest {
    fn new(
        profile: EstimatorProfile,
        request: &ContextRequest,
        previous: Option<&PricedRequest>,
    ) -> Self {
        let ctx = render::session_context_message(&request.session_context);
        let context_version = match previous {
            Some(p) if p.ctx == ctx => p.context_version,
            Some(p) => p.context_version + 1,
            None => 0,
        };
        let extensions_text = render::extensions_text(&request.extensions);
        PricedRequest {
            system_prompt: request.system_prompt.clone(),
            session_context: request.session_context.clone(),
            extensions: request.extensions.clone(),
            ctx_tokens: message_tokens(profile, &ctx),
            ctx,
            context_version,
            system_tokens: estimate(profile, &request.system_prompt) as u64,
            extension_tokens: if request.extensions.is_empty() {
                0
            } else {
                entry_tokens(profile, KernelContextKind::Extension, &extensions_text)
            },
            extensions_text,
        }
    }

    fn answers(&self, request: &ContextRequest) -> bool {
        self.system_prompt == request.system_prompt
            && self.session_context == request.session_context
            && self.extensions == request.extensions
    }
}

/// The reference context engine. One instance per session.
#[derive(Clone, Debug)]
pub struct ContinuityEngine {
    model: ModelProfile,
    profile: EstimatorProfile,
    config: Config,
    cache: Option<Cache>,
}

/// Why a new epoch starts.
#[derive(Clone, Debug)]
enum Start {
    /// No epoch in the log yet.
    First,
    /// `/compact` at this sequence number.
    Compact(u64),
    /// Conversation passed the rotation point: the threshold, or the
    /// cost-aware point below it (`cost`).
    Threshold {
        conv: u64,
        threshold: u64,
        cost: bool,
    },
    /// The request would break the hard budget.
    Hard { total: u64, limit: u64 },
}

/// Everything one materialization needs, computed once; the state and the
/// priced request are borrowed from the cache.
struct Inputs<'a> {
    request: &'a ContextRequest,
    plan: Plan,
    state: &'a CanonicalState,
    state_body: &'a str,
    threshold: u64,
    priced: &'a PricedRequest,
    event_count: u64,
    /// The highest generation and revision of the log's kernel context.
    kernel_generation: u64,
    kernel_revision: u64,
}

/// What [`ContinuityEngine::prepare`] computes before the cache is borrowed.
struct Prepared {
    plan: Plan,
    threshold: u64,
}

/// A view's messages: a leading part known to be the previous view's first
/// `lead` messages (with its tally), then the entries that follow it.
struct Built<'a> {
    lead: usize,
    lead_tally: Tally,
    entries: Vec<Entry<'a>>,
    /// What the next view of this epoch will begin with (see
    /// [`sent::Stable`]).
    stable: Option<Stable>,
}

impl<'a> Built<'a> {
    /// A view built whole.
    fn whole(entries: Vec<Entry<'a>>) -> Self {
        Built {
            lead: 0,
            lead_tally: Tally::new(),
            entries,
            stable: None,
        }
    }
}

/// A view before it is sent: every message with what the report and the
/// continuation need about it.
struct Draft<'a> {
    view: Built<'a>,
    persist: Vec<KernelContextEntry>,
    report: ContextReport,
}

impl ContinuityEngine {
    /// An engine for `model` with the default configuration (the same as
    /// [`Engine::new`]).
    pub fn for_model(model: ModelProfile) -> Self {
        ContinuityEngine {
            profile: model.estimator,
            model,
            config: Config::default(),
            cache: None,
        }
    }

    /// The current configuration.
    pub fn settings(&self) -> &Config {
        &self.config
    }

    /// How many messages of the last view this instance built; the rest of
    /// the view it knew to be unchanged from the view before (see
    /// [`sent::Stable`]). A warm request within an epoch builds about as
    /// many as are new.
    pub fn last_built(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.built)
    }

    /// The working-memory high-water mark of a request with `budget`: no
    /// threshold exceeds it, so a fold without an epoch keeps this much
    /// conversation (see [`EpochFold::with_keep`]).
    fn keep_for(&self, budget: &ContextBudget) -> u64 {
        self.config
            .recent_tokens
            .unwrap_or(budget.recent_tokens)
            .max(1)
    }

    /// Bring the caches up to the log's latest event, for requests whose
    /// working-memory threshold is at most `keep`.
    fn sync(&mut self, session: &dyn SessionView, info: &SessionInfo, keep: u64) {
        let latest = session.latest_seq();
        let stale = match &mut self.cache {
            None => true,
            Some(c) => {
                c.session_id != info.id
                    || c.fold.latest_seq > latest
                    || c.fold.events_seen > info.event_count
                    || !c.fold.widen_keep(keep)
            }
        };
        if stale {
            self.cache = Some(Cache {
                session_id: info.id.clone(),
                fold: EpochFold::with_keep(self.profile, keep),
                epoch_episodes: Segmenter::new(self.config.episode_volume_tokens),
                episodes: RefCell::new(None),
                state: None,
                rendered: None,
                sent: Vec::new(),
                stable: None,
                built: 0,
                searches: RefCell::default(),
                priced: None,
            });
        }
        let Some(cache) = self.cache.as_mut() else {
            return;
        };
        let cap = self.config.episode_volume_tokens;
        if cache.fold.events_seen == 0 {
            // A fresh instance (or a new session): load the current epoch
            // from the tail, segmenting its episodes on the way.
            let episodes = &mut cache.epoch_episodes;
            cache.fold = epoch::load(self.profile, keep, session, |e, volume| {
                episodes.push(e, volume);
            });
            cache.fold.price();
            return;
        }
        if cache.fold.latest_seq >= latest {
            return;
        }
        let epoch_before = cache.fold.epoch.as_ref().map(|e| e.snapshot_seq);
        let profile = self.profile;
        session.for_each_event(cache.fold.latest_seq + 1, u64::MAX, &mut |e| {
            let volume = latch_engine_sdk::estimate::event_tokens(profile, &e.body);
            cache.epoch_episodes.push(&e, volume);
            cache.fold.apply(e, volume, session);
        });
        let next = cache.fold.latest_seq + 1;
        cache.fold.price();
        if cache.fold.epoch.as_ref().map(|e| e.snapshot_seq) != epoch_before {
            // A new epoch: its episodes are segmented from its retained
            // start, as a fresh instance segments them.
            let start = cache.fold.start();
            let mut segments = Segmenter::new(cap);
            session.for_each_outlined(start, next, self.profile, &mut |o| {
                segments.push(&o.event, o.tokens);
            });
            cache.epoch_episodes = segments;
        }
    }

    /// The episodes of the whole log, up to date (see [`Cache::episodes`]).
    fn all_episodes<'c>(
        &self,
        cache: &'c Cache,
        session: &dyn SessionView,
    ) -> std::cell::Ref<'c, EpisodeBuilder> {
        let end = cache.fold.latest_seq.saturating_add(1);
        {
            let mut slot = cache.episodes.borrow_mut();
            let (episodes, next) = slot
                .get_or_insert_with(|| (EpisodeBuilder::new(self.config.episode_volume_tokens), 0));
            if *next < end {
                session.for_each_outlined(*next, end, self.profile, &mut |o| {
                    episodes.push(&o.event, o.tokens)
                });
                *next = end;
            }
        }
        std::cell::Ref::map(cache.episodes.borrow(), |e| {
            &e.as_ref().expect("built above").0
        })
    }

    fn cache(&self) -> Result<&Cache, EngineError> {
        self.cache
            .as_ref()
            .ok_or_else(|| EngineError::Internal("the session cache is missing".into()))
    }

    /// Plan the request and bring the cached canonical state and its
    /// rendering up to date (the state is fetched again only when the
    /// session's state revision moved).
    fn prepare(
        &mut self,
        session: &dyn SessionView,
        info: &SessionInfo,
        request: &ContextRequest,
    ) -> Result<Prepared, EngineError> {
        let p = self.profile;
        let recent_tokens = self.config.recent_tokens;
        let cache = self
            .cache
            .as_mut()
            .ok_or_else(|| EngineError::Internal("the session cache is missing".into()))?;
        if !cache.priced.as_ref().is_some_and(|r| r.answers(request)) {
            cache.priced = Some(PricedRequest::new(p, request, cache.priced.as_ref()));
        }
        let priced = cache.priced.as_ref().expect("priced above");
        let plan = Plan::new(
            &request.budget,
            priced.system_tokens + priced.ctx_tokens,
            priced.extension_tokens.max(request.budget.extension_tokens),
            recent_tokens,
        )?;
        let state = match &mut cache.state {
            Some(s) if s.revision == info.state_revision => s,
            slot => slot.insert(session.canonical_state()),
        };
        let state_tokens = match &cache.rendered {
            Some((revision, avail, _, tokens))
                if *revision == state.revision && *avail == plan.avail =>
            {
                *tokens
            }
            _ => {
                let body = state::render_state(p, state, plan.avail);
                let tokens = entry_tokens(
                    p,
                    KernelContextKind::StateUpdate,
                    &state_text(&state_update_line(state.revision), &body),
                );
                cache.rendered = Some((state.revision, plan.avail, body, tokens));
                tokens
            }
        };
        let threshold = plan.threshold(state_tokens);
        Ok(Prepared { plan, threshold })
    }

    /// The inputs of one materialization, borrowing the state from the
    /// cache that [`ContinuityEngine::prepare`] brought up to date.
    fn inputs<'a>(
        &'a self,
        prepared: Prepared,
        request: &'a ContextRequest,
        info: &SessionInfo,
    ) -> Result<Inputs<'a>, EngineError> {
        let cache = self.cache()?;
        let (Some(state), Some((_, _, state_body, _)), Some(priced)) =
            (&cache.state, &cache.rendered, &cache.priced)
        else {
            return Err(EngineError::Internal(
                "the canonical state was not prepared".into(),
            ));
        };
        Ok(Inputs {
            request,
            plan: prepared.plan,
            state,
            state_body,
            threshold: prepared.threshold,
            priced,
            event_count: info.event_count,
            kernel_generation: info.kernel_context_generation,
            kernel_revision: info.kernel_context_revision,
        })
    }

    fn build_view<'a>(
        &'a self,
        session: &dyn SessionView,
        inp: &'a Inputs<'a>,
    ) -> Result<Draft<'a>, EngineError> {
        let fold = &self.cache()?.fold;
        let Some(epoch) = &fold.epoch else {
            return self.rotate(session, inp, Start::First);
        };
        if let Some(c) = fold.compact_seq {
            return self.rotate(session, inp, Start::Compact(c));
        }
        let p = self.profile;
        let start = epoch.header.start;
        let generation = epoch.generation;
        let mut rev = inp.kernel_revision + 1;
        let mut new: Vec<KernelContextEntry> = Vec::new();
        let mut push = |new: &mut Vec<KernelContextEntry>, kind, text: String| {
            new.push(KernelContextEntry {
                generation,
                revision: rev,
                kind,
                epoch_start: None,
                text,
            });
            rev += 1;
        };
        if fold.state_revision != Some(inp.state.revision) {
            push(
                &mut new,
                KernelContextKind::StateUpdate,
                state_text(&state_update_line(inp.state.revision), inp.state_body),
            );
        }
        let shown_ext = fold.extension_text.as_deref().unwrap_or(NO_EXTENSIONS);
        if inp.priced.extensions_text != shown_ext {
            push(
                &mut new,
                KernelContextKind::Extension,
                inp.priced.extensions_text.clone(),
            );
        }
        if let Some((seq, summary)) = &fold.last_reground_note
            && *seq >= start
            && fold.last_reground_entry_seq.is_none_or(|s| *seq > s)
        {
            push(
                &mut new,
                KernelContextKind::Reground,
                render::reground_text(*seq, summary),
            );
        }

        // Rotation: past the rotation point (when a rotation would evict
        // something), or past the hard budget.
        let point = self.rotation_point(fold, &epoch.header, inp);
        if fold.conv_tokens > point {
            let tokens: Vec<u64> = fold.units().map(|u| u.tokens).collect();
            let target = retention_target(point, self.config.retain_percent);
            let first = retained_from(&tokens, target);
            let first = retained_first(fold, &tokens, first, inp.threshold);
            let new_start = fold
                .units()
                .nth(first)
                .map(|u| u.first_seq)
                .unwrap_or(fold.latest_seq + 1);
            if new_start > start {
                return self.rotate(
                    session,
                    inp,
                    Start::Threshold {
                        conv: fold.conv_tokens,
                        threshold: point,
                        cost: point < inp.threshold,
                    },
                );
            }
        }
        let mandatory: u64 = new.iter().map(|e| entry_tokens(p, e.kind, &e.text)).sum();
        let total = inp.plan.fixed + fold.kernel_tokens + fold.conv_tokens + mandatory;
        if total > inp.plan.limit {
            return self.rotate(
                session,
                inp,
                Start::Hard {
                    total,
                    limit: inp.plan.limit,
                },
            );
        }

        // Recalled originals fill what the caps and the hard budget leave.
        let cap = self.config.recall_tokens.saturating_sub(fold.recall_used);
        let room = inp.plan.limit - total;
        for text in self.recall_entries(session, inp, start, &fold.recalled, cap.min(room)) {
            push(&mut new, KernelContextKind::Recall, text);
        }

        // Assemble: context, group, (deltas while the group is still open),
        // body, deltas. What the previous view showed of the context, the
        // closed group and the body is known to lead this view unchanged:
        // only what follows it is built.
        let last_a = fold.last_assistant_seq;
        let stable = self.cache()?.stable.as_ref().filter(|s| {
            !fold.group_open
                && s.leads(
                    epoch.snapshot_seq,
                    inp.priced.context_version,
                    fold.group.len(),
                    fold.body.len(),
                    last_a,
                )
        });
        let mut entries = Vec::new();
        let first_item = match stable {
            Some(s) => s.body_items,
            None => {
                entries.push(self.ctx_entry(inp, last_a));
                for k in &fold.group {
                    entries.push(kernel_entry(
                        Held::Borrowed(&k.message),
                        k.kind,
                        k.tokens.unwrap_or(0),
                        Some(k.seq),
                        last_a,
                    ));
                }
                0
            }
        };
        let new_entries: Vec<Entry> = new
            .iter()
            .map(|e| {
                let m = kernel_message(e, None);
                let t = message_tokens(p, &m);
                kernel_entry(Held::Owned(Box::new(m)), e.kind, t, None, last_a)
            })
            .collect();
        if fold.group_open {
            entries.extend(new_entries.iter().cloned());
        }
        for item in &fold.body[first_item..] {
            match item {
                Item::Unit(u) => push_unit(&mut entries, u, last_a),
                Item::Kernel(k) => entries.push(kernel_entry(
                    Held::Borrowed(&k.message),
                    k.kind,
                    k.tokens.unwrap_or(0),
                    Some(k.seq),
                    last_a,
                )),
            }
        }
        // The next view of this epoch begins with everything up to here,
        // unless the group is still open (it may grow).
        let next_stable = (!fold.group_open).then(|| {
            let base = stable.cloned().unwrap_or_else(|| {
                Stable::group(
                    epoch.snapshot_seq,
                    inp.priced.context_version,
                    fold.group.len(),
                )
            });
            base.extended(&entries, fold.body.len())
        });
        if !fold.group_open {
            entries.extend(new_entries);
        }
        let fresh = last_a.is_none_or(|a| epoch.snapshot_seq > a);
        let shown = new
            .iter()
            .rev()
            .find(|e| e.kind == KernelContextKind::ArchiveIndex)
            .and_then(|e| render::parse_index_shown(&e.text))
            .unwrap_or(fold.index_shown);
        // The archive's episodes as the snapshot counted them, and the
        // epoch's own.
        let episode_count =
            epoch.header.archived_episodes + self.cache()?.epoch_episodes.len() as u64;
        let (lead, lead_tally) = stable.map_or((0, Tally::new()), |s| (s.entries, s.tally));
        let view = Built {
            lead,
            lead_tally,
            entries,
            stable: next_stable,
        };
        self.finish(
            inp,
            view,
            new,
            &epoch.header,
            generation,
            fresh,
            (episode_count, shown),
        )
    }

    /// The conversation size past which the current epoch rotates (see
    /// [`config::Rotation`]).
    fn rotation_point(&self, fold: &EpochFold, header: &SnapshotHeader, inp: &Inputs) -> u64 {
        match self.config.rotation {
            config::Rotation::Threshold => inp.threshold,
            config::Rotation::Cost => budget::cost_rotation_point(
                budget::CachePricing::of_provider(&self.model.provider),
                inp.threshold,
                header.retained,
                fold.kernel_tokens,
                fold.conv_tokens.saturating_sub(header.retained),
                fold.epoch_requests,
            ),
        }
    }

    /// Start a new epoch: choose the retained units, then build the snapshot
    /// group in priority order (state, extension, re-ground, the user's
    /// pinned messages, then recalled originals and the index in the
    /// configured order: see [`config::Allocation`]).
    fn rotate<'a>(
        &'a self,
        session: &dyn SessionView,
        inp: &'a Inputs<'a>,
        why: Start,
    ) -> Result<Draft<'a>, EngineError> {
        let p = self.profile;
        let cache = self.cache()?;
        let fold = &cache.fold;
        let (entries_out, header, generation, first_retained) =
            self.snapshot_group(session, inp, why)?;
        let last_a = fold.last_assistant_seq;
        let mut entries = vec![self.ctx_entry(inp, last_a)];
        for e in &entries_out {
            let m = kernel_message(e, None);
            let t = message_tokens(p, &m);
            entries.push(kernel_entry(
                Held::Owned(Box::new(m)),
                e.kind,
                t,
                None,
                last_a,
            ));
        }
        for u in fold.units().skip(first_retained) {
            push_unit(&mut entries, u, last_a);
        }
        let shown = entries_out
            .iter()
            .find(|e| e.kind == KernelContextKind::ArchiveIndex)
            .and_then(|e| render::parse_index_shown(&e.text))
            .unwrap_or(0);
        let episode_count = self.all_episodes(cache, session).len() as u64;
        self.finish(
            inp,
            Built::whole(entries),
            entries_out,
            &header,
            generation,
            true,
            (episode_count, shown),
        )
    }

    /// The entries of a new epoch's snapshot group, its header, generation
    /// and the index of the first retained unit of the current fold.
    fn snapshot_group(
        &self,
        session: &dyn SessionView,
        inp: &Inputs,
        why: Start,
    ) -> Result<(Vec<KernelContextEntry>, SnapshotHeader, u64, usize), EngineError> {
        let p = self.profile;
        let cache = self.cache()?;
        let fold = &cache.fold;
        let units: Vec<&Unit> = fold.units().collect();
        let tokens: Vec<u64> = units.iter().map(|u| u.tokens).collect();
        // Units a fold without an epoch dropped are older than any a new
        // epoch retains (see [`EpochFold::with_keep`]); they still count.
        let conv: u64 = fold.dropped_tokens + tokens.iter().sum::<u64>();
        let point = match &why {
            Start::Threshold { threshold, .. } => *threshold,
            _ => inp.threshold,
        };
        let target = retention_target(point, self.config.retain_percent);
        let keep = |first| retained_first(fold, &tokens, first, inp.threshold);
        let newest = || keep(retained_from(&tokens, target));
        let (first, reason) = match &why {
            Start::First if conv <= inp.threshold => (0, None),
            Start::First => (
                newest(),
                Some(format!(
                    "first epoch: working memory {conv} tokens exceeded {}",
                    inp.threshold
                )),
            ),
            Start::Compact(c) => (
                keep(
                    units
                        .iter()
                        .position(|u| u.first_seq > *c)
                        .unwrap_or(units.len()),
                ),
                Some("manual compact".to_string()),
            ),
            Start::Threshold {
                conv,
                threshold,
                cost: false,
            } => (
                newest(),
                Some(format!("working memory {conv} tokens exceeded {threshold}")),
            ),
            Start::Threshold {
                conv,
                threshold,
                cost: true,
            } => (
                newest(),
                Some(format!(
                    "cost: a fresh epoch is cheaper past {threshold} tokens of working memory ({conv})"
                )),
            ),
            Start::Hard { total, limit } => (
                newest(),
                Some(format!(
                    "hard budget: the request needed {total} of {limit} tokens"
                )),
            ),
        };
        let start = units
            .get(first)
            .map(|u| u.first_seq)
            .unwrap_or(fold.latest_seq + 1);
        let retained: u64 = tokens[first..].iter().sum();
        let evicted: u64 = fold.dropped_tokens + tokens[..first].iter().sum::<u64>();
        let generation = inp.kernel_generation + 1;
        let archived_episodes = self.all_episodes(cache, session).count_before(start) as u64;
        let header = SnapshotHeader {
            start,
            state_revision: inp.state.revision,
            retained,
            evicted,
            archived_episodes,
            reason,
        };

        let mut texts: Vec<(KernelContextKind, String)> = vec![(
            KernelContextKind::Snapshot,
            state_text(&header.line(generation), inp.state_body),
        )];
        if inp.priced.extensions_text != NO_EXTENSIONS {
            texts.push((
                KernelContextKind::Extension,
                inp.priced.extensions_text.clone(),
            ));
        }
        if let Some((seq, summary)) = &fold.last_reground_note
            && *seq >= start
        {
            texts.push((
                KernelContextKind::Reground,
                render::reground_text(*seq, summary),
            ));
        }
        let used = |texts: &[(KernelContextKind, String)]| {
            inp.plan.fixed
                + retained
                + texts
                    .iter()
                    .map(|(k, t)| entry_tokens(p, *k, t))
                    .sum::<u64>()
        };
        if used(&texts) > inp.plan.limit {
            // A kept-whole unit leaves less room than planned: render the
            // state into what is actually left (the core first).
            let others = used(&texts[1..]);
            let room = inp.plan.limit.saturating_sub(others);
            let body = state::render_state(p, inp.state, room.saturating_mul(2));
            texts[0].1 = state_text(&header.line(generation), &body);
        }
        // The user's own words outrank everything after the state: the
        // first task and the newest messages the epoch no longer holds.
        let remaining = inp.plan.limit.saturating_sub(used(&texts));
        let (pinned, pinned_seqs) = self.user_intents(
            cache,
            session,
            start,
            self.config.user_tokens.min(remaining / 2),
        );
        texts.extend(pinned.into_iter().map(|t| (KernelContextKind::Recall, t)));
        // Recalled originals and the episode index share what is left, in
        // the configured order (see [`config::Allocation`]).
        let recall = |texts: &mut Vec<(KernelContextKind, String)>| {
            let room = inp
                .plan
                .limit
                .saturating_sub(used(texts))
                .min(self.config.recall_tokens);
            for text in self.recall_entries(session, inp, start, &pinned_seqs, room) {
                texts.push((KernelContextKind::Recall, text));
            }
        };
        let index = |texts: &mut Vec<(KernelContextKind, String)>, share: u64| {
            let remaining = inp.plan.limit.saturating_sub(used(texts));
            let budget = self.config.index_tokens.min(remaining / share);
            if let Some(text) = self.index_text(cache, session, inp, start, budget) {
                texts.push((KernelContextKind::ArchiveIndex, text));
            }
        };
        match self.config.allocation {
            config::Allocation::RecallFirst => {
                recall(&mut texts);
                index(&mut texts, 1);
            }
            config::Allocation::IndexFirst => {
                index(&mut texts, 2);
                recall(&mut texts);
            }
        }
        let total = used(&texts);
        if total > inp.plan.limit {
            return Err(EngineError::BudgetExceeded(format!(
                "the newest conversation unit, the task state and the instructions need {total} tokens but the request limit is {}",
                inp.plan.limit
            )));
        }
        let first_rev = inp.kernel_revision + 1;
        let entries = texts
            .into_iter()
            .enumerate()
            .map(|(i, (kind, text))| KernelContextEntry {
                generation,
                revision: first_rev + i as u64,
                kind,
                epoch_start: (kind == KernelContextKind::Snapshot).then_some(start),
                text,
            })
            .collect();
        Ok((entries, header, generation, first))
    }

    /// The user's messages before `start`, verbatim, as recalled-original
    /// entry texts within `budget` tokens, and their sequence numbers: the
    /// session's first message always (cut to the budget), then the newest
    /// back to the first that does not fit (each cut at
    /// `recall_event_tokens`), in chronological order.
    fn user_intents(
        &self,
        cache: &Cache,
        session: &dyn SessionView,
        start: u64,
        budget: u64,
    ) -> (Vec<String>, BTreeSet<u64>) {
        let p = self.profile;
        // Every user message starts an intent's first episode.
        let starts: Vec<u64> = self
            .all_episodes(cache, session)
            .episodes()
            .filter(|e| e.part == 0 && e.first_seq < start)
            .map(|e| e.first_seq)
            .collect();
        let read = |seq: u64| {
            session
                .events(seq, seq + 1, 1)
                .into_iter()
                .find(|e| e.seq == seq && matches!(e.body, EventBody::UserMessage(_)))
        };
        let mut chosen: Vec<(u64, String)> = Vec::new();
        let mut used = 0u64;
        let mut first = None;
        for &seq in &starts {
            if let Some(e) = read(seq) {
                // The header and the message overhead come out of the budget.
                let text = render::recall_text(p, &e, budget.saturating_sub(48));
                let tokens = entry_tokens(p, KernelContextKind::Recall, &text);
                if tokens <= budget {
                    used += tokens;
                    chosen.push((seq, text));
                }
                first = Some(seq);
                break;
            }
        }
        for &seq in starts.iter().rev() {
            if Some(seq) <= first {
                break;
            }
            let Some(e) = read(seq) else { continue };
            let text = render::recall_text(p, &e, self.config.recall_event_tokens);
            let tokens = entry_tokens(p, KernelContextKind::Recall, &text);
            if used + tokens > budget {
                break;
            }
            used += tokens;
            chosen.push((seq, text));
        }
        chosen.sort_by_key(|(seq, _)| *seq);
        let seqs = chosen.iter().map(|(seq, _)| *seq).collect();
        (chosen.into_iter().map(|(_, t)| t).collect(), seqs)
    }

    /// The episode index of the archive (`seq < start`) within `budget`.
    fn index_text(
        &self,
        cache: &Cache,
        session: &dyn SessionView,
        inp: &Inputs,
        start: u64,
        budget: u64,
    ) -> Option<String> {
        let p = self.profile;
        let eps = self.all_episodes(cache, session);
        let archival = eps.count_before(start);
        if archival == 0 || self.config.max_index_entries == 0 {
            return None;
        }
        let query = recall::query_set(&inp.request.query);
        let mut newest_files: Vec<&FileState> = inp.state.files.iter().collect();
        newest_files.sort_by(|a, b| b.seq.cmp(&a.seq).then(a.path.cmp(&b.path)));
        let files: BTreeSet<String> = newest_files
            .into_iter()
            .take(episodes::MAX_SCORED_FILES)
            .map(|f| f.path.clone())
            .collect();
        let max = self.config.max_index_entries as usize;
        let pointers = self.match_pointers(cache, session, inp, start, &query);
        // Episodes holding an exact match of the query come first (their
        // words may be only in tool output, which scoring never reads),
        // then the best scored, in chronological order.
        let mut chosen: Vec<usize> = Vec::new();
        for (seq, _) in &pointers {
            let i = eps.count_before(seq + 1).saturating_sub(1);
            if i < archival && !chosen.contains(&i) && chosen.len() < max {
                chosen.push(i);
            }
        }
        for i in eps.select(archival, &query, &files, max) {
            if chosen.len() < max && !chosen.contains(&i) {
                chosen.push(i);
            }
        }
        chosen.sort_unstable();
        let query = eps.term_ids(&query);
        let lines: Vec<(u64, usize, String)> = chosen
            .iter()
            .filter_map(|&i| {
                let ep = eps.get(i)?;
                let mut line = episodes::index_line(ep);
                // The newest archival match of the query inside the
                // episode, as a pointer for `recall`.
                if let Some((seq, text)) = pointers
                    .iter()
                    .find(|(seq, _)| (ep.first_seq..=ep.last_seq).contains(seq))
                {
                    line.push_str(&format!("{SEP}match: event {seq}, {text}"));
                }
                Some((episodes::score(ep, &query, &files, i, archival), i, line))
            })
            .collect();
        // Drop the lowest-scored choices (older first on ties) until the
        // index fits its budget.
        let mut order: Vec<usize> = (0..lines.len()).collect();
        order.sort_by(|&a, &b| {
            lines[a]
                .0
                .cmp(&lines[b].0)
                .then(lines[a].1.cmp(&lines[b].1))
        });
        let mut keep: Vec<bool> = vec![true; lines.len()];
        let render = |keep: &[bool]| {
            let shown = keep.iter().filter(|k| **k).count();
            let mut text = format!(
                "{}{SEP}{shown} of {archival} episodes{SEP}archive before event {start}\nOlder work, by intent. Originals stay in the durable log: call the `recall` tool with keywords (a command, a path, an error) to read them verbatim.",
                render::INDEX_TITLE,
            );
            for (k, (_, _, line)) in keep.iter().zip(&lines) {
                if *k {
                    text.push('\n');
                    text.push_str(line);
                }
            }
            text
        };
        for drop in order {
            if entry_tokens(p, KernelContextKind::ArchiveIndex, &render(&keep)) <= budget {
                break;
            }
            keep[drop] = false;
        }
        if !keep.iter().any(|k| *k) {
            return None;
        }
        let text = render(&keep);
        (entry_tokens(p, KernelContextKind::ArchiveIndex, &text) <= budget).then_some(text)
    }

    /// The archival matches of the request's query, newest first, each with
    /// the first line of its original that carries a query word (else its
    /// first line), shortened: pointers the episode index shows so the model
    /// knows what `recall` will find. The search is the one recall makes
    /// (answered from the memo after the first time).
    fn match_pointers(
        &self,
        cache: &Cache,
        session: &dyn SessionView,
        inp: &Inputs,
        start: u64,
        words: &BTreeSet<String>,
    ) -> Vec<(u64, String)> {
        let mut memo = cache.searches.borrow_mut();
        let limit = self.config.recall_limit.max(1);
        let hits = memo.archival_hits(
            session,
            &inp.request.query,
            (start, limit),
            &BTreeSet::new(),
            |e| self.candidate(e),
        );
        hits.into_iter()
            .map(|c| {
                let (header, body) = c.text.split_once("\n\n").unwrap_or((&c.text, ""));
                // The header ends with what the event is (`tool result
                // shell`, `user`, ...).
                let label = header.rsplit(SEP).next().unwrap_or("");
                let mut lines = body.lines().filter(|l| !l.trim().is_empty());
                let hit = body
                    .lines()
                    .find(|l| latch_engine_sdk::words(l).any(|w| words.contains(&w)));
                let line = hit.or_else(|| lines.next()).unwrap_or("");
                (
                    c.seq,
                    format!("{label}: \"{}\"", render::one_line(line, 100)),
                )
            })
            .collect()
    }

    /// An archival event rendered as a recall entry (see
    /// [`recall::SearchMemo`]).
    fn candidate(&self, e: &Event) -> recall::Candidate {
        let text = render::recall_text(self.profile, e, self.config.recall_event_tokens);
        recall::Candidate {
            seq: e.seq,
            tokens: entry_tokens(self.profile, KernelContextKind::Recall, &text),
            text,
        }
    }

    /// Recalled-original entry texts for the request's query: the newest
    /// archival matches not already shown, in chronological order, greedily
    /// within `room` tokens.
    fn recall_entries(
        &self,
        session: &dyn SessionView,
        inp: &Inputs,
        start: u64,
        shown: &BTreeSet<u64>,
        room: u64,
    ) -> Vec<String> {
        let Ok(cache) = self.cache() else {
            return Vec::new();
        };
        let archive_empty = cache.fold.first_seq.is_none_or(|f| f >= start);
        if room == 0 || archive_empty || self.config.recall_limit == 0 {
            return Vec::new();
        }
        let mut memo = cache.searches.borrow_mut();
        let hits = memo.archival_hits(
            session,
            &inp.request.query,
            (start, self.config.recall_limit),
            shown,
            |e| self.candidate(e),
        );
        let mut used = 0u64;
        let mut chosen: Vec<(u64, String)> = Vec::new();
        for c in hits {
            if used + c.tokens <= room {
                used += c.tokens;
                chosen.push((c.seq, c.text.clone()));
            }
        }
        chosen.sort_by_key(|(seq, _)| *seq);
        chosen.into_iter().map(|(_, t)| t).collect()
    }

    fn ctx_entry<'a>(&self, inp: &'a Inputs, last_a: Option<u64>) -> Entry<'a> {
        Entry {
            tokens: inp.priced.ctx_tokens,
            images: (0, 0),
            message: Held::Borrowed(&inp.priced.ctx),
            shown: Shown::Context(inp.priced.context_version),
            component: Component::Instructions,
            existed: last_a.is_some(),
            user_turn: false,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn finish<'a>(
        &self,
        inp: &Inputs,
        view: Built<'a>,
        persist: Vec<KernelContextEntry>,
        header: &SnapshotHeader,
        generation: u64,
        fresh: bool,
        (episode_count, shown): (u64, u32),
    ) -> Result<Draft<'a>, EngineError> {
        let cache = self.cache()?;
        let status = match (fresh, &header.reason) {
            (false, _) => "ok",
            (true, None) => "started",
            (true, Some(r)) if r == "manual compact" => "compacted",
            (true, Some(_)) => "rotated",
        };
        let facts = Facts {
            engine: format!("{ENGINE_NAME} {}", env!("CARGO_PKG_VERSION")),
            system_tokens: inp.priced.system_tokens,
            tools_tokens: inp.request.budget.tools_tokens,
            limit_tokens: inp.plan.limit,
            reserve_tokens: inp.request.budget.reserve_tokens,
            has_previous: cache.fold.last_assistant_seq.is_some(),
            evicted_tokens: if fresh { header.evicted } else { 0 },
            event_count: inp.event_count,
            episode_count: episode_count as u32,
            episodes_shown: shown,
            status: status.to_string(),
            generation,
            rotation_reason: header.reason.clone(),
            retained_after_rotation_tokens: header.retained,
        };
        let report = report::build(view.lead_tally, &view.entries, facts);
        if report.total_tokens > report.limit_tokens {
            return Err(EngineError::BudgetExceeded(format!(
                "the view needs {} tokens but the request limit is {}",
                report.total_tokens, report.limit_tokens
            )));
        }
        Ok(Draft {
            view,
            persist,
            report,
        })
    }
}

/// Canonical price of a kernel-context entry's message.
/// The price of a kernel-context entry of `kind` with `text`: its message
/// as the provider receives it, the host's frame included (the frame counts
/// toward the hard budget; see [`message_tokens`]).
fn entry_tokens(profile: EstimatorProfile, kind: KernelContextKind, text: &str) -> u64 {
    latch_engine_sdk::estimate::MESSAGE_OVERHEAD_TOKENS
        + estimate(profile, &frame_kernel_text(kind, text)) as u64
}

fn state_text(header: &str, body: &str) -> String {
    format!("{header}\n\n{body}")
}

fn kernel_entry(
    message: Held<'_>,
    kind: KernelContextKind,
    tokens: u64,
    seq: Option<u64>,
    last_a: Option<u64>,
) -> Entry<'_> {
    Entry {
        message,
        shown: seq.map_or(Shown::Fresh, Shown::Logged),
        component: Component::of_kind(kind),
        tokens,
        images: (0, 0),
        existed: matches!((seq, last_a), (Some(s), Some(a)) if s < a),
        user_turn: false,
    }
}

fn push_unit<'a>(entries: &mut Vec<Entry<'a>>, unit: &'a Unit, last_a: Option<u64>) {
    let priced = unit.prices.iter().zip(&unit.images);
    for (i, (m, (t, images))) in unit.messages.iter().zip(priced).enumerate() {
        let seq = m.source_seqs.first().copied().unwrap_or(u64::MAX);
        entries.push(Entry {
            message: Held::Borrowed(m),
            shown: Shown::Logged(seq),
            component: Component::Recent,
            tokens: *t,
            images: *images,
            existed: last_a.is_some_and(|a| seq < a),
            user_turn: unit.user_turn && i == 0,
        });
    }
}

/// The first unit of `fold` (whose unit prices are `tokens`) a new epoch
/// retains: `first` as the epoch's policy chose it, reached back so that no
/// unit the model has not been shown leaves with the old epoch, within the
/// working-memory threshold `cap` (see [`budget::reach_back_to_unseen`]). A
/// unit was shown when the latest assistant message follows its last event.
fn retained_first(fold: &EpochFold, tokens: &[u64], first: usize, cap: u64) -> usize {
    let last_a = fold.last_assistant_seq;
    let unseen = fold
        .units()
        .position(|u| last_a.is_none_or(|a| u.last_seq > a))
        .unwrap_or(tokens.len());
    budget::reach_back_to_unseen(tokens, first, unseen, cap)
}

impl Engine for ContinuityEngine {
    fn new(model: ModelProfile) -> Self {
        ContinuityEngine::for_model(model)
    }

    fn config(&self) -> String {
        self.config.to_json()
    }

    fn set_config(&mut self, json: &str) -> Result<(), ConfigError> {
        let next = self.config.apply_json(json)?;
        if next != self.config {
            self.config = next;
            self.cache = None;
        }
        Ok(())
    }

    fn set_estimator(&mut self, profile: EstimatorProfile) {
        if profile != self.profile {
            self.profile = profile;
            self.cache = None;
        }
    }

    fn default_budget(&self) -> ContextBudget {
        ContextBudget::for_model(&self.model)
    }

    fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, EngineError> {
        let info = session.info();
        self.sync(session, &info, self.keep_for(&request.budget));
        let prepared = self.prepare(session, &info, request)?;
        let inp = self.inputs(prepared, request, &info)?;
        let draft = self.build_view(session, &inp)?;
        let cache = self.cache()?;
        let Built {
            lead,
            entries,
            stable,
            ..
        } = draft.view;
        if lead > cache.sent.len() {
            return Err(EngineError::Internal(format!(
                "the view continues {lead} messages of a previous view that had {}",
                cache.sent.len()
            )));
        }
        let kept = lead + sent::kept(&cache.sent[lead..], &entries);
        let built = entries.len();
        let shown: Vec<Shown> = entries.iter().map(|e| e.shown).collect();
        let messages: Vec<Message> = entries
            .into_iter()
            .skip(kept - lead)
            .map(|e| e.message.into_owned())
            .collect();
        let view = ContextView {
            system: request.system_prompt.clone(),
            kept_messages: kept as u32,
            messages,
            persist: draft.persist,
            report: draft.report,
        };
        if let Some(cache) = self.cache.as_mut() {
            cache.sent.truncate(lead);
            cache.sent.extend(shown);
            cache.stable = stable;
            cache.built = built;
        }
        Ok(view)
    }

    fn manual_compact(
        &mut self,
        session: &dyn SessionView,
    ) -> Result<Vec<KernelContextEntry>, EngineError> {
        let info = session.info();
        self.sync(session, &info, self.keep_for(&self.default_budget()));
        let request = ContextRequest {
            system_prompt: String::new(),
            session_context: SessionContext {
                workspace: info.workspace.clone(),
                repository_instructions: String::new(),
                mode: String::new(),
            },
            budget: self.default_budget(),
            query: String::new(),
            extensions: Vec::new(),
        };
        let prepared = self.prepare(session, &info, &request)?;
        let inp = self.inputs(prepared, &request, &info)?;
        let at = self
            .cache()?
            .fold
            .compact_seq
            .unwrap_or(session.latest_seq());
        let (entries, ..) = self.snapshot_group(session, &inp, Start::Compact(at))?;
        Ok(entries)
    }

    fn recall(
        &mut self,
        session: &dyn SessionView,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Event>, EngineError> {
        Ok(recall::search_log(session, query, limit))
    }
}

latch_engine_sdk::export_engine!(ContinuityEngine);

/// The component's allocator (see `Cargo.toml`): an engine allocates on every
/// request, and talc is much faster than wasm's default dlmalloc.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

#[cfg(test)]
mod tests;
