//! The cache-epoch loader: a fold over the durable log.
//!
//! The fold turns events into the provider-visible epoch: the snapshot group
//! (the snapshot and the entries persisted right after it), then whole
//! conversation units and later kernel-context deltas in log order. A warm
//! instance continues it from a sequence watermark; a fresh one ([`load`])
//! reads only the current epoch, which gives the same fold because nothing
//! before the epoch's retained start is rendered.
//!
//! * A conversation unit is a user message, a notification, an assistant
//!   message without tool calls, or an assistant tool-call turn together with
//!   every result that answers it. A unit enters the epoch when it completes,
//!   so a tool call is never separated from its results; a unit abandoned
//!   before completion and a result without its call never render.
//! * Only conversation counts toward the working-memory threshold; the fold
//!   walks past any number of kernel-context revisions.
//! * The latest snapshot starts the current epoch: it names the first
//!   retained conversation event; units before it and every kernel-context
//!   entry of other generations leave the provider-visible epoch (they stay
//!   in the log). Within an epoch an entry renders only if its revision is higher
//!   than every earlier one, so revisions are monotone in the view.

use std::collections::BTreeSet;

use latch_engine_sdk::estimate::{event_tokens, message_image_tokens, message_tokens};
use latch_engine_sdk::types::*;
use latch_engine_sdk::{MAX_PAGE, SessionView};

#[cfg(doc)]
use crate::render::kernel_message;
use crate::render::{SnapshotHeader, parse_index_shown, parse_recall, parse_state_update};

/// Pages of the log's tail [`load`] holds while it looks for the latest
/// snapshot.
const TAIL_PAGES: usize = 4;

/// Fewest droppable units dropped at once before the first epoch.
const DROP_BATCH: usize = 64;

/// A whole conversation unit.
#[derive(Clone, Debug)]
pub struct Unit {
    /// Sequence number of its first event.
    pub first_seq: u64,
    /// Sequence number of its last event (its last tool result, for a
    /// tool-call turn): the unit was in a model request only if an
    /// assistant message follows this.
    pub last_seq: u64,
    /// Its messages, in log order.
    pub messages: Vec<Message>,
    /// Canonical price of each message.
    pub prices: Vec<u64>,
    /// Images of each message and their visual tokens (a part of its price).
    pub images: Vec<(u32, u64)>,
    /// Canonical price of its messages.
    pub tokens: u64,
    /// True for a user message (a user turn).
    pub user_turn: bool,
}

/// A kernel-context entry read back from the log.
#[derive(Clone, Debug)]
pub struct KernelItem {
    /// What the entry carries.
    pub kind: KernelContextKind,
    /// Its sequence number.
    pub seq: u64,
    /// Its rendered message.
    pub message: Message,
    /// Canonical price of the message, once priced (see
    /// [`EpochFold::price`]): entries of epochs that end before the next
    /// request are never priced.
    pub tokens: Option<u64>,
}

/// One element of the epoch body.
#[derive(Clone, Debug)]
pub enum Item {
    /// Conversation.
    Unit(Unit),
    /// A kernel-context delta.
    Kernel(KernelItem),
}

/// The current epoch's identity.
#[derive(Clone, Debug)]
pub struct Epoch {
    /// Cache epoch generation.
    pub generation: u64,
    /// Sequence number of the snapshot.
    pub snapshot_seq: u64,
    /// What the snapshot says about the epoch.
    pub header: SnapshotHeader,
}

/// What the unit builder needs to know about a conversation event.
enum Shape {
    /// A user message.
    User,
    /// A notification.
    Notification,
    /// An assistant message with the ids of its tool calls.
    Assistant(BTreeSet<String>),
    /// A tool result answering a call id.
    Result(String),
}

impl Shape {
    fn of(body: &EventBody) -> Option<Shape> {
        Some(match body {
            EventBody::UserMessage(_) => Shape::User,
            EventBody::Notification(_) => Shape::Notification,
            EventBody::AssistantMessage(parts) => Shape::Assistant(
                parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolCall(c) => Some(c.id.clone()),
                        _ => None,
                    })
                    .collect(),
            ),
            EventBody::ToolResult(r) => Shape::Result(r.call_id.clone()),
            _ => return None,
        })
    }
}

