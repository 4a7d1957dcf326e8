//! What a surface of a session reads from the store: its own events, the
//! workspace-wide events of the other sessions of its workspace and its
//! children's reports and deliveries, in sequence order — the one input of
//! [`Surface::apply`] that every surface (terminal, web) catches up with.
//!
//! The reducers never hold a store: these functions borrow one for a read
//! and hand back owned events (or the surface they reduce to).

use crate::Surface;
use latch_kernel::{Store, StoreError, StoredEvent};

/// Workspace events read per page while catching up.
const PAGE: u32 = 5_000;

/// The reducer input of `session` (of `workspace`) after `after`,
/// ascending, without duplicates.
pub fn catch_up(
    store: &Store,
    session: &str,
    workspace: &str,
    after: u64,
) -> Result<Vec<StoredEvent>, StoreError> {
    let mut events = Vec::new();
    let mut from = after;
    loop {
        let page = store.workspace_log(session, workspace, from, PAGE)?;
        let full = page.len() == PAGE as usize;
        from = page.last().map_or(from, |e| e.seq);
        events.extend(page);
        if !full {
            break;
        }
    }
    events.extend(store.agent_log(session, after)?);
    events.sort_by_key(|e| e.seq);
    events.dedup_by_key(|e| e.seq);
    Ok(events)
}

/// The surface of `session` as the log says it now. With `live_since`,
/// the process drives the session since that seq: runs the log opened
/// after it are shown live, earlier open ones as stopped. Without it,
/// nothing is live (call [`Surface::go_live`] when the caller starts
/// driving the session from here).
pub fn surface_of(
    store: &Store,
    session: &str,
    workspace: &str,
    live_since: Option<u64>,
) -> Result<Surface, StoreError> {
    Ok(replay_live(
        session,
        &catch_up(store, session, workspace, 0)?,
        live_since,
    ))
}

/// [`Surface::replay`] over `events`, going live once every event up to
/// `live_since` is applied (see [`surface_of`]).
pub fn replay_live(session: &str, events: &[StoredEvent], live_since: Option<u64>) -> Surface {
    let mut surface = Surface::new(session);
    let mut pending_live = live_since;
    for e in events {
        if let Some(since) = pending_live
            && e.seq > since
        {
            surface.go_live();
            pending_live = None;
        }
        surface.apply(e);
    }
    if pending_live.is_some() {
        surface.go_live();
    }
    surface
}
