//! The shared semantic reducers over logs recorded in a real event store:
//! a single agent's session, a parent with children, an interrupted run,
//! and the pin that the live surface equals the one rebuilt after a
//! restart, at every prefix of the log.

mod logs;
mod slots;

use latch_kernel::{EventKind, StoredEvent};
use latch_surface::{Activity, ChildView, Delta, DividerKind, Item, Phase, Surface, ToolStatus};
use logs::Recorded;

/// Feed `events` the way a live process does: deltas stream each
/// assistant message's text (and a reasoning signal) before it commits.
fn live(session: &str, events: &[StoredEvent], check_every_prefix: bool) -> Surface {
    let mut s = Surface::new(session);
    s.go_live();
    for (i, e) in events.iter().enumerate() {
        if e.session == session
            && let EventKind::AssistantMessage { parts } = &e.kind
        {
            s.delta(Delta::Reasoning);
            for p in parts {
                if let latch_engine_sdk::types::Part::Text(t) = p {
                    for chunk in t.as_bytes().chunks(7) {
                        s.delta(Delta::Text(String::from_utf8_lossy(chunk).into_owned()));
                    }
                }
            }
            // Deltas never change what is committed.
            let committed = Surface::replay(session, &events[..i]);
            assert_eq!(
                s.durable(),
                committed.durable(),
                "a delta changed a committed item"
            );
        }
        s.apply(e);
        if check_every_prefix {
            let resumed = Surface::replay(session, &events[..=i]);
            assert_eq!(
                s.durable(),
                resumed.durable(),
                "live and resumed differ after event {} ({})",
                e.seq,
                e.kind.kind_name()
            );
        }
    }
    s
}

#[test]
fn a_single_agent_session_reduces_to_transcript_task_usage_and_phase() {
    let log = Recorded::single_agent();
    let s = Surface::replay(&log.session, &log.events);
    let d = s.durable();
    let items = d.transcript.items();

    // The user's turn, the assistant's text, each tool call with its result.
    assert!(matches!(&items[0], Item::User { text, .. } if text.contains("sh test.sh")));
    assert!(
        matches!(&items[1], Item::Assistant { text, .. } if text.starts_with("I'll record the goal"))
    );
    let tools: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            Item::Tool(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(
        tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["set_goal", "read_file", "validate", "edit_file", "validate"]
    );
    let statuses: Vec<ToolStatus> = tools.iter().map(|t| t.status).collect();
    use ToolStatus::{Done, Failed};
    assert_eq!(statuses, [Done, Done, Failed, Done, Done]);
    assert_eq!(tools[1].summary, "src/math.sh");
    assert!(tools[1].output.contains("echo $(( $1 - $2 ))"));
    // The edit is a diff: the old line removed, the new one added.
    let diff = format!("{:?}", tools[3].diff);
    assert!(
        diff.contains(r#"Removed("echo $(( $1 - $2 ))")"#)
            && diff.contains(r#"Added("echo $(( $1 + $2 ))")"#),
        "{diff}"
    );
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Item::Validation { passed: false, .. }))
    );
    assert!(items.iter().any(|i| matches!(
        i,
        Item::Certification {
            certified: true,
            ..
        }
    )));

    // Task state as the kernel reduces it: the goal, the rejected
    // hypothesis struck, the failed evidence stale after the edit and the
    // passing one current.
    assert_eq!(d.task.goal.as_ref().unwrap().text, "Make `sh test.sh` pass");
    let rejected: Vec<_> = d
        .task
        .hypotheses
        .iter()
        .filter(|h| h.status == latch_engine_sdk::types::HypothesisStatus::Rejected)
        .collect();
    assert_eq!(rejected.len(), 1, "{:?}", d.task.hypotheses);
    assert!(d.task.evidence.iter().any(|e| !e.stale));
    assert_eq!(d.generation, 1);

    // Usage: every request's provider report and the measured hit rate.
    assert_eq!(d.usage.requests().len(), 3);
    assert_eq!(d.usage.totals(), (3_000, 150));
    assert_eq!(d.usage.hit_rate(), Some(1_200.0 / 2_400.0));
    assert_eq!(d.usage.last().unwrap().prefix_utilization(), Some(0.5));

    // The run finished: nothing is shown as running.
    assert_eq!(d.phase, Phase::Idle);
    assert_eq!(s.activity(), Activity::Idle);
}

