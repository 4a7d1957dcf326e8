//! Skills through the agent loop, on the real store, the embedded
//! ContinuityEngine and the local wire-format server: the capped skill list
//! reaches the model as an extension source (never in the system prompt or
//! the tool schemas), `load_skill` answers are ordinary durable tool
//! results, and a resumed session replays the loaded body from the log even
//! after the `SKILL.md` changed on disk.

use latch::agent::extended::{ExtendedTools, skill_source};
use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentOptions};
use latch_engine_sdk::types::*;
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use latch_tools::skills;
use std::path::Path;
use std::sync::Arc;

use super::common::scripted_agent;

/// An agent of `session` with the standard tools, `load_skill` over the
/// skills discovered in `ws` now, and their list as an extension source.
fn agent(ws: &Path, store: &Arc<Store>, session: &SessionRecord, server: &FakeServer) -> Agent {
    let found = skills::discover(ws, None);
    assert!(found.warnings.is_empty(), "{:?}", found.warnings);
    let catalog = skills::catalog(&found.skills, 5_000, session.model.estimator);
    let ctx = latch_tools::ToolContext::new(store.clone(), session.id.clone(), ws).unwrap();
    let tools = ExtendedTools::new(
        Box::new(StandardTools::new(ctx)),
        found.skills,
        session.model.estimator,
        None,
    );
    scripted_agent(
        store,
        session,
        ws,
        server,
        Box::new(tools),
        AgentOptions {
            mode: "run".into(),
            max_tokens: 4_096,
            ..AgentOptions::default()
        },
    )
    .with_extensions(skill_source(&catalog).into_iter().collect())
}

#[test]
fn a_loaded_skill_body_is_durable_and_replayed_on_resume_after_the_file_changed() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let skill_dir = ws.join(".latch/skills/deploy");
    std::fs::create_dir_all(&skill_dir).unwrap();
    let skill_md = skill_dir.join("SKILL.md");
    std::fs::write(
        &skill_md,
        "---\nname: deploy\ndescription: Deploy the service to staging safely.\n---\n\
         # Deploy\nORIGINAL-STEP: run ./deploy.sh --staging first.\n",
    )
    .unwrap();
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = io
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call("load_skill", r#"{"name":"deploy"}"#),
            ScriptedTurn::text("Loaded the deploy skill."),
            ScriptedTurn::text("Still following it."),
        ])))
        .unwrap();
    let store = Arc::new(Store::open(ws.join(".latch/latch.db")).unwrap());
    let session = store
        .create_session(
            &ws.display().to_string(),
            None,
            &ModelProfile::with_defaults("anthropic", "test-model"),
        )
        .unwrap();

    let mut first = agent(&ws, &store, &session, &server);
    let system = first.next_request("x").unwrap().system_prompt;
    assert!(
        !system.contains("deploy"),
        "the system prompt stays session-independent"
    );
    first.run_turn("deploy it", &mut |_| {}).unwrap();
    drop(first);

    let requests = server.requests();
    let body0 = requests[0].body.to_string();
    assert!(
        body0.contains("Deploy the service to staging safely."),
        "the skill list is in the first request"
    );
    assert!(
        !body0.contains("ORIGINAL-STEP"),
        "bodies enter only through load_skill"
    );
    let tools = requests[0].body["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "load_skill"));
    assert!(
        !requests[0].body["system"].to_string().contains("deploy"),
        "the list is not in the system field"
    );
    let loaded: Vec<ToolResult> = store
        .events(&session.id, 0, u64::MAX, 10_000)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ToolResult(r) if r.name == "load_skill" => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(loaded.len(), 1);
    assert!(!loaded[0].is_error, "{}", loaded[0].content);
    assert!(loaded[0].content.contains("ORIGINAL-STEP"));
    assert!(requests[1].body.to_string().contains("ORIGINAL-STEP"));

    // The file changes; a resumed session still shows what was loaded.
    std::fs::write(
        &skill_md,
        "---\nname: deploy\ndescription: Deploy the service to staging safely.\n---\n\
         # Deploy\nCHANGED-STEP: something else.\n",
    )
    .unwrap();
    let mut resumed = agent(&ws, &store, &session, &server);
    resumed.resume(&mut |_| {}).unwrap();
    resumed.run_turn("keep going", &mut |_| {}).unwrap();
    let last = server.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("ORIGINAL-STEP"),
        "the loaded body is replayed from the log"
    );
    assert!(
        !last.contains("CHANGED-STEP"),
        "the changed file is not read behind the log"
    );
    drop(resumed);
    io.block_on(server.shutdown());
}
