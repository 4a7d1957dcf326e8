//! Sessions deleted from history (`latch history delete`: a tombstone) are
//! not served: absent from the list, 404 naming the session as deleted on
//! every route, for the session and for its children; a stream open when
//! the tombstone lands ends.

use super::*;

/// Every `/api/` route of one session, as the page would send it.
fn routes(id: &str) -> Vec<Request<Body>> {
    let s = format!("/api/sessions/{id}");
    vec![
        page(get(&s)),
        page(get(&format!("{s}/events"))),
        page(get(&format!("{s}/group"))),
        page(get(&format!("{s}/context"))),
        page(get(&format!("{s}/recall?q=plan"))),
        page(post(&format!("{s}/messages"), r#"{"text":"go on"}"#.into())),
        page(post(&format!("{s}/resume"), String::new())),
        page(post(&format!("{s}/compact"), String::new())),
        page(post(&format!("{s}/interrupt"), String::new())),
        page(get(&format!("{s}/rewind"))),
        page(get(&format!("{s}/rewind/1"))),
        page(post(&format!("{s}/rewind/1"), String::new())),
        page(post(
            &format!("{s}/permissions/{CALL}"),
            r#"{"decision":"always"}"#.into(),
        )),
    ]
}

fn listed(list: &Value) -> String {
    list["sessions"].to_string()
}

#[tokio::test]
async fn a_deleted_session_and_its_children_are_not_served() {
    let server = Server::new(|_| {});
    let kept = server.session();
    let gone = server.session();
    let store = server.store();
    store
        .append(&gone, EventKind::user_text("a deleted secret"))
        .unwrap();
    let child = store
        .create_session(
            server.backend.workspace(),
            Some(&gone),
            &latch_engine_sdk::types::ModelProfile::with_defaults("openai", "scripted"),
        )
        .unwrap()
        .id;

    // Before the tombstone every route answers (some with their own 4xx).
    for request in routes(&gone) {
        let what = format!("{} {}", request.method(), request.uri());
        let response = server.send(request).await;
        assert_ne!(response.status(), 404, "{what} before the tombstone");
    }
    // Let the turn started above end.
    let started = Instant::now();
    loop {
        let (_, list) = server.json(page(get("/api/sessions"))).await;
        if !listed(&list).contains("\"running\":true") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{list}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    store.delete_session(&gone).unwrap();
    let (_, list) = server.json(page(get("/api/sessions"))).await;
    assert!(listed(&list).contains(&kept), "{list}");
    assert!(!listed(&list).contains(&gone), "{list}");
    assert!(!listed(&list).contains(&child), "{list}");

    for id in [&gone, &child] {
        for request in routes(id) {
            let what = format!("{} {}", request.method(), request.uri());
            let (status, body) = server.json(request).await;
            assert_eq!(status, 404, "{what}: {body}");
            let error = body["error"].as_str().unwrap();
            assert!(
                error.contains(id.as_str()) && error.contains("deleted"),
                "{what}: {error}"
            );
            assert!(!body.to_string().contains("a deleted secret"), "{what}");
        }
    }
    // The kept session still answers.
    let (status, _) = server
        .json(page(get(&format!("/api/sessions/{kept}"))))
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_open_when_its_session_is_deleted_ends() {
    let server = Server::new(|_| {});
    let watched = server.session();
    let other = server.session();
    let response = server
        .send(page(get(&format!("/api/sessions/{watched}/events"))))
        .await;
    assert_eq!(response.status(), 200);
    let reading = tokio::spawn(read_stream(response, |t| t.contains("event: deleted")));
    // Let the stream subscribe, then delete its session; the next commit
    // of this process (a turn in another session) reaches its feed.
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.store().delete_session(&watched).unwrap();
    server.start_turn(&other, "hello").await;
    let body = reading.await.unwrap();
    assert!(body.contains("event: deleted"), "{body}");
    assert!(body.contains(&watched), "{body}");
}
