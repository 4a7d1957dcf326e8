//! What a session's surface reads from the store: its own events, the
//! workspace-wide events of the other sessions of its workspace and its
//! children's reports and deliveries, in sequence order.

use latch_kernel::{Store, StoredEvent};
use latch_surface::Surface;

const PAGE: u32 = 2_000;

/// The reducer input of `session` after `after`, ascending, without
/// duplicates.
pub fn catch_up(
    store: &Store,
    session: &str,
    workspace: &str,
    after: u64,
) -> Result<Vec<StoredEvent>, latch_kernel::StoreError> {
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

/// The surface of `session` as the log says it now. Runs opened after
/// `live_since` are shown as driven by this process.
pub fn surface_of(
    store: &Store,
    session: &str,
    workspace: &str,
    live_since: Option<u64>,
) -> Result<Surface, latch_kernel::StoreError> {
    let mut surface = Surface::new(session);
    let events = catch_up(store, session, workspace, 0)?;
    let mut pending_live = live_since;
    for e in &events {
        if let Some(since) = pending_live
            && e.seq > since
        {
            // Everything up to `since` is applied: runs opened from here on
            // are this process's.
            surface.go_live();
            pending_live = None;
        }
        surface.apply(e);
    }
    if pending_live.is_some() {
        surface.go_live();
    }
    Ok(surface)
}
