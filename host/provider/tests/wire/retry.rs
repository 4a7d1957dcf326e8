//! Retries: 429 honouring `retry-after`, 5xx on the backoff schedule,
//! overload reported inside a stream, connection failures, and the bound on
//! attempts.

use crate::common;

use std::time::Duration;

use common::*;
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedFailure, ScriptedTurn};
use latch_provider::{NoMedia, ProviderError, ProviderKind, RetryPolicy};

#[tokio::test]
async fn rate_limit_waits_for_retry_after_then_succeeds() {
    for kind in KINDS {
        let server = FakeServer::start(Script::new([
            ScriptStep::from(ScriptedFailure::RateLimited {
                retry_after: Some("0.2".into()),
            }),
            ScriptStep::from(ScriptedTurn::text("done after waiting")),
        ]))
        .await
        .unwrap();
        let provider = provider(kind, &server);
        let mut events = Events::default();
        let started = std::time::Instant::now();
        let turn = provider
            .complete(&request(vec![user("hi")]), &NoMedia, &mut |e| {
                events.0.push(e)
            })
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(turn.text(), "done after waiting");
        assert_eq!(
            events.retries(),
            vec![(2, Duration::from_millis(200))],
            "{kind}: retry-after replaces the 10 ms backoff"
        );
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert_eq!(server.requests().len(), 2);
        assert_eq!(
            server.requests()[0].body,
            server.requests()[1].body,
            "the retry resends the same body"
        );
        server.shutdown().await;
    }
}

#[tokio::test]
async fn retry_after_is_capped() {
    let server = FakeServer::start(Script::new([
        ScriptStep::from(ScriptedFailure::RateLimited {
            retry_after: Some("3600".into()),
        }),
        ScriptStep::from(ScriptedTurn::text("ok")),
    ]))
    .await
    .unwrap();
    let policy = RetryPolicy {
        max_retry_after: Duration::from_millis(30),
        ..fast_retry(3)
    };
    let provider = provider_with(ProviderKind::Anthropic, &server, policy, Some("k"));
    let mut events = Events::default();
    provider
        .complete(&request(vec![user("hi")]), &NoMedia, &mut |e| {
            events.0.push(e)
        })
        .await
        .unwrap();
    assert_eq!(events.retries(), vec![(2, Duration::from_millis(30))]);
}

#[tokio::test]
async fn server_errors_back_off_exponentially() {
    for kind in KINDS {
        let server = FakeServer::start(Script::new([
            ScriptStep::from(ScriptedFailure::ServerError {
                status: 500,
                message: "Internal server error".into(),
            }),
            ScriptStep::from(ScriptedFailure::ServerError {
                status: 529,
                message: "Overloaded".into(),
            }),
            ScriptStep::from(ScriptedFailure::ServerError {
                status: 503,
                message: "Service unavailable".into(),
            }),
            ScriptStep::from(ScriptedTurn::text("recovered")),
        ]))
        .await
        .unwrap();
        let provider = provider(kind, &server);
        let mut events = Events::default();
        let turn = provider
            .complete(&request(vec![user("hi")]), &NoMedia, &mut |e| {
                events.0.push(e)
            })
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(turn.text(), "recovered");
        assert_eq!(
            events.retries(),
            vec![
                (2, Duration::from_millis(10)),
                (3, Duration::from_millis(20)),
                (4, Duration::from_millis(40)),
            ]
        );
        server.shutdown().await;
    }
}

#[tokio::test]
async fn attempts_are_bounded() {
    for kind in KINDS {
        let fail = || {
            ScriptStep::from(ScriptedFailure::ServerError {
                status: 500,
                message: "the upstream is down".into(),
            })
        };
        let server = FakeServer::start(Script::new([fail(), fail(), fail(), fail()]))
            .await
            .unwrap();
        let provider = provider_with(kind, &server, fast_retry(3), Some("k"));
        let err = provider
            .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
            .await
            .unwrap_err();
        match &err {
            ProviderError::RetriesExhausted {
                attempts,
                status,
                last,
                ..
            } => {
                assert_eq!(*attempts, 3);
                assert_eq!(*status, Some(500));
                assert!(last.contains("the upstream is down"), "{last}");
            }
            other => panic!("{kind}: unexpected {other:?}"),
        }
        assert!(
            err.to_string()
                .starts_with(&format!("{kind} failed after 3 attempts")),
            "{err}"
        );
        assert_eq!(server.requests().len(), 3);
        assert_eq!(server.remaining(), 1);
        server.shutdown().await;
    }
}

