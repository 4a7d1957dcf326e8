//! The `/api/` routes other than the event stream: sessions, messages
//! (which return a command receipt at once while the turn runs
//! server-side) and the session commands.
//!
//! Commands run on blocking threads that no request owns, so closing the
//! page or dropping the connection never cancels them.

use super::{AppState, Running};
use crate::backend::{BackendError, Signal};
use crate::{log, view};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use latch_kernel::group::GroupError;
use latch_kernel::{SessionRecord, StoreError};
use latch_surface::Delta;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// An API error: a status and a message that says what was wrong and how
/// to fix it.
#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<BackendError> for ApiError {
    fn from(e: BackendError) -> ApiError {
        let status = match e {
            BackendError::NotFound(_) => StatusCode::NOT_FOUND,
            BackendError::BadRequest(_) => StatusCode::BAD_REQUEST,
            BackendError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
            BackendError::Interrupted(_) | BackendError::InUse(_) => StatusCode::CONFLICT,
        };
        ApiError(status, e.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }
}

impl From<GroupError> for ApiError {
    fn from(e: GroupError) -> ApiError {
        ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }
}

/// What a handler returns.
pub(crate) type ApiResult = Result<Response, ApiError>;

/// Run blocking work off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
}

/// The session `id` of this workspace, or 404: for an unknown session,
/// and for one deleted from history (it or an ancestor tombstoned), which
/// the web never serves.
/// The session as the page sees it now ([`log::observe`]), its GROUP
/// block read from where its group lives.
pub(crate) fn observed(state: &AppState, id: &str) -> Result<log::Observed, ApiError> {
    let record = state.backend.store().session(id)?;
    let home = state.backend.group_home(&record);
    Ok(log::observe(
        state.backend.store(),
        id,
        state.backend.workspace(),
        state.hub.live_since(id),
        &home,
    )?)
}

pub(crate) fn known(state: &AppState, id: &str) -> Result<SessionRecord, ApiError> {
    let not_found = || ApiError::from(BackendError::NotFound(id.to_string()));
    let store = state.backend.store();
    match store.session(id) {
        Ok(s) if s.workspace == state.backend.workspace() => {
            if store.is_hidden(id)? {
                return Err(deleted(id));
            }
            Ok(s)
        }
        Ok(_) | Err(StoreError::UnknownSession(_)) => Err(not_found()),
        Err(e) => Err(e.into()),
    }
}

/// The 404 for a session deleted from history.
pub(crate) fn deleted(id: &str) -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        format!(
            "session {id} was deleted from history (`latch history delete`, of it or of a \
             parent): its events are kept in the store but are no longer served; list the \
             sessions with GET /api/sessions"
        ),
    )
}

/// `GET /api/commands`: the custom slash commands, `{commands: [{usage,
/// help}]}` (a message `/name args` runs one).
pub async fn commands(State(state): State<Arc<AppState>>) -> ApiResult {
    let st = state.clone();
    let commands = blocking(move || Ok(st.backend.commands())).await?;
    let list: Vec<Value> = commands
        .into_iter()
        .map(|(usage, help)| json!({ "usage": usage, "help": help }))
        .collect();
    Ok(Json(json!({ "commands": list })).into_response())
}

/// `POST /api/sessions`: a new root session.
pub async fn create(State(state): State<Arc<AppState>>) -> ApiResult {
    let st = state.clone();
    let s = blocking(move || Ok(st.backend.create_session()?)).await?;
    let brief = super::sessions::Brief::default();
    Ok((
        StatusCode::CREATED,
        Json(super::sessions::summary(&s, &brief, Vec::new())),
    )
        .into_response())
}

/// `GET /api/sessions/{id}`: the reducers' current state of the session,
/// and who drives it (`driver`: pid, host, surface, since when; `null`
/// when nobody does). A session another process drives is viewed
/// read-only: its messages and commands are refused with 409.
pub async fn show(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let st = state.clone();
    let value = blocking(move || {
        known(&st, &id)?;
        let observed = observed(&st, &id)?;
        let driver = st.backend.store().lease_holder(&id)?.map(|h| {
            json!({
                "pid": h.pid,
                "host": h.host,
                "surface": h.surface,
                "since_ms": h.since_ms,
                "this_process": h.this_process,
                // Driven by this server's own pages (not a child agent
                // this process runs, not another process).
                "this_server": h.this_process && h.surface == crate::WEB_SURFACE,
            })
        });
        let prices = st.backend.prices();
        Ok(json!({ "session": id, "state": view::state(&observed, &prices), "driver": driver }))
    })
    .await?;
    Ok(Json(value).into_response())
}

