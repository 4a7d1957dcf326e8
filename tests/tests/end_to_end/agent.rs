//! The agent loop's port pins, end to end through the local wire-format
//! server: the provider sees exactly the view the configured engine returned
//! (golden bodies rebuilt from the recorded views), a replacement engine gets
//! no default-engine context behind its back, and a 50-turn session's cache
//! figures.

use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentOptions};
use latch::engine::runtime::EngineSource;
use latch::engine::{ComponentEngine, EngineRuntime, Materialization, Observed, SandboxLimits};
use latch_engine_sdk::types::*;
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn, WireFormat};
use latch_provider::{
    CacheHints, NoMedia, Provider, ProviderConfig, ProviderKind, ProviderRequest, RetryPolicy,
    ToolSchema,
};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub(crate) struct Harness {
    _dir: tempfile::TempDir,
    pub(crate) io: tokio::runtime::Runtime,
    pub(crate) server: Option<FakeServer>,
    pub(crate) store: Arc<Store>,
    pub(crate) agent: Agent,
    provider: Provider,
    pub(crate) views: Arc<Mutex<Vec<ContextView>>>,
    pub(crate) session: String,
}

fn harness(format: WireFormat, engine: EngineSource, script: Script) -> Harness {
    harness_with(
        format,
        engine,
        script,
        |_| {},
        AgentOptions {
            mode: "run".into(),
            ..AgentOptions::default()
        },
    )
}

/// A harness whose model profile `adjust` changes (e.g. a small window) and
/// whose agent runs with `options`.
pub(crate) fn harness_with(
    format: WireFormat,
    engine: EngineSource,
    script: Script,
    adjust: impl FnOnce(&mut ModelProfile),
    options: AgentOptions,
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    std::fs::write(ws.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = io.block_on(FakeServer::start(script)).unwrap();
    let (kind, base) = match format {
        WireFormat::Anthropic => (ProviderKind::Anthropic, server.anthropic_base_url()),
        WireFormat::OpenAi => (ProviderKind::OpenAiCompatible, server.openai_base_url()),
        WireFormat::Responses => (ProviderKind::OpenAi, server.openai_base_url()),
    };
    let config = ProviderConfig {
        base_url: Some(base),
        api_key: Some("k".into()),
        retry: RetryPolicy::none(),
        ..ProviderConfig::new(kind)
    };
    let provider = Provider::new(config).unwrap();
    let store = Arc::new(Store::open(ws.join("latch.db")).unwrap());
    let mut model = ModelProfile::with_defaults(kind.name(), "test-model");
    adjust(&mut model);
    let session = store
        .create_session(&ws.display().to_string(), None, &model)
        .unwrap();
    let rt = EngineRuntime::new(None).unwrap();
    let loaded = rt.load(&engine).unwrap();
    let views = Arc::new(Mutex::new(Vec::new()));
    let recorded = views.clone();
    let engine = Observed::new(
        Box::new(ComponentEngine::new(
            loaded,
            SandboxLimits::default(),
            &session.id,
            model,
        )),
        move |m| {
            if let Materialization::After(_, view) = m {
                recorded.lock().unwrap().push(view.clone());
            }
        },
    );
    let tools = latch_tools::ToolContext::new(store.clone(), session.id.clone(), &ws).unwrap();
    let id = session.id.clone();
    let agent = Agent::new(
        store.clone(),
        session,
        ws,
        Box::new(engine),
        provider.clone(),
        Box::new(StandardTools::new(tools)),
        options,
    )
    .unwrap();
    Harness {
        _dir: dir,
        io,
        server: Some(server),
        store,
        agent,
        provider,
        views,
        session: id,
    }
}

fn script() -> Script {
    Script::new([
        ScriptedTurn::tool_call("set_goal", r#"{"text":"summarize notes.txt"}"#),
        ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#),
        ScriptedTurn::text("The notes list alpha and beta."),
    ])
}

/// Rebuild each request body from the recorded view (kernel context in the
/// host's documented frame) and compare it with what the server received,
/// byte for byte (as JSON values).
fn assert_provider_saw_exactly_the_views(h: &Harness) {
    let requests = h.server.as_ref().unwrap().requests();
    let views = h.views.lock().unwrap();
    assert_eq!(
        requests.len(),
        views.len(),
        "one engine view per provider request"
    );
    let mut tools: Vec<ToolSchema> = latch_tools::schemas()
        .into_iter()
        .map(|s| ToolSchema {
            name: s.name,
            description: s.description,
            input_schema: s.input_schema,
        })
        .collect();
    tools.push(latch::agent::recall::schema());
    tools.push(latch::agent::plan::schema());
    for (i, (captured, view)) in requests.iter().zip(views.iter()).enumerate() {
        let request = ProviderRequest {
            model: "test-model".into(),
            system: view.system.clone(),
            tools: tools.clone(),
            messages: latch_engine_sdk::validate::framed(&view.messages),
            max_tokens: AgentOptions::default().max_tokens,
            cache_breakpoints: CacheHints::for_messages(&view.messages),
        };
        let expected = h.provider.request_body(&request, &NoMedia).unwrap();
        assert_eq!(
            captured.body, expected,
            "request {i} differs from the engine's view"
        );
    }
}

#[test]
fn provider_sees_exactly_the_default_engines_view_in_both_formats() {
    for format in [WireFormat::Anthropic, WireFormat::OpenAi] {
        let mut h = harness(format, EngineSource::Builtin("continuity".into()), script());
        let outcome = h
            .agent
            .run_turn("Summarize notes.txt", &mut |_| {})
            .unwrap();
        assert_eq!(outcome.steps, 3);
        assert_provider_saw_exactly_the_views(&h);
        // The default engine persisted its kernel context before sending.
        let events = h.store.events(&h.session, 0, u64::MAX, 10_000).unwrap();
        assert!(
            events
                .iter()
                .any(|e| matches!(e.kind, EventKind::KernelContext(_)))
        );
        h.io.block_on(h.server.take().unwrap().shutdown());
    }
}

#[test]
fn a_replacement_engine_gets_no_default_engine_context() {
    let window = EngineSource::Path(PathBuf::from(latch_tests::WINDOW_WASM));
    let mut h = harness(WireFormat::Anthropic, window, script());
    h.agent
        .run_turn("Summarize notes.txt", &mut |_| {})
        .unwrap();
    assert_provider_saw_exactly_the_views(&h);
    let events = h.store.events(&h.session, 0, u64::MAX, 10_000).unwrap();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::KernelContext(_))),
        "the host appended no kernel context of its own for the window engine"
    );
    for view in h.views.lock().unwrap().iter() {
        assert!(view.messages.iter().all(|m| m.kernel.is_none()));
        assert!(view.report.engine.starts_with("window"));
    }
    h.io.block_on(h.server.take().unwrap().shutdown());
}

