//! Token auth: `Authorization: Bearer <token>` or the `latch_token` cookie
//! the page sets when opened with `?token=`. Anything else is 401.

use super::AppState;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The cookie that carries the token for `EventSource` and the page.
pub const COOKIE: &str = "latch_token";

/// Equal in time independent of where the strings differ.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The token a request presents, if any.
pub(crate) fn presented(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some(t) = v.strip_prefix("Bearer ")
    {
        return Some(t.trim().to_string());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// The middleware on `/api/`.
pub async fn require(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    match presented(request.headers()) {
        Some(t) if same(&t, &state.config.token) => next.run(request).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            axum::Json(serde_json::json!({
                "error": "missing or wrong token: open the URL `latch serve` printed (it sets a cookie), \
                          or send `Authorization: Bearer <token>`"
            })),
        )
            .into_response(),
    }
}