/// Body of `POST /api/sessions/{id}/messages`.
#[derive(Debug, Deserialize)]
pub struct MessageBody {
    /// The user's message (may be empty when images come with it).
    #[serde(default)]
    pub text: String,
    /// Images sent with it, after its text.
    #[serde(default)]
    pub images: Vec<super::images::ImageBody>,
}

/// Claim `id` for one command, or 409.
fn claim(state: &AppState, id: &str, running: Running) -> Result<(), ApiError> {
    let mut busy = state.busy.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(now) = busy.get(id) {
        let what = match now {
            Running::Turn { .. } => {
                format!("a turn (POST /api/sessions/{id}/interrupt stops it)")
            }
            Running::Command => "a command".to_string(),
        };
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!("session {id} is running {what}; wait for its `turn` event and send again"),
        ));
    }
    busy.insert(id.to_string(), running);
    Ok(())
}

/// The command of `id` ended: free the session, drop permission answers
/// nobody took, wake whoever waits for the end (an interrupt).
fn release(state: &AppState, id: &str) {
    state
        .busy
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(id);
    state.backend.approvals().forget(id);
    state.released.notify_waiters();
}

/// The sink a command of `id` reports to: commits wake the feeds, deltas
/// go out transient.
fn sink(state: &Arc<AppState>, id: &str) -> impl FnMut(Signal) + Send + use<> {
    let hub = state.hub.clone();
    let id = id.to_string();
    move |signal| match signal {
        Signal::Committed(_) => hub.committed(),
        Signal::Delta(d) => hub.transient(&id, "delta", delta(&d)),
    }
}

/// A transient delta as JSON.
pub(crate) fn delta(d: &Delta) -> Value {
    match d {
        Delta::Text(t) => json!({ "text": t }),
        Delta::Reasoning => json!({ "reasoning": true }),
        Delta::Retrying { attempt, reason } => {
            json!({ "retrying": { "attempt": attempt, "reason": reason } })
        }
    }
}

/// `POST /api/sessions/{id}/messages` `{"text": "...", "images": [{"name":
/// "shot.png", "data": "<base64>"}]}` (`images` optional): start a turn and
/// return its receipt at once (202). The turn's end arrives on the event
/// stream as a transient `turn` event carrying the receipt. Images are
/// checked as `latch run --image` checks a file before anything is
/// recorded (400 naming what is wrong), and are refused while a turn runs
/// (409: send them when it ends).
pub async fn message(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<MessageBody>, axum::extract::rejection::JsonRejection>,
) -> ApiResult {
    let Json(body) = body.map_err(super::images::body_refused)?;
    if body.text.trim().is_empty() && body.images.is_empty() {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            "the message is empty: send {\"text\": \"<your task>\"}".into(),
        ));
    }
    let images = Arc::new(super::images::decode(&body.images)?);
    {
        let st = state.clone();
        let id = id.clone();
        blocking(move || known(&st, &id).map(drop)).await?;
    }
    // A bad image is refused before anything is recorded, with what is
    // wrong with it.
    if !images.is_empty() {
        let st = state.clone();
        let images = Arc::clone(&images);
        blocking(move || {
            images
                .iter()
                .try_for_each(|i| st.backend.check_image(i))
                .map_err(ApiError::from)
        })
        .await?;
    }
    // A session another process drives is refused here, with its holder,
    // not after the receipt.
    {
        let st = state.clone();
        let id = id.clone();
        blocking(move || Ok(st.backend.drive(&id)?)).await?;
    }
    let receipt = format!("r{}", state.receipts.fetch_add(1, Ordering::Relaxed) + 1);
    // A turn runs: the message waits for its next safe boundary, as in
    // the terminal (or starts the next turn when this one ends first).
    // Images go with a message of their own: refused below while a turn
    // runs.
    if images.is_empty()
        && let Some(queued) = queue(&state, &id, &body.text, &receipt)
    {
        return Ok(queued);
    }
    claim(
        &state,
        &id,
        Running::Turn {
            receipt: receipt.clone(),
        },
    )?;
    state.hub.mark_live(&id);
    let st = state.clone();
    let (sid, rid) = (id.clone(), receipt.clone());
    tokio::task::spawn_blocking(move || {
        let mut on = sink(&st, &sid);
        let mut text = body.text;
        // The images go with the first turn only.
        let mut images: &[_] = &images;
        loop {
            let result = st
                .backend
                .run_turn_with_images(&sid, &text, images, &mut on);
            images = &[];
            st.hub.committed();
            // Messages queued after the turn's last safe boundary: the next
            // turn starts with them (taken and released under the lock that
            // queueing takes, so none is left behind).
            let mut busy = st.busy.lock().unwrap_or_else(|p| p.into_inner());
            let unsent = st.backend.unsent(&sid);
            if result.is_ok() && !unsent.is_empty() {
                drop(busy);
                text = unsent.join("\n");
                continue;
            }
            busy.remove(&sid);
            drop(busy);
            let done = match &result {
                Ok(()) => json!({ "receipt": rid, "state": "finished" }),
                Err(BackendError::Interrupted(why)) => {
                    json!({ "receipt": rid, "state": "interrupted", "reason": why, "unsent": unsent })
                }
                Err(e) => json!({
                    "receipt": rid, "state": "failed", "error": e.to_string(), "unsent": unsent,
                }),
            };
            release(&st, &sid);
            st.hub.transient(&sid, "turn", done);
            return;
        }
    });
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "receipt": receipt, "session": id })),
    )
        .into_response())
}

