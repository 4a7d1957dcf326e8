//! Reading a recorded session tree from a store opened read-only: each
//! session's workspace log (its own events and the workspace-wide events
//! of its workspace's other sessions), read as engines read it (tool-call
//! ids of an older log repaired), and the metadata of the artifacts it
//! cites.

use super::{Logged, Recorded, RecordedSession, Recording, media_of};
use crate::compare::CompareError;
use latch_kernel::{SessionRecord, Store, StoreError};
use std::collections::BTreeMap;

/// Events read per page.
const PAGE: u32 = 5_000;

/// The session `selector` names (an id or unique prefix; the workspace's
/// latest root session when `None`). A session deleted from history is
/// refused, saying so.
pub fn open_session(
    store: &Store,
    workspace: &str,
    selector: Option<&str>,
) -> Result<SessionRecord, CompareError> {
    let Some(selector) = selector else {
        return store
            .latest_root_session(workspace)?
            .ok_or_else(|| CompareError::NoSession(workspace.to_string()));
    };
    match store.resolve_session(selector) {
        Ok(record) if store.is_hidden(&record.id)? => Err(CompareError::Deleted(record.id)),
        Ok(record) => Ok(record),
        Err(StoreError::NoMatch(prefix)) => match store.deleted_session_matching(&prefix)? {
            Some(id) => Err(CompareError::Deleted(id)),
            None => Err(StoreError::NoMatch(prefix).into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// The sessions of the tree below `root` (`root` first, then its
/// descendants in creation order, depth first), or `root` alone.
fn tree_of(
    store: &Store,
    root: &SessionRecord,
    tree: bool,
) -> Result<Vec<SessionRecord>, StoreError> {
    let mut out = vec![root.clone()];
    if tree {
        let mut i = 0;
        while i < out.len() {
            let children = store.children(&out[i].id)?;
            out.splice(i + 1..i + 1, children);
            i += 1;
        }
    }
    Ok(out)
}

/// Read `root` (and with `tree` its descendants) from `store`.
pub fn from_store(
    store: &Store,
    root: &SessionRecord,
    tree: bool,
) -> Result<Recording, CompareError> {
    let mut sessions = Vec::new();
    let mut artifacts = BTreeMap::new();
    for record in tree_of(store, root, tree)? {
        let mut log = Vec::new();
        let mut after = 0;
        loop {
            let page = store.workspace_log(&record.id, &record.workspace, after, PAGE)?;
            let full = page.len() == PAGE as usize;
            after = page.last().map_or(after, |e| e.seq);
            log.extend(page);
            if !full {
                break;
            }
        }
        // Read as engines read it: repeated tool-call ids of an older log
        // get their session-unique ids.
        let kernel = store.kernel(&record.id)?;
        for e in log.iter_mut().filter(|e| e.session == record.id) {
            kernel.call_ids().repair(e);
        }
        for e in &log {
            for m in media_of(&e.kind) {
                if !artifacts.contains_key(&m.sha256)
                    && let Some(meta) = store.artifact(&m.sha256)?
                {
                    artifacts.insert(m.sha256.clone(), meta);
                }
            }
        }
        sessions.push(RecordedSession {
            id: record.id.clone(),
            parent: record.parent.clone(),
            workspace: record.workspace.clone(),
            model: record.model.clone(),
            log: log
                .into_iter()
                .map(|e| Logged {
                    seq: e.seq,
                    session: e.session,
                    time_ms: e.time_ms,
                    event: Recorded::Event(e.kind),
                })
                .collect(),
        });
    }
    Ok(Recording {
        source: format!("store {}", store.path().display()),
        redacted: false,
        sessions,
        artifacts,
    })
}
