//! Helpers shared by the end-to-end tests of this binary.

use latch::agent::{Agent, AgentOptions, ToolSet};
use latch::engine::runtime::EngineSource;
use latch::engine::{ComponentEngine, EngineRuntime, LoadedComponent, SandboxLimits};
use latch_engine_sdk::types::ModelProfile;
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_provider::fake::{FakeServer, Script};
use latch_provider::{Provider, ProviderConfig, ProviderKind, RetryPolicy};
use latch_tools::ToolContext;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The embedded ContinuityEngine, compiled once for the whole test binary.
pub fn continuity() -> Arc<LoadedComponent> {
    static RUNTIME: OnceLock<EngineRuntime> = OnceLock::new();
    static LOADED: OnceLock<Arc<LoadedComponent>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            RUNTIME
                .get_or_init(|| EngineRuntime::new(None).unwrap())
                .load(&EngineSource::Builtin("continuity".into()))
                .unwrap()
        })
        .clone()
}

/// One in-process session for tests that drive [`Agent`] directly: a
/// workspace holding `notes.txt`, the local wire-format server playing a
/// script, the real store file and a session on the Anthropic wire.
pub struct SessionRig {
    _dir: tempfile::TempDir,
    /// The workspace (canonical).
    pub ws: PathBuf,
    _io: tokio::runtime::Runtime,
    /// The scripted provider.
    pub server: FakeServer,
    /// The session's store (`.latch/latch.db` in the workspace).
    pub store: Arc<Store>,
    /// The session.
    pub session: SessionRecord,
}

impl SessionRig {
    /// A rig whose workspace's `notes.txt` holds `notes` and whose server
    /// plays what `turns` makes of the workspace's path.
    pub fn new(notes: &str, turns: impl FnOnce(&Path) -> Script) -> SessionRig {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        std::fs::write(ws.join("notes.txt"), notes).unwrap();
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = io.block_on(FakeServer::start(turns(&ws))).unwrap();
        let store = Arc::new(Store::open(ws.join(".latch/latch.db")).unwrap());
        let model = ModelProfile::with_defaults("anthropic", "test-model");
        let session = store
            .create_session(&ws.display().to_string(), None, &model)
            .unwrap();
        SessionRig {
            _dir: dir,
            ws,
            _io: io,
            server,
            store,
            session,
        }
    }

    /// The tool context of the session in its workspace.
    pub fn tool_context(&self) -> ToolContext {
        ToolContext::new(self.store.clone(), self.session.id.clone(), &self.ws).unwrap()
    }

    /// The session's agent on the embedded ContinuityEngine, talking to
    /// the scripted server with no retries.
    pub fn agent_with(&self, tools: Box<dyn ToolSet>, options: AgentOptions) -> Agent {
        scripted_agent(
            &self.store,
            &self.session,
            &self.ws,
            &self.server,
            tools,
            options,
        )
    }

    /// Every event of the session, in order.
    pub fn events(&self) -> Vec<EventKind> {
        self.store
            .events(&self.session.id, 0, u64::MAX, 100_000)
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect()
    }
}

/// `session`'s agent in `ws` on the embedded ContinuityEngine, talking to
/// `server` on the Anthropic wire with no retries.
pub fn scripted_agent(
    store: &Arc<Store>,
    session: &SessionRecord,
    ws: &Path,
    server: &FakeServer,
    tools: Box<dyn ToolSet>,
    options: AgentOptions,
) -> Agent {
    let provider = Provider::new(ProviderConfig {
        base_url: Some(server.anthropic_base_url()),
        api_key: Some("k".into()),
        retry: RetryPolicy::none(),
        ..ProviderConfig::new(ProviderKind::Anthropic)
    })
    .unwrap();
    let engine = ComponentEngine::new(
        continuity(),
        SandboxLimits::default(),
        &session.id,
        session.model.clone(),
    );
    Agent::new(
        store.clone(),
        session.clone(),
        ws.to_path_buf(),
        Box::new(engine),
        provider,
        tools,
        options,
    )
    .unwrap()
}
