use super::*;
use crate::event::{CertificationOutcome, EventKind, Outcome};
use crate::store::Store;
use crate::view::StoreSessionView;
use latch_engine_sdk::SessionView;
use latch_engine_sdk::types::ModelProfile;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    parent: String,
    a: String,
    b: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("t.db")).unwrap();
    let model = ModelProfile::with_defaults("openai", "m");
    let parent = store.create_session("/ws", None, &model).unwrap().id;
    let a = store
        .create_session("/ws", Some(&parent), &model)
        .unwrap()
        .id;
    let b = store
        .create_session("/ws", Some(&parent), &model)
        .unwrap()
        .id;
    Fixture {
        _dir: dir,
        store,
        parent,
        a,
        b,
    }
}

fn spawned(child: &str, role: &str) -> EventKind {
    EventKind::ChildSpawned {
        child: child.into(),
        role: role.into(),
        task: format!("task of {role}"),
        model: "m".into(),
        engine: "builtin:continuity".into(),
        engine_config: "{}".into(),
    }
}

fn report(role: &str, outcome: ReportOutcome) -> EventKind {
    EventKind::AgentReport(AgentReport {
        role: role.into(),
        outcome,
        summary: format!("{role} done"),
        files_changed: vec![],
        validations: vec![],
        certification: "not attempted".into(),
    })
}

/// A whole lifecycle: two spawns, a queued message and its delivery, a
/// failed report, a resume, reports, one delivered as a notification and
/// one received through `wait_agents`.
fn lifecycle(f: &Fixture) -> (u64, u64, u64) {
    let s = &f.store;
    s.append(&f.parent, spawned(&f.a, "fixer")).unwrap();
    s.append(&f.parent, spawned(&f.b, "tester")).unwrap();
    s.append(&f.parent, EventKind::user_text("unrelated"))
        .unwrap();
    let msg = s
        .append(
            &f.parent,
            EventKind::AgentMessageQueued {
                child: f.a.clone(),
                text: "also check docs".into(),
            },
        )
        .unwrap();
    s.append(
        &f.a,
        EventKind::AgentMessageDelivered {
            message_seq: msg,
            text: "also check docs".into(),
        },
    )
    .unwrap();
    let failed = s
        .append(&f.b, report("tester", ReportOutcome::Failed))
        .unwrap();
    s.append(
        &f.parent,
        EventKind::AgentReportReceived {
            child: f.b.clone(),
            report_seq: failed,
        },
    )
    .unwrap();
    s.append(&f.parent, EventKind::AgentResumed { child: f.b.clone() })
        .unwrap();
    let ra = s
        .append(&f.a, report("fixer", ReportOutcome::Completed))
        .unwrap();
    let rb = s
        .append(&f.b, report("tester", ReportOutcome::Completed))
        .unwrap();
    s.append(
        &f.parent,
        EventKind::AgentNotificationDelivered {
            child: f.a.clone(),
            report_seq: ra,
            text: "a".into(),
        },
    )
    .unwrap();
    (failed, ra, rb)
}

#[test]
fn incremental_application_equals_replay_at_every_prefix() {
    let f = fixture();
    lifecycle(&f);
    let log = f.store.agent_log(&f.parent, 0).unwrap();
    assert_eq!(
        log.len(),
        10,
        "the unrelated user message is not in the log"
    );
    let mut incremental = AgentTree::default();
    for (i, e) in log.iter().enumerate() {
        incremental.apply(e);
        assert_eq!(
            incremental,
            AgentTree::replay(&log[..=i]),
            "prefix {}",
            i + 1
        );
        // Catching up from the store past a watermark gives the same tree.
        let mut caught = AgentTree::replay(&log[..=i]);
        for e in f.store.agent_log(&f.parent, caught.watermark()).unwrap() {
            caught.apply(&e);
        }
        assert_eq!(caught, AgentTree::replay(&log));
    }
    // Applying events again changes nothing.
    let mut twice = incremental.clone();
    for e in log.iter().skip(2) {
        twice.apply(e);
    }
    assert_eq!(twice, incremental);
}

