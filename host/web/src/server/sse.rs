//! `GET /api/sessions/{id}/events`: the session's event stream.
//!
//! Every committed event goes out as `event: event` with `id: <seq>`;
//! transient messages (`delta`: streamed text, reasoning reported, retries;
//! `turn`: a command receipt's outcome) go out without an id. A client that
//! reconnects with `Last-Event-ID` (or `?after=` for polyfills) gets every
//! committed event after it, then live ones, with no gap and no duplicate.
//! One more than [`super::WebConfig::snapshot_after`] events behind gets one
//! `event: snapshot` (`id:` its seq) carrying the reducers' state at that
//! seq instead. Keep-alive comments go out at the configured interval.
//!
//! Like every `/api/` route the stream needs `Authorization: Bearer`; the
//! page reads it with `fetch`, which can set the header (`EventSource`
//! cannot), and reconnects itself with `Last-Event-ID`. Event data goes
//! through [`crate::redact`]: no reasoning text leaves. A session deleted
//! from history is refused (404), and an open stream of it ends with
//! `event: deleted`. When the session's agent group lives on a shared
//! store, `event: group` (no id) says the group moved (woken by the
//! store's notifications), so the page reads the GROUP block again.

use super::AppState;
use super::api::{ApiError, deleted, known};
use crate::hub::Out;
use crate::{log, redact, view};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use latch_kernel::StoredEvent;
use latch_kernel::group::GroupError;
use serde_json::json;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc};

/// Where a client resumes: `Last-Event-ID`, else `?after=`, else 0.
fn resume_point(headers: &HeaderMap, q: &HashMap<String, String>) -> Result<u64, ApiError> {
    let raw = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| q.get("after").cloned());
    match raw {
        None => Ok(0),
        Some(r) if r.trim().is_empty() => Ok(0),
        Some(r) => r.trim().parse().map_err(|_| {
            ApiError(
                StatusCode::BAD_REQUEST,
                format!(
                    "Last-Event-ID / ?after= must be the seq of the last event received, not `{r}`"
                ),
            )
        }),
    }
}

/// A committed event as it goes out: through [`redact::stored`], the one
/// place event data is serialized for the web.
fn durable(e: &StoredEvent) -> Event {
    Event::default()
        .id(e.seq.to_string())
        .event("event")
        .data(redact::stored(e).to_string())
}

/// The handler.
pub async fn events(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    let after = resume_point(&headers, &q)?;
    {
        let st = state.clone();
        let id = id.clone();
        tokio::task::spawn_blocking(move || known(&st, &id).map(drop))
            .await
            .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    }
    // Subscribe before the catch-up read: what the read misses arrives here.
    let rx = state.hub.subscribe(&id);
    let (tx, out) = mpsc::channel::<Event>(256);
    tokio::spawn(pump(state.clone(), id, after, rx, tx));
    let stream = futures_util::stream::unfold(out, |mut out| async move {
        out.recv().await.map(|e| (Ok::<_, Infallible>(e), out))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(state.config.keep_alive)))
}

/// Send catch-up (or a snapshot) after `last`, then live messages, until
/// the client goes away.
async fn pump(
    state: Arc<AppState>,
    id: String,
    mut last: u64,
    mut rx: broadcast::Receiver<Arc<Out>>,
    tx: mpsc::Sender<Event>,
) {
    if catch_up(&state, &id, &mut last, &tx).await.is_err() {
        return;
    }
    watch_group(&state, &id, &tx);
    loop {
        let message = tokio::select! {
            m = rx.recv() => m,
            _ = tx.closed() => return,
        };
        let event = match message {
            Ok(m) => match &*m {
                Out::Event(e) if e.seq <= last => continue,
                Out::Event(e) => {
                    last = e.seq;
                    durable(e)
                }
                Out::Transient(name, data) => Event::default().event(*name).data(data.to_string()),
                Out::Deleted => {
                    let ApiError(_, error) = deleted(&id);
                    let data = json!({ "session": id, "error": error });
                    let _ = tx
                        .send(Event::default().event("deleted").data(data.to_string()))
                        .await;
                    return;
                }
            },
            Err(broadcast::error::RecvError::Lagged(_)) => {
                // Too slow for the channel: read what was missed from the store.
                if catch_up(&state, &id, &mut last, &tx).await.is_err() {
                    return;
                }
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if tx.send(event).await.is_err() {
            return;
        }
    }
}

/// On a shared group store: `event: group` each time the group's log moves,
/// until the client goes away.
fn watch_group(state: &Arc<AppState>, id: &str, tx: &mpsc::Sender<Event>) {
    let (st, id, tx) = (state.clone(), id.to_string(), tx.clone());
    tokio::task::spawn_blocking(move || {
        let Ok(record) = st.backend.store().session(&id) else {
            return;
        };
        let home = st.backend.group_home(&record);
        if !home.shared {
            return;
        }
        let last = |after: u64| {
            home.port
                .group_log(&home.root, after)
                .ok()
                .and_then(|l| l.last().map(|e| e.seq))
        };
        let mut seen = last(0).unwrap_or(0);
        let closed = || tx.is_closed();
        while !closed() {
            match home.port.wait_for_log(
                &home.root,
                seen,
                std::time::Duration::from_secs(10),
                &closed,
            ) {
                Ok(true) => {
                    seen = last(seen).unwrap_or(seen);
                    let data = json!({ "root": home.root, "seq": seen });
                    let event = Event::default().event("group").data(data.to_string());
                    if tx.blocking_send(event).is_err() {
                        return;
                    }
                }
                Ok(false) => {}
                Err(_) => std::thread::sleep(std::time::Duration::from_secs(1)),
            }
        }
    });
}

/// Send what the store holds after `last`: the events, or one snapshot
/// when there are more than the configured limit.
async fn catch_up(
    state: &Arc<AppState>,
    id: &str,
    last: &mut u64,
    tx: &mpsc::Sender<Event>,
) -> Result<(), ()> {
    let st = state.clone();
    let sid = id.to_string();
    let from = *last;
    let read = tokio::task::spawn_blocking(move || {
        let store = st.backend.store();
        let ws = st.backend.workspace();
        let events = log::catch_up(store, &sid, ws, from)?;
        if events.len() <= st.config.snapshot_after {
            return Ok::<_, GroupError>(Err(events));
        }
        let home = st.backend.group_home(&store.session(&sid)?);
        Ok(Ok(log::observe(
            store,
            &sid,
            ws,
            st.hub.live_since(&sid),
            &home,
        )?))
    })
    .await;
    match read {
        Ok(Ok(Err(events))) => {
            for e in &events {
                *last = e.seq;
                tx.send(durable(e)).await.map_err(drop)?;
            }
            Ok(())
        }
        Ok(Ok(Ok(observed))) => {
            let seq = observed.surface.durable().watermark.max(*last);
            *last = seq;
            let prices = state.backend.prices();
            let data = json!({ "seq": seq, "state": view::state(&observed, &prices) });
            let event = Event::default()
                .id(seq.to_string())
                .event("snapshot")
                .data(data.to_string());
            tx.send(event).await.map_err(drop)
        }
        Ok(Err(e)) => {
            let data = json!({ "error": format!("reading the store failed: {e}") });
            let _ = tx
                .send(Event::default().event("error").data(data.to_string()))
                .await;
            Err(())
        }
        Err(_) => Err(()),
    }
}
