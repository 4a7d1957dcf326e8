use super::*;
use crate::event::{CertificationOutcome, EventKind, Outcome, StateOp, StoredEvent};
use latch_engine_sdk::types::{HypothesisStatus, Part, ToolCall, ToolResult};

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &["alpha", "beta", "gamma", "delta"];
const REQS: &[&str] = &["tests pass", "clippy clean", "docs build"];
const PATHS: &[&str] = &["src/a.rs", "src/b.rs", "README.md"];

fn random_kind(r: &mut Rng) -> EventKind {
    let w = r.pick(WORDS).to_string();
    match r.below(22) {
        0 => EventKind::user_text(format!("please {w}")),
        1 => EventKind::AssistantMessage {
            parts: vec![Part::ToolCall(ToolCall {
                id: "c".into(),
                name: "shell".into(),
                arguments_json: "{}".into(),
            })],
        },
        2 | 3 => EventKind::ToolResult(ToolResult {
            call_id: "c".into(),
            name: r.pick(&["shell", "read_file"]).into(),
            content: format!("error {} at line {}", w, r.below(100)),
            is_error: r.below(3) != 0,
            images: vec![],
        }),
        4 => EventKind::StateUpdate(StateOp::SetGoal { text: w }),
        5 => EventKind::StateUpdate(StateOp::AddConstraint { text: w }),
        6 => EventKind::StateUpdate(StateOp::RecordDecision { text: w }),
        7 => EventKind::StateUpdate(StateOp::ReviseDecision {
            previous: w,
            text: r.pick(WORDS).into(),
        }),
        8 => EventKind::StateUpdate(StateOp::AddHypothesis { text: w }),
        9 => EventKind::StateUpdate(StateOp::RejectHypothesis {
            text: w,
            reason: "no".into(),
        }),
        10 => EventKind::StateUpdate(match r.below(6) {
            0 => StateOp::AddQuestion { text: w },
            1 => StateOp::ResolveQuestion {
                text: w,
                answer: None,
            },
            2 => StateOp::AddAction { text: w },
            3 => StateOp::CompleteAction { text: w },
            4 => StateOp::AddCriterion { text: w },
            _ => StateOp::AddNote { text: w },
        }),
        11 => EventKind::StateUpdate(StateOp::RequireValidation {
            requirement: r.pick(REQS).into(),
        }),
        12 => EventKind::StateUpdate(StateOp::RecordDisproof {
            summary: w,
            reason: "because".into(),
            lineage: Some(format!("tool:shell:error {} at line #", r.pick(WORDS))),
        }),
        13 | 14 => EventKind::Mutation {
            source: "write_file".into(),
            paths: vec![r.pick(PATHS).into()],
            command: None,
            unchanged: r.below(4) == 0,
        },
        15 => EventKind::FileObserved {
            path: r.pick(PATHS).into(),
            sha256: Some(r.pick(&["h1", "h2"]).into()),
            size: r.below(3),
        },
        16 => EventKind::ExternalChange {
            path: r.pick(PATHS).into(),
            expected_sha256: None,
            actual_sha256: Some("h3".into()),
        },
        17 | 18 => EventKind::Validation {
            requirements: vec![r.pick(REQS).into(), r.pick(REQS).into()],
            command: r.pick(&["cargo test", "cargo clippy"]).into(),
            outcome: if r.below(2) == 0 {
                Outcome::Passed
            } else {
                Outcome::Failed
            },
            exit_code: Some(0),
            output: format!("diag {w}"),
            generation: r.below(6),
        },
        19 => EventKind::ProcessStarted {
            id: r.pick(&["p1", "p2"]).into(),
            command: "server".into(),
        },
        20 => EventKind::ProcessExited {
            id: r.pick(&["p1", "p2"]).into(),
            exit_code: Some(0),
            output_tail: String::new(),
        },
        _ => EventKind::CertificationAttempt {
            outcome: if r.below(3) == 0 {
                CertificationOutcome::Certified
            } else {
                CertificationOutcome::Refused
            },
            blockers: vec![r.pick(&["x", "y"]).into()],
            generation: 0,
        },
    }
}

pub(super) fn generated_log(seed: u64, n: usize) -> Vec<StoredEvent> {
    let mut r = Rng(seed);
    let mut seq = 0;
    (0..n)
        .map(|_| {
            seq += 1 + r.below(2);
            StoredEvent {
                seq,
                session: r.pick(&["a", "a", "a", "b"]).into(),
                time_ms: seq * 10,
                kind: random_kind(&mut r),
            }
        })
        .collect()
}

fn without_revision(
    mut c: latch_engine_sdk::types::CanonicalState,
) -> latch_engine_sdk::types::CanonicalState {
    c.revision = 0;
    c
}

