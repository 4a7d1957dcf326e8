//! The reducers against an independent oracle: a deliberately plain,
//! non-incremental reading of whole generated logs.

use super::tests::generated_log;
use super::*;
use crate::event::{EventKind, Outcome, StateOp, StoredEvent};

/// An independent oracle for the reducers: a deliberately plain,
/// non-incremental reading of a whole log, written without the reducers'
/// code, for the parts of the state it can state directly. The
/// `incremental == replay` pin above compares `apply` with itself folded; this
/// one compares it with something else.
#[derive(Debug, PartialEq)]
struct Plain {
    generation: u64,
    goal: Option<String>,
    /// (requirement, passed, generation, seq, stale)
    evidence: Vec<(String, bool, u64, u64, bool)>,
    running: Vec<String>,
}

fn plain(session: &str, log: &[StoredEvent]) -> Plain {
    let generation = log
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::Mutation {
                    unchanged: false,
                    ..
                } | EventKind::ExternalChange { .. }
            )
        })
        .count() as u64;
    let own: Vec<&StoredEvent> = log.iter().filter(|e| e.session == session).collect();
    let goal = own
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::StateUpdate(StateOp::SetGoal { text }) if !text.trim().is_empty() => {
                Some(text.trim().to_string())
            }
            _ => None,
        })
        .next_back();
    let mut requirements: Vec<String> = Vec::new();
    for e in &own {
        if let EventKind::Validation {
            requirements: r, ..
        } = &e.kind
        {
            for r in r.iter().map(|r| r.trim()).filter(|r| !r.is_empty()) {
                if !requirements.iter().any(|x| x == r) {
                    requirements.push(r.to_string());
                }
            }
        }
    }
    let evidence = requirements
        .into_iter()
        .map(|req| {
            let (passed, at, seq) = own
                .iter()
                .filter_map(|e| match &e.kind {
                    EventKind::Validation {
                        requirements,
                        outcome,
                        generation,
                        ..
                    } if requirements.iter().any(|r| r.trim() == req) => {
                        Some((*outcome == Outcome::Passed, *generation, e.seq))
                    }
                    _ => None,
                })
                .next_back()
                .unwrap();
            (req, passed, at, seq, at != generation)
        })
        .collect();
    let mut ids: Vec<String> = Vec::new();
    for e in &own {
        if let EventKind::ProcessStarted { id, .. } = &e.kind
            && !ids.contains(id)
        {
            ids.push(id.clone());
        }
    }
    let mut running: Vec<String> = ids
        .into_iter()
        .filter(|id| {
            own.iter()
                .filter_map(|e| match &e.kind {
                    EventKind::ProcessStarted { id: x, .. } if x == id => Some(true),
                    EventKind::ProcessExited { id: x, .. } if x == id => Some(false),
                    _ => None,
                })
                .next_back()
                .unwrap_or(false)
        })
        .collect();
    running.sort();
    Plain {
        generation,
        goal,
        evidence,
        running,
    }
}

fn reduced(s: &KernelState) -> Plain {
    let c = s.canonical();
    let mut running: Vec<String> = s
        .running_processes()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    running.sort();
    Plain {
        generation: s.generation(),
        goal: c.goal.map(|g| g.text),
        evidence: c
            .evidence
            .into_iter()
            .map(|e| {
                (
                    e.requirement,
                    e.outcome == Outcome::Passed.to_sdk(),
                    e.generation,
                    e.seq,
                    e.stale,
                )
            })
            .collect(),
        running,
    }
}

#[test]
fn the_reducers_agree_with_an_independent_oracle_at_every_prefix() {
    for seed in [3u64, 11, 99, 0xC0FFEE] {
        let log = generated_log(seed, 400);
        let mut inc = KernelState::new("a");
        let mut compared_evidence = 0;
        for k in 0..log.len() {
            inc.apply(&log[k]);
            let expected = plain("a", &log[..=k]);
            compared_evidence += expected.evidence.len();
            assert_eq!(reduced(&inc), expected, "seed {seed}, prefix {}", k + 1);
        }
        assert!(compared_evidence > 100, "the oracle saw evidence");
    }
}

#[test]
fn the_oracle_catches_a_reducer_that_drops_an_event() {
    // The pin can fail: a builder that skips one event of each kind the
    // oracle reads disagrees with it at some prefix.
    type Kind = fn(&EventKind) -> bool;
    let kinds: [(&str, Kind); 4] = [
        ("mutation", |k| matches!(k, EventKind::Mutation { .. })),
        ("validation", |k| matches!(k, EventKind::Validation { .. })),
        ("process start", |k| {
            matches!(k, EventKind::ProcessStarted { .. })
        }),
        ("goal", |k| {
            matches!(k, EventKind::StateUpdate(StateOp::SetGoal { .. }))
        }),
    ];
    for (skipped, is) in kinds {
        let log = generated_log(5, 400);
        let victim = log
            .iter()
            .position(|e| e.session == "a" && is(&e.kind))
            .unwrap();
        let mut broken = KernelState::new("a");
        let mut disagreed = false;
        for k in 0..log.len() {
            if k != victim {
                broken.apply(&log[k]);
            }
            disagreed |= reduced(&broken) != plain("a", &log[..=k]);
        }
        assert!(disagreed, "dropping a {skipped} went unnoticed");
    }
}
