//! No reasoning text leaves the server: a session whose log holds
//! Anthropic thinking (in the clear) and an OpenAI reasoning item (summary
//! in the clear, encrypted content) as `provider_state`, read through
//! every body the page reads — the state, the event stream and its
//! snapshot.

use super::*;
use latch_kernel::{OpaqueBlock, OpaqueState};

const SECRETS: &[&str] = &[
    "SECRET THINKING",
    "SIGNATURE-BYTES",
    "SECRET SUMMARY",
    "ENCRYPTED-BLOB",
];

/// A session with an answer, its thinking, and a reasoning item.
fn session_with_reasoning(server: &Server) -> (String, u64) {
    let id = server.session();
    let store = server.store();
    store
        .append(&id, EventKind::user_text("plan the fix"))
        .unwrap();
    store
        .append(&id, EventKind::assistant_text("Here is the plan."))
        .unwrap();
    store
        .append(
            &id,
            EventKind::ProviderState(OpaqueState {
                wire: "anthropic".into(),
                blocks: vec![OpaqueBlock {
                    before_part: 0,
                    json: r#"{"type":"thinking","thinking":"SECRET THINKING about the fix","signature":"SIGNATURE-BYTES"}"#
                        .into(),
                }],
                call_ids: vec![],
            }),
        )
        .unwrap();
    let last = store
        .append(
            &id,
            EventKind::ProviderState(OpaqueState {
                wire: "openai-responses".into(),
                blocks: vec![OpaqueBlock {
                    before_part: 1,
                    json: r#"{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"SECRET SUMMARY"}],"encrypted_content":"ENCRYPTED-BLOB"}"#
                        .into(),
                }],
                call_ids: vec![],
            }),
        )
        .unwrap();
    // The store holds it, so the checks below can fail.
    let stored: String = store
        .all_events(&id)
        .unwrap()
        .iter()
        .map(|e| e.kind.to_json())
        .collect();
    for s in SECRETS {
        assert!(stored.contains(s), "{s} is not in the store");
    }
    (id, last)
}

fn assert_clean(what: &str, body: &str) {
    for s in SECRETS {
        assert!(!body.contains(s), "{what} carries `{s}`:\n{body}");
    }
}

#[tokio::test]
async fn the_state_and_the_stream_carry_no_reasoning_text() {
    let server = Server::new(|_| {});
    let (id, last) = session_with_reasoning(&server);

    let (status, state) = server.json(page(get(&format!("/api/sessions/{id}")))).await;
    assert_eq!(status, 200);
    assert_clean("GET /api/sessions/{id}", &state.to_string());
    assert!(state.to_string().contains("Here is the plan."));

    // The stream sends every event, the reasoning ones as "reported".
    let response = server
        .send(page(get(&format!("/api/sessions/{id}/events"))))
        .await;
    assert_eq!(response.status(), 200);
    let body = read_stream(response, |t| {
        t.contains(&format!("id: {last}\n")) && t.ends_with("\n\n")
    })
    .await;
    assert!(body.contains(&format!("id: {last}\n")), "{body}");
    assert_clean("the event stream", &body);
    let frames: Vec<Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let reported: Vec<&Value> = frames
        .iter()
        .filter(|f| f["event"]["kind"] == "provider_state")
        .collect();
    assert_eq!(reported.len(), 2, "{body}");
    assert_eq!(reported[0]["event"]["data"]["reasoning"], "reported");
    assert_eq!(reported[0]["event"]["data"]["wire"], "anthropic");
    assert!(body.contains("Here is the plan."));
}

#[tokio::test]
async fn a_snapshot_carries_no_reasoning_text() {
    let server = Server::new(|c| c.snapshot_after = 1);
    let (id, last) = session_with_reasoning(&server);
    let response = server
        .send(page(get(&format!("/api/sessions/{id}/events"))))
        .await;
    let body = read_stream(response, |t| {
        t.contains("event: snapshot") && t.ends_with("\n\n")
    })
    .await;
    assert!(body.contains("event: snapshot"), "{body}");
    assert!(body.contains(&format!("id: {last}\n")), "{body}");
    assert_clean("the snapshot", &body);
}