#[test]
fn the_tree_knows_states_reports_deliveries_and_messages() {
    let f = fixture();
    let (failed, ra, rb) = lifecycle(&f);
    let tree = f.store.agent_tree(&f.parent).unwrap();
    let ids: Vec<&str> = tree.children().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, [f.a.as_str(), f.b.as_str()]);
    assert_eq!(tree.child(&f.a).unwrap().state, ChildState::Finished);
    assert_eq!(tree.child(&f.b).unwrap().reports.len(), 2);
    assert!(tree.is_delivered(failed) && tree.is_delivered(ra));
    let pending: Vec<u64> = tree.undelivered().iter().map(|(_, s, _)| *s).collect();
    assert_eq!(pending, [rb], "only b's second report waits");
    assert!(tree.pending_messages(&f.a).is_empty(), "delivered once");
    f.store
        .append(
            &f.parent,
            EventKind::AgentMessageQueued {
                child: f.a.clone(),
                text: "second".into(),
            },
        )
        .unwrap();
    let tree = f.store.agent_tree(&f.parent).unwrap();
    let texts: Vec<String> = tree
        .pending_messages(&f.a)
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(texts, ["second"]);
    assert!(tree.pending_messages(&f.b).is_empty());
}

#[test]
fn a_resumed_child_is_unfinished_until_it_reports_again() {
    let f = fixture();
    f.store.append(&f.parent, spawned(&f.a, "fixer")).unwrap();
    f.store
        .append(&f.a, report("fixer", ReportOutcome::Failed))
        .unwrap();
    let tree = f.store.agent_tree(&f.parent).unwrap();
    assert_eq!(tree.child(&f.a).unwrap().state, ChildState::Failed);
    f.store
        .append(&f.parent, EventKind::AgentResumed { child: f.a.clone() })
        .unwrap();
    let tree = f.store.agent_tree(&f.parent).unwrap();
    assert_eq!(tree.child(&f.a).unwrap().state, ChildState::Unfinished);
}

#[test]
fn lifecycle_events_are_hidden_from_engines_and_recall() {
    let f = fixture();
    lifecycle(&f);
    let view = StoreSessionView::new(std::sync::Arc::new(f.store), &f.parent).unwrap();
    let events = view.events(0, u64::MAX, 1000);
    let bodies: Vec<String> = events.iter().map(|e| format!("{:?}", e.body)).collect();
    assert_eq!(
        events.len(),
        2,
        "the user message and the delivered notification only: {bodies:?}"
    );
    assert!(matches!(
        events[1].body,
        latch_engine_sdk::types::EventBody::Notification(_)
    ));
    assert_eq!(view.events_before(u64::MAX, 1000).len(), 2);
    assert_eq!(
        view.events_outline(
            0,
            u64::MAX,
            1000,
            ModelProfile::with_defaults("openai", "m").estimator
        )
        .len(),
        2
    );
    // The spawn names the role "fixer"; the queued message "docs": neither is
    // searchable.
    assert!(view.search("fixer", u64::MAX, 10).is_empty());
    assert!(view.search("docs", u64::MAX, 10).is_empty());
    let child = StoreSessionView::new(view.store().clone(), &f.a).unwrap();
    let child_events = child.events(0, u64::MAX, 1000);
    assert_eq!(
        child_events.len(),
        1,
        "the delivered message, not the report"
    );
    assert!(child.search("docs", u64::MAX, 10).len() == 1);
}

/// An engine's `latest-seq` names the newest event it can read: hidden
/// lifecycle rows at the end of the log do not count, so an engine that
/// caches by watermark finds nothing new where nothing visible is new.
#[test]
fn latest_seq_of_a_view_skips_trailing_lifecycle_rows() {
    let f = fixture();
    let s = &f.store;
    let visible = s.append(&f.parent, EventKind::user_text("go")).unwrap();
    s.append(&f.parent, spawned(&f.a, "fixer")).unwrap();
    let report_seq = s
        .append(&f.a, report("fixer", ReportOutcome::Completed))
        .unwrap();
    s.append(
        &f.parent,
        EventKind::AgentReportReceived {
            child: f.a.clone(),
            report_seq,
        },
    )
    .unwrap();
    let view = StoreSessionView::new(std::sync::Arc::new(f.store), &f.parent).unwrap();
    assert_eq!(view.latest_seq(), visible);
    assert_eq!(view.events(0, u64::MAX, 10).last().unwrap().seq, visible);
    // Only the hidden report in the child: nothing it can read.
    let child = StoreSessionView::new(view.store().clone(), &f.a).unwrap();
    assert_eq!(child.latest_seq(), 0);
    let next = view
        .store()
        .append(&f.parent, EventKind::user_text("more"))
        .unwrap();
    assert_eq!(view.latest_seq(), next);
}

