//! Bounded reads through the agent loop over real HTTP: `read_file` on a
//! large file without a newline gives the provider one bounded page that
//! says how to read on.

use crate::agent::harness_with;
use latch::agent::AgentOptions;
use latch::engine::runtime::EngineSource;
use latch_engine_sdk::estimate;
use latch_engine_sdk::types::EstimatorProfile;
use latch_kernel::{READ_MAX_BYTES, READ_MAX_TOKENS};
use latch_provider::fake::{Script, ScriptedTurn, WireFormat};
use serde_json::Value;

/// The tool results of an OpenAI-compatible request body, in order.
pub(crate) fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn read_file_of_a_large_file_without_a_newline_reaches_the_provider_as_one_bounded_page() {
    let script = Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"huge.log"}"#),
        ScriptedTurn::text("It is one long line."),
    ]);
    let mut h = harness_with(
        WireFormat::OpenAi,
        EngineSource::Builtin("continuity".into()),
        script,
        |_| {},
        AgentOptions {
            mode: "run".into(),
            ..AgentOptions::default()
        },
    );
    let ws = std::path::PathBuf::from(h.store.session(&h.session).unwrap().workspace);
    // Text up front (not binary), then a sparse tail: 64 MiB, no newline.
    let len: u64 = 64 << 20;
    let file = std::fs::File::create(ws.join("huge.log")).unwrap();
    use std::io::Write;
    (&file).write_all(&[b'a'; 16 * 1024]).unwrap();
    file.set_len(len).unwrap();
    drop(file);

    h.agent
        .run_turn("What is in huge.log?", &mut |_| {})
        .unwrap();
    let requests = h.server.as_ref().unwrap().requests();
    assert_eq!(requests.len(), 2);
    let results = tool_results(&requests[1].body);
    assert_eq!(results.len(), 1, "{:?}", requests[1].body);
    let page = &results[0];
    assert!(
        page.len() <= READ_MAX_BYTES,
        "the page is {} bytes",
        page.len()
    );
    assert!(estimate(EstimatorProfile::Openai, page) <= READ_MAX_TOKENS);
    assert!(page.starts_with("     1\taaaa"), "{}", &page[..40]);
    // It says what was left out and how to read on.
    assert!(
        page.contains(&format!("line 1 is {len} bytes long; only its first")),
        "{}",
        &page[page.len().saturating_sub(400)..]
    );
    assert!(
        page.contains("tail -c +") && page.contains("huge.log | head -c"),
        "{}",
        &page[page.len().saturating_sub(400)..]
    );
    h.io.block_on(h.server.take().unwrap().shutdown());
}
