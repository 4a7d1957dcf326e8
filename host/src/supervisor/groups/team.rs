//! Waiting for the team, on a shared group store: when a member's model
//! ends its turn while work it depends on is in other live members' hands,
//! the turn waits — woken by the store's notifications (`LISTEN/NOTIFY` on
//! PostgreSQL), never by polling — and goes on when that work moves, with
//! a note of what changed and the messages that wait for it.
//!
//! * The lead waits while another member with a live lease holds a claim,
//!   or while a task is open and another live member could take it.
//! * Any other member waits while nothing is ready for it and an open task
//!   waits for a task that a live member holds.
//!
//! A member counts as live while its lease holds on the store's clock;
//! while it waits, the member commits an idempotent request every few
//! seconds, so that members whose leases expired are removed (and their
//! claims freed) by the commit path even when nobody else commits. A store
//! without leases (one machine) never waits here: a parent waits for its
//! children's reports instead.

use latch_kernel::group::{GroupState, MemberLease, TaskStatus};
use std::collections::BTreeMap;

/// What a member waits for, from the group's state and the live leases.
pub(crate) fn waits(state: &GroupState, me: &str, lead: bool, leases: &[MemberLease]) -> bool {
    let live = |id: &str| {
        id != me
            && state.member(id).is_some_and(|m| m.active)
            && leases.iter().any(|l| l.member == id && !l.expired())
    };
    let held_by_live = |task: u64| {
        state.task(task).is_some_and(|t| {
            t.status == TaskStatus::Claimed && t.owner.as_deref().is_some_and(live)
        })
    };
    if lead {
        let held = state.tasks().any(|t| held_by_live(t.id));
        let open = state.tasks().any(|t| t.status == TaskStatus::Open);
        let others = state.members().any(|m| live(&m.id));
        return held || (open && others);
    }
    if !ready(state).is_empty() {
        return false;
    }
    state
        .tasks()
        .any(|t| t.status == TaskStatus::Open && t.depends_on.iter().any(|d| held_by_live(*d)))
}

/// The open tasks whose dependencies are all completed.
pub(crate) fn ready(state: &GroupState) -> Vec<u64> {
    state
        .tasks()
        .filter(|t| {
            t.status == TaskStatus::Open
                && t.depends_on.iter().all(|d| {
                    state
                        .task(*d)
                        .is_some_and(|d| d.status == TaskStatus::Completed)
                })
        })
        .map(|t| t.id)
        .collect()
}

/// The tasks' status and holder, to compare before and after a wait.
pub(crate) fn statuses(state: &GroupState) -> BTreeMap<u64, (TaskStatus, Option<String>)> {
    state
        .tasks()
        .map(|t| (t.id, (t.status, t.owner.clone())))
        .collect()
}

/// True when a task closed (completed or failed) since `before`: the wait
/// ends so the member can act on it.
pub(crate) fn closed_since(
    before: &BTreeMap<u64, (TaskStatus, Option<String>)>,
    state: &GroupState,
) -> bool {
    state.tasks().any(|t| {
        matches!(t.status, TaskStatus::Completed | TaskStatus::Failed)
            && before.get(&t.id).is_none_or(|(s, _)| *s != t.status)
    })
}

/// The note that continues the turn: what changed while the member waited
/// and what is ready now.
pub(crate) fn note(
    before: &BTreeMap<u64, (TaskStatus, Option<String>)>,
    state: &GroupState,
) -> String {
    let mut lines = vec!["[Latch] The group moved on while you waited:".to_string()];
    for t in state.tasks() {
        let was = before.get(&t.id);
        if was.is_some_and(|(s, o)| *s == t.status && *o == t.owner) {
            continue;
        }
        let who = t.owner.as_deref().unwrap_or("nobody");
        let mut line = match t.status {
            TaskStatus::Open if was.is_none() => {
                format!("- task #{} was created: {}", t.id, t.title)
            }
            TaskStatus::Open => format!("- task #{} is open again: {}", t.id, t.title),
            TaskStatus::Claimed => format!("- task #{} was claimed by {who}: {}", t.id, t.title),
            TaskStatus::Completed => {
                format!("- task #{} was completed by {who}: {}", t.id, t.title)
            }
            TaskStatus::Failed => format!("- task #{} failed ({who}): {}", t.id, t.title),
        };
        if let Some(r) = &t.result {
            line.push_str(&format!(" → {}", r.lines().next().unwrap_or("")));
        }
        lines.push(line);
    }
    let ready = ready(state);
    lines.push(if ready.is_empty() {
        "No open task is ready to claim.".to_string()
    } else {
        format!(
            "Ready to claim: {}",
            ready
                .iter()
                .map(|i| format!("#{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    });
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_kernel::EventKind;
    use latch_kernel::event::StoredEvent;
    use latch_kernel::group::GroupEvent;

    fn state(events: Vec<GroupEvent>) -> GroupState {
        let stored: Vec<StoredEvent> = events
            .into_iter()
            .enumerate()
            .map(|(i, g)| StoredEvent {
                seq: i as u64 + 1,
                session: "lead".into(),
                time_ms: 0,
                kind: EventKind::Group(g),
            })
            .collect();
        GroupState::replay(&stored)
    }

    fn lease(member: &str, expires_in_ms: i64) -> MemberLease {
        MemberLease {
            member: member.into(),
            epoch: 1,
            host: "h".into(),
            pid: 1,
            ttl_ms: 1000,
            expires_in_ms,
        }
    }

    fn team() -> Vec<GroupEvent> {
        let join = |m: &str| GroupEvent::MemberJoined {
            member: m.into(),
            role: "r".into(),
        };
        let task = |t: &str, deps: Vec<u64>| GroupEvent::TaskCreated {
            title: t.into(),
            description: String::new(),
            depends_on: deps,
            key: None,
            by: "lead".into(),
        };
        vec![
            GroupEvent::Created {
                lead: "lead".into(),
            },
            join("lead"),
            join("m"),
            task("fix", vec![]),    // #4
            task("prove", vec![4]), // #5
            GroupEvent::TaskClaimed {
                task: 4,
                by: "m".into(),
                epoch: None,
            },
        ]
    }

    #[test]
    fn the_lead_waits_while_a_live_member_holds_work_and_not_for_a_dead_one() {
        let s = state(team());
        assert!(waits(&s, "lead", true, &[lease("m", 5000)]));
        assert!(
            !waits(&s, "lead", true, &[lease("m", -1)]),
            "its lease expired"
        );
        assert!(!waits(&s, "lead", true, &[]), "no lease: nobody runs it");
        // Another member waits for the task `m` holds.
        let mut events = team();
        events.push(GroupEvent::MemberJoined {
            member: "x".into(),
            role: "r".into(),
        });
        let s = state(events);
        assert!(waits(&s, "x", false, &[lease("m", 5000)]));
        assert!(!waits(&s, "m", false, &[lease("m", 5000)]), "not on itself");
    }

    #[test]
    fn a_completion_ends_the_wait_with_a_note_of_what_is_ready() {
        let s = state(team());
        let before = statuses(&s);
        let mut events = team();
        events.push(GroupEvent::TaskCompleted {
            task: 4,
            by: "m".into(),
            ok: true,
            result: "fixed add".into(),
        });
        let after = state(events);
        assert!(closed_since(&before, &after));
        assert!(!closed_since(&statuses(&after), &after));
        assert_eq!(
            note(&before, &after),
            "[Latch] The group moved on while you waited:\n- task #4 was completed by m: fix → \
             fixed add\nReady to claim: #5"
        );
    }
}