#[test]
fn the_report_is_built_from_the_childs_own_log() {
    let f = fixture();
    let s = &f.store;
    s.append(
        &f.a,
        EventKind::Mutation {
            source: "write_file".into(),
            paths: vec!["src/lib.rs".into()],
            command: None,
            unchanged: false,
        },
    )
    .unwrap();
    s.append(
        &f.a,
        EventKind::Validation {
            requirements: vec!["tests pass".into()],
            command: "cargo test".into(),
            outcome: Outcome::Passed,
            exit_code: Some(0),
            output: String::new(),
            generation: 1,
        },
    )
    .unwrap();
    s.append(
        &f.a,
        EventKind::CertificationAttempt {
            outcome: CertificationOutcome::Certified,
            blockers: vec![],
            generation: 1,
        },
    )
    .unwrap();
    let events = s.all_events(&f.a).unwrap();
    let r = build_report("fixer", &events, ReportOutcome::Completed, " fixed it \n");
    assert_eq!(r.summary, "fixed it");
    assert_eq!(r.files_changed, ["src/lib.rs"]);
    assert_eq!(r.validations.len(), 1);
    assert_eq!(r.validations[0].outcome, Outcome::Passed);
    assert_eq!(r.certification, "certified");
    let text = notification_text(&f.a, &r);
    assert!(text.contains("informational; not evidence"), "{text}");
    assert!(
        text.contains("src/lib.rs") && text.contains("completed"),
        "{text}"
    );
    // A long summary is bounded.
    let long = "x".repeat(report::SUMMARY_MAX_CHARS + 10);
    let r = build_report("fixer", &[], ReportOutcome::Failed, &long);
    assert!(r.summary.ends_with("…[cut]"));
    assert_eq!(r.certification, "not attempted");
}

#[test]
fn a_childs_validations_never_become_parent_evidence() {
    let f = fixture();
    f.store.append(&f.parent, spawned(&f.a, "fixer")).unwrap();
    f.store
        .append(
            &f.a,
            EventKind::Validation {
                requirements: vec!["tests pass".into()],
                command: "cargo test".into(),
                outcome: Outcome::Passed,
                exit_code: Some(0),
                output: String::new(),
                generation: 0,
            },
        )
        .unwrap();
    let events = f.store.all_events(&f.a).unwrap();
    let r = build_report("fixer", &events, ReportOutcome::Completed, "ok");
    let seq = f
        .store
        .append(&f.a, EventKind::AgentReport(r.clone()))
        .unwrap();
    f.store
        .append(
            &f.parent,
            EventKind::AgentNotificationDelivered {
                child: f.a.clone(),
                report_seq: seq,
                text: notification_text(&f.a, &r),
            },
        )
        .unwrap();
    let parent = f.store.with_kernel(&f.parent, |k| k.canonical()).unwrap();
    let child = f.store.with_kernel(&f.a, |k| k.canonical()).unwrap();
    assert_ne!(
        format!("{:?}", parent.evidence),
        format!("{:?}", child.evidence),
        "the child has evidence the parent does not"
    );
    assert!(
        !format!("{:?}", parent.evidence).contains("tests pass"),
        "{:?}",
        parent.evidence
    );
}

#[test]
fn every_agent_kind_round_trips_and_only_deliveries_are_visible() {
    let kinds = [
        spawned("c", "fixer"),
        EventKind::AgentResumed { child: "c".into() },
        report("fixer", ReportOutcome::Cancelled),
        EventKind::AgentNotificationDelivered {
            child: "c".into(),
            report_seq: 3,
            text: "t".into(),
        },
        EventKind::AgentReportReceived {
            child: "c".into(),
            report_seq: 3,
        },
        EventKind::AgentMessageQueued {
            child: "c".into(),
            text: "t".into(),
        },
        EventKind::AgentMessageDelivered {
            message_seq: 6,
            text: "t".into(),
        },
    ];
    for (i, e) in kinds.iter().enumerate() {
        let back = EventKind::from_row(i as u64, e.kind_name(), &e.to_json()).unwrap();
        assert_eq!(&back, e);
        assert!(crate::event::KNOWN_KINDS.contains(&e.kind_name()));
        let visible = matches!(
            e,
            EventKind::AgentNotificationDelivered { .. } | EventKind::AgentMessageDelivered { .. }
        );
        assert_eq!(e.hidden_from_engines(), !visible, "{}", e.kind_name());
    }
    // A spawn written before the profile fields existed still decodes.
    let old = r#"{"kind":"child_spawned","data":{"child":"c","role":"r"}}"#;
    assert!(EventKind::from_row(1, "child_spawned", old).is_ok());
}