#[test]
fn incremental_equals_replay_at_every_prefix() {
    for seed in [1u64, 7, 42, 0xDEAD_BEEF] {
        let log = generated_log(seed, 400);
        let mut inc = KernelState::new("a");
        let mut previous = without_revision(inc.canonical());
        for k in 0..log.len() {
            let rev_before = inc.revision();
            let changed = inc.apply(&log[k]);
            let replayed = KernelState::replay("a", &log[..=k]);
            assert_eq!(inc, replayed, "seed {seed}, prefix {}", k + 1);
            // The revision moves exactly on effective changes of the rendering.
            let now = without_revision(inc.canonical());
            assert_eq!(changed, now != previous, "seed {seed}, event {:?}", log[k]);
            assert_eq!(inc.revision(), rev_before + changed as u64);
            previous = now;
            // Re-applying is a no-op.
            assert!(!inc.apply(&log[k]));
        }
        // The generated log exercised both effective and ineffective events.
        assert!(
            inc.revision() > 50 && inc.revision() < log.len() as u64,
            "{}",
            inc.revision()
        );
        assert!(inc.generation() > 10);
    }
}

fn ev(seq: u64, session: &str, kind: EventKind) -> StoredEvent {
    StoredEvent {
        seq,
        session: session.into(),
        time_ms: seq,
        kind,
    }
}

fn validation(reqs: &[&str], outcome: Outcome, generation: u64) -> EventKind {
    EventKind::Validation {
        requirements: reqs.iter().map(|s| s.to_string()).collect(),
        command: "cargo test".into(),
        outcome,
        exit_code: Some(0),
        output: String::new(),
        generation,
    }
}

fn mutation() -> EventKind {
    EventKind::Mutation {
        source: "write_file".into(),
        paths: vec!["src/lib.rs".into()],
        command: None,
        unchanged: false,
    }
}

#[test]
fn a_validation_set_goes_stale_together_after_another_sessions_write() {
    let log = [
        ev(
            1,
            "a",
            EventKind::StateUpdate(StateOp::RequireValidation {
                requirement: "unit".into(),
            }),
        ),
        ev(2, "a", validation(&["unit", "doc"], Outcome::Passed, 0)),
        ev(3, "b", mutation()),
    ];
    let s = KernelState::replay("a", &log[..2]);
    let c = s.canonical();
    assert_eq!(c.evidence.len(), 2);
    assert!(
        c.evidence
            .iter()
            .all(|e| !e.stale && e.seq == 2 && e.generation == 0)
    );
    assert!(s.certification().is_certified());
    let s = KernelState::replay("a", &log);
    assert_eq!(s.generation(), 1);
    let c = s.canonical();
    assert!(c.evidence.iter().all(|e| e.stale), "the whole set is stale");
    assert!(
        c.files.is_empty(),
        "another session's write is not this session's file state"
    );
    let cert = s.certification();
    assert!(!cert.is_certified());
    assert!(
        cert.blockers[0].starts_with("stale: unit"),
        "{:?}",
        cert.blockers
    );
}

#[test]
fn a_managed_process_blocks_until_it_exits_and_validation_reruns() {
    let mut s = KernelState::new("a");
    let mut seq = 0;
    let mut push = |s: &mut KernelState, kind| {
        seq += 1;
        s.apply(&ev(seq, "a", kind));
    };
    push(
        &mut s,
        EventKind::StateUpdate(StateOp::RequireValidation {
            requirement: "unit".into(),
        }),
    );
    push(
        &mut s,
        EventKind::ProcessStarted {
            id: "p1".into(),
            command: "npm run dev".into(),
        },
    );
    push(&mut s, validation(&["unit"], Outcome::Passed, 0));
    let cert = s.certification();
    assert_eq!(
        cert.blockers,
        vec!["managed process running: p1 (npm run dev)".to_string()]
    );
    push(
        &mut s,
        EventKind::ProcessExited {
            id: "p1".into(),
            exit_code: Some(0),
            output_tail: String::new(),
        },
    );
    let cert = s.certification();
    assert_eq!(
        cert.blockers,
        vec!["not re-run since a managed process exited: unit".to_string()]
    );
    push(&mut s, validation(&["unit"], Outcome::Passed, 0));
    assert!(s.certification().is_certified());
}

