//! The page: static files compiled into the binary, no build step, no
//! external network. Opening `/?token=…` with the right token sets the
//! auth cookie (HttpOnly, SameSite=Strict) that the page's requests and its
//! `EventSource` carry.

use super::AppState;
use super::auth::{COOKIE, same};
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::Arc;

const INDEX: &str = include_str!("../page/index.html");
const SCRIPT: &str = include_str!("../page/app.js");
const STYLE: &str = include_str!("../page/app.css");

/// `GET /`: the page; sets the cookie when `?token=` is right.
pub async fn index(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let html = [(header::CONTENT_TYPE, "text/html; charset=utf-8")];
    match q.get("token") {
        Some(t) if same(t, &state.config.token) => {
            let cookie = format!("{COOKIE}={t}; Path=/; HttpOnly; SameSite=Strict");
            ([(header::SET_COOKIE, cookie)], html, INDEX).into_response()
        }
        _ => (html, INDEX).into_response(),
    }
}

/// `GET /app.js`.
pub async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

/// `GET /app.css`.
pub async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}
