//! Store behaviour on a real SQLite file in a temporary directory.

mod common;
#[path = "store/resume.rs"]
mod resume;

use common::*;
use latch_engine_sdk::estimate::message_tokens;
use latch_engine_sdk::types::{
    EstimatorProfile, EventBody, HypothesisStatus, KernelContextEntry, KernelContextKind,
    OutlinedEvent, ValidationOutcome,
};
use latch_engine_sdk::{MemorySession, SessionView};
use latch_kernel::*;
use std::sync::Arc;

#[test]
fn appends_are_monotone_and_pages_follow_the_index() {
    let f = Fixture::new();
    let a = f.session("/ws");
    let b = f.session("/ws");
    let mut mine = Vec::new();
    for i in 0..30 {
        mine.push(
            f.store
                .append(&a, EventKind::user_text(format!("a {i}")))
                .unwrap(),
        );
        f.store
            .append(&b, EventKind::user_text(format!("b {i}")))
            .unwrap();
    }
    let batch = f
        .store
        .append_batch(
            &a,
            vec![EventKind::assistant_text("x"), EventKind::ManualCompact],
        )
        .unwrap();
    assert_eq!(batch[1], batch[0] + 1);
    mine.extend(batch);
    assert!(mine.windows(2).all(|w| w[0] < w[1]));
    let page = f.store.events(&a, mine[3], mine[10], 4).unwrap();
    assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), mine[3..7]);
    let back = f.store.events_before(&a, mine[5], 100).unwrap();
    assert_eq!(
        back.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![mine[4], mine[3], mine[2], mine[1], mine[0]]
    );
    assert_eq!(f.store.event_count(&a).unwrap(), 32);
    assert_eq!(f.store.latest_seq(&a).unwrap(), *mine.last().unwrap());
    let err = f
        .store
        .append("nope", EventKind::ManualCompact)
        .unwrap_err();
    assert!(matches!(err, StoreError::UnknownSession(_)), "{err}");
    // A failed batch commits nothing.
    assert!(
        f.store
            .append_across(vec![
                (a.clone(), EventKind::ManualCompact),
                ("nope".into(), EventKind::ManualCompact)
            ])
            .is_err()
    );
    assert_eq!(f.store.event_count(&a).unwrap(), 32);
}

