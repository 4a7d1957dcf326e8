//! What the web surface shows of a session, read from the store: the
//! shared reducers' surface ([`latch_surface::surface_of`]) with its two
//! extension slots filled — the GROUP block from the kernel's group
//! presentation ([`latch_kernel::group::present`]) over the store the
//! session's group lives in (a shared store's current state, with leases)
//! and the permission prompt from the request the session's live run waits
//! on — and that request itself, which the page answers.
//!
//! Every part is a function of the log up to the surface's watermark (and
//! of whether this process drives the run), so a snapshot at a seq and the
//! state a live page reduced to that seq agree.

use crate::backend::GroupHome;
use latch_engine_sdk::types::MediaRef;
use latch_kernel::group::{GroupError, GroupPort, GroupState, present};
use latch_kernel::{PermissionLog, PermissionRequest, Store, StoredEvent};
use latch_surface::{GroupView, Surface};
use std::collections::BTreeMap;

pub use latch_surface::catch_up;

/// A session as the page sees it.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The reducers' surface, slots filled.
    pub surface: Surface,
    /// The permission request the live run waits on, if any: what
    /// `POST /api/sessions/{id}/permissions/{call_id}` answers.
    pub permission: Option<PermissionRequest>,
    /// The images of the session's user messages, by the message's
    /// sequence number (the transcript shows them).
    pub images: BTreeMap<u64, Vec<MediaRef>>,
}

/// Observe `session` as the log says it now. Runs opened after
/// `live_since` are driven by this process (see
/// [`latch_surface::surface_of`]).
pub fn observe(
    store: &Store,
    session: &str,
    workspace: &str,
    live_since: Option<u64>,
    group: &GroupHome,
) -> Result<Observed, GroupError> {
    let events = catch_up(store, session, workspace, 0)?;
    let mut surface = latch_surface::replay_live(session, &events, live_since);
    let permission = waiting_request(&surface, session, &events);
    // The reducers fill the prompt from the log; only a run this process
    // drives can still be answered, so any other prompt is cleared.
    if permission.is_none() {
        surface.set_permission(None);
    }
    surface.set_group(if group.shared {
        shared_block(group)?
    } else {
        group_block(store, &group.root, surface.durable().watermark)?
    });
    let images = crate::server::images::user_images(&events, session);
    Ok(Observed {
        surface,
        permission,
        images,
    })
}

/// The request the session's live run waits on: the latest one without a
/// decision or a result. None when no run of this process is open (a
/// request an earlier process left is denied as interrupted on resume, so
/// nobody can answer it).
pub fn waiting_request(
    surface: &Surface,
    session: &str,
    events: &[StoredEvent],
) -> Option<PermissionRequest> {
    if !surface.run_is_live() {
        return None;
    }
    let log = PermissionLog::replay(
        events
            .iter()
            .filter(|e| e.session == session)
            .map(|e| &e.kind),
    );
    log.pending().last().cloned()
}

/// The group of `root` as of `upto`.
pub fn group_state(store: &Store, root: &str, upto: u64) -> Result<GroupState, GroupError> {
    let events = store.group_log(root, 0)?;
    Ok(GroupState::replay(events.iter().filter(|e| e.seq <= upto)))
}

/// The GROUP block of a group on a shared store, as it stands (its events
/// are not in this log, so no sequence number of it bounds them).
fn shared_block(group: &GroupHome) -> Result<Option<GroupView>, GroupError> {
    let state = group.port.replay(&group.root)?;
    if !state.exists() {
        return Ok(None);
    }
    let leases = group.port.leases(&group.root)?.unwrap_or_default();
    let text = present::text(&present::view_with_leases(&state, &leases));
    let mut lines = text.lines().map(str::to_string);
    let title = lines.next().unwrap_or_default();
    Ok(Some(GroupView {
        title,
        lines: lines.collect(),
    }))
}

/// The GROUP block of `root`'s group as of `upto` (None without a group):
/// the `/group` text, its first line as the title.
fn group_block(store: &Store, root: &str, upto: u64) -> Result<Option<GroupView>, GroupError> {
    let state = group_state(store, root, upto)?;
    if !state.exists() {
        return Ok(None);
    }
    let text = present::render(&state);
    let mut lines = text.lines().map(str::to_string);
    let title = lines.next().unwrap_or_default();
    Ok(Some(GroupView {
        title,
        lines: lines.collect(),
    }))
}
