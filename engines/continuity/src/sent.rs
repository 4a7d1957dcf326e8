//! What the previous view showed, and how much of it the next view keeps.
//!
//! The engine answers `materialize` with a continuation of its previous
//! view (the contract's `kept-messages`): within a cache epoch the view is
//! append-only, so usually only the messages after the last request cross
//! the boundary. The kept prefix is found without comparing message bytes:
//! a message rendered from a durable event is a function of that event, so
//! two messages from the same sequence number are identical; the
//! session-context message is compared by content; a kernel-context entry
//! not yet persisted is new by definition (once persisted it renders with
//! its sequence number, which differs from the unpersisted message).

use latch_engine_sdk::types::Message;

use crate::report::Entry;

/// What identifies one message of a view across the views of an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// Rendered from the durable event with this sequence number.
    Logged(u64),
    /// The session-context message (compared by content).
    Context,
    /// A kernel-context entry returned for persisting; never kept.
    Fresh,
}

/// How many leading messages of the previous view (`previous`, whose
/// session-context message was `previous_context`) the next view (`next`,
/// with `context`) begins with.
pub fn kept(
    previous: &[Shown],
    previous_context: Option<&Message>,
    next: &[Entry<'_>],
    context: &Message,
) -> usize {
    previous
        .iter()
        .zip(next)
        .take_while(|(was, now)| match (was, now.shown) {
            (Shown::Logged(a), Shown::Logged(b)) => *a == b,
            (Shown::Context, Shown::Context) => previous_context == Some(context),
            _ => false,
        })
        .count()
}
