//! Errors: refusals quote the provider's message, a cut stream is
//! `Interrupted` with no partial turn, and a malformed request is refused
//! the way the real services refuse it.

use crate::common;

use common::*;
use latch_engine_sdk::types::Role;
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedFailure, ScriptedTurn};
use latch_provider::{NoMedia, ProviderError, ProviderKind, StreamEvent};

#[tokio::test]
async fn unauthorized_quotes_the_provider_and_names_the_key() {
    let cases = [
        (
            ProviderKind::Anthropic,
            "anthropic rejected the request (401 Unauthorized): invalid x-api-key — set ANTHROPIC_API_KEY or [provider] api_key",
        ),
        (
            ProviderKind::OpenAi,
            "openai rejected the request (401 Unauthorized): Incorrect API key provided. — set OPENAI_API_KEY or [provider] api_key",
        ),
    ];
    for (kind, expected) in cases {
        let server =
            FakeServer::start(Script::new([ScriptedTurn::text("never")]).expect_api_key("right"))
                .await
                .unwrap();
        let provider = provider_with(kind, &server, fast_retry(4), Some("wrong"));
        let err = provider
            .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
            .await
            .unwrap_err();
        assert!(
            matches!(err, ProviderError::Rejected { status: 401, .. }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), expected);
        assert_eq!(server.requests().len(), 1, "a refusal is not retried");
        assert_eq!(server.remaining(), 1, "no turn was consumed");
        server.shutdown().await;
    }
}

#[tokio::test]
async fn bad_request_and_not_found_quote_the_body() {
    for kind in KINDS {
        let server = FakeServer::start(Script::new([
            ScriptedFailure::Reject {
                status: 400,
                message: "max_tokens: 1000000 > 64000, which is the maximum".into(),
            },
            ScriptedFailure::Reject {
                status: 404,
                message: "model: golden-model".into(),
            },
        ]))
        .await
        .unwrap();
        let provider = provider(kind, &server);
        let err = provider
            .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{kind} rejected the request (400 Bad Request): max_tokens: 1000000 > 64000, which is the maximum"
            )
        );
        let err = provider
            .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("(404 Not Found): model: golden-model"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "check the model name and the base URL ({})",
                provider.base_url()
            )),
            "{text}"
        );
        server.shutdown().await;
    }
}

#[tokio::test]
async fn a_cut_stream_is_retried_or_interrupted_and_never_returns_half_a_turn() {
    for kind in KINDS {
        for abort in [true, false] {
            let turn = ScriptedTurn::text("The fix is to change the minus into a plus.")
                .with_tool_call("shell", r#"{"cmd":"cargo test"}"#);
            let mut script = Script::new([ScriptedFailure::CutStream {
                turn: turn.clone(),
                after_events: 5,
                abort,
            }]);
            // Lost mid-stream, the request is retried: the retry gets the
            // whole turn.
            script.push(turn);
            let server = FakeServer::start(script).await.unwrap();
            let provider = provider(kind, &server);
            let mut events = Events::default();
            let outcome = provider
                .complete(&request(vec![user("hi")]), &NoMedia, &mut |e| {
                    events.0.push(e)
                })
                .await;
            assert!(
                events
                    .0
                    .iter()
                    .any(|e| matches!(e, StreamEvent::TextDelta(_))),
                "{kind}: some deltas streamed before the cut"
            );
            if abort {
                // A connection lost mid-stream is retried as configured,
                // and the turn is the retry's whole one, never the half.
                let turn = outcome.unwrap_or_else(|e| panic!("{kind}: {e:?}"));
                assert_eq!(turn.text(), "The fix is to change the minus into a plus.");
                assert_eq!(events.text_since_last_retry(), turn.text());
                assert_eq!(events.retries().len(), 1, "{kind}");
                let first_reason = events.0.iter().find_map(|e| match e {
                    StreamEvent::Retrying { reason, .. } => Some(reason.clone()),
                    _ => None,
                });
                assert!(
                    first_reason
                        .as_deref()
                        .is_some_and(|r| r.contains("connection lost mid-stream")),
                    "{first_reason:?}"
                );
                assert_eq!(server.requests().len(), 2);
            } else {
                let err = outcome.expect_err("a cut stream never yields a turn");
                assert!(err.is_interrupted(), "{kind} abort={abort}: {err:?}");
                assert!(
                    err.to_string()
                        .starts_with(&format!("{kind} response was interrupted")),
                    "{err}"
                );
                assert!(err.to_string().contains("the stream ended before"), "{err}");
                assert!(
                    events.retries().is_empty(),
                    "a body that ended cleanly is not retried"
                );
                assert_eq!(server.requests().len(), 1);
            }
            server.shutdown().await;
        }
    }
}

#[tokio::test]
async fn a_fatal_stream_error_names_its_kind() {
    let server = FakeServer::start(Script::new([ScriptedFailure::StreamError {
        kind: "invalid_request_error".into(),
        message: "prompt is too long".into(),
    }]))
    .await
    .unwrap();
    let anthropic = provider(ProviderKind::Anthropic, &server);
    let err = anthropic
        .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "anthropic reported an error mid-stream (invalid_request_error): prompt is too long"
    );

    let server = FakeServer::start(Script::new([ScriptedFailure::StreamError {
        kind: "server_error".into(),
        message: "CUDA out of memory".into(),
    }]))
    .await
    .unwrap();
    let compatible = provider(ProviderKind::OpenAiCompatible, &server);
    let err = compatible
        .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "openai-compatible reported an error mid-stream (server_error): CUDA out of memory"
    );
}

#[tokio::test]
async fn an_exhausted_script_is_a_clear_refusal() {
    let server = FakeServer::start(Script::default()).await.unwrap();
    let provider = provider(ProviderKind::OpenAiCompatible, &server);
    let err = provider
        .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("script is exhausted"), "{err}");
}

#[tokio::test]
async fn the_fake_refuses_what_the_real_services_refuse() {
    // A tool result whose call is not in the previous assistant message.
    let orphan = vec![
        user("hi"),
        msg(Role::Assistant, vec![call("toolu_1", "shell", "{}")]),
        msg(Role::User, vec![result("toolu_9", "shell", "?", false)]),
    ];
    for kind in KINDS {
        let server = FakeServer::start(Script::new([ScriptedTurn::text("never")]))
            .await
            .unwrap();
        let provider = provider(kind, &server);
        let err = provider
            .complete(&request(orphan.clone()), &NoMedia, &mut |_| {})
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("400 Bad Request"), "{text}");
        assert!(text.contains("toolu_"), "{text}");
        assert_eq!(server.remaining(), 1);
        server.shutdown().await;
    }
}

#[tokio::test]
async fn a_responder_answers_after_the_queue() {
    let script =
        Script::new([ScriptStep::from(ScriptedTurn::text("first"))]).with_responder(|req| {
            let n = req.body["messages"].as_array().map_or(0, |m| m.len());
            ScriptedTurn::text(format!("saw {n} messages")).into()
        });
    let server = FakeServer::start(script).await.unwrap();
    let provider = provider(ProviderKind::Anthropic, &server);
    let req = request(vec![user("hi")]);
    assert_eq!(
        provider
            .complete(&req, &NoMedia, &mut |_| {})
            .await
            .unwrap()
            .text(),
        "first"
    );
    assert_eq!(
        provider
            .complete(&req, &NoMedia, &mut |_| {})
            .await
            .unwrap()
            .text(),
        "saw 1 messages"
    );
}