/// Assembles conversation units from events.
#[derive(Clone, Debug, Default)]
struct UnitBuilder {
    pending: Option<(Unit, BTreeSet<String>)>,
}

impl UnitBuilder {
    /// Fold one conversation event in (its message already built); returns
    /// a unit when one completes.
    fn push(&mut self, seq: u64, shape: Shape, message: Message, tokens: u64) -> Option<Unit> {
        let images = message_image_tokens(&message);
        let single = |user_turn| Unit {
            first_seq: seq,
            last_seq: seq,
            messages: vec![message],
            prices: vec![tokens],
            images: vec![images],
            tokens,
            user_turn,
        };
        match shape {
            Shape::Result(call_id) => {
                let (unit, open) = self.pending.as_mut()?;
                if !open.remove(&call_id) {
                    return None;
                }
                unit.messages.push(single(false).messages.remove(0));
                unit.last_seq = seq;
                unit.prices.push(tokens);
                unit.images.push(images);
                unit.tokens += tokens;
                if open.is_empty() {
                    return self.pending.take().map(|(u, _)| u);
                }
                None
            }
            Shape::Assistant(calls) => {
                self.pending = None;
                if calls.is_empty() {
                    Some(single(false))
                } else {
                    self.pending = Some((single(false), calls));
                    None
                }
            }
            Shape::User => {
                self.pending = None;
                Some(single(true))
            }
            Shape::Notification => {
                self.pending = None;
                Some(single(false))
            }
        }
    }

    /// Fold one owned event in.
    fn push_event(&mut self, event: Event, tokens: u64) -> Option<Unit> {
        let shape = Shape::of(&event.body)?;
        let seq = event.seq;
        let message = event.into_message()?;
        self.push(seq, shape, message, tokens)
    }
}

/// The fold's state.
#[derive(Clone, Debug)]
pub struct EpochFold {
    profile: EstimatorProfile,
    /// The current epoch, once a snapshot was seen.
    pub epoch: Option<Epoch>,
    /// The snapshot and the entries persisted right after it.
    pub group: Vec<KernelItem>,
    /// True until a non-kernel-context event follows the snapshot group.
    pub group_open: bool,
    /// Conversation units and later deltas, in log order.
    pub body: Vec<Item>,
    units: UnitBuilder,
    /// Tokens of the units in `body`.
    pub conv_tokens: u64,
    /// Before the first epoch, the newest conversation the fold keeps: once
    /// `body` holds more than this without its oldest unit, that unit is
    /// dropped (see [`EpochFold::with_keep`]).
    pub keep_tokens: u64,
    /// Tokens of the units dropped before the first epoch; they count
    /// toward the conversation's size but are no longer held.
    pub dropped_tokens: u64,
    /// How many of the oldest units of `body` (and their tokens) may be
    /// dropped before the first epoch (see [`EpochFold::drop_oldest`]).
    droppable: (usize, u64),
    /// Tokens of the kernel messages in `group` and `body`.
    pub kernel_tokens: u64,
    /// Every unit starting at or after `floor` is in `body`.
    floor: u64,
    /// Sequence number of the first event of the log.
    pub first_seq: Option<u64>,
    /// Sequence number of the latest event folded in.
    pub latest_seq: u64,
    /// Events folded in.
    pub events_seen: u64,
    epoch_max_revision: u64,
    /// The latest assistant message: the boundary of the previous request.
    pub last_assistant_seq: Option<u64>,
    /// Assistant messages (model requests) since the current snapshot.
    pub epoch_requests: u64,
    /// The latest re-ground kernel note and its summary.
    pub last_reground_note: Option<(u64, String)>,
    /// The latest re-ground entry of the epoch.
    pub last_reground_entry_seq: Option<u64>,
    /// The canonical revision the epoch's latest state message renders.
    pub state_revision: Option<u64>,
    /// The epoch's latest extension entry text.
    pub extension_text: Option<String>,
    /// Events recalled in the epoch.
    pub recalled: BTreeSet<u64>,
    /// Tokens of the epoch's recall entries.
    pub recall_used: u64,
    /// A manual compact appended after the current snapshot.
    pub compact_seq: Option<u64>,
    /// Episodes shown by the epoch's latest index entry.
    pub index_shown: u32,
}

