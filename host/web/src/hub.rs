//! Per-session fan-out: committed events in sequence order and transient
//! signals, to every SSE subscriber of the session.
//!
//! A feed tails the store: when a command reports a commit, every feed with
//! subscribers reads its session's reducer input after its own watermark
//! and broadcasts it. Subscribers therefore see every committed event once,
//! in order, whoever committed it; one that falls behind the channel reads
//! the store again. A session deleted from history (tombstoned, or a
//! descendant of a tombstoned one) ends its streams at the next commit.
//! Nothing here is durable.

use crate::log;
use latch_kernel::{Store, StoredEvent};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// Capacity of a feed's channel before slow subscribers lag.
const CAPACITY: usize = 1_024;

/// One message of a feed.
#[derive(Clone, Debug)]
pub enum Out {
    /// A committed event (sent with `id: <seq>`), boxed: events are large.
    Event(Box<StoredEvent>),
    /// A transient message (sent without an id): its SSE event name and
    /// JSON data.
    Transient(&'static str, Value),
    /// The session was deleted from history: streams of it end.
    Deleted,
}

/// One session's feed.
pub struct Feed {
    tx: broadcast::Sender<Arc<Out>>,
    watermark: Mutex<u64>,
}

/// All feeds of one workspace.
pub struct Hub {
    store: Arc<Store>,
    workspace: String,
    feeds: Mutex<HashMap<String, Arc<Feed>>>,
    live_since: Mutex<HashMap<String, u64>>,
}

impl Hub {
    /// The hub of `workspace` over `store`.
    pub fn new(store: Arc<Store>, workspace: impl Into<String>) -> Hub {
        Hub {
            store,
            workspace: workspace.into(),
            feeds: Mutex::new(HashMap::new()),
            live_since: Mutex::new(HashMap::new()),
        }
    }

    fn feed(&self, session: &str) -> Arc<Feed> {
        let mut feeds = self.feeds.lock().unwrap_or_else(|p| p.into_inner());
        feeds
            .entry(session.to_string())
            .or_insert_with(|| {
                let (tx, _) = broadcast::channel(CAPACITY);
                let start = self.store.latest_seq(session).unwrap_or(0);
                Arc::new(Feed {
                    tx,
                    watermark: Mutex::new(start),
                })
            })
            .clone()
    }

    /// Subscribe to `session`'s feed. Subscribe before reading the store
    /// for catch-up: every event the catch-up read misses is then
    /// broadcast to the receiver.
    pub fn subscribe(&self, session: &str) -> broadcast::Receiver<Arc<Out>> {
        self.feed(session).tx.subscribe()
    }

    /// Something was committed: every feed with subscribers broadcasts
    /// what its session's log gained (blocking; call off the async
    /// runtime's workers or accept a short store read).
    pub fn committed(&self) {
        let feeds: Vec<(String, Arc<Feed>)> = {
            let feeds = self.feeds.lock().unwrap_or_else(|p| p.into_inner());
            feeds
                .iter()
                .filter(|(_, f)| f.tx.receiver_count() > 0)
                .map(|(s, f)| (s.clone(), f.clone()))
                .collect()
        };
        for (session, feed) in feeds {
            let mut mark = feed.watermark.lock().unwrap_or_else(|p| p.into_inner());
            match log::catch_up(&self.store, &session, &self.workspace, *mark) {
                Ok(events) => {
                    for e in events {
                        *mark = e.seq;
                        let _ = feed.tx.send(Arc::new(Out::Event(Box::new(e))));
                    }
                }
                Err(e) => tracing::warn!("web feed of {session}: {e}"),
            }
            if self.store.is_hidden(&session).unwrap_or(false) {
                let _ = feed.tx.send(Arc::new(Out::Deleted));
            }
        }
    }

    /// Send a transient message to `session`'s subscribers.
    pub fn transient(&self, session: &str, name: &'static str, data: Value) {
        let _ = self
            .feed(session)
            .tx
            .send(Arc::new(Out::Transient(name, data)));
    }

    /// Record that this process starts driving `session` now (the first
    /// time only): runs opened later are live, earlier open ones are not.
    pub fn mark_live(&self, session: &str) {
        let seq = self.store.latest_seq(session).unwrap_or(0);
        self.live_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(session.to_string())
            .or_insert(seq);
    }

    /// Since when this process drives `session`, if it does.
    pub fn live_since(&self, session: &str) -> Option<u64> {
        self.live_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(session)
            .copied()
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The workspace key.
    pub fn workspace(&self) -> &str {
        &self.workspace
    }
}
