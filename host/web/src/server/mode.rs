//! Plan mode and the agents users defined, from the page: `POST
//! /api/sessions/{id}/mode {"mode": "plan" | "edits" | "on-request" |
//! "untrusted" | "never"}` switches the session's mode as Shift+Tab and
//! `/plan` do (the agent records it first, so it is durable and a resume
//! keeps it); it is a session command, refused while a turn or another
//! command runs. `GET /api/agents` lists the agents as `latch agents` does.

use super::AppState;
use super::api::{ApiError, ApiResult, blocking, command};
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

/// Body of `POST /api/sessions/{id}/mode`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeBody {
    /// `plan`, or an approval mode's name.
    pub mode: String,
}

/// `POST /api/sessions/{id}/mode`: switch the session's mode; answers
/// `{session, mode}` with the mode's label (`plan`, `edits`, `auto`, ...).
pub async fn switch(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<ModeBody>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body.map_err(|e| {
        ApiError(
            StatusCode::BAD_REQUEST,
            format!(
                "the body must be JSON like {{\"mode\": \"plan\" | \"edits\" | \"on-request\" | \
                 \"untrusted\" | \"never\"}}: {e}"
            ),
        )
    })?;
    let sid = id.clone();
    let mode = command(&state, &id, move |st, on| {
        st.backend.switch_mode(&sid, body.mode.trim(), on)
    })
    .await?;
    Ok(Json(json!({ "session": id, "mode": mode })).into_response())
}

/// `GET /api/agents`: `{lines: [...]}`, each agent with where it came
/// from and what it runs with, then the files left out with their line.
pub async fn agents(State(state): State<Arc<AppState>>) -> ApiResult {
    let st = state.clone();
    let lines = blocking(move || Ok(st.backend.agents())).await?;
    Ok(Json(json!({ "lines": lines })).into_response())
}
