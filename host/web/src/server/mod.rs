//! The axum router of `latch serve`: where a request comes from (`Host`,
//! `Origin`) checked on every route, the token on every `/api/` route, the
//! API, per-session SSE and the page. What the page may do is decided here
//! and nowhere else.
//!
//! * [`origin`] — `Host` against the bound address (DNS rebinding) and
//!   `Origin` against this server; 403 otherwise.
//! * [`auth`] — a tab's credential (or the server's token) as
//!   `Authorization: Bearer`, never a cookie; 401 otherwise.
//!   [`auth::Refusal`] is every refusal of both.
//! * [`tabs`] — the one-tab links `latch serve` prints and the credential
//!   each tab gets for its link.
//! * [`api`] — sessions, messages (command receipts, or queued while a
//!   turn runs), commands.
//! * [`images`] — images uploaded with a message, and the transcript's
//!   images served back to the page.
//! * [`rewind`] — the rewind points, a rewind's preview, the rewind.
//! * [`sessions`] — the session list (first message, time, state) and the
//!   server's own state (whether a turn can start).
//! * [`control`] — interrupting a running turn, answering its permission
//!   requests.
//! * [`group`] — the agent group view.
//! * [`sse`] — the event stream with `Last-Event-ID` resume and snapshots.
//! * [`page`] — the static page compiled into the binary.

pub mod api;
pub mod auth;
pub mod control;
pub mod group;
pub mod images;
pub mod origin;
pub mod page;
pub mod rewind;
pub mod sessions;
pub mod sse;
pub mod tabs;

use crate::backend::Backend;
use crate::hub::Hub;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Settings of the web surface.
#[derive(Clone, Debug)]
pub struct WebConfig {
    /// The server's secret: every `/api/` request presents it, or a tab
    /// credential made under it ([`tabs`]).
    pub token: String,
    /// The one-tab links of this server (the printed one among them).
    pub links: Arc<tabs::Links>,
    /// The address the server is bound to: `Host` must name it, a
    /// loopback address or `localhost` ([`serve`] sets it from the
    /// listener).
    pub bound: IpAddr,
    /// Further `Host` names to accept (`--allow-host`): the name of a
    /// proxy in front of a remote bind.
    pub allowed_hosts: Vec<String>,
    /// A reconnecting client more than this many events behind gets one
    /// snapshot instead of the events.
    pub snapshot_after: usize,
    /// Interval of SSE keep-alive comments.
    pub keep_alive: Duration,
}

impl WebConfig {
    /// Defaults around `token`: bound to 127.0.0.1, no further host
    /// names, snapshot past 1,000 events, keep-alive every 15 s.
    pub fn new(token: impl Into<String>) -> WebConfig {
        WebConfig {
            token: token.into(),
            links: Arc::new(tabs::Links::new()),
            bound: IpAddr::V4(Ipv4Addr::LOCALHOST),
            allowed_hosts: Vec::new(),
            snapshot_after: 1_000,
            keep_alive: Duration::from_secs(15),
        }
    }
}

/// What a session runs in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Running {
    /// A turn, started by the message with this receipt.
    Turn {
        /// The message's command receipt.
        receipt: String,
    },
    /// A short command (`/compact`, `/context`, recall, resume).
    Command,
}

/// What every handler shares.
pub struct AppState {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) config: WebConfig,
    pub(crate) hosts: origin::HostRule,
    /// Sessions with a command running in this process.
    pub(crate) busy: Mutex<HashMap<String, Running>>,
    /// Woken whenever a session's command ends.
    pub(crate) released: tokio::sync::Notify,
    pub(crate) receipts: AtomicU64,
}

/// The router of `latch serve` over `backend`.
pub fn router(backend: Arc<dyn Backend>, config: WebConfig) -> Router {
    let hub = Arc::new(Hub::new(
        backend.store().clone(),
        backend.workspace().to_string(),
    ));
    let hosts = origin::HostRule::new(config.bound, &config.allowed_hosts);
    let state = Arc::new(AppState {
        backend,
        hub,
        hosts,
        config,
        busy: Mutex::new(HashMap::new()),
        released: tokio::sync::Notify::new(),
        receipts: AtomicU64::new(0),
    });
    let api = Router::new()
        .route("/tab", post(auth::open_tab))
        .route("/links", post(auth::new_link))
        .route("/server", get(sessions::server))
        .route("/sessions", get(sessions::list).post(api::create))
        .route("/commands", get(api::commands))
        .route("/sessions/{id}", get(api::show))
        .route(
            "/sessions/{id}/messages",
            post(api::message).layer(DefaultBodyLimit::max(images::MAX_MESSAGE_BODY)),
        )
        .route("/sessions/{id}/images/{sha256}", get(images::show))
        .route("/sessions/{id}/rewind", get(rewind::points))
        .route(
            "/sessions/{id}/rewind/{seq}",
            get(rewind::preview).post(rewind::apply),
        )
        .route("/sessions/{id}/resume", post(api::resume))
        .route("/sessions/{id}/compact", post(api::compact))
        .route("/sessions/{id}/context", get(api::context))
        .route("/sessions/{id}/recall", get(api::recall))
        .route("/sessions/{id}/interrupt", post(control::interrupt))
        .route(
            "/sessions/{id}/permissions/{request}",
            post(control::permission),
        )
        .route("/sessions/{id}/group", get(group::show))
        .route("/sessions/{id}/events", get(sse::events))
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require,
        ));
    Router::new()
        .route("/", get(page::index))
        .route("/app.js", get(page::script))
        .route("/attach.js", get(page::attach_script))
        .route("/rewind.js", get(page::rewind_script))
        .route("/app.css", get(page::style))
        .route("/favicon.svg", get(page::icon))
        .nest("/api", api)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            origin::require,
        ))
        .with_state(state)
}

/// Serve `backend` on `listener` until the process ends (`config.bound`
/// is set to the listener's address).
pub async fn serve(
    listener: tokio::net::TcpListener,
    backend: Arc<dyn Backend>,
    mut config: WebConfig,
) -> std::io::Result<()> {
    config.bound = listener.local_addr()?.ip();
    axum::serve(listener, router(backend, config)).await
}