#[test]
fn repeated_unchanged_blockers_form_a_lineage_that_survives_resume() {
    let refused = |b: &str| EventKind::CertificationAttempt {
        outcome: CertificationOutcome::Refused,
        blockers: vec![b.into()],
        generation: 0,
    };
    let log = [
        ev(1, "a", refused("stale: unit")),
        ev(2, "a", validation(&["unit"], Outcome::Passed, 0)),
        ev(3, "a", refused("stale: unit")),
        ev(4, "a", refused("stale: unit")),
    ];
    // "Resume" is a fresh replay of the same log.
    let s = KernelState::replay("a", &log);
    assert_eq!(
        s.active_failures(),
        vec![("certification:stale: unit".to_string(), 3)]
    );
    let mut more = log.to_vec();
    more.push(ev(5, "a", refused("no evidence: doc")));
    let s = KernelState::replay("a", &more);
    assert_eq!(
        s.active_failures(),
        vec![("certification:no evidence: doc".to_string(), 1)]
    );
    more.push(ev(
        6,
        "a",
        EventKind::CertificationAttempt {
            outcome: CertificationOutcome::Certified,
            blockers: vec![],
            generation: 0,
        },
    ));
    assert!(KernelState::replay("a", &more).active_failures().is_empty());
}

#[test]
fn failure_streaks_are_session_scoped_and_close_on_success() {
    let err = |content: &str, is_error| {
        EventKind::ToolResult(ToolResult {
            call_id: "1".into(),
            name: "shell".into(),
            content: content.into(),
            is_error,
            images: vec![],
        })
    };
    let log = [
        ev(1, "a", err("error: linker failed at 12", true)),
        ev(2, "b", err("error: linker failed at 13", true)),
        ev(3, "a", err("error: linker failed at 14", true)),
    ];
    let s = KernelState::replay("a", &log);
    let c = s.canonical();
    assert_eq!(c.failures.len(), 1);
    assert_eq!(
        (
            c.failures[0].count,
            c.failures[0].first_seq,
            c.failures[0].last_seq
        ),
        (2, 1, 3)
    );
    let mut more = log.to_vec();
    more.push(ev(4, "a", err("ok", false)));
    assert!(
        KernelState::replay("a", &more)
            .canonical()
            .failures
            .is_empty()
    );
}

#[test]
fn disproofs_are_workspace_wide_and_close_their_lineage() {
    let log = [
        ev(
            1,
            "a",
            EventKind::ToolResult(ToolResult {
                call_id: "1".into(),
                name: "shell".into(),
                content: "binary differs".into(),
                is_error: true,
                images: vec![],
            }),
        ),
        ev(
            2,
            "a",
            EventKind::StateUpdate(StateOp::RecordDisproof {
                summary: "binary differs from release".into(),
                reason: "release builds embed a timestamp".into(),
                lineage: Some("tool:shell:binary differs".into()),
            }),
        ),
    ];
    let a = KernelState::replay("a", &log);
    assert!(a.canonical().failures.is_empty());
    assert_eq!(a.canonical().disproofs.len(), 1);
    // A later session (or a child) on the same workspace sees it too.
    let later = KernelState::replay("child", &log);
    let d = &later.canonical().disproofs;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].seq, 2);
    assert!(d[0].text.contains("timestamp"));
}

#[test]
fn rejected_hypotheses_never_render_active() {
    let log = [
        ev(
            1,
            "a",
            EventKind::StateUpdate(StateOp::AddHypothesis {
                text: "cache".into(),
            }),
        ),
        ev(
            2,
            "a",
            EventKind::StateUpdate(StateOp::RejectHypothesis {
                text: "cache".into(),
                reason: "cold run fails too".into(),
            }),
        ),
        ev(
            3,
            "a",
            EventKind::StateUpdate(StateOp::AddHypothesis {
                text: "cache".into(),
            }),
        ),
    ];
    let c = KernelState::replay("a", &log).canonical();
    assert_eq!(c.hypotheses.len(), 1);
    assert_eq!(c.hypotheses[0].status, HypothesisStatus::Rejected);
    assert_eq!(
        c.hypotheses[0].reason.as_deref(),
        Some("cold run fails too")
    );
    assert_eq!(c.revision, 2);
}

fn assistant_call(id: &str, name: &str, args: &str) -> EventKind {
    EventKind::AssistantMessage {
        parts: vec![Part::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments_json: args.into(),
        })],
    }
}

fn result(id: &str, name: &str, content: &str, is_error: bool) -> EventKind {
    EventKind::ToolResult(ToolResult {
        call_id: id.into(),
        name: name.into(),
        content: content.into(),
        is_error,
        images: vec![],
    })
}