#[test]
fn children_show_their_role_and_the_state_their_reports_give() {
    let log = Recorded::children();
    let s = Surface::replay(&log.session, &log.events);
    let children: Vec<&ChildView> = s.durable().children.all().iter().collect();
    assert_eq!(children.len(), 2);
    assert_eq!(children[0].role, "reviewer");
    assert_eq!(
        children[0].status,
        latch_surface::children::ChildStatus::Finished
    );
    assert_eq!(
        children[0].last_report.as_deref(),
        Some("The parser is fine.")
    );
    assert_eq!(
        children[1].status,
        latch_surface::children::ChildStatus::Unfinished
    );
    // The spawn is a transcript row, the delivered report a notification;
    // the child's own transcript never reaches the parent's.
    let items = s.durable().transcript.items();
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Item::Child { role, .. } if role == "reviewer"))
    );
    assert!(items.iter().any(
        |i| matches!(i, Item::Notification { text, .. } if text.contains("The parser is fine."))
    ));
    assert!(
        !items
            .iter()
            .any(|i| matches!(i, Item::Assistant { text, .. } if text.contains("child-only")))
    );
    // The child's mutation is workspace-wide: the parent's evidence is stale.
    assert_eq!(s.durable().generation, 1);
    assert!(!s.durable().task.evidence.is_empty());
    assert!(s.durable().task.evidence.iter().all(|e| e.stale));
}

#[test]
fn an_interrupted_run_is_shown_interrupted_never_live() {
    let log = Recorded::interrupted();
    // The log as the killed process left it: a run open, a call unanswered.
    let cut = log.repair_from;
    let resumed = Surface::replay(&log.session, &log.events[..cut]);
    assert!(matches!(resumed.durable().phase, Phase::Tools { .. }));
    assert!(!resumed.run_is_live());
    assert_eq!(
        resumed.activity(),
        Activity::Interrupted(latch_surface::surface::UNFINISHED_REASON.into())
    );
    // A live process that resumes it does not make the old run live.
    let mut later = resumed.clone();
    later.go_live();
    later.delta(Delta::Text("stale".into()));
    assert!(matches!(later.activity(), Activity::Interrupted(_)));

    // After the host's repair: the call answered as interrupted, the run
    // ended with a divider that says why.
    let repaired = Surface::replay(&log.session, &log.events);
    let items = repaired.durable().transcript.items();
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Item::Tool(t) if t.status == ToolStatus::Interrupted))
    );
    assert!(matches!(
        items.last(),
        Some(Item::Divider { kind: DividerKind::Interrupted { reason }, .. }) if reason.contains("interrupted by the user")
    ));
    assert!(matches!(repaired.activity(), Activity::Interrupted(r) if r.contains("by the user")));
}

#[test]
fn live_equals_resumed_at_every_prefix_of_every_recorded_log() {
    for log in [
        Recorded::single_agent(),
        Recorded::children(),
        Recorded::interrupted(),
    ] {
        let s = live(&log.session, &log.events, true);
        assert_eq!(s.streaming(), "", "a committed message ends the stream");
    }
}

#[test]
fn transient_signals_drive_activity_only_while_live() {
    let log = Recorded::single_agent();
    // Up to the first request of the run: user message committed.
    let first_user = log
        .events
        .iter()
        .position(|e| matches!(e.kind, EventKind::UserMessage { .. }))
        .unwrap();
    let mut s = Surface::new(&log.session);
    s.go_live();
    for e in &log.events[..=first_user] {
        s.apply(e);
    }
    assert_eq!(s.activity(), Activity::Waiting, "silence is not progress");
    s.delta(Delta::Reasoning);
    assert_eq!(s.activity(), Activity::Reasoning);
    s.delta(Delta::Retrying {
        attempt: 2,
        reason: "overloaded".into(),
    });
    assert_eq!(s.activity().label(), "retrying (attempt 2): overloaded");
    s.delta(Delta::Text("I'll".into()));
    assert_eq!(s.activity(), Activity::Streaming);
    assert_eq!(s.streaming(), "I'll");
    s.set_permission(Some(latch_surface::PermissionPrompt {
        tool: "shell".into(),
        ..Default::default()
    }));
    assert_eq!(s.activity(), Activity::AwaitingPermission("shell".into()));
}