#[test]
fn reopening_keeps_everything_and_uses_wal() {
    let f = Fixture::new();
    let a = f.session("/ws");
    f.store
        .append(&a, EventKind::user_text("remember me"))
        .unwrap();
    let path = f.db_path();
    drop(f.store);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), store::SCHEMA_VERSION);
    assert_eq!(store.event_count(&a).unwrap(), 1);
    assert_eq!(store.recall(&a, "remember", 5).unwrap().len(), 1);
    let mode: String = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn tombstoned_sessions_leave_listing_and_resume_but_their_events_stay() {
    let f = Fixture::new();
    let root = f.session("/ws");
    let child = f.child("/ws", &root);
    let grandchild = f.child("/ws", &child);
    let other = f.session("/ws");
    f.store
        .append(&root, EventKind::user_text("hello"))
        .unwrap();
    commit_mutation(&f.store, &child, "write_file", vec!["a.rs".into()], None).unwrap();
    assert_eq!(f.store.workspace_generation("/ws").unwrap(), 1);
    let listed = |s: &Store| {
        s.list_sessions("/ws")
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(listed(&f.store).len(), 4);

    f.store.delete_session(&root).unwrap();
    assert_eq!(listed(&f.store), vec![other.clone()]);
    for id in [&root, &child, &grandchild] {
        assert!(f.store.is_hidden(id).unwrap());
        assert!(matches!(
            f.store.resolve_session(id),
            Err(StoreError::NoMatch(_))
        ));
    }
    assert_eq!(
        f.store.latest_root_session("/ws").unwrap().unwrap().id,
        other
    );
    assert_eq!(
        f.store
            .resolve_session(&other[..other.len() - 1])
            .unwrap()
            .id,
        other
    );
    // Raw events, children and mutation evidence stay; the generation does not go back.
    assert_eq!(
        f.store.event_count(&root).unwrap(),
        2,
        "message + tombstone"
    );
    assert_eq!(f.store.event_count(&child).unwrap(), 1);
    assert_eq!(f.store.children(&root).unwrap().len(), 1);
    assert_eq!(f.store.workspace_generation("/ws").unwrap(), 1);
    assert_eq!(f.store.generation_of(&other).unwrap(), 1);
}

#[test]
fn resume_selectors_need_a_unique_prefix() {
    let f = Fixture::new();
    let a = f.session("/ws");
    let b = f.session("/ws");
    let common: String = a
        .chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect();
    if !common.is_empty() {
        assert!(matches!(
            f.store.resolve_session(&common),
            Err(StoreError::Ambiguous { .. })
        ));
    }
    assert_eq!(f.store.resolve_session(&a.to_uppercase()).unwrap().id, a);
    assert!(matches!(
        f.store.resolve_session("%"),
        Err(StoreError::NoMatch(_))
    ));
    assert!(matches!(
        f.store.resolve_session(""),
        Err(StoreError::NoMatch(_))
    ));
    assert_eq!(
        f.store.latest_root_session("/ws").unwrap().unwrap().id,
        b.max(a)
    );
    assert!(f.store.latest_root_session("/elsewhere").unwrap().is_none());
}

#[test]
fn evidence_goes_stale_after_a_write_from_another_session_of_the_workspace() {
    let f = Fixture::new();
    let a = f.session("/ws");
    let b = f.session("/ws");
    let elsewhere = f.session("/other");
    f.store
        .append(
            &a,
            op(StateOp::RequireValidation {
                requirement: "cargo test passes".into(),
            }),
        )
        .unwrap();
    let g = f.store.generation_of(&a).unwrap();
    record_validation(
        &f.store,
        &a,
        vec!["cargo test passes".into(), "no warnings".into()],
        "cargo test",
        Some(0),
        "ok",
        g,
    )
    .unwrap();
    let before = f.store.canonical_state(&a).unwrap();
    assert_eq!(before.evidence.len(), 2);
    assert!(
        before
            .evidence
            .iter()
            .all(|e| !e.stale && e.outcome == ValidationOutcome::Passed)
    );
    assert!(f.store.certification(&a).unwrap().is_certified());

    // A write in another workspace changes nothing here.
    commit_mutation(&f.store, &elsewhere, "write_file", vec!["x".into()], None).unwrap();
    assert!(f.store.certification(&a).unwrap().is_certified());

    let receipt = commit_mutation(
        &f.store,
        &b,
        "shell",
        vec![],
        Some("sed -i s/a/b/ src/lib.rs".into()),
    )
    .unwrap();
    assert_eq!(receipt.generation, g + 1);
    let after = f.store.canonical_state(&a).unwrap();
    assert!(
        after.evidence.iter().all(|e| e.stale),
        "the whole set is stale together"
    );
    assert!(after.revision > before.revision);
    let cert = f.store.certification(&a).unwrap();
    assert!(!cert.is_certified());
    assert!(cert.blockers[0].contains("stale"), "{:?}", cert.blockers);
    // The historical Passed entry stays in the raw log.
    assert_eq!(
        f.store
            .events(&a, 0, u64::MAX, 100)
            .unwrap()
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Validation { .. }))
            .count(),
        1
    );
}