impl EpochFold {
    /// An empty fold.
    pub fn new(profile: EstimatorProfile) -> Self {
        EpochFold {
            profile,
            epoch: None,
            group: Vec::new(),
            group_open: false,
            body: Vec::new(),
            units: UnitBuilder::default(),
            conv_tokens: 0,
            keep_tokens: u64::MAX,
            dropped_tokens: 0,
            droppable: (0, 0),
            kernel_tokens: 0,
            floor: 0,
            first_seq: None,
            latest_seq: 0,
            events_seen: 0,
            epoch_max_revision: 0,
            last_assistant_seq: None,
            epoch_requests: 0,
            last_reground_note: None,
            last_reground_entry_seq: None,
            state_revision: None,
            extension_text: None,
            recalled: BTreeSet::new(),
            recall_used: 0,
            compact_seq: None,
            index_shown: 0,
        }
    }

    /// An empty fold that, before the first epoch, keeps only the newest
    /// units holding at least `keep` tokens (and every unit after a
    /// `/compact`): the whole conversation of a session that has no epoch
    /// yet (the first call after an engine switch) is never held at once.
    /// Every decision about a first epoch whose working-memory threshold is
    /// at most `keep` comes out as if every unit were kept: a new epoch
    /// retains at most the threshold, and the dropped units count in
    /// [`EpochFold::dropped_tokens`].
    pub fn with_keep(profile: EstimatorProfile, keep: u64) -> Self {
        EpochFold {
            keep_tokens: keep.max(1),
            ..EpochFold::new(profile)
        }
    }

    /// Serve requests whose working-memory threshold may be up to `keep`:
    /// false when this fold already dropped units it would now need (a
    /// fresh fold must be loaded).
    pub fn widen_keep(&mut self, keep: u64) -> bool {
        if keep <= self.keep_tokens {
            return true;
        }
        if self.dropped_tokens > 0 {
            return false;
        }
        self.keep_tokens = keep;
        self.droppable = (0, 0);
        true
    }

    /// The epoch's first retained conversation event (`seq >= start`).
    pub fn start(&self) -> u64 {
        self.epoch.as_ref().map(|e| e.header.start).unwrap_or(0)
    }

    /// The units of the body, in order.
    pub fn units(&self) -> impl Iterator<Item = &Unit> {
        self.body.iter().filter_map(|i| match i {
            Item::Unit(u) => Some(u),
            Item::Kernel(_) => None,
        })
    }

    /// Fold one event in. `volume` is the canonical price of its message (see
    /// [`event_tokens`]). `session` is read only when a snapshot names
    /// a start older than the units this fold kept.
    pub fn apply(&mut self, event: Event, volume: u64, session: &dyn SessionView) {
        self.observe(&event);
        if !matches!(event.body, EventBody::KernelContext(_)) {
            self.group_open = false;
        }
        let event = match event.body {
            EventBody::KernelContext(entry) => {
                self.kernel_event(entry, event.seq, session);
                return;
            }
            body => Event {
                seq: event.seq,
                time_ms: event.time_ms,
                body,
            },
        };
        match event.body {
            EventBody::ManualCompact => self.compact_seq = Some(event.seq),
            EventBody::AssistantMessage(_) if self.epoch.is_some() => self.epoch_requests += 1,
            _ => {}
        }
        let complete = self.units.push_event(event, volume);
        if let Some(unit) = complete
            && unit.first_seq >= self.start()
        {
            self.conv_tokens += unit.tokens;
            self.body.push(Item::Unit(unit));
            if self.epoch.is_none() {
                self.drop_oldest();
            }
        }
    }

