//! A session whose agent group lives on a shared store (another store than
//! the session's own, as `[group] store` or `latch group join` makes it):
//! `GET .../group`, the GROUP block of the session's state and the event
//! stream read that store — never the empty local projection — and the
//! stream says `group` when the shared group moves.

use super::*;
use latch_kernel::group::{GroupEvent, GroupPort};

fn task(store: &Store, root: &str, title: &str) {
    store
        .commit(
            root,
            GroupEvent::TaskCreated {
                title: title.into(),
                description: String::new(),
                depends_on: vec![],
                key: None,
                by: root.into(),
            },
        )
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_route_the_block_and_the_stream_follow_the_shared_store() {
    let server = Server::new(|_| {});
    let id = server.session();
    let dir = tempfile::tempdir().unwrap();
    let shared = Arc::new(Store::open(dir.path().join("shared.db")).unwrap());
    let lead = shared
        .create_session(
            "/elsewhere",
            None,
            &ModelProfile::with_defaults("openai", "m"),
        )
        .unwrap()
        .id;
    shared
        .commit(&lead, GroupEvent::Created { lead: lead.clone() })
        .unwrap();
    shared
        .commit(
            &lead,
            GroupEvent::MemberJoined {
                member: lead.clone(),
                role: "lead".into(),
            },
        )
        .unwrap();
    task(&shared, &lead, "SHARED-ADD");
    *server.backend.shared_group.lock().unwrap() = Some((shared.clone(), lead.clone()));
    // This host's store has no group at all.
    assert!(!server.store().replay(&id).unwrap().exists());

    let (status, group) = server
        .json(page(get(&format!("/api/sessions/{id}/group"))))
        .await;
    assert_eq!(status, 200, "{group}");
    assert_eq!(group["exists"], true, "{group}");
    assert_eq!(group["shared"], true, "{group}");
    assert_eq!(group["tasks"][0]["title"], "SHARED-ADD", "{group}");

    let (_, state) = server.json(page(get(&format!("/api/sessions/{id}")))).await;
    let block = &state["state"]["durable"]["group"];
    assert!(
        block["title"]
            .as_str()
            .is_some_and(|t| t.starts_with(&format!("GROUP of {lead}"))),
        "{state}"
    );
    assert!(block["lines"].to_string().contains("SHARED-ADD"), "{block}");

    // The stream says when the shared group moves.
    let response = server
        .send(page(get(&format!("/api/sessions/{id}/events"))))
        .await;
    assert_eq!(response.status(), 200);
    let writer = {
        let (shared, lead) = (shared.clone(), lead.clone());
        tokio::task::spawn_blocking(move || {
            std::thread::sleep(Duration::from_millis(300));
            task(&shared, &lead, "SHARED-MUL");
        })
    };
    let body = read_stream(response, |t| t.contains("event: group")).await;
    writer.await.unwrap();
    assert!(body.contains("event: group"), "{body}");
    let (_, state) = server.json(page(get(&format!("/api/sessions/{id}")))).await;
    assert!(
        state["state"]["durable"]["group"]["lines"]
            .to_string()
            .contains("SHARED-MUL"),
        "{state}"
    );
}