#[tokio::test]
async fn overload_inside_an_anthropic_stream_is_retried() {
    let server = FakeServer::start(Script::new([
        ScriptStep::from(ScriptedFailure::StreamError {
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
        }),
        ScriptStep::from(ScriptedTurn::text("second time lucky")),
    ]))
    .await
    .unwrap();
    let provider = provider(ProviderKind::Anthropic, &server);
    let mut events = Events::default();
    let turn = provider
        .complete(&request(vec![user("hi")]), &NoMedia, &mut |e| {
            events.0.push(e)
        })
        .await
        .unwrap();
    assert_eq!(turn.text(), "second time lucky");
    assert_eq!(events.retries().len(), 1);
    assert_eq!(events.text_since_last_retry(), "second time lucky");
}

#[tokio::test]
async fn connection_failures_are_retried_then_reported() {
    // A port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for kind in KINDS {
        let mut config = latch_provider::ProviderConfig::new(kind);
        config.base_url = Some(format!("http://127.0.0.1:{port}/v1"));
        config.api_key = Some("k".into());
        config.retry = fast_retry(2);
        let provider = latch_provider::Provider::new(config).unwrap();
        let mut events = Events::default();
        let err = provider
            .complete(&request(vec![user("hi")]), &NoMedia, &mut |e| {
                events.0.push(e)
            })
            .await
            .unwrap_err();
        match &err {
            ProviderError::RetriesExhausted {
                attempts: 2,
                status: None,
                last,
                ..
            } => assert!(last.contains(&format!("127.0.0.1:{port}")), "{last}"),
            other => panic!("{kind}: unexpected {other:?}"),
        }
        assert_eq!(events.retries().len(), 1);
    }
}

/// Hostile `retry-after` values over real HTTP: huge ones (which once
/// overflowed a `Duration` and panicked the host) wait the policy's cap and
/// the retry message says the provider asked for more; negative and `NaN`
/// ones fall back to the backoff schedule.
#[tokio::test]
async fn hostile_retry_after_headers_never_panic_and_are_capped() {
    let huge = [
        ("retry-after", "1e300"),
        ("retry-after", "18446744073709551616"),
        ("retry-after-ms", "1e20"),
        ("retry-after-ms", "1e300"),
        ("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"),
    ];
    let ignored = [("retry-after", "-5"), ("retry-after", "NaN")];
    let cases = huge
        .iter()
        .map(|h| (h, true))
        .chain(ignored.iter().map(|h| (h, false)));
    for ((name, value), is_huge) in cases {
        for kind in [ProviderKind::Anthropic, ProviderKind::OpenAiCompatible] {
            let server = FakeServer::start(Script::new([
                ScriptStep::from(ScriptedFailure::RateLimitedWith {
                    headers: vec![(name.to_string(), value.to_string())],
                }),
                ScriptStep::from(ScriptedTurn::text("ok")),
            ]))
            .await
            .unwrap();
            let policy = RetryPolicy {
                max_retry_after: Duration::from_millis(30),
                ..fast_retry(3)
            };
            let provider = provider_with(kind, &server, policy, Some("k"));
            let mut events = Events::default();
            let turn = provider
                .complete(&request(vec![user("hi")]), &NoMedia, &mut |e| {
                    events.0.push(e)
                })
                .await
                .unwrap_or_else(|e| panic!("{kind} {name}: {value}: {e}"));
            assert_eq!(turn.text(), "ok");
            let reasons: Vec<String> = events
                .0
                .iter()
                .filter_map(|e| match e {
                    latch_provider::StreamEvent::Retrying { reason, .. } => Some(reason.clone()),
                    _ => None,
                })
                .collect();
            if is_huge {
                assert_eq!(
                    events.retries(),
                    vec![(2, Duration::from_millis(30))],
                    "{kind} {name}: {value} waits the cap"
                );
                let note = format!(
                    "the provider asked to wait more than a day ({name}: {value}); Latch waits at most 0.03 s"
                );
                assert!(reasons[0].contains(&note), "{kind}: {:?}", reasons[0]);
            } else {
                assert_eq!(
                    events.retries(),
                    vec![(2, Duration::from_millis(10))],
                    "{kind} {name}: {value} is ignored: the backoff applies"
                );
                assert!(!reasons[0].contains("asked to wait"), "{:?}", reasons[0]);
            }
            server.shutdown().await;
        }
    }
}
