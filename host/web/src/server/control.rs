//! Acting on a running turn from the page: `POST
//! /api/sessions/{id}/interrupt` stops it at once, and `POST
//! /api/sessions/{id}/permissions/{call_id}` answers the permission request
//! it waits on. Both go through the backend — the session's turn control
//! and its decision port — so the agent commits what becomes durable
//! (`run_interrupted`, `permission_granted` / `permission_denied`).

use super::api::{ApiError, ApiResult, blocking, known};
use super::{AppState, Running};
use crate::approvals::Answer;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long an interrupt waits for the turn to commit its end before it
/// answers that the stop is still under way.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// How often the interrupt is repeated while the turn runs (one sent
/// before the turn's start clears it is sent again).
const REPEAT: Duration = Duration::from_millis(100);

/// The receipt of the turn `id` runs, if it runs one.
fn running_turn(state: &AppState, id: &str) -> Result<Option<String>, ApiError> {
    match state.busy.lock().unwrap_or_else(|p| p.into_inner()).get(id) {
        Some(Running::Turn { receipt }) => Ok(Some(receipt.clone())),
        Some(Running::Command) => Err(ApiError(
            StatusCode::CONFLICT,
            format!(
                "session {id} runs a command (/compact, /context, recall or resume), not a turn; \
                 it ends by itself"
            ),
        )),
        None => Ok(None),
    }
}

/// `POST /api/sessions/{id}/interrupt`: stop the running turn at once. The
/// answer comes once the turn committed `run_interrupted` (200, `stopped:
/// true`), or after 10 s with `stopped: false` (202) when it has not yet.
/// 409 when no turn runs, 404 for an unknown session.
pub async fn interrupt(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    {
        let st = state.clone();
        let id = id.clone();
        blocking(move || known(&st, &id).map(drop)).await?;
    }
    let Some(receipt) = running_turn(&state, &id)? else {
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!(
                "nothing runs in session {id}: interrupt stops a running turn \
                 (POST /api/sessions/{id}/messages starts one)"
            ),
        ));
    };
    let deadline = Instant::now() + STOP_WAIT;
    let stopped = loop {
        let released = state.released.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        if running_turn(&state, &id).ok().flatten().as_ref() != Some(&receipt) {
            break true;
        }
        if Instant::now() >= deadline {
            break false;
        }
        state.backend.interrupt(&id)?;
        let _ = tokio::time::timeout_at(deadline.min(Instant::now() + REPEAT), released).await;
    };
    let status = if stopped {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((
        status,
        Json(json!({ "session": id, "receipt": receipt, "stopped": stopped })),
    )
        .into_response())
}

/// Body of `POST /api/sessions/{id}/permissions/{call_id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerBody {
    /// `allow`, `deny` or `always` (for this session).
    pub decision: String,
    /// Why, for a denial: the model reads it.
    #[serde(default)]
    pub reason: Option<String>,
    /// For `approve` (a plan): the approval mode it runs under.
    #[serde(default)]
    pub mode: Option<String>,
}

/// `POST /api/sessions/{id}/permissions/{call_id}` `{"decision": "allow" |
/// "deny" | "always", "reason": "..."}`: answer the permission request the
/// session's running turn waits on. 409 when that request does not wait
/// (answered already, or left by a process that stopped).
pub async fn permission(
    State(state): State<Arc<AppState>>,
    Path((id, request)): Path<(String, String)>,
    body: Result<Json<AnswerBody>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body.map_err(|e| {
        ApiError(
            StatusCode::BAD_REQUEST,
            format!(
                "the body must be JSON like {{\"decision\": \"allow\" | \"deny\" | \"always\", \
                 \"reason\": \"...\"}}: {e}"
            ),
        )
    })?;
    let answer = Answer::parse_with_mode(&body.decision, body.reason.clone(), body.mode.clone())
        .map_err(|e| ApiError(StatusCode::BAD_REQUEST, e))?;
    let st = state.clone();
    let (sid, rid) = (id.clone(), request.clone());
    blocking(move || {
        known(&st, &sid)?;
        let observed = super::api::observed(&st, &sid)?;
        match observed.permission {
            Some(waiting) if waiting.call_id == rid => Ok(()),
            Some(waiting) => Err(ApiError(
                StatusCode::CONFLICT,
                format!(
                    "permission request `{rid}` does not wait in session {sid}; the one waiting \
                     is `{}` ({}: {})",
                    waiting.call_id,
                    waiting.tool,
                    waiting.subject()
                ),
            )),
            None => Err(ApiError(
                StatusCode::CONFLICT,
                format!(
                    "no permission request waits in session {sid} (answered already, or left by \
                     a process that stopped: POST /api/sessions/{sid}/resume denies it as \
                     interrupted); GET /api/sessions/{sid} shows `state.permission`"
                ),
            )),
        }
    })
    .await?;
    state.backend.approvals().answer(&id, &request, answer);
    Ok(Json(json!({
        "session": id,
        "request": request,
        "decision": body.decision.trim().to_ascii_lowercase(),
    }))
    .into_response())
}
