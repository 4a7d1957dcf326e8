//! What a resume relies on, against the real store reopened from its file:
//! writer blockers stay one lineage across a resume, the open turn costs
//! what is new, and read-only opening never creates a store.

use crate::common::*;
use latch_engine_sdk::types::{Part, ToolCall};
use latch_kernel::*;

/// A writer that keeps staling its own evidence: validate passes, then a
/// write moves the generation, then completion is refused, with the
/// blockers `certify` really produces (they quote generations).
fn writer_round(store: &Store, session: &str) -> Vec<String> {
    let generation = store.generation_of(session).unwrap();
    record_validation(
        store,
        session,
        vec!["unit".into()],
        "cargo test",
        Some(0),
        "ok",
        generation,
    )
    .unwrap();
    commit_mutation(store, session, "shell", vec![], Some("touch gen.rs".into())).unwrap();
    let cert = attempt_certification(store, session).unwrap();
    assert!(!cert.is_certified());
    cert.blockers
}

#[test]
fn repeated_writer_blockers_are_one_lineage_across_a_resume() {
    let f = Fixture::new();
    let s = f.session("/ws");
    f.store
        .append(
            &s,
            op(StateOp::RequireValidation {
                requirement: "unit".into(),
            }),
        )
        .unwrap();
    let first = writer_round(&f.store, &s);
    let second = writer_round(&f.store, &s);
    assert_ne!(first, second, "the real blockers quote moving generations");
    assert!(first[0].starts_with("stale: unit (checked generation"));
    let path = f.db_path();
    drop(f.store);
    // Resume: a new process opens the file and replays.
    let store = Store::open(&path).unwrap();
    let third = writer_round(&store, &s);
    let failures = store.canonical_state(&s).unwrap().failures;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].count, 3, "{first:?} {second:?} {third:?}");
    assert!(
        failures[0]
            .summary
            .contains("completion refused: stale: unit")
    );
    // The incremental reducer and a fresh replay agree.
    assert_eq!(store.kernel(&s).unwrap(), store.replay_kernel(&s).unwrap());
}

#[test]
fn checking_the_open_turn_costs_what_is_new() {
    let f = Fixture::new();
    let s = f.session("/ws");
    let mut batch = Vec::new();
    for i in 0..3_000 {
        batch.push(EventKind::user_text(format!("message {i}")));
    }
    f.store.append_batch(&s, batch).unwrap();
    let path = f.db_path();
    drop(f.store);
    let store = Store::open(&path).unwrap();
    // The first look after opening reads the log once.
    assert!(!store.with_kernel(&s, |k| k.unfinished().open_run).unwrap());
    let before = store.decoded_events();
    assert!(before >= 3_000);
    store
        .append_batch(
            &s,
            vec![
                EventKind::RunStarted {
                    mode: "run".into(),
                    context: None,
                },
                EventKind::AssistantMessage {
                    parts: vec![Part::ToolCall(ToolCall {
                        id: "c1".into(),
                        name: "shell".into(),
                        arguments_json: r#"{"command":"make"}"#.into(),
                    })],
                },
            ],
        )
        .unwrap();
    let open = store.with_kernel(&s, |k| k.unfinished().clone()).unwrap();
    assert!(open.open_run);
    assert_eq!(open.open_calls[0].id, "c1");
    let read = store.decoded_events() - before;
    assert!(read <= 2, "the second look decoded {read} events");
}

#[test]
fn opening_an_existing_store_never_creates_one() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nested").join("latch.db");
    let err = Store::open_existing(&missing).unwrap_err();
    assert!(matches!(err, StoreError::Missing { .. }));
    let text = err.to_string();
    assert!(
        text.contains(&missing.display().to_string()) && text.contains("--store"),
        "{text}"
    );
    assert!(!missing.exists());
    assert!(!dir.path().join("nested").exists());
    // An existing store opens.
    drop(Store::open(&missing).unwrap());
    assert!(Store::open_existing(&missing).is_ok());
}
