//! Bounded reads through the agent loop over real HTTP: `read_file` on a
//! large file without a newline gives the provider one bounded page that
//! says how to read on; a tool output too long to show whole is stored as
//! an artifact the model reads back page by page with `read_artifact`, and
//! an id that is not the session's gets an error naming it.

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

/// The 64 hex digits after `marker` in `text`.
fn sha_after(text: &str, marker: &str) -> Option<String> {
    let at = text.find(marker)? + marker.len();
    let sha: String = text[at..].chars().take(64).collect();
    (sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit())).then_some(sha)
}

/// The number after `continue with offset=` in `text`.
fn next_offset(text: &str) -> Option<u64> {
    let at = text.find("continue with offset=")? + "continue with offset=".len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()
}

#[test]
fn a_long_tool_output_is_stored_as_an_artifact_and_read_back_page_by_page() {
    const UNKNOWN: &str = "0000000000000000000000000000000000000000000000000000000000000000";
    // The model reacts to each result: the artifact a long output names,
    // then every page until the last, then an id that is not the session's.
    let script = Script::new([ScriptedTurn::tool_call(
        "shell",
        r#"{"command":"seq 1 12000"}"#,
    )])
    .with_responder(|request| {
        let results = tool_results(&request.body);
        let last = results.last().cloned().unwrap_or_default();
        let call = |args: Value| ScriptedTurn::tool_call("read_artifact", args.to_string()).into();
        if let Some(sha) = sha_after(&last, "the whole output is artifact ") {
            return call(serde_json::json!({ "id": sha }));
        }
        if let Some(sha) = sha_after(&last, " of artifact ") {
            return match next_offset(&last) {
                Some(offset) => call(serde_json::json!({ "id": sha, "offset": offset })),
                None => call(serde_json::json!({ "id": UNKNOWN })),
            };
        }
        ScriptedTurn::text("Read it all.").into()
    });
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
    h.agent
        .run_turn("Count to 12000 and read the output.", &mut |_| {})
        .unwrap();
    // Each call's result as the request right after it carried it (older
    // results may be elided in later requests).
    let results: Vec<String> = h
        .server
        .as_ref()
        .unwrap()
        .requests()
        .iter()
        .skip(1)
        .map(|r| tool_results(&r.body).pop().unwrap())
        .collect();
    // The shell result, at least three pages, the refusal.
    assert!(results.len() >= 5, "{} results", results.len());
    for r in &results {
        assert!(r.len() <= READ_MAX_BYTES, "a result of {} bytes", r.len());
        assert!(estimate(EstimatorProfile::Openai, r) <= READ_MAX_TOKENS);
    }
    let sha = sha_after(&results[0], "the whole output is artifact ").expect("the artifact");
    assert!(results[0].contains("read_artifact"), "{}", results[0]);
    // The pages, in order, are the stored output line for line.
    let stored = String::from_utf8(h.store.artifact_bytes(&sha).unwrap().unwrap()).unwrap();
    assert!(stored.contains("\n12000"), "the whole output is stored");
    let pages = &results[1..results.len() - 1];
    let mut lines = Vec::new();
    for page in pages {
        assert!(page.contains(&format!(" of artifact {sha} (")), "{page}");
        for l in page.lines().filter(|l| !l.starts_with('[')) {
            let (n, text) = l.split_once('\t').expect("a numbered line");
            assert_eq!(n.trim().parse::<usize>().unwrap(), lines.len() + 1);
            lines.push(text.to_string());
        }
    }
    assert_eq!(lines, stored.lines().collect::<Vec<_>>());
    assert!(next_offset(pages.last().unwrap()).is_none());
    // An id that is no artifact of this session: a clear error naming it.
    let refusal = results.last().unwrap();
    assert!(
        refusal.contains(&format!(
            "artifact `{UNKNOWN}` is not an artifact of this session"
        )),
        "{refusal}"
    );
    h.io.block_on(h.server.take().unwrap().shutdown());
}