#[test]
fn unknown_sessions_and_repeated_pages_change_nothing() {
    let log = Recorded::single_agent();
    let mut s = Surface::replay(&log.session, &log.events);
    let before = s.durable().clone();
    for e in &log.events {
        assert!(!s.apply(e), "an event at or below the watermark is new");
    }
    let stranger = StoredEvent {
        seq: before.watermark + 1,
        session: "someone-else".into(),
        time_ms: 0,
        kind: EventKind::user_text("not ours"),
    };
    s.apply(&stranger);
    assert_eq!(s.durable().transcript, before.transcript);
    assert_eq!(s.durable().task, before.task);
}

/// A resume that changed what the session runs with shows each change in
/// the transcript (a looser mode marked as such); the first profile, which
/// changes nothing, shows nothing. Live and resumed agree.
#[test]
fn a_profile_change_is_a_transcript_line_and_the_first_profile_is_not() {
    use latch_engine_sdk::types::ModelProfile;
    use latch_kernel::{ProfileChange, SessionProfile, Store};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("s.db")).unwrap();
    let model = ModelProfile::with_defaults("openai-compatible", "local");
    let id = store.create_session("/w", None, &model).unwrap().id;
    let first = SessionProfile {
        provider: "openai-compatible".into(),
        base_url: Some("http://127.0.0.1:9/v1".into()),
        model: "local".into(),
        approval: "untrusted".into(),
        sandbox: "read-only".into(),
        changes: vec![],
        group: None,
        mode: Default::default(),
    };
    store
        .append(&id, EventKind::SessionProfile(first.clone()))
        .unwrap();
    store.append(&id, EventKind::user_text("hello")).unwrap();
    let looser = SessionProfile {
        approval: "never".into(),
        changes: vec![ProfileChange {
            setting: "approval".into(),
            from: "untrusted".into(),
            to: "never".into(),
            by: "--approval never".into(),
            looser: true,
        }],
        ..first
    };
    store
        .append(&id, EventKind::SessionProfile(looser))
        .unwrap();
    // All of the session's own events, as a surface's catch-up reads them.
    let events = store.all_events(&id).unwrap();
    let s = live(&id, &events, true);
    let items = s.durable().transcript.items();
    assert_eq!(items.len(), 2, "{items:?}");
    let Item::Notification { source, text, .. } = &items[1] else {
        panic!("{items:?}")
    };
    assert_eq!(source, latch_surface::transcript::PROFILE_SOURCE);
    assert!(
        text.contains("approval untrusted → never (LOOSER; by --approval never)"),
        "{text}"
    );
}

/// A `reground` event is one transcript item saying what repeated (refused
/// completions in words, a failing lineage by its operation and count); a
/// `mutation_pending` event, bookkeeping before a command, is none. Live
/// and resumed agree.
#[test]
fn a_reground_is_a_transcript_line_and_a_pending_mutation_is_not() {
    use latch_engine_sdk::types::ModelProfile;
    use latch_kernel::{REFUSALS_IN_A_ROW, Store};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("s.db")).unwrap();
    let model = ModelProfile::with_defaults("openai-compatible", "local");
    let id = store.create_session("/w", None, &model).unwrap().id;
    store.append(&id, EventKind::user_text("fix it")).unwrap();
    store
        .append(
            &id,
            EventKind::MutationPending {
                source: "shell".into(),
                command: Some("make".into()),
                snapshot: Some("4b825dc642cb6eb9a060e54bf8d69288fbee4904".into()),
            },
        )
        .unwrap();
    for (lineage, count) in [
        (REFUSALS_IN_A_ROW, 2),
        ("validation:sh test.sh", 3),
        ("tool:shell `cargo build`:error: boom", 4),
    ] {
        store
            .append(
                &id,
                EventKind::Reground {
                    reason: "what repeats, for the model".into(),
                    lineage: lineage.into(),
                    count,
                },
            )
            .unwrap();
    }
    let events = store.all_events(&id).unwrap();
    let s = live(&id, &events, true);
    let texts: Vec<&str> = s
        .durable()
        .transcript
        .items()
        .iter()
        .skip(1)
        .map(|i| match i {
            Item::Reground { text, .. } => text.as_str(),
            other => panic!("only re-grounds after the message: {other:?}"),
        })
        .collect();
    assert_eq!(
        texts,
        [
            "completion refused twice in a row — the agent re-reads the task",
            "validation `sh test.sh` failed again (3×)",
            "shell `cargo build` failed again (4×)",
        ]
    );
}