#[test]
fn certification_waits_for_a_managed_process_and_a_rerun() {
    let f = Fixture::new();
    let a = f.session("/ws");
    f.store
        .append(
            &a,
            op(StateOp::RequireValidation {
                requirement: "tests".into(),
            }),
        )
        .unwrap();
    commit_mutation(
        &f.store,
        &a,
        "shell",
        vec![],
        Some("npm run watch &".into()),
    )
    .unwrap();
    f.store
        .append(
            &a,
            EventKind::ProcessStarted {
                id: "p1".into(),
                command: "npm run watch".into(),
            },
        )
        .unwrap();
    let g = f.store.generation_of(&a).unwrap();
    record_validation(
        &f.store,
        &a,
        vec!["tests".into()],
        "npm test",
        Some(0),
        "ok",
        g,
    )
    .unwrap();

    let first = attempt_certification(&f.store, &a).unwrap();
    assert!(!first.is_certified());
    assert_eq!(
        first.blockers,
        vec!["managed process running: p1 (npm run watch)".to_string()]
    );
    let second = attempt_certification(&f.store, &a).unwrap();
    assert_eq!(second.blockers, first.blockers);
    // Repeated unchanged blockers are a failure lineage, even though the
    // validation command passed; it survives a fresh replay (resume).
    let lineage = f.store.replay_kernel(&a).unwrap().canonical().failures;
    assert_eq!(lineage.len(), 1);
    assert_eq!(lineage[0].count, 2);

    // The natural exit is committed by the process supervisor.
    f.store
        .append(
            &a,
            EventKind::ProcessExited {
                id: "p1".into(),
                exit_code: Some(0),
                output_tail: String::new(),
            },
        )
        .unwrap();
    let third = attempt_certification(&f.store, &a).unwrap();
    assert_eq!(
        third.blockers,
        vec!["not re-run since a managed process exited: tests".to_string()]
    );
    let g = f.store.generation_of(&a).unwrap();
    record_validation(
        &f.store,
        &a,
        vec!["tests".into()],
        "npm test",
        Some(0),
        "ok",
        g,
    )
    .unwrap();
    let done = attempt_certification(&f.store, &a).unwrap();
    assert!(done.is_certified(), "{:?}", done.blockers);
    assert!(f.store.canonical_state(&a).unwrap().failures.is_empty());
}