/// Queue `text` for the turn `id` runs in this process: 202 with
/// `queued: true`. `None` when no turn runs (or the backend cannot queue).
fn queue(state: &AppState, id: &str, text: &str, receipt: &str) -> Option<Response> {
    let busy = state.busy.lock().unwrap_or_else(|p| p.into_inner());
    if !matches!(busy.get(id), Some(Running::Turn { .. })) {
        return None;
    }
    // Queued under the lock: the turn cannot end between the check and
    // the queueing without the backend seeing the message.
    if !state.backend.steer(id, text) {
        return None;
    }
    drop(busy);
    state
        .hub
        .transient(id, "queued", json!({ "receipt": receipt, "text": text }));
    Some(
        (
            StatusCode::ACCEPTED,
            Json(json!({ "receipt": receipt, "session": id, "queued": true })),
        )
            .into_response(),
    )
}

/// Run a short command of `id` that commits events, with the session
/// claimed.
pub(crate) async fn command<T: Send + 'static>(
    state: &Arc<AppState>,
    id: &str,
    f: impl FnOnce(&AppState, &mut (dyn FnMut(Signal) + Send)) -> Result<T, BackendError>
    + Send
    + 'static,
) -> Result<T, ApiError> {
    {
        let st = state.clone();
        let id = id.to_string();
        blocking(move || known(&st, &id).map(drop)).await?;
    }
    claim(state, id, Running::Command)?;
    state.hub.mark_live(id);
    let st = state.clone();
    let sid = id.to_string();
    let result = blocking(move || {
        let mut on = sink(&st, &sid);
        let r = f(&st, &mut on);
        st.hub.committed();
        Ok(r)
    })
    .await;
    release(state, id);
    Ok(result??)
}

/// `POST /api/sessions/{id}/resume`: settle what an earlier process left
/// and mark an interrupted run interrupted.
pub async fn resume(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let sid = id.clone();
    let repaired = command(&state, &id, move |st, on| st.backend.resume(&sid, on)).await?;
    Ok(Json(json!({ "session": id, "repaired": repaired })).into_response())
}

/// `POST /api/sessions/{id}/compact`: `/compact`.
pub async fn compact(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let sid = id.clone();
    let entries = command(&state, &id, move |st, on| st.backend.compact(&sid, on)).await?;
    Ok(Json(json!({ "session": id, "entries": entries })).into_response())
}

/// `GET /api/sessions/{id}/context`: the `/context` report.
pub async fn context(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let sid = id.clone();
    let report = command(&state, &id, move |st, _| st.backend.context_report(&sid)).await?;
    Ok(Json(json!({ "session": id, "report": report })).into_response())
}

/// `GET /api/sessions/{id}/recall?q=…&limit=…`: recall original events.
pub async fn recall(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let query = q.get("q").cloned().unwrap_or_default();
    if query.trim().is_empty() {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            "recall needs a query: GET /api/sessions/{id}/recall?q=<words>".into(),
        ));
    }
    let limit = match q.get("limit") {
        None => 10,
        Some(l) => l.parse::<u32>().map_err(|_| {
            ApiError(
                StatusCode::BAD_REQUEST,
                format!("limit must be a whole number, not `{l}`"),
            )
        })?,
    };
    let sid = id.clone();
    let events = command(&state, &id, move |st, _| {
        st.backend.recall(&sid, &query, limit)
    })
    .await?;
    Ok(Json(json!({ "session": id, "events": events })).into_response())
}

/// Any other `/api/` path.
pub async fn not_found() -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "no such API route; see the README's \"Web surface\" section for the routes".into(),
    )
}