    /// Before the first epoch: drop the oldest units while the rest still
    /// hold `keep_tokens`, never one that follows a `/compact`. Units are
    /// marked droppable one by one and dropped in batches (at least half of
    /// `body`), so a long log costs amortized constant work per unit.
    fn drop_oldest(&mut self) {
        let (mut n, mut tokens) = self.droppable;
        while let Some(Item::Unit(u)) = self.body.get(n) {
            let after_compact = self.compact_seq.is_some_and(|c| u.first_seq > c);
            if after_compact || self.conv_tokens - tokens - u.tokens < self.keep_tokens {
                break;
            }
            n += 1;
            tokens += u.tokens;
        }
        self.droppable = (n, tokens);
        if n >= DROP_BATCH && n * 2 >= self.body.len() {
            if let Some(Item::Unit(last)) = self.body.get(n - 1) {
                self.floor = last.last_seq + 1;
            }
            self.body.drain(..n);
            self.conv_tokens -= tokens;
            self.dropped_tokens += tokens;
            self.droppable = (0, 0);
        }
    }

    /// What every event changes, whichever epoch it belongs to: the
    /// watermark, the counts, the latest assistant message and re-ground
    /// note.
    fn observe(&mut self, event: &Event) {
        self.latest_seq = event.seq;
        self.events_seen += 1;
        self.first_seq.get_or_insert(event.seq);
        match &event.body {
            EventBody::Kernel(note) if note.kind == KernelNoteKind::Reground => {
                self.last_reground_note = Some((event.seq, note.summary.clone()));
            }
            EventBody::AssistantMessage(_) => self.last_assistant_seq = Some(event.seq),
            _ => {}
        }
    }

    /// Fold in an event before the current epoch's snapshot whose units may
    /// be retained by it: only units starting at or after `start` are kept,
    /// and kernel-context entries are observed but never shown.
    fn prime(&mut self, event: Event, volume: u64, start: u64) {
        self.observe(&event);
        if let Some(unit) = self.units.push_event(event, volume)
            && unit.first_seq >= start
        {
            self.body.push(Item::Unit(unit));
        }
    }

    fn kernel_event(&mut self, entry: KernelContextEntry, seq: u64, session: &dyn SessionView) {
        if entry.kind == KernelContextKind::Snapshot {
            self.start_epoch(entry, seq, session);
        } else if let Some(e) = &self.epoch
            && entry.generation == e.generation
            && entry.revision > self.epoch_max_revision
        {
            self.add_kernel(entry, seq);
        }
    }

    /// Price the epoch's kernel messages that are not priced yet.
    pub fn price(&mut self) {
        let profile = self.profile;
        let items = self
            .group
            .iter_mut()
            .chain(self.body.iter_mut().filter_map(|i| match i {
                Item::Kernel(k) => Some(k),
                Item::Unit(_) => None,
            }));
        for k in items {
            if k.tokens.is_none() {
                let t = message_tokens(profile, &k.message);
                k.tokens = Some(t);
                self.kernel_tokens += t;
                if k.kind == KernelContextKind::Recall {
                    self.recall_used += t;
                }
            }
        }
    }

