//! Shared fixtures: a real temporary workspace, a real SQLite store on a
//! temporary file, one session, and helpers to call tools and read events.

#![allow(dead_code)]

use latch_engine_sdk::types::{EstimatorProfile, ModelProfile, ToolCall};
use latch_kernel::{EventKind, Store, StoredEvent};
use latch_tools::{ToolContext, ToolOutcome, execute};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A workspace, a store outside it, a session and a tool context.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub store: Arc<Store>,
    pub session: String,
    pub ctx: ToolContext,
}

pub fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = std::fs::canonicalize(&ws).unwrap();
    let store = Arc::new(Store::open(dir.path().join("store").join("latch.db")).unwrap());
    let profile = ModelProfile {
        provider: "openai".into(),
        model: "test-model".into(),
        context_window_tokens: 256_000,
        reserve_tokens: 16_000,
        estimator: EstimatorProfile::Openai,
    };
    let session = store
        .create_session(ws.to_str().unwrap(), None, &profile)
        .unwrap()
        .id;
    let ctx = ToolContext::new(Arc::clone(&store), &session, &ws)
        .unwrap()
        .with_default_timeout(Duration::from_secs(20));
    Env {
        dir,
        ws,
        store,
        session,
        ctx,
    }
}

impl Env {
    /// Call a tool with JSON arguments.
    pub fn call(&self, name: &str, args: Value) -> ToolOutcome {
        self.call_raw(name, &args.to_string())
    }

    /// Call a tool with raw argument text.
    pub fn call_raw(&self, name: &str, arguments_json: &str) -> ToolOutcome {
        static N: AtomicU64 = AtomicU64::new(0);
        execute(
            &self.ctx,
            &ToolCall {
                id: format!("call-{}", N.fetch_add(1, Ordering::Relaxed)),
                name: name.to_string(),
                arguments_json: arguments_json.to_string(),
            },
        )
    }

    /// Every event of the session, ascending.
    pub fn events(&self) -> Vec<StoredEvent> {
        self.store
            .events(&self.session, 0, u64::MAX, 100_000)
            .unwrap()
    }

    /// Events of the session matching `pred`.
    pub fn find(&self, pred: impl Fn(&EventKind) -> bool) -> Vec<StoredEvent> {
        self.events()
            .into_iter()
            .filter(|e| pred(&e.kind))
            .collect()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.ws.join(rel)
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub fn generation(&self) -> u64 {
        self.store.generation_of(&self.session).unwrap()
    }

    /// Wait (bounded) until the store holds an event matching `pred`.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&EventKind) -> bool) -> StoredEvent {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(e) = self.find(&pred).into_iter().next() {
                return e;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

pub fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

#[track_caller]
pub fn assert_ok(o: &ToolOutcome) {
    assert!(!o.result.is_error, "unexpected error: {}", o.result.content);
}

#[track_caller]
pub fn assert_err(o: &ToolOutcome, needle: &str) {
    assert!(
        o.result.is_error,
        "expected an error, got: {}",
        o.result.content
    );
    assert!(
        o.result.content.contains(needle),
        "expected {needle:?} in: {}",
        o.result.content
    );
}
