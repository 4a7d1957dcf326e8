//! Token auth: every `/api/` request presents, as `Authorization: Bearer`,
//! a tab's credential or the server's secret, and nothing else counts.
//!
//! No cookie carries either. Cookies are scoped to a host, not to a port,
//! so a cookie set by `127.0.0.1:7420` is sent to every server on
//! `127.0.0.1` — a dev server the agent started among them, which could
//! then replay it — and a browser attaches it to requests that other local
//! pages make. A header is only ever set by script running in the page's
//! own origin. The page receives a one-tab link code in the URL's fragment
//! (never sent to any server), exchanges it once for the tab's own
//! credential ([`super::tabs`]: `POST /api/tab`, the one route that takes
//! a link code), keeps that in `sessionStorage` (per tab, per origin) and
//! sets the header on every request, the event stream included (it
//! streams with `fetch`, since `EventSource` cannot set headers). A link
//! left in the browser's history opens nothing.
//!
//! [`Refusal`] is every answer the trust checks give, here and in
//! [`super::origin`]: a status, a stable `kind` and a message that names
//! what was wrong and how to fix it.

use super::AppState;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Why a request was refused before any handler saw it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No `Authorization: Bearer` header.
    #[error(
        "no token: send the token `latch serve` printed as `Authorization: Bearer <token>` \
         (the page does this itself when opened from the printed URL)"
    )]
    MissingToken,
    /// The token came in a cookie or the query string, which the API
    /// ignores.
    #[error(
        "the token came as {0}, which the API does not accept (cookies reach every port of \
         the host and URLs end up in logs): send it as `Authorization: Bearer <token>`, or \
         open the URL `latch serve` printed, whose page does"
    )]
    TokenNotInHeader(&'static str),
    /// A bearer token that is not this server's.
    #[error(
        "wrong token: open the newest link this `latch serve` printed (each opens one tab; \
         `--new-token` replaces every tab's credential), or send the server's token as \
         `Authorization: Bearer <token>`"
    )]
    WrongToken,
    /// A link whose code already opened a tab.
    #[error(
        "this link was used already: a link `latch serve` prints opens one tab, so one left in \
         the browser's history opens nothing. Open the newest link it printed (it prints the \
         next one each time one is used)"
    )]
    LinkUsed,
    /// No `Host` header at all.
    #[error("the request has no Host header; send the address you connected to as `Host`")]
    MissingHost,
    /// A `Host` that is not this server: a DNS-rebinding page, or a name
    /// the user did not allow.
    #[error(
        "Host `{host}` is not this server (a page on another name resolving to this machine \
         cannot drive it): connect as `localhost`, `{bound}` or a loopback address, or, for a \
         name of your own in front of a remote bind, start `latch serve --allow-host <name>`"
    )]
    ForeignHost {
        /// The `Host` header as sent.
        host: String,
        /// The address the server is bound to.
        bound: String,
    },
    /// A cross-origin request: another page, even on another port of this
    /// machine.
    #[error(
        "cross-origin request refused: Origin `{origin}` is not this server (`{host}`); only \
         the page `latch serve` serves may call its API from a browser"
    )]
    CrossOrigin {
        /// The `Origin` header as sent.
        origin: String,
        /// The `Host` it should have matched.
        host: String,
    },
}

impl Refusal {
    /// A stable name for the refusal (the `kind` of the JSON body).
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::MissingToken => "missing_token",
            Refusal::TokenNotInHeader(_) => "token_not_in_header",
            Refusal::WrongToken => "wrong_token",
            Refusal::LinkUsed => "link_used",
            Refusal::MissingHost => "missing_host",
            Refusal::ForeignHost { .. } => "foreign_host",
            Refusal::CrossOrigin { .. } => "cross_origin",
        }
    }

    /// 401 for the token, 403 for where the request came from.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::MissingToken
            | Refusal::TokenNotInHeader(_)
            | Refusal::WrongToken
            | Refusal::LinkUsed => StatusCode::UNAUTHORIZED,
            Refusal::MissingHost | Refusal::ForeignHost { .. } | Refusal::CrossOrigin { .. } => {
                StatusCode::FORBIDDEN
            }
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.to_string(), "kind": self.kind() });
        let mut response = (self.status(), axum::Json(body)).into_response();
        if self.status() == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"latch\""),
            );
        }
        response
    }
}

/// Equal in time independent of where the strings differ.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The bearer token a request presents, if any (`Bearer` in any case).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// Where a request that has no bearer header tried to put the token, for
/// a refusal that says why it did not count.
fn misplaced(request: &Request) -> Option<&'static str> {
    let cookie = request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .any(|kv| kv.trim().starts_with("latch_token"));
    let query = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv.starts_with("token=")));
    match (cookie, query) {
        (true, _) => Some("a cookie"),
        (false, true) => Some("`?token=` in the URL"),
        (false, false) => None,
    }
}

/// Check the credential of an `/api/` request: the server's secret `token`
/// or a tab credential made under it.
pub fn check(request: &Request, token: &str) -> Result<(), Refusal> {
    match bearer(request.headers()) {
        Some(t) if same(t, token) || super::tabs::valid_tab_credential(token, t) => Ok(()),
        Some(_) => Err(Refusal::WrongToken),
        None => Err(misplaced(request).map_or(Refusal::MissingToken, Refusal::TokenNotInHeader)),
    }
}

/// `POST /api/tab`: exchange a link's code (as `Authorization: Bearer`),
/// once, for a new tab's credential: 201 `{credential}`; a used code is
/// refused as [`Refusal::LinkUsed`].
pub async fn open_tab(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let Some(code) = bearer(request.headers()) else {
        return Refusal::MissingToken.into_response();
    };
    match state.config.links.redeem(code) {
        Ok(()) => {
            let credential = super::tabs::tab_credential(&state.config.token);
            let mut response = (
                StatusCode::CREATED,
                axum::Json(serde_json::json!({ "credential": credential })),
            )
                .into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(super::tabs::Redeem::Used) => Refusal::LinkUsed.into_response(),
        Err(super::tabs::Redeem::Unknown) => Refusal::WrongToken.into_response(),
    }
}

/// `POST /api/links` (authorized): a new link's code, for another tab.
pub async fn new_link(State(state): State<Arc<AppState>>) -> Response {
    (
        StatusCode::CREATED,
        axum::Json(serde_json::json!({ "code": state.config.links.mint() })),
    )
        .into_response()
}

/// The middleware on `/api/`: the credential (but for `POST /api/tab`,
/// which checks its link code itself), then the handler; API answers are
/// never cached.
pub async fn require(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let exchange = request.method() == axum::http::Method::POST
        && matches!(request.uri().path(), "/tab" | "/api/tab");
    if !exchange && let Err(refusal) = check(&request, &state.config.token) {
        return refusal.into_response();
    }
    let mut response = next.run(request).await;
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