    fn start_epoch(&mut self, entry: KernelContextEntry, seq: u64, session: &dyn SessionView) {
        let mut header = SnapshotHeader::parse(&entry.text).unwrap_or(SnapshotHeader {
            start: seq,
            state_revision: u64::MAX,
            retained: 0,
            evicted: 0,
            archived_episodes: 0,
            reason: Some("unreadable snapshot".into()),
        });
        header.start = snapshot_start(&entry, seq);
        let start = header.start;
        let body = if start < self.floor {
            // The snapshot retains units this fold no longer holds: rebuild
            // the retained conversation from the log, as a fresh instance
            // reads it (see [`load`]).
            let mut body = Vec::new();
            let mut builder = UnitBuilder::default();
            let profile = self.profile;
            session.for_each_event(start, seq, &mut |e| {
                let volume = event_tokens(profile, &e.body);
                if let Some(u) = builder.push_event(e, volume)
                    && u.first_seq >= start
                {
                    body.push(Item::Unit(u));
                }
            });
            body
        } else {
            std::mem::take(&mut self.body)
                .into_iter()
                .filter(|i| matches!(i, Item::Unit(u) if u.first_seq >= start))
                .collect()
        };
        self.body = body;
        self.conv_tokens = self.units().map(|u| u.tokens).sum();
        self.dropped_tokens = 0;
        self.droppable = (0, 0);
        let kind = entry.kind;
        let generation = entry.generation;
        let revision = entry.revision;
        let message = owned_kernel_message(entry, seq);
        self.kernel_tokens = 0;
        self.group = vec![KernelItem {
            kind,
            seq,
            message,
            tokens: None,
        }];
        self.group_open = true;
        self.floor = start;
        self.epoch_max_revision = revision;
        self.state_revision = (header.state_revision != u64::MAX).then_some(header.state_revision);
        self.epoch = Some(Epoch {
            generation,
            snapshot_seq: seq,
            header,
        });
        self.extension_text = None;
        self.recalled.clear();
        self.recall_used = 0;
        self.last_reground_entry_seq = None;
        self.compact_seq = None;
        self.index_shown = 0;
        self.epoch_requests = 0;
    }

    fn add_kernel(&mut self, entry: KernelContextEntry, seq: u64) {
        self.epoch_max_revision = entry.revision;
        match entry.kind {
            KernelContextKind::StateUpdate | KernelContextKind::Snapshot => {
                self.state_revision = parse_state_update(&entry.text).or(self.state_revision);
            }
            KernelContextKind::Extension => self.extension_text = Some(entry.text.clone()),
            KernelContextKind::Recall => {
                if let Some(s) = parse_recall(&entry.text) {
                    self.recalled.insert(s);
                }
            }
            KernelContextKind::ArchiveIndex => {
                self.index_shown = parse_index_shown(&entry.text).unwrap_or(0);
            }
            KernelContextKind::Reground => self.last_reground_entry_seq = Some(seq),
        }
        let kind = entry.kind;
        let message = owned_kernel_message(entry, seq);
        let item = KernelItem {
            kind,
            seq,
            message,
            tokens: None,
        };
        if self.group_open {
            self.group.push(item);
        } else {
            self.body.push(Item::Kernel(item));
        }
    }
}

/// The conversation start a snapshot names, as [`EpochFold::apply`] reads
/// it: the structured `epoch_start`, else the header of its text, else its
/// own sequence number.
fn snapshot_start(entry: &KernelContextEntry, seq: u64) -> u64 {
    entry
        .epoch_start
        .or_else(|| SnapshotHeader::parse(&entry.text).map(|h| h.start))
        .unwrap_or(seq)
}