#[test]
fn lineages_are_keyed_by_the_failing_operation_and_its_error() {
    let build = r#"{"command":"cargo build"}"#;
    let log = [
        ev(1, "a", assistant_call("c1", "shell", build)),
        ev(
            2,
            "a",
            result(
                "c1",
                "shell",
                "error[E0425]: cannot find value `x` at src/main.rs:3:5",
                true,
            ),
        ),
        // An unrelated successful command of the same tool.
        ev(3, "a", assistant_call("c2", "shell", r#"{"command":"ls"}"#)),
        ev(4, "a", result("c2", "shell", "Cargo.toml\nsrc", false)),
        // The same build fails with another error code: another lineage.
        ev(5, "a", assistant_call("c3", "shell", build)),
        ev(
            6,
            "a",
            result(
                "c3",
                "shell",
                "error[E0433]: failed to resolve at src/main.rs:9:1",
                true,
            ),
        ),
        // The first error again, on another line: the same lineage.
        ev(7, "a", assistant_call("c4", "shell", build)),
        ev(
            8,
            "a",
            result(
                "c4",
                "shell",
                "error[E0425]: cannot find value `x` at src/main.rs:40:5",
                true,
            ),
        ),
    ];
    let s = KernelState::replay("a", &log);
    let active = s.active_failures();
    assert_eq!(active.len(), 2, "{active:?}");
    assert!(
        active[0]
            .0
            .starts_with("tool:shell `cargo build`:error[e0425]")
    );
    assert_eq!(active[0].1, 2);
    assert!(active[1].0.contains("e0433"));
    assert_eq!(active[1].1, 1);
    // A success of the failing operation itself closes its lineages.
    let mut more = log.to_vec();
    more.push(ev(9, "a", assistant_call("c5", "shell", build)));
    more.push(ev(10, "a", result("c5", "shell", "Finished", false)));
    assert!(KernelState::replay("a", &more).active_failures().is_empty());
}

#[test]
fn the_open_turn_is_what_resume_repairs() {
    let log = [
        ev(
            1,
            "a",
            EventKind::RunStarted {
                mode: "run".into(),
                context: None,
            },
        ),
        ev(2, "a", EventKind::user_text("go")),
        ev(
            3,
            "a",
            EventKind::AssistantMessage {
                parts: vec![
                    Part::ToolCall(ToolCall {
                        id: "c1".into(),
                        name: "shell".into(),
                        arguments_json: r#"{"command":"make"}"#.into(),
                    }),
                    Part::ToolCall(ToolCall {
                        id: "c2".into(),
                        name: "read_file".into(),
                        arguments_json: r#"{"path":"a.rs"}"#.into(),
                    }),
                ],
            },
        ),
        ev(4, "a", result("c1", "shell", "ok", false)),
        // Another session's events never open or close this one's turn.
        ev(
            5,
            "b",
            EventKind::RunStarted {
                mode: "run".into(),
                context: None,
            },
        ),
    ];
    let s = KernelState::replay("a", &log);
    let open = s.unfinished();
    assert!(open.open_run);
    assert_eq!(open.open_calls.len(), 1);
    assert_eq!(open.open_calls[0].id, "c2");
    assert_eq!(open.open_calls[0].operation, "read_file `a.rs`");
    let mut more = log.to_vec();
    more.push(ev(6, "a", result("c2", "read_file", "x", false)));
    more.push(ev(
        7,
        "a",
        EventKind::RunFinished {
            outcome: "completed".into(),
        },
    ));
    assert_eq!(
        KernelState::replay("a", &more).unfinished(),
        &Unfinished::default()
    );
}

#[test]
fn reground_is_due_for_refusals_in_a_row_and_repeated_lineages_until_answered() {
    let refused = |b: &str| EventKind::CertificationAttempt {
        outcome: CertificationOutcome::Refused,
        blockers: vec![b.to_string()],
        generation: 0,
    };
    let mut k = KernelState::new("s");
    // Two refusals in a row, whatever their blockers.
    k.apply(&ev(1, "s", refused("no evidence: a")));
    assert!(k.reground_due().is_empty());
    k.apply(&ev(2, "s", refused("stale: b")));
    let due = k.reground_due();
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(
        (due[0].lineage.as_str(), due[0].count),
        (REFUSALS_IN_A_ROW, 2)
    );
    // Answered: nothing due until the streak doubles.
    k.apply(&ev(3, "s", due[0].event()));
    assert!(k.reground_due().is_empty());
    k.apply(&ev(4, "s", refused("stale: b")));
    assert!(k.reground_due().is_empty());
    k.apply(&ev(5, "s", refused("stale: b")));
    assert_eq!(k.reground_due()[0].count, 4);
    // A certified completion ends the streak.
    k.apply(&ev(
        6,
        "s",
        EventKind::CertificationAttempt {
            outcome: CertificationOutcome::Certified,
            blockers: vec![],
            generation: 0,
        },
    ));
    assert!(k.reground_due().is_empty());
    // A validation failing twice is a repeated lineage; another session's
    // failures are not this session's.
    let failed = validation(&["unit"], Outcome::Failed, 0);
    k.apply(&ev(7, "other", failed.clone()));
    k.apply(&ev(8, "s", failed.clone()));
    assert!(k.reground_due().is_empty());
    k.apply(&ev(9, "s", failed));
    let due = k.reground_due();
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(due[0].lineage, "validation:cargo test");
}
