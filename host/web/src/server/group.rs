//! `GET /api/sessions/{id}/group`: the agent group the session belongs to
//! (as its lead or a member), read from the store it lives in (a shared
//! store when `[group] store` names one, or the store a member joined
//! from this host) and reduced by the kernel's one presentation reducer
//! ([`latch_kernel::group::present`]) — the same data `/group` and `latch
//! group` print, as JSON and as that text.

use super::AppState;
use super::api::{ApiResult, blocking, known};
use axum::Json;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use latch_kernel::group::present;
use serde_json::json;
use std::sync::Arc;

/// The handler.
pub async fn show(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let st = state.clone();
    let value = blocking(move || {
        let record = known(&st, &id)?;
        let home = st.backend.group_home(&record);
        let root = home.root.clone();
        let group = home.port.replay(&root)?;
        let leases = home.port.leases(&root)?.unwrap_or_default();
        let view = present::view_with_leases(&group, &leases);
        Ok(json!({
            "session": id,
            "root": root,
            "shared": home.shared,
            "exists": group.exists(),
            "lead": view.lead,
            "members": view.members.iter().map(|m| json!({
                "id": m.id,
                "role": m.role,
                "state": m.state,
                "pending": m.pending,
                "holding": m.holding,
                "last_activity_ms": m.last_activity_ms,
            })).collect::<Vec<_>>(),
            "tasks": view.tasks.iter().map(|t| json!({
                "id": t.id,
                "title": t.title,
                "status": t.status.label(),
                "owner": t.owner,
                "depends_on": t.depends_on,
                "result": t.result,
            })).collect::<Vec<_>>(),
            "pending": view.pending,
            "delivered": view.delivered,
            "last_activity_ms": view.last_activity_ms,
            "text": present::text(&view),
        }))
    })
    .await?;
    Ok(Json(value).into_response())
}
