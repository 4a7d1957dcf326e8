//! The page: static files compiled into the binary, no build step, no
//! external network. The page holds no secret, so loading it needs no
//! token: it reads the token from the URL's fragment (`/#token=…`, which
//! the browser never sends to a server), keeps it in `sessionStorage` and
//! sends it as `Authorization: Bearer` (see [`super::auth`]). Every file
//! goes out with a content security policy that allows only this origin
//! and forbids framing the page (no other page can overlay its buttons).

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../page/index.html");
const SCRIPT: &str = include_str!("../page/app.js");
const ATTACH: &str = include_str!("../page/attach.js");
const REWIND: &str = include_str!("../page/rewind.js");
const PLAN: &str = include_str!("../page/plan.js");
const STYLE: &str = include_str!("../page/app.css");
const ICON: &str = include_str!("../page/favicon.svg");

/// Scripts, styles and connections from this origin only; no frames, no
/// plugins, no form posts elsewhere.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                      form-action 'self'; frame-ancestors 'none'";

fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

/// `GET /`: the page.
pub async fn index() -> Response {
    file("text/html; charset=utf-8", INDEX)
}

/// `GET /app.js`.
pub async fn script() -> Response {
    file("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /attach.js`: images attached to the next message.
pub async fn attach_script() -> Response {
    file("text/javascript; charset=utf-8", ATTACH)
}

/// `GET /rewind.js`: rewinding files from a user message.
pub async fn rewind_script() -> Response {
    file("text/javascript; charset=utf-8", REWIND)
}

/// `GET /plan.js`: plan mode, the plan to approve and the checklist.
pub async fn plan_script() -> Response {
    file("text/javascript; charset=utf-8", PLAN)
}

/// `GET /app.css`.
pub async fn style() -> Response {
    file("text/css; charset=utf-8", STYLE)
}

/// `GET /favicon.svg`: the tab's icon.
pub async fn icon() -> Response {
    file("image/svg+xml", ICON)
}