#[test]
fn recall_selects_the_newest_matches_and_returns_them_in_order() {
    let f = Fixture::new();
    let a = f.session("/ws");
    let b = f.session("/ws");
    let mut hits = Vec::new();
    for i in 0..10 {
        hits.push(
            f.store
                .append(
                    &a,
                    EventKind::user_text(format!("revision {i} of parser_config")),
                )
                .unwrap(),
        );
        f.store
            .append(&a, EventKind::assistant_text("unrelated"))
            .unwrap();
        f.store
            .append(&b, EventKind::user_text("parser_config in another session"))
            .unwrap();
    }
    let rows = f.store.search(&a, "PARSER_config", 3).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.event.seq).collect::<Vec<_>>(),
        vec![hits[9], hits[8], hits[7]]
    );
    let recalled = f.store.recall(&a, "parser_config", 3).unwrap();
    assert_eq!(
        recalled.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![hits[7], hits[8], hits[9]]
    );
    assert!(rows[0].snippet.contains("revision 9"));
    // Terms are ANDed.
    assert_eq!(
        f.store
            .search(&a, "revision 3 parser_config", 10)
            .unwrap()
            .len(),
        1
    );
    assert!(
        f.store
            .search(&a, "revision nothing", 10)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn fts_syntax_in_a_query_cannot_error_or_inject() {
    let f = Fixture::new();
    let a = f.session("/ws");
    f.store
        .append(&a, EventKind::user_text("alpha beta NEAR gamma"))
        .unwrap();
    let nasty = [
        "\"",
        "\"unterminated",
        "alpha OR",
        "OR",
        "AND AND",
        "NOT alpha",
        "NEAR(alpha beta)",
        "alpha*",
        "^alpha",
        "text:alpha",
        "-alpha",
        "(",
        ")",
        "{alpha}",
        "alpha + beta",
        "'",
        "\\",
        "\0",
        "*",
        "\u{2028}",
        "α β",
        "alpha\"beta",
        ":",
        "@@",
        "rowid=1",
    ];
    for q in nasty {
        let rows = f.store.search(&a, q, 10);
        assert!(rows.is_ok(), "query {q:?} failed: {:?}", rows.err());
    }
    // Operators are plain words: "alpha OR zeta" needs both words.
    assert!(f.store.search(&a, "alpha OR zeta", 10).unwrap().is_empty());
    assert_eq!(f.store.search(&a, "NEAR(alpha beta)", 10).unwrap().len(), 1);
    assert!(f.store.search(&a, "", 10).unwrap().is_empty());
    assert!(f.store.search(&a, " !!! ", 10).unwrap().is_empty());
}

#[test]
fn store_search_agrees_with_the_sdk_memory_session() {
    let f = Fixture::new();
    let a = f.session("/ws");
    let mut mem = MemorySession::new(&a, model());
    let texts = [
        "the build failed with E0425 in parser_config.rs",
        "Café au lait",
        "tests pass",
        "E0425 again, build failed",
        "日本語 テキスト",
        "unrelated",
    ];
    for (i, t) in texts.iter().enumerate() {
        let kind = if i % 2 == 0 {
            EventKind::user_text(*t)
        } else {
            tool_result("shell", t, i == 3)
        };
        let seq = f.store.append(&a, kind.clone()).unwrap();
        assert_eq!(mem.push(kind.to_sdk_body()), seq);
    }
    let view = StoreSessionView::new(f.store.clone(), &a).unwrap();
    for q in [
        "E0425",
        "build failed",
        "café",
        "cafe",
        "parser_config",
        "日本語",
        "shell error",
        "ok",
        "tool result",
        "rs",
    ] {
        let middle = view.latest_seq() / 2 + 1;
        for before in [u64::MAX, middle] {
            let store_seqs: Vec<u64> = view
                .search(q, before, 50)
                .iter()
                .map(|h| h.event.seq)
                .collect();
            let mem_seqs: Vec<u64> = mem
                .search(q, before, 50)
                .iter()
                .map(|h| h.event.seq)
                .collect();
            assert_eq!(store_seqs, mem_seqs, "query {q:?} before {before}");
        }
    }
}

#[test]
fn unusable_files_are_refused_and_left_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let check = |name: &str, bytes: &[u8], expect: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = Store::open(&path).unwrap_err().to_string();
        assert!(err.contains(expect), "{name}: {err}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name} was modified");
        err
    };
    check(
        "notes.txt",
        b"just some text, definitely not a database\n",
        "not an SQLite database",
    );
    check("tiny", b"SQLite", "not an SQLite database");
    let mut corrupt = b"SQLite format 3\0".to_vec();
    corrupt.extend(std::iter::repeat_n(0xA5u8, 4096));
    check("corrupt.db", &corrupt, "corrupted");

    // Another program's SQLite database.
    let foreign = dir.path().join("foreign.db");
    {
        let c = rusqlite::Connection::open(&foreign).unwrap();
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
    }
    let bytes = std::fs::read(&foreign).unwrap();
    check("foreign.db", &bytes, "not a Latch store");

    // A store written by a newer Latch.
    let newer = dir.path().join("newer.db");
    {
        let s = Store::open(&newer).unwrap();
        let id = s.create_session("/ws", None, &model()).unwrap().id;
        s.append(&id, EventKind::user_text("from the future"))
            .unwrap();
    }
    {
        let c = rusqlite::Connection::open(&newer).unwrap();
        c.execute("UPDATE latch_schema SET version = 99", [])
            .unwrap();
    }
    let bytes = std::fs::read(&newer).unwrap();
    let err = check("newer.db", &bytes, "schema version 99");
    assert!(
        err.contains(&format!("up to version {}", store::SCHEMA_VERSION)),
        "{err}"
    );
}

#[test]
fn artifacts_are_content_addressed_with_image_dimensions() {
    let f = Fixture::new();
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    png.extend_from_slice(&1024u32.to_be_bytes());
    png.extend_from_slice(&768u32.to_be_bytes());
    png.extend_from_slice(b"rest of the image");
    let m = f.store.put_artifact(&png, None).unwrap();
    assert_eq!(
        (m.mime_type.as_str(), m.width, m.height),
        ("image/png", Some(1024), Some(768))
    );
    assert_eq!(m.sha256, sha256_hex(&png));
    assert_eq!(
        f.store.put_artifact(&png, Some("text/plain")).unwrap(),
        m,
        "stored once"
    );
    assert_eq!(f.store.artifact_bytes(&m.sha256).unwrap().unwrap(), png);
    let view = StoreSessionView::new(f.store.clone(), &f.session("/ws")).unwrap();
    assert_eq!(view.artifact(&m.sha256), Some(m));
    assert_eq!(view.artifact("00"), None);
    let log = f
        .store
        .put_artifact(b"log output", Some("text/plain"))
        .unwrap();
    assert_eq!((log.mime_type.as_str(), log.width), ("text/plain", None));
}

