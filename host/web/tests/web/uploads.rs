//! Images and rewind at the router, over the scripted backend: what a
//! message body with images may be (base64, at most
//! [`latch_web::server::images::MAX_MESSAGE_BODY`]), a backend that takes
//! no images refusing them before anything is recorded, the transcript's
//! images in the state and served only when a user message holds them,
//! and a rewind's sequence number checked.

use super::*;
use latch_engine_sdk::types::Part;

/// A PNG header of 4×3 pixels (all the store reads of it).
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x04\0\0\0\x03\x08\x06\0\0\0";

fn user_messages(server: &Server, id: &str) -> usize {
    server
        .store()
        .all_events(id)
        .unwrap()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::UserMessage { .. }))
        .count()
}

#[tokio::test]
async fn a_message_s_images_are_checked_before_anything_is_recorded() {
    let server = Server::new(|_| {});
    let id = server.session();
    let uri = format!("/api/sessions/{id}/messages");

    let body = r#"{"text":"see","images":[{"name":"shot.png","data":"not base64!"}]}"#;
    let (status, r) = server.json(page(post(&uri, body.into()))).await;
    assert_eq!(status, 400, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("shot.png: its `data` is not base64"),
        "{r}"
    );

    // The scripted backend takes no images: refused with the file's name.
    let data = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, PNG);
    let body = serde_json::json!({"text": "", "images": [{"name": "shot.png", "data": data}]});
    let (status, r) = server.json(page(post(&uri, body.to_string()))).await;
    assert_eq!(status, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("shot.png"), "{r}");

    // Too large a body: 413 saying how large one may be.
    let big = "A".repeat(latch_web::server::images::MAX_MESSAGE_BODY + 1);
    let body = format!(r#"{{"text":"see","images":[{{"name":"big.png","data":"{big}"}}]}}"#);
    let (status, r) = server.json(page(post(&uri, body))).await;
    assert_eq!(status, 413, "{r}");
    assert!(r["error"].as_str().unwrap().contains("48 MiB"), "{r}");

    // Neither text nor images.
    let (status, _) = server
        .json(page(post(&uri, r#"{"text":"  "}"#.into())))
        .await;
    assert_eq!(status, 400);
    assert_eq!(user_messages(&server, &id), 0, "nothing recorded");
}

#[tokio::test]
async fn the_transcript_s_images_are_in_the_state_and_served_only_from_user_messages() {
    let server = Server::new(|_| {});
    let id = server.session();
    let store = server.store();
    let media = store.put_artifact(PNG, None).unwrap();
    let other = store.put_artifact(b"a checkpoint's bytes", None).unwrap();
    let seq = store
        .append(
            &id,
            EventKind::UserMessage {
                parts: vec![Part::Text("see".into()), Part::Image(media.clone())],
            },
        )
        .unwrap();

    let (status, shown) = server.json(page(get(&format!("/api/sessions/{id}")))).await;
    assert_eq!(status, 200);
    let images = &shown["state"]["images"][seq.to_string()];
    assert_eq!(images[0]["sha256"], media.sha256.as_str(), "{shown}");
    assert_eq!(
        (images[0]["width"].clone(), images[0]["height"].clone()),
        (4.into(), 3.into())
    );

    let response = server
        .send(page(get(&format!(
            "/api/sessions/{id}/images/{}",
            media.sha256
        ))))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "image/png");
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&bytes[..], PNG);

    // An artifact no user message holds is not served, token or not.
    let (status, _) = server
        .json(page(get(&format!(
            "/api/sessions/{id}/images/{}",
            other.sha256
        ))))
        .await;
    assert_eq!(status, 404);
    let response = server
        .send(get(&format!("/api/sessions/{id}/images/{}", media.sha256)))
        .await;
    assert_eq!(response.status(), 401);
}

#[tokio::test]
async fn a_rewind_names_a_user_message_by_its_number() {
    let server = Server::new(|_| {});
    let id = server.session();
    server
        .store()
        .append(&id, EventKind::user_text("fix add"))
        .unwrap();
    let (status, r) = server
        .json(page(post(
            &format!("/api/sessions/{id}/rewind/latest"),
            String::new(),
        )))
        .await;
    assert_eq!(status, 400, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("`latest` is not a sequence number"),
        "{r}"
    );
    let (status, r) = server
        .json(page(get(&format!("/api/sessions/{id}/rewind"))))
        .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["points"][0]["text"], "fix add", "{r}");
}
