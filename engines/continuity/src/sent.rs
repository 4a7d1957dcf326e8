//! What the previous view showed, and how much of it the next view keeps.
//!
//! The engine answers `materialize` with a continuation of its previous
//! view (the contract's `kept-messages`): within a cache epoch the view is
//! append-only, so usually only the messages after the last request cross
//! the boundary. The kept prefix is found without comparing message bytes:
//! a message rendered from a durable event is a function of that event, so
//! two messages from the same sequence number are identical; the
//! session-context message by a version that moves when its content does; a kernel-context entry
//! not yet persisted is new by definition (once persisted it renders with
//! its sequence number, which differs from the unpersisted message).

use crate::report::Entry;

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

/// How many leading messages of the previous view (`previous`) the next
/// view (`next`) begins with.
pub fn kept(previous: &[Shown], next: &[Entry<'_>]) -> usize {
    previous
        .iter()
        .zip(next)
        .take_while(|(was, now)| **was != Shown::Fresh && **was == now.shown)
        .count()
}
