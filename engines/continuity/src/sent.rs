//! What the previous view showed, and how much of it the next view keeps.
//!
//! The engine answers `materialize` with a continuation of its previous
//! view (the contract's `kept-messages`): within a cache epoch the view is
//! append-only, so usually only the messages after the last request cross
//! the boundary. The kept prefix is found without comparing message bytes:
//! a message rendered from a durable event is a function of that event, so
//! two messages from the same sequence number are identical; the
//! session-context message by a version that moves when its content does; a
//! kernel-context entry not yet persisted is new by definition (once
//! persisted it renders with its sequence number, which differs from the
//! unpersisted message).
//!
//! Most of a view is also *known* to be unchanged without looking at it:
//! the session-context message, a closed snapshot group and the epoch body
//! as the previous view showed them (body items never change once folded).
//! [`Stable`] remembers where that part ends and what it sums to, so a warm
//! request builds, tallies and compares only what follows it.

use crate::report::{Entry, Tally};

/// What identifies one message of a view across the views of an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// Rendered from the durable event with this sequence number.
    Logged(u64),
    /// The session-context message, by version: the version moves only when
    /// the message's content changes.
    Context(u64),
    /// A kernel-context entry returned for persisting; never kept.
    Fresh,
}

impl Shown {
    /// The sequence number of a logged message.
    pub fn seq(self) -> Option<u64> {
        match self {
            Shown::Logged(seq) => Some(seq),
            Shown::Context(_) | Shown::Fresh => None,
        }
    }
}

/// How many leading messages of the previous view (`previous`) the next
/// view (`next`) begins with.
pub fn kept(previous: &[Shown], next: &[Entry<'_>]) -> usize {
    previous
        .iter()
        .zip(next)
        .take_while(|(was, now)| **was != Shown::Fresh && **was == now.shown)
        .count()
}

/// The leading part of the previous view that the next view of the same
/// epoch begins with unchanged: the session-context message, the closed
/// snapshot group and the first `body_items` items of the epoch body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stable {
    /// The epoch's snapshot.
    pub snapshot_seq: u64,
    /// The session-context message's version.
    pub context_version: u64,
    /// Entries of the snapshot group.
    pub group_len: usize,
    /// Items of the epoch body.
    pub body_items: usize,
    /// View messages of this part.
    pub entries: usize,
    /// Its tally, every entry counted as one the previous request
    /// contained (true once an assistant message follows `max_seq`).
    pub tally: Tally,
    /// The highest sequence number of its logged messages.
    pub max_seq: Option<u64>,
}

impl Stable {
    /// The part made of the session-context message and a closed snapshot
    /// group of `group_len` entries, before any body item.
    pub fn group(snapshot_seq: u64, context_version: u64, group_len: usize) -> Stable {
        Stable {
            snapshot_seq,
            context_version,
            group_len,
            body_items: 0,
            entries: 0,
            tally: Tally::new(),
            max_seq: None,
        }
    }

    /// Whether this part still leads a view of the epoch whose snapshot is
    /// `snapshot_seq`, showing session-context version `context_version`,
    /// a closed group of `group_len` entries and `body_items` body items,
    /// with the latest assistant message at `last_assistant`: then its
    /// messages are the view's first [`Stable::entries`] and every one of
    /// them was in the previous request.
    pub fn leads(
        &self,
        snapshot_seq: u64,
        context_version: u64,
        group_len: usize,
        body_items: usize,
        last_assistant: Option<u64>,
    ) -> bool {
        self.snapshot_seq == snapshot_seq
            && self.context_version == context_version
            && self.group_len == group_len
            && self.body_items <= body_items
            && last_assistant.is_some_and(|a| self.max_seq.is_none_or(|s| s < a))
    }

    /// This part extended by `entries` (the body items after it, up to
    /// `body_items`).
    pub fn extended(&self, entries: &[Entry<'_>], body_items: usize) -> Stable {
        let mut next = self.clone();
        for e in entries {
            next.tally.add(e, true);
            next.max_seq = next.max_seq.max(e.shown.seq());
        }
        next.entries += entries.len();
        next.body_items = body_items;
        next
    }
}
