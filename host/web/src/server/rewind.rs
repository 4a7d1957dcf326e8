//! Rewind from the page: the session's user messages with the files Latch
//! changed from each on, what a rewind to before one would do now (a
//! preview that changes nothing), and the rewind itself, run by the
//! backend with the same code as `latch rewind` and `/rewind`. The rewind
//! is a session command: refused while a turn or another command runs,
//! and for a session another driver holds (409 naming it).

use super::AppState;
use super::api::{ApiError, ApiResult, blocking, command, known};
use crate::backend::BackendError;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use latch_kernel::{FileAction, RewindPlan};
use serde_json::{Value, json};
use std::sync::Arc;

/// A plan as JSON: `{to_seq, restore: [path], remove: [path], conflicts:
/// [path], links: [path]}` (conflicts: changed outside Latch, left alone;
/// links: those of them where a link or a directory stands).
pub fn plan_json(plan: &RewindPlan) -> Value {
    let of = |want: fn(&FileAction) -> bool| -> Vec<&str> {
        plan.actions
            .iter()
            .filter(|(_, a)| want(a))
            .map(|(p, _)| p.as_str())
            .collect()
    };
    json!({
        "to_seq": plan.to_seq,
        "restore": of(|a| matches!(a, FileAction::Restore(_))),
        "remove": of(|a| matches!(a, FileAction::Remove)),
        "conflicts": plan.conflicts,
        "links": plan.links,
    })
}

fn seq_of(raw: &str) -> Result<u64, ApiError> {
    raw.parse::<u64>().map_err(|_| {
        ApiError(
            StatusCode::BAD_REQUEST,
            format!(
                "`{raw}` is not a sequence number: rewind to a user message's `seq` \
                 (GET /api/sessions/{{id}}/rewind lists them)"
            ),
        )
    })
}

/// `GET /api/sessions/{id}/rewind`: `{points: [{seq, text, files}]}`, the
/// user messages oldest first, each with the files a rewind to before it
/// would restore.
pub async fn points(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let st = state.clone();
    let value = blocking(move || {
        known(&st, &id)?;
        let points = latch_kernel::rewind_points(st.backend.store(), &id)?;
        let list: Vec<Value> = points
            .iter()
            .map(|p| json!({ "seq": p.seq, "text": p.text, "files": p.files }))
            .collect();
        Ok(json!({ "session": id, "points": list }))
    })
    .await?;
    Ok(Json(value).into_response())
}

/// `GET /api/sessions/{id}/rewind/{seq}`: what a rewind to before the
/// user message `seq` would do now; nothing is changed.
pub async fn preview(
    State(state): State<Arc<AppState>>,
    Path((id, seq)): Path<(String, String)>,
) -> ApiResult {
    let to = seq_of(&seq)?;
    let st = state.clone();
    let plan = blocking(move || {
        known(&st, &id)?;
        Ok(st.backend.rewind_plan(&id, to)?)
    })
    .await?;
    Ok(Json(plan_json(&plan)).into_response())
}

/// `POST /api/sessions/{id}/rewind/{seq}`: rewind the files to their state
/// before the user message `seq`, as new durable events (the `rewound`
/// event lists what was restored and what was left alone). Answers the
/// plan that was applied.
pub async fn apply(
    State(state): State<Arc<AppState>>,
    Path((id, seq)): Path<(String, String)>,
) -> ApiResult {
    let to = seq_of(&seq)?;
    let sid = id.clone();
    let plan = command(&state, &id, move |st, on| -> Result<_, BackendError> {
        st.backend.rewind(&sid, to, on)
    })
    .await?;
    Ok(Json(plan_json(&plan)).into_response())
}
