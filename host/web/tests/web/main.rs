//! The router of `latch serve` over a scripted backend and a real SQLite
//! store, driven through `tower::ServiceExt::oneshot` (no socket).
//!
//! * [`trust`] — the token only as a header, `Host` and `Origin` checked:
//!   the matrix of who may answer a pending permission request.
//! * [`reasoning`] — no reasoning text in any body the server sends.
//! * [`deleted`] — sessions deleted from history are not served.
//! * [`uploads`] — a message's images, the transcript's images, rewind's
//!   sequence numbers.
//! * [`shared`] — a group on a shared store: the route, the GROUP block
//!   and the stream's wake-ups follow that store.

mod deleted;
mod reasoning;
mod shared;
mod trust;
mod uploads;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response};
use http_body_util::BodyExt;
use latch_engine_sdk::types::{ContextReport, Event, ModelProfile};
use latch_kernel::{EventKind, PermissionKind, PermissionRequest, SessionRecord, Store};
use latch_web::backend::Sink;
use latch_web::{Answer, Approvals, Backend, BackendError, Signal, WebConfig};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tower::ServiceExt;

/// The token of every test server.
pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";
/// The `Host` of a request sent to the server as the page does.
pub const HOST: &str = "127.0.0.1:7420";
/// The page's own origin.
pub const ORIGIN: &str = "http://127.0.0.1:7420";
/// The call id of the permission request a scripted turn asks.
pub const CALL: &str = "call-1";

/// A backend that asks: a turn whose text is `ask` commits a permission
/// request for `rm -rf build` and waits for the page's answer (as the
/// binary's decision port does), then commits the decision; any other
/// text commits one notification.
pub struct Scripted {
    store: Arc<Store>,
    workspace: String,
    approvals: Approvals,
    interrupted: AtomicBool,
    /// Every answer a turn received.
    pub answers: Mutex<Vec<Answer>>,
    /// A store that stands for a shared group store and the group's id
    /// there: when set, every session's group is that one (as for a
    /// member that joined a group whose lead runs elsewhere).
    pub shared_group: Mutex<Option<(Arc<Store>, String)>>,
}

fn failed(e: impl std::fmt::Display) -> BackendError {
    BackendError::Failed(e.to_string())
}

impl Scripted {
    fn commit(&self, session: &str, kind: EventKind, on: Sink<'_>) -> Result<u64, BackendError> {
        let seq = self.store.append(session, kind).map_err(failed)?;
        on(Signal::Committed(seq));
        Ok(seq)
    }

    fn ask(&self, session: &str, on: Sink<'_>) -> Result<(), BackendError> {
        let request = PermissionRequest {
            call_id: CALL.into(),
            tool: "shell".into(),
            kind: PermissionKind::Command,
            command: Some("rm -rf build".into()),
            path: None,
            diff: None,
            reason: "the approval mode is untrusted".into(),
            model_reason: None,
            approval: "untrusted".into(),
            sandbox: "workspace-write".into(),
            mcp: None,
            plan: None,
        };
        self.commit(session, EventKind::PermissionRequested(request), on)?;
        let stop = || self.interrupted.load(Ordering::SeqCst);
        let answer = self.approvals.wait(session, CALL, stop);
        let decided = match &answer {
            Some(Answer::Allow) | Some(Answer::Always) => EventKind::PermissionGranted {
                call_id: CALL.into(),
                tool: "shell".into(),
                subject: "rm -rf build".into(),
                by: latch_kernel::DecidedBy::User,
                scope: if answer == Some(Answer::Always) {
                    latch_kernel::GrantScope::Session
                } else {
                    latch_kernel::GrantScope::Once
                },
                key: String::new(),
            },
            _ => EventKind::PermissionDenied {
                call_id: CALL.into(),
                tool: "shell".into(),
                subject: "rm -rf build".into(),
                by: latch_kernel::DecidedBy::User,
                reason: "denied".into(),
            },
        };
        if let Some(a) = answer {
            self.answers.lock().unwrap().push(a);
        }
        self.commit(session, decided, on)?;
        Ok(())
    }
}

