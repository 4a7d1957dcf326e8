//! Helpers shared by the integration tests.
#![allow(dead_code)]

use latch_engine_sdk::types::{ModelProfile, ToolResult};
use latch_kernel::{EventKind, StateOp, Store};
use std::path::PathBuf;
use std::sync::Arc;

pub fn model() -> ModelProfile {
    ModelProfile::with_defaults("anthropic", "test-model")
}

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub store: Arc<Store>,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path().join(".latch").join("latch.db")).unwrap());
        Fixture { dir, store }
    }

    pub fn db_path(&self) -> PathBuf {
        self.store.path().to_path_buf()
    }

    pub fn session(&self, workspace: &str) -> String {
        self.store
            .create_session(workspace, None, &model())
            .unwrap()
            .id
    }

    pub fn child(&self, workspace: &str, parent: &str) -> String {
        self.store
            .create_session(workspace, Some(parent), &model())
            .unwrap()
            .id
    }
}

pub fn op(op: StateOp) -> EventKind {
    EventKind::StateUpdate(op)
}

pub fn tool_result(name: &str, content: &str, is_error: bool) -> EventKind {
    EventKind::ToolResult(ToolResult {
        call_id: "call".into(),
        name: name.into(),
        content: content.into(),
        is_error,
        images: vec![],
    })
}
