//! `GET /api/sessions`: the workspace's sessions as a user picks one —
//! the first message (what the session was about), when it was last
//! active, and its state in words (running here, driven elsewhere,
//! interrupted, ready) — newest first, children nested under their parent.

use super::AppState;
use super::api::{ApiResult, blocking};
use axum::Json;
use axum::extract::State;
use axum::response::IntoResponse;
use latch_engine_sdk::types::Part;
use latch_kernel::{EventKind, SessionRecord, Store, StoreError};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;

/// Longest first message the list carries, in characters.
pub const FIRST_MESSAGE_CHARS: usize = 200;

/// What the list says of one session besides its record.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Brief {
    /// The first user message, cut to [`FIRST_MESSAGE_CHARS`].
    pub first_message: Option<String>,
    /// When its latest event was committed (ms since the epoch).
    pub updated_ms: Option<u64>,
    /// Its state: `running` (a turn of this server), `busy` (another
    /// driver holds it), `interrupted` (its last run was stopped) or
    /// `ready`.
    pub state: &'static str,
    /// Who drives it when another process does.
    pub driver: Option<String>,
}

/// The [`Brief`] of `id` read from the store; `running` when a turn of
/// this server runs it.
pub fn brief(store: &Store, id: &str, running: bool) -> Result<Brief, StoreError> {
    let first_message = store
        .events_outline(id, 0, u64::MAX, 32)?
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::UserMessage { parts } => Some(
                parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Text(t) => Some(t.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        })
        .map(|t| cut(&t));
    let last = store.events_before(id, u64::MAX, 1)?.into_iter().next();
    let holder = store.lease_holder(id)?;
    let driver = holder
        .as_ref()
        .filter(|h| !(h.this_process && h.surface == crate::WEB_SURFACE))
        .map(|h| format!("{} (pid {})", h.surface, h.pid));
    let state = if running {
        "running"
    } else if driver.is_some() {
        "busy"
    } else if matches!(
        last.as_ref().map(|e| &e.kind),
        Some(EventKind::RunInterrupted { .. })
    ) {
        "interrupted"
    } else {
        "ready"
    };
    Ok(Brief {
        first_message,
        updated_ms: last.map(|e| e.time_ms),
        state,
        driver,
    })
}

fn cut(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= FIRST_MESSAGE_CHARS {
        return one_line;
    }
    let mut out: String = one_line.chars().take(FIRST_MESSAGE_CHARS - 1).collect();
    out.push('…');
    out
}

/// One session of the list as JSON.
pub fn summary(s: &SessionRecord, b: &Brief, children: Vec<Value>) -> Value {
    json!({
        "id": s.id,
        "parent": s.parent,
        "provider": s.model.provider,
        "model": s.model.model,
        "created_ms": s.created_ms,
        "updated_ms": b.updated_ms.unwrap_or(s.created_ms),
        "first_message": b.first_message,
        "state": if b.state.is_empty() { "ready" } else { b.state },
        "driver": b.driver,
        "running": b.state == "running",
        "children": children,
    })
}

/// `GET /api/sessions`: the workspace's sessions, newest first, children
/// nested under their parent.
pub async fn list(State(state): State<Arc<AppState>>) -> ApiResult {
    let busy: HashSet<String> = state
        .busy
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .keys()
        .cloned()
        .collect();
    let st = state.clone();
    let roots = blocking(move || {
        let store = st.backend.store();
        let sessions = store.list_sessions(st.backend.workspace())?;
        fn nest(
            s: &SessionRecord,
            all: &[SessionRecord],
            busy: &HashSet<String>,
            store: &Store,
        ) -> Result<Value, StoreError> {
            let mut kids: Vec<&SessionRecord> = all
                .iter()
                .filter(|c| c.parent.as_deref() == Some(s.id.as_str()))
                .collect();
            kids.sort_by_key(|c| c.created_ms);
            let children = kids
                .into_iter()
                .map(|c| nest(c, all, busy, store))
                .collect::<Result<_, _>>()?;
            let b = brief(store, &s.id, busy.contains(&s.id))?;
            Ok(summary(s, &b, children))
        }
        let roots = sessions
            .iter()
            .filter(|s| s.parent.is_none())
            .map(|s| nest(s, &sessions, &busy, store))
            .collect::<Result<Vec<Value>, StoreError>>()?;
        Ok(roots)
    })
    .await?;
    Ok(Json(json!({ "sessions": roots })).into_response())
}

/// `GET /api/server`: what the page needs before any session — the
/// workspace, and whether a turn can start (the provider of new sessions,
/// or why there is none and how to configure one).
pub async fn server(State(state): State<Arc<AppState>>) -> ApiResult {
    let provider = match state.backend.provider() {
        Ok(p) => json!({ "configured": true, "name": p }),
        Err(why) => json!({ "configured": false, "reason": why }),
    };
    Ok(Json(json!({
        "workspace": state.backend.workspace(),
        "provider": provider,
    }))
    .into_response())
}