#[test]
fn fifty_turn_session_cache_figures() {
    let mut steps = Vec::new();
    for i in 0..50 {
        steps.push(ScriptedTurn::tool_call(
            "read_file",
            r#"{"path":"notes.txt"}"#,
        ));
        steps.push(ScriptedTurn::text(format!(
            "Turn {i}: the notes list alpha and beta."
        )));
    }
    let mut h = harness(
        WireFormat::Anthropic,
        EngineSource::Builtin("continuity".into()),
        Script::new(steps),
    );
    let mut cacheability = Vec::new();
    for i in 0..50 {
        let out = h
            .agent
            .run_turn(
                &format!("Turn {i}: read notes.txt again and summarize it."),
                &mut |_| {},
            )
            .unwrap();
        let r = out.report.unwrap();
        cacheability.push(r.common_prefix_tokens as f64 / r.request_tokens as f64);
    }
    let served = h.server.as_ref().unwrap().served();
    let (read, total): (u64, u64) = served.iter().skip(1).fold((0, 0), |(r, t), s| {
        let read = s.usage.cache_read_tokens.unwrap_or(0);
        let input =
            s.usage.input_tokens.unwrap_or(0) + s.usage.cache_creation_tokens.unwrap_or(0) + read;
        (r + read, t + input)
    });
    let hit_rate = read as f64 / total as f64;
    let mean_cacheability =
        cacheability.iter().skip(1).sum::<f64>() / (cacheability.len() - 1) as f64;
    println!(
        "figure 50-turn session: estimated cacheability {mean_cacheability:.3}, measured provider hit rate {hit_rate:.3}"
    );
    assert!(
        mean_cacheability >= 0.9,
        "estimated cacheability {mean_cacheability}"
    );
    assert!(hit_rate >= 0.8, "measured hit rate {hit_rate}");
    h.io.block_on(h.server.take().unwrap().shutdown());
}