/// A fresh instance's fold: the same state as [`EpochFold::apply`] over every
/// event of the log wherever the view depends on it, read in work
/// proportional to the current epoch, not to the session.
///
/// The latest snapshot starts the current epoch, so the loader walks back
/// from the tail (`events_before` pages) to it, then reads whole events
/// from the epoch's retained start on: events before the snapshot build
/// units, the snapshot and everything after it are folded normally. Nothing
/// before the retained start is rendered, so it is not read; what the fold
/// would have learned there comes from one-event reads: the session's first
/// event and, when the epoch holds no assistant message, the latest one
/// before it. (The re-ground note the fold remembers matters only inside
/// the epoch.) `each` sees every event read, in order, with its conversation
/// volume: from the retained start, or the whole log when no epoch exists
/// yet.
///
/// Memory stays bounded whatever the log's length: the walk holds at most
/// [`TAIL_PAGES`] pages (what it passes beyond them is read again, forward,
/// a page at a time), and a log with no epoch yet (the first call after an
/// engine switch) is folded with [`EpochFold::with_keep`]`(keep)`, which
/// holds only the newest units; `keep` must be at least the working-memory
/// threshold of the requests this fold serves.
pub fn load(
    profile: EstimatorProfile,
    keep: u64,
    session: &dyn SessionView,
    mut each: impl FnMut(&Event, u64),
) -> EpochFold {
    // The tail, newest page first, down to the latest snapshot. Only the
    // newest pages are held; what the walk passes beyond them is read again,
    // oldest first, one page at a time.
    let mut tail: Vec<Vec<Event>> = Vec::new();
    // Every event from here on is in `tail`.
    let mut held_from = u64::MAX;
    let mut snapshot: Option<(u64, u64)> = None;
    let mut before = u64::MAX;
    loop {
        let page = session.events_before(before, MAX_PAGE);
        let Some(oldest) = page.last() else { break };
        before = oldest.seq;
        let short = page.len() < MAX_PAGE as usize;
        snapshot = page.iter().find_map(|e| match &e.body {
            EventBody::KernelContext(k) if k.kind == KernelContextKind::Snapshot => {
                Some((e.seq, snapshot_start(k, e.seq)))
            }
            _ => None,
        });
        if tail.len() < TAIL_PAGES {
            held_from = before;
            tail.push(page);
        }
        if snapshot.is_some() || short || before == 0 {
            break;
        }
    }
    let mut fold = EpochFold::with_keep(profile, keep);
    let Some((snapshot_seq, start)) = snapshot else {
        // No epoch yet: the whole log, oldest first, a page at a time.
        let mut feed = |e: Event| {
            let volume = event_tokens(profile, &e.body);
            each(&e, volume);
            fold.apply(e, volume, session);
        };
        session.for_each_event(0, held_from, &mut feed);
        for page in tail.into_iter().rev() {
            page.into_iter().rev().for_each(&mut feed);
        }
        return fold;
    };
    let mut feed = |e: Event| {
        if e.seq < start {
            return;
        }
        let volume = event_tokens(profile, &e.body);
        each(&e, volume);
        if e.seq < snapshot_seq {
            fold.prime(e, volume, start);
        } else {
            fold.apply(e, volume, session);
        }
    };
    // The retained conversation the held tail does not reach, then the tail.
    session.for_each_event(start, held_from, &mut feed);
    for page in tail.into_iter().rev() {
        page.into_iter().rev().for_each(&mut feed);
    }
    fold.events_seen = session.info().event_count;
    fold.first_seq = session.events(0, u64::MAX, 1).first().map(|e| e.seq);
    let mut before = start;
    while fold.last_assistant_seq.is_none() {
        let page = session.events_before(before, MAX_PAGE);
        let Some(oldest) = page.last() else { break };
        before = oldest.seq;
        fold.last_assistant_seq = page
            .iter()
            .find(|e| matches!(e.body, EventBody::AssistantMessage(_)))
            .map(|e| e.seq);
        if page.len() < MAX_PAGE as usize {
            break;
        }
    }
    fold
}