impl Backend for Scripted {
    fn store(&self) -> &Arc<Store> {
        &self.store
    }
    fn workspace(&self) -> &str {
        &self.workspace
    }
    fn group_home(&self, session: &SessionRecord) -> latch_web::backend::GroupHome {
        let local = latch_web::backend::GroupHome::local(self.store.clone(), session);
        match self.shared_group.lock().unwrap().clone() {
            Some((shared, root)) => latch_web::backend::GroupHome {
                port: shared,
                root,
                shared: true,
            },
            None => local,
        }
    }
    fn create_session(&self) -> Result<SessionRecord, BackendError> {
        self.store
            .create_session(
                &self.workspace,
                None,
                &ModelProfile::with_defaults("openai", "scripted"),
            )
            .map_err(failed)
    }
    fn run_turn(&self, session: &str, text: &str, on: Sink<'_>) -> Result<(), BackendError> {
        let run = EventKind::RunStarted {
            mode: "web".into(),
            context: None,
        };
        self.commit(session, run, on)?;
        if text == "ask" {
            self.ask(session, on)?;
        } else {
            let note = EventKind::NotificationDelivered {
                source: "scripted".into(),
                text: text.into(),
            };
            self.commit(session, note, on)?;
        }
        let end = EventKind::RunFinished {
            outcome: "completed".into(),
        };
        self.commit(session, end, on)?;
        Ok(())
    }
    fn resume(&self, _: &str, _: Sink<'_>) -> Result<usize, BackendError> {
        Ok(0)
    }
    fn compact(&self, _: &str, _: Sink<'_>) -> Result<usize, BackendError> {
        Ok(0)
    }
    fn context_report(&self, _: &str) -> Result<ContextReport, BackendError> {
        Err(BackendError::BadRequest("no engine in these tests".into()))
    }
    fn recall(&self, _: &str, _: &str, _: u32) -> Result<Vec<Event>, BackendError> {
        Ok(Vec::new())
    }
    fn interrupt(&self, _: &str) -> Result<(), BackendError> {
        self.interrupted.store(true, Ordering::SeqCst);
        Ok(())
    }
    fn approvals(&self) -> &Approvals {
        &self.approvals
    }
}

/// A router over a [`Scripted`] backend in a temporary store.
pub struct Server {
    /// The router (cloned for every request).
    pub router: Router,
    /// The backend behind it.
    pub backend: Arc<Scripted>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// A server with `config` applied to the defaults.
    pub fn new(config: impl FnOnce(&mut WebConfig)) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path().join("latch.db")).unwrap());
        let backend = Arc::new(Scripted {
            store,
            workspace: dir.path().display().to_string(),
            approvals: Approvals::new(),
            interrupted: AtomicBool::new(false),
            answers: Mutex::new(Vec::new()),
            shared_group: Mutex::new(None),
        });
        let mut web = WebConfig::new(TOKEN);
        config(&mut web);
        Server {
            router: latch_web::router(backend.clone(), web),
            backend,
            _dir: dir,
        }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.backend.store
    }

    /// A new session, straight in the store.
    pub fn session(&self) -> String {
        self.backend.create_session().unwrap().id
    }

    /// Send `request` through the router.
    pub async fn send(&self, request: Request<Body>) -> Response<Body> {
        self.router.clone().oneshot(request).await.unwrap()
    }

    /// Send `request` and read its whole body as JSON.
    pub async fn json(&self, request: Request<Body>) -> (u16, Value) {
        let response = self.send(request).await;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// Start the turn `text` in `session` as the page does.
    pub async fn start_turn(&self, session: &str, text: &str) {
        let body = serde_json::json!({ "text": text }).to_string();
        let (status, body) = self
            .json(page(post(
                &format!("/api/sessions/{session}/messages"),
                body,
            )))
            .await;
        assert_eq!(status, 202, "{body}");
    }

    /// Wait until `session` shows the permission request waiting.
    pub async fn until_asked(&self, session: &str) {
        let started = Instant::now();
        loop {
            let (_, state) = self
                .json(page(get(&format!("/api/sessions/{session}"))))
                .await;
            if state["state"]["permission"]["call_id"] == CALL {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the request never waited: {state}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A request builder for `method` `uri` with the page's `Host`.
fn request(method: &str, uri: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(uri)
        .header("host", HOST)
}

/// `GET uri` with the right Host and nothing else.
pub fn get(uri: &str) -> Request<Body> {
    request("GET", uri).body(Body::empty()).unwrap()
}

/// `POST uri` with a JSON body, the right Host and nothing else.
pub fn post(uri: &str, body: String) -> Request<Body> {
    request("POST", uri)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap()
}

/// `request` as the page sends it: the bearer token and, for a POST, its
/// own origin.
pub fn page(mut request: Request<Body>) -> Request<Body> {
    let h = request.headers_mut();
    h.insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    if request.method() == "POST" {
        request
            .headers_mut()
            .insert("origin", ORIGIN.parse().unwrap());
    }
    request
}

/// `request` with `name: value` set (replacing any).
pub fn with(mut request: Request<Body>, name: &'static str, value: &str) -> Request<Body> {
    request.headers_mut().insert(name, value.parse().unwrap());
    request
}

/// Read an event stream's body until `done` holds for what arrived, or it
/// ends, or 10 s pass; returns what arrived.
pub async fn read_stream(response: Response<Body>, done: impl Fn(&str) -> bool) -> String {
    let mut body = response.into_body();
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done(&text) {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    text.push_str(&String::from_utf8_lossy(data));
                }
            }
            _ => break,
        }
    }
    text
}