#[test]
fn guarded_writes_reject_external_changes_until_reread() {
    let f = Fixture::new();
    let a = f.session("/ws");
    f.store
        .append(&a, EventKind::file_observed("src/lib.rs", b"fn a() {}"))
        .unwrap();
    let original = sha256_hex(b"fn a() {}");
    check_guarded_write(&f.store, &a, "src/lib.rs", Some(&original)).unwrap();
    check_guarded_write(&f.store, &a, "src/new.rs", None).unwrap();

    let changed = sha256_hex(b"fn b() {}");
    let g = f.store.generation_of(&a).unwrap();
    let err = check_guarded_write(&f.store, &a, "src/lib.rs", Some(&changed)).unwrap_err();
    let GuardError::ExternalChange { seq: Some(seq), .. } = &err else {
        panic!("{err}")
    };
    assert!(err.to_string().contains("re-read"), "{err}");
    assert!(matches!(
        f.store.event(*seq).unwrap().unwrap().kind,
        EventKind::ExternalChange { .. }
    ));
    assert_eq!(f.store.generation_of(&a).unwrap(), g + 1);
    // Still rejected, but not recorded twice.
    let again = check_guarded_write(&f.store, &a, "src/lib.rs", Some(&changed)).unwrap_err();
    assert!(matches!(
        again,
        GuardError::ExternalChange { seq: None, .. }
    ));
    // After re-reading the write may proceed.
    f.store
        .append(&a, EventKind::file_observed("src/lib.rs", b"fn b() {}"))
        .unwrap();
    check_guarded_write(&f.store, &a, "src/lib.rs", Some(&changed)).unwrap();
    let files = f.store.canonical_state(&a).unwrap().files;
    assert_eq!(files[0].sha256.as_deref(), Some(changed.as_str()));
}

#[test]
fn disproofs_survive_into_new_sessions_and_children_of_the_workspace() {
    let f = Fixture::new();
    let first = f.session("/ws");
    f.store
        .append(
            &first,
            tool_result("shell", "checksum mismatch for target/app", true),
        )
        .unwrap();
    f.store
        .append(
            &first,
            op(StateOp::RecordDisproof {
                summary: "checksum mismatch for target/app".into(),
                reason: "the binary embeds its build time".into(),
                lineage: Some("tool:shell:checksum mismatch for target/app".into()),
            }),
        )
        .unwrap();
    assert!(f.store.canonical_state(&first).unwrap().failures.is_empty());
    let later = f.session("/ws");
    let child = f.child("/ws", &later);
    let elsewhere = f.session("/other");
    for s in [&first, &later, &child] {
        let d = f.store.canonical_state(s).unwrap().disproofs;
        assert_eq!(d.len(), 1, "session {s}");
        assert!(d[0].text.contains("build time"));
    }
    assert!(
        f.store
            .canonical_state(&elsewhere)
            .unwrap()
            .disproofs
            .is_empty()
    );
    // Task state stays local to its session.
    f.store
        .append(
            &later,
            op(StateOp::SetGoal {
                text: "ship".into(),
            }),
        )
        .unwrap();
    assert!(f.store.canonical_state(&child).unwrap().goal.is_none());
}

