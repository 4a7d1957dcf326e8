use super::*;
use crate::event::StoredEvent;

fn ev(seq: u64, g: GroupEvent) -> StoredEvent {
    StoredEvent {
        seq,
        session: "root".into(),
        time_ms: 1_000 * seq,
        kind: EventKind::Group(g),
    }
}

fn history() -> Vec<StoredEvent> {
    let join = |m: &str, r: &str| GroupEvent::MemberJoined {
        member: m.into(),
        role: r.into(),
    };
    vec![
        ev(
            1,
            GroupEvent::Created {
                lead: "root".into(),
            },
        ),
        ev(2, join("root", "lead")),
        ev(3, join("a", "fixer")),
        ev(
            4,
            GroupEvent::TaskCreated {
                title: "parse".into(),
                description: String::new(),
                depends_on: vec![],
                key: Some("k".into()),
                by: "root".into(),
            },
        ),
        ev(
            5,
            GroupEvent::TaskCreated {
                title: "test".into(),
                description: "after parse".into(),
                depends_on: vec![4, 4],
                key: None,
                by: "root".into(),
            },
        ),
        ev(
            6,
            GroupEvent::TaskClaimed {
                task: 4,
                by: "a".into(),
                epoch: None,
            },
        ),
        // Refused by the store; the reducer ignores it the same way.
        ev(
            7,
            GroupEvent::TaskClaimed {
                task: 4,
                by: "root".into(),
                epoch: None,
            },
        ),
        ev(
            8,
            GroupEvent::MessageQueued {
                from: "a".into(),
                to: ALL.into(),
                recipients: vec!["root".into()],
                text: "parse is mine".into(),
            },
        ),
        ev(
            9,
            GroupEvent::TaskCompleted {
                task: 4,
                by: "a".into(),
                ok: true,
                result: "done".into(),
            },
        ),
        ev(
            10,
            GroupEvent::MessageDelivered {
                message: 8,
                to: "root".into(),
            },
        ),
        ev(
            11,
            GroupEvent::MessageDelivered {
                message: 8,
                to: "root".into(),
            },
        ),
        ev(
            12,
            GroupEvent::MemberLeft {
                member: "a".into(),
                reason: "finished".into(),
                forced_by: None,
            },
        ),
    ]
}

#[test]
fn incremental_equals_replay_at_every_prefix() {
    let log = history();
    let mut live = GroupState::default();
    for (i, e) in log.iter().enumerate() {
        live.apply(e);
        live.apply(e); // applied once only
        assert_eq!(live, GroupState::replay(&log[..=i]), "prefix {}", i + 1);
    }
}

#[test]
fn the_reducer_follows_the_rules() {
    let s = GroupState::replay(&history());
    let t = s.task(4).unwrap();
    assert_eq!(t.status, TaskStatus::Completed);
    assert_eq!(
        t.owner.as_deref(),
        Some("a"),
        "the refused claim changed nothing"
    );
    assert_eq!(s.task(5).unwrap().depends_on, vec![4]);
    assert!(s.pending_for("root").is_empty());
    assert_eq!(s.delivered(), 1, "a second marker delivers nothing");
    assert!(!s.member("a").unwrap().active);
}

#[test]
fn the_presentation_names_owners_dependencies_and_pending() {
    let mut log = history();
    log.truncate(8);
    let text = present::render(&GroupState::replay(&log));
    assert!(text.contains("#4  claimed    a  parse"), "{text}");
    assert!(text.contains("#5  open       -  test  after #4"), "{text}");
    assert!(text.contains("root  lead  active  pending 1"), "{text}");
    assert!(
        text.contains("a  fixer  active  pending 0  holds #4"),
        "{text}"
    );
    assert!(text.contains("1 pending"), "{text}");
    assert_eq!(
        present::render(&GroupState::default()),
        "no agent group in this session yet\n"
    );
}

#[test]
fn group_events_round_trip_through_the_row_encoding() {
    for e in history() {
        let back = EventKind::from_row(e.seq, e.kind.kind_name(), &e.kind.to_json()).unwrap();
        assert_eq!(back, e.kind);
    }
    let d = EventKind::GroupMessageDelivered {
        message_seq: 8,
        from: "a".into(),
        text: "hi".into(),
    };
    assert_eq!(
        EventKind::from_row(1, d.kind_name(), &d.to_json()).unwrap(),
        d
    );
    assert!(EventKind::Group(GroupEvent::Created { lead: "r".into() }).hidden_from_engines());
    assert!(!d.hidden_from_engines());
}