/// The message of a persisted kernel-context entry, taking its text; the
/// same message as [`kernel_message`] with `Some(seq)`.
fn owned_kernel_message(entry: KernelContextEntry, seq: u64) -> Message {
    Message {
        role: Role::User,
        parts: vec![Part::Text(entry.text)],
        kernel: Some(KernelTag {
            generation: entry.generation,
            revision: entry.revision,
            kind: entry.kind,
            seq: Some(seq),
        }),
        source_seqs: vec![seq],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::MemorySession;

    fn fold(s: &MemorySession) -> EpochFold {
        fold_keeping(s, u64::MAX)
    }

    fn fold_keeping(s: &MemorySession, keep: u64) -> EpochFold {
        let p = EstimatorProfile::Openai;
        let mut f = EpochFold::with_keep(p, keep);
        for e in &s.events {
            f.apply(e.clone(), event_tokens(p, &e.body), s);
        }
        f
    }

    /// Everything the engine reads from a fold (the re-ground note only
    /// where it is read: inside the epoch).
    fn fingerprint(f: &EpochFold) -> String {
        let start = f.start();
        let reground = f
            .last_reground_note
            .as_ref()
            .filter(|(seq, _)| *seq >= start);
        format!(
            "{:?}",
            (
                (&f.epoch, &f.group, f.group_open, &f.body),
                (f.conv_tokens, f.kernel_tokens, f.floor, f.first_seq),
                (f.keep_tokens, f.dropped_tokens, f.droppable),
                (f.latest_seq, f.events_seen),
                (f.epoch_max_revision, f.last_assistant_seq, f.epoch_requests),
                (reground, f.last_reground_entry_seq),
                (f.state_revision, &f.extension_text, &f.recalled),
                (f.recall_used, f.compact_seq, f.index_shown),
            )
        )
    }

    fn folded(s: &MemorySession) -> EpochFold {
        let mut f = fold(s);
        f.price();
        f
    }

    /// The loaded fold and the events its `each` saw.
    fn loaded(s: &MemorySession) -> (EpochFold, Vec<u64>) {
        loaded_keeping(s, u64::MAX)
    }

    fn loaded_keeping(s: &MemorySession, keep: u64) -> (EpochFold, Vec<u64>) {
        let mut seen = Vec::new();
        let mut f = load(EstimatorProfile::Openai, keep, s, |e, _| seen.push(e.seq));
        f.price();
        (f, seen)
    }

    /// A log with no epoch: `turns` user turns of one tool exchange and a
    /// reply each.
    fn no_epoch(turns: usize) -> MemorySession {
        let mut s = MemorySession::new("s", ModelProfile::with_defaults("openai", "m"));
        for i in 0..turns {
            s.user(&format!("turn {i}"));
            s.tool_exchange(&format!("c{i}"), "shell", "{}", &"out ".repeat(i % 40));
            s.assistant(&format!("done {i}"));
        }
        s
    }

    /// Without an epoch the fold holds only the newest units, at least
    /// `keep` tokens of them: the same units the whole fold ends with, and
    /// the dropped ones still counted.
    #[test]
    fn without_an_epoch_only_the_newest_units_are_held() {
        let s = no_epoch(3_000);
        let all = folded(&s);
        let all_units: Vec<u64> = all.units().map(|u| u.first_seq).collect();
        for keep in [1, 300, 5_000] {
            let (f, seen) = loaded_keeping(&s, keep);
            assert_eq!(seen.len(), s.events.len(), "every event is read");
            assert_eq!(
                fingerprint(&f),
                fingerprint(&{
                    let mut g = fold_keeping(&s, keep);
                    g.price();
                    g
                })
            );
            let held: Vec<u64> = f.units().map(|u| u.first_seq).collect();
            assert!(
                all_units.ends_with(&held),
                "keep {keep}: not the newest units"
            );
            assert_eq!(f.dropped_tokens + f.conv_tokens, all.conv_tokens);
            assert!(
                f.conv_tokens >= keep,
                "keep {keep}: holds {}",
                f.conv_tokens
            );
            // Held: at most about twice the fewest newest units that hold
            // `keep` tokens (units are dropped in batches).
            let mut needed = 0;
            let mut sum = 0;
            for u in all.units().collect::<Vec<_>>().iter().rev() {
                if sum >= keep {
                    break;
                }
                sum += u.tokens;
                needed += 1;
            }
            assert!(
                held.len() <= 2 * needed + DROP_BATCH,
                "keep {keep}: {} units held, {needed} needed",
                held.len()
            );
            assert!(
                held.len() < all_units.len() / 4,
                "keep {keep}: {} units held",
                held.len()
            );
            // Every unit starting at or after the floor is held.
            assert!(f.floor > 0 && f.floor <= held[0], "floor {}", f.floor);
        }
        // Units after a `/compact` are never dropped.
        let mut s = no_epoch(200);
        s.push(EventBody::ManualCompact);
        let after = s.events.len();
        let more = no_epoch(200);
        for e in more.events {
            s.push(e.body);
        }
        let f = fold_keeping(&s, 1);
        let first_held = f.units().next().map(|u| u.first_seq).unwrap();
        assert!(
            first_held <= s.events[after].seq,
            "a unit after the compact was dropped"
        );
    }

    /// The events `load` hands to `each`: from the epoch's retained start,
    /// or all of them before the first epoch.
    fn from_start(s: &MemorySession, f: &EpochFold) -> Vec<u64> {
        let start = f.epoch.as_ref().map_or(0, |e| e.header.start);
        s.events
            .iter()
            .map(|e| e.seq)
            .filter(|seq| *seq >= start)
            .collect()
    }

    #[test]
    fn the_tail_loader_equals_the_full_fold_at_every_prefix() {
        use crate::testkit::{EngineHost, Script, run};
        let mut script = Script::new(5, 70);
        script.compact_at = vec![45];
        let mut host = EngineHost::new(crate::ContinuityEngine::for_model(
            ModelProfile::with_defaults("openai", "m"),
        ));
        let full = run(&script, &mut host).memory().clone();
        let mut epochs = 0;
        for n in 0..=full.events.len() {
            let mut s = full.clone();
            s.truncate(n);
            let (f, seen) = loaded(&s);
            assert_eq!(fingerprint(&f), fingerprint(&folded(&s)), "prefix {n}");
            assert_eq!(seen, from_start(&s, &f), "prefix {n}");
            epochs += usize::from(f.epoch.is_some());
        }
        assert!(
            epochs * 10 > full.events.len() * 9,
            "{epochs} prefixes had an epoch"
        );
    }

    #[test]
    fn irregular_logs_load_as_they_fold() {
        use crate::render::SnapshotHeader;
        let snapshot = |generation, revision, start| {
            let header = SnapshotHeader {
                start,
                state_revision: 0,
                retained: 0,
                evicted: 0,
                archived_episodes: 0,
                reason: None,
            };
            EventBody::KernelContext(KernelContextEntry {
                generation,
                revision,
                kind: KernelContextKind::Snapshot,
                epoch_start: None,
                text: header.line(generation),
            })
        };
        let build = |late: EventBody| {
            let mut s = MemorySession::new("s", ModelProfile::with_defaults("openai", "m"));
            s.user("one");
            s.tool_exchange("t1", "read_file", "{}", "before the first epoch");
            s.user("two");
            s.push(snapshot(1, 1, 4));
            s.assistant("b");
            s.user("three");
            s.push(late);
            s.assistant("c");
            s
        };
        for (late, why) in [
            (snapshot(2, 2, 1), "a later epoch reaching back"),
            (snapshot(1, 2, 7), "a repeated generation"),
            (snapshot(0, 2, 7), "an older generation"),
            (snapshot(2, 2, 7), "a regular epoch"),
        ] {
            let s = build(late);
            let (f, seen) = loaded(&s);
            assert_eq!(fingerprint(&f), fingerprint(&folded(&s)), "{why}");
            assert_eq!(seen, from_start(&s, &f), "{why}");
            assert_eq!(
                f.epoch.as_ref().map(|e| e.snapshot_seq),
                Some(8),
                "{why}: the latest snapshot starts the epoch"
            );
        }
    }

    #[test]
    fn tool_units_are_whole_and_orphans_dropped() {
        let mut s = MemorySession::new("s", ModelProfile::with_defaults("openai", "m"));
        s.user("go");
        s.tool_exchange("a", "read_file", "{}", "one");
        // An orphan result and an abandoned call.
        s.push(EventBody::ToolResult(ToolResult {
            call_id: "zz".into(),
            name: "x".into(),
            content: "orphan".into(),
            is_error: false,
            images: vec![],
        }));
        s.push(EventBody::AssistantMessage(vec![Part::ToolCall(
            ToolCall {
                id: "b".into(),
                name: "shell".into(),
                arguments_json: "{}".into(),
            },
        )]));
        s.user("interrupted");
        let f = fold(&s);
        let units: Vec<&Unit> = f.units().collect();
        assert_eq!(units.len(), 3);
        assert_eq!(units[1].messages.len(), 2, "call and result are one unit");
        assert!(units.iter().all(|u| {
            u.messages
                .iter()
                .all(|m| !format!("{m:?}").contains("orphan"))
        }));
        assert_eq!(units[2].first_seq, 6);
    }
}