#[test]
fn the_view_serves_bounded_pages_and_cached_state_equal_to_a_replay() {
    let f = Fixture::new();
    let a = f.session("/ws");
    let b = f.session("/ws");
    let view = StoreSessionView::new(f.store.clone(), &a).unwrap();
    let mut batch = Vec::new();
    for i in 0..1200 {
        batch.push(EventKind::user_text(format!("message {i} about widgets")));
    }
    f.store.append_batch(&a, batch).unwrap();
    assert_eq!(view.events(0, u64::MAX, 5000).len(), 1000);
    assert_eq!(view.events_before(u64::MAX, 5000).len(), 1000);
    assert_eq!(view.events_from(0).len(), 1200);
    assert_eq!(view.search("widgets", u64::MAX, 1000).len(), 200);
    for round in 0..5 {
        f.store
            .append(
                &a,
                op(StateOp::AddConstraint {
                    text: format!("c{round}"),
                }),
            )
            .unwrap();
        commit_mutation(&f.store, &b, "write_file", vec!["x".into()], None).unwrap();
        let g = view.info().workspace_generation;
        record_validation(
            &f.store,
            &a,
            vec!["t".into()],
            "make test",
            Some(1),
            "boom",
            g,
        )
        .unwrap();
        let cached = view.canonical_state();
        assert_eq!(
            view.info().state_revision,
            cached.revision,
            "the info names the revision canonical-state returns"
        );
        let replayed = f.store.replay_kernel(&a).unwrap();
        assert_eq!(cached, replayed.canonical());
        assert_eq!(f.store.kernel(&a).unwrap(), replayed);
    }
    let info = view.info();
    assert_eq!(info.workspace_generation, 5);
    assert_eq!(info.event_count, 1210);
    assert_eq!(info.model, model());
    assert_eq!(view.latest_seq(), f.store.latest_seq(&a).unwrap());
    let state = view.canonical_state();
    assert_eq!(state.constraints.len(), 5);
    assert_eq!(state.failures.len(), 1);
    assert_eq!(state.failures[0].count, 5);
    match &view.events_before(u64::MAX, 1)[0].body {
        EventBody::Kernel(n) => assert!(n.summary.contains("make test")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_outline_leaves_out_bulky_bodies_and_prices_every_event() {
    let f = Fixture::new();
    let a = f.session("/ws");
    let view = StoreSessionView::new(f.store.clone(), &a).unwrap();
    let first = f.store.append(&a, EventKind::user_text("hello")).unwrap();
    for (revision, kind) in [
        (1, KernelContextKind::Snapshot),
        (2, KernelContextKind::StateUpdate),
    ] {
        f.store
            .append(
                &a,
                EventKind::kernel_context(
                    "builtin:continuity",
                    KernelContextEntry {
                        generation: 1,
                        revision,
                        kind,
                        epoch_start: (kind == KernelContextKind::Snapshot).then_some(first),
                        text: "a long snapshot body ".repeat(200),
                    },
                ),
            )
            .unwrap();
    }
    f.store
        .append(&a, tool_result("shell", &"output line\n".repeat(300), true))
        .unwrap();
    let p = EstimatorProfile::Anthropic;
    let full = view.events(0, u64::MAX, 100);
    let outline = view.events_outline(0, u64::MAX, 100, p);
    assert_eq!(outline.len(), 4);
    for (o, e) in outline.iter().zip(&full) {
        assert_eq!(o.event.seq, e.seq);
        let price = e.to_message().map(|m| message_tokens(p, &m)).unwrap_or(0);
        assert_eq!(o.tokens, price, "the outline prices the whole event");
        match (&o.event.body, &e.body) {
            (EventBody::KernelContext(ok), EventBody::KernelContext(ek)) => {
                assert!(ok.text.is_empty() && !ek.text.is_empty());
                assert_eq!(
                    (ok.generation, ok.revision, ok.kind),
                    (ek.generation, ek.revision, ek.kind)
                );
                assert_eq!(ok.epoch_start, ek.epoch_start);
            }
            (EventBody::ToolResult(or), EventBody::ToolResult(er)) => {
                assert!(or.content.is_empty() && !er.content.is_empty());
                assert_eq!(
                    (&or.call_id, &or.name, or.is_error),
                    (&er.call_id, &er.name, er.is_error)
                );
                assert!(o.tokens > 300);
            }
            (ob, eb) => assert_eq!(ob, eb),
        }
    }
    match &outline[1].event.body {
        EventBody::KernelContext(k) => assert_eq!(k.epoch_start, Some(first)),
        other => panic!("{other:?}"),
    }
    // Pages are bounded like `events`.
    let seqs = |v: Vec<OutlinedEvent>| v.iter().map(|e| e.event.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(view.events_outline(full[1].seq, full[3].seq, 1, p)),
        [full[1].seq]
    );
    assert_eq!(
        seqs(view.events_outline(full[1].seq, u64::MAX, 100, p)),
        view.events(full[1].seq, u64::MAX, 100)
            .iter()
            .map(|e| e.seq)
            .collect::<Vec<_>>()
    );
}

#[test]
fn stored_tool_output_is_bounded() {
    let big = "x".repeat(100 * 1024);
    let bounded = bound_tool_output(&big, latch_engine_sdk::types::EstimatorProfile::Openai);
    assert!(bounded.len() <= READ_MAX_BYTES);
    let f = Fixture::new();
    let a = f.session("/ws");
    record_validation(&f.store, &a, vec!["r".into()], "cmd", Some(2), &big, 0).unwrap();
    let ev = f.store.events(&a, 0, u64::MAX, 1).unwrap().pop().unwrap();
    let EventKind::Validation {
        output, outcome, ..
    } = ev.kind
    else {
        panic!()
    };
    assert!(output.len() <= READ_MAX_BYTES);
    assert_eq!(outcome, Outcome::Failed);
}

/// The stress guarantee: early memory survives thousands of later events.
/// Local tier: `cargo test -p latch-kernel -- --ignored`.
#[test]
#[ignore]
fn stress_early_memory_survives_ten_thousand_events() {
    let f = Fixture::new();
    let a = f.session("/ws");
    let diagnostic = "error[E0599]: no method named `frobnicate_widget` found for struct `Gadget` in the current scope";
    f.store
        .append_batch(
            &a,
            vec![
                op(StateOp::AddConstraint {
                    text: "never touch the public API of crate::wire".into(),
                }),
                op(StateOp::RecordDecision {
                    text: "use a write-ahead log for durability".into(),
                }),
                op(StateOp::AddHypothesis {
                    text: "the flake comes from the allocator".into(),
                }),
                op(StateOp::RejectHypothesis {
                    text: "the flake comes from the allocator".into(),
                    reason: "reproduces with the system allocator".into(),
                }),
                tool_result("shell", diagnostic, true),
            ],
        )
        .unwrap();
    let view = StoreSessionView::new(f.store.clone(), &a).unwrap();
    for chunk in 0..100 {
        let mut batch = Vec::new();
        for i in 0..100 {
            let n = chunk * 100 + i;
            batch.push(match n % 5 {
                0 => EventKind::user_text(format!("step {n}: keep going with the widget refactor")),
                1 => EventKind::assistant_text(format!("working on step {n}")),
                2 => tool_result("shell", &format!("compiled {n} crates, no errors"), false),
                3 => op(StateOp::AddNote {
                    text: format!("note {n}"),
                }),
                _ => EventKind::Mutation {
                    source: "write_file".into(),
                    paths: vec![format!("src/m{}.rs", n % 50)],
                    command: None,
                    unchanged: false,
                },
            });
        }
        f.store.append_batch(&a, batch).unwrap();
        if chunk % 10 == 0 {
            view.canonical_state();
        }
    }
    assert_eq!(f.store.event_count(&a).unwrap(), 10_005);
    let state = view.canonical_state();
    assert_eq!(state, f.store.replay_kernel(&a).unwrap().canonical());
    assert_eq!(
        state.constraints[0].text,
        "never touch the public API of crate::wire"
    );
    assert_eq!(
        state.decisions[0].text,
        "use a write-ahead log for durability"
    );
    assert_eq!(state.hypotheses.len(), 1);
    assert_eq!(state.hypotheses[0].status, HypothesisStatus::Rejected);
    let recalled = f.store.recall(&a, "frobnicate_widget Gadget", 5).unwrap();
    assert_eq!(recalled.len(), 1);
    match &recalled[0].kind {
        EventKind::ToolResult(r) => assert_eq!(r.content, diagnostic),
        other => panic!("{other:?}"),
    }
    let hits = view.search("E0599", u64::MAX, 5);
    assert_eq!(hits.len(), 1);
    assert!(hits[0].snippet.contains("frobnicate_widget"));
    let _ = Arc::strong_count(&f.store);
}

fn context(generation: u64, revision: u64, text: &str) -> KernelContextEntry {
    KernelContextEntry {
        generation,
        revision,
        kind: KernelContextKind::Snapshot,
        epoch_start: Some(1),
        text: text.into(),
    }
}

/// Kernel context is tagged with the engine that wrote it, durably; an
/// engine's view leaves out every entry up to the last one another engine
/// wrote (its own earlier entries included: switching starts a fresh epoch),
/// pages stay full, and `info` still counts every entry so a new engine's
/// entries rise above all of them.
#[test]
fn an_engine_sees_only_its_own_kernel_context_since_the_last_switch() {
    let f = Fixture::new();
    let a = f.session("/ws");
    let store = &f.store;
    let own = |g, r, t: &str| EventKind::kernel_context("builtin:continuity", context(g, r, t));
    store.append(&a, EventKind::user_text("hello")).unwrap();
    let early = store.append(&a, own(1, 1, "continuity epoch 1")).unwrap();
    let poison = store
        .append(
            &a,
            EventKind::kernel_context("/tmp/hostile.wasm", context(2, 2, "POISON")),
        )
        .unwrap();
    for i in 0..1200 {
        store
            .append(&a, EventKind::user_text(format!("turn {i}")))
            .unwrap();
    }
    let kinds = |v: &StoreSessionView| {
        v.events(0, u64::MAX, 1000)
            .into_iter()
            .filter_map(|e| match e.body {
                EventBody::KernelContext(k) => Some(k.text),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let unscoped = StoreSessionView::new(store.clone(), &a).unwrap();
    assert_eq!(kinds(&unscoped), ["continuity epoch 1", "POISON"]);
    let back = StoreSessionView::for_engine(store.clone(), &a, "builtin:continuity").unwrap();
    assert!(
        kinds(&back).is_empty(),
        "nothing before the switch is authoritative"
    );
    let page = back.events(0, u64::MAX, 1000);
    assert_eq!(page.len(), 1000, "hidden entries do not shorten a page");
    assert!(page.iter().all(|e| e.seq != early && e.seq != poison));
    let before = back.events_before(poison + 1, 5);
    assert_eq!(
        before.len(),
        1,
        "hidden from every read: only `hello` is left"
    );
    assert!(matches!(before[0].body, EventBody::UserMessage(_)));
    assert!(
        back.events_outline(0, poison + 1, 10, EstimatorProfile::Openai)
            .iter()
            .all(|o| !matches!(o.event.body, EventBody::KernelContext(_)))
    );
    let info = back.info();
    assert_eq!(
        (info.kernel_context_generation, info.kernel_context_revision),
        (2, 2)
    );
    // The engine's own entries after the switch are its again, across a reopen.
    let fresh = store.append(&a, own(3, 3, "continuity epoch 3")).unwrap();
    let reopened = Arc::new(Store::open(f.db_path()).unwrap());
    let back = StoreSessionView::for_engine(reopened.clone(), &a, "builtin:continuity").unwrap();
    assert_eq!(
        back.events_before(u64::MAX, 1)[0].seq,
        fresh,
        "the newest event is the engine's own entry"
    );
    assert_eq!(
        back.events_before(u64::MAX, 2000)
            .into_iter()
            .filter(|e| matches!(e.body, EventBody::KernelContext(_)))
            .count(),
        1
    );
    let hostile = StoreSessionView::for_engine(reopened, &a, "/tmp/hostile.wasm").unwrap();
    assert!(
        hostile
            .events_before(u64::MAX, 2000)
            .iter()
            .all(|e| !matches!(e.body, EventBody::KernelContext(_))),
        "the other engine's entries are not the hostile engine's either"
    );
}
