//! Who may drive the server: the token only as `Authorization: Bearer`,
//! `Host` a name that cannot be rebound, `Origin` (when sent) this server.
//! The matrix runs against a permission request that waits for an answer,
//! the request a local page or service would most like to answer
//! "always".

use super::*;
use axum::http::header;

/// Every way in that must not answer the waiting request, with the status
/// and refusal kind each gets.
fn attacks(session: &str) -> Vec<(&'static str, Request<Body>, u16, &'static str)> {
    let uri = format!("/api/sessions/{session}/permissions/{CALL}");
    let always = || post(&uri, r#"{"decision":"always"}"#.to_string());
    let cookie = format!("latch_token={TOKEN}");
    let port_cookie = format!("latch_token_7421={TOKEN}; latch_token_7420={TOKEN}");
    vec![
        ("no token", always(), 401, "missing_token"),
        (
            "the token as a cookie, as the old page set it",
            with(always(), "cookie", &cookie),
            401,
            "token_not_in_header",
        ),
        (
            "per-port cookies (another port's, and this one's)",
            with(always(), "cookie", &port_cookie),
            401,
            "token_not_in_header",
        ),
        (
            "the token in the query string",
            post(
                &format!("{uri}?token={TOKEN}"),
                r#"{"decision":"always"}"#.into(),
            ),
            401,
            "token_not_in_header",
        ),
        (
            "a wrong bearer token",
            with(always(), "authorization", "Bearer not-the-token"),
            401,
            "wrong_token",
        ),
        (
            "a page on another port of this machine",
            with(page(always()), "origin", "http://127.0.0.1:3000"),
            403,
            "cross_origin",
        ),
        (
            "a page on another site",
            with(page(always()), "origin", "https://evil.example"),
            403,
            "cross_origin",
        ),
        (
            "a sandboxed frame or a file (Origin: null)",
            with(page(always()), "origin", "null"),
            403,
            "cross_origin",
        ),
        (
            "a DNS-rebinding page (its own Host and Origin)",
            with(
                with(page(always()), "host", "evil.example:7420"),
                "origin",
                "http://evil.example:7420",
            ),
            403,
            "foreign_host",
        ),
        (
            "a rebinding Host even with the cookie",
            with(
                with(always(), "host", "evil.example:7420"),
                "cookie",
                &cookie,
            ),
            403,
            "foreign_host",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_permission_is_answered_only_by_the_page_with_the_header() {
    let server = Server::new(|_| {});
    let id = server.session();
    server.start_turn(&id, "ask").await;
    server.until_asked(&id).await;

    for (what, request, status, kind) in attacks(&id) {
        let (got, body) = server.json(request).await;
        assert_eq!(got, status, "{what}: {body}");
        assert_eq!(body["kind"], kind, "{what}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(!error.is_empty(), "{what}: {body}");
        // Nothing was answered: the request still waits.
        assert!(server.backend.answers.lock().unwrap().is_empty(), "{what}");
        let (_, state) = server.json(page(get(&format!("/api/sessions/{id}")))).await;
        assert_eq!(state["state"]["permission"]["call_id"], CALL, "{what}");
    }

    // The page: the header and its own origin.
    let uri = format!("/api/sessions/{id}/permissions/{CALL}");
    let (status, body) = server
        .json(page(post(&uri, r#"{"decision":"deny"}"#.into())))
        .await;
    assert_eq!(status, 200, "{body}");
    let started = Instant::now();
    while server.backend.answers.lock().unwrap().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        *server.backend.answers.lock().unwrap(),
        vec![Answer::Deny(None)]
    );
}

#[tokio::test]
async fn refusals_name_what_was_wrong() {
    let server = Server::new(|_| {});
    let (_, body) = server
        .json(with(
            get("/api/sessions"),
            "cookie",
            &format!("latch_token={TOKEN}"),
        ))
        .await;
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("cookie") && error.contains("Authorization: Bearer"),
        "{error}"
    );
    let (_, body) = server
        .json(with(
            page(get("/api/sessions")),
            "origin",
            "http://127.0.0.1:3000",
        ))
        .await;
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("http://127.0.0.1:3000") && error.contains(HOST),
        "{error}"
    );
    let (_, body) = server
        .json(with(
            page(get("/api/sessions")),
            "host",
            "evil.example:7420",
        ))
        .await;
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("evil.example:7420") && error.contains("--allow-host"),
        "{error}"
    );
    let response = server.send(get("/api/sessions")).await;
    assert_eq!(response.status(), 401);
    assert!(response.headers().contains_key(header::WWW_AUTHENTICATE));
}

#[tokio::test]
async fn reads_and_the_event_stream_need_the_header_too() {
    let server = Server::new(|_| {});
    let id = server.session();
    for uri in [
        "/api/sessions".to_string(),
        format!("/api/sessions/{id}"),
        format!("/api/sessions/{id}/events"),
        format!("/api/sessions/{id}/group"),
    ] {
        let cookie = format!("latch_token={TOKEN}");
        for (what, request, status) in [
            ("nothing", get(&uri), 401),
            ("a cookie", with(get(&uri), "cookie", &cookie), 401),
            (
                "another port's page",
                with(page(get(&uri)), "origin", "http://127.0.0.1:3000"),
                403,
            ),
            (
                "a rebinding host",
                with(page(get(&uri)), "host", "attacker.example:7420"),
                403,
            ),
        ] {
            let response = server.send(request).await;
            assert_eq!(response.status(), status, "{uri} with {what}");
        }
        // The page's request, with or without its own Origin.
        let response = server.send(page(get(&uri))).await;
        assert_eq!(response.status(), 200, "{uri}");
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
        let response = server.send(with(page(get(&uri)), "origin", ORIGIN)).await;
        assert_eq!(response.status(), 200, "{uri} from the page's origin");
        // Through an SSH tunnel on another local port.
        let tunnel = with(
            with(page(get(&uri)), "host", "localhost:8000"),
            "origin",
            "http://localhost:8000",
        );
        assert_eq!(server.send(tunnel).await.status(), 200, "{uri} tunnelled");
    }
}

#[tokio::test]
async fn the_page_loads_without_a_token_sets_no_cookie_and_refuses_frames() {
    let server = Server::new(|_| {});
    for uri in ["/", "/app.js", "/app.css", &format!("/?token={TOKEN}")] {
        let response = server.send(get(uri)).await;
        assert_eq!(response.status(), 200, "{uri}");
        let h = response.headers();
        assert!(h.get(header::SET_COOKIE).is_none(), "{uri} set a cookie");
        let policy = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(policy.contains("connect-src 'self'"), "{policy}");
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
    }
    // A rebinding page cannot even load it.
    let response = server
        .send(with(get("/"), "host", "evil.example:7420"))
        .await;
    assert_eq!(response.status(), 403);
}

#[tokio::test]
async fn a_remote_bind_takes_the_names_the_user_allowed() {
    let server = Server::new(|c| {
        c.bound = "10.0.0.5".parse().unwrap();
        c.allowed_hosts = vec!["latch.example".into()];
    });
    for (host, status) in [
        ("latch.example", 200),
        ("10.0.0.5:7420", 200),
        ("localhost:7420", 200),
        ("other.example", 403),
    ] {
        let response = server
            .send(with(page(get("/api/sessions")), "host", host))
            .await;
        assert_eq!(response.status(), status, "{host}");
    }
}
