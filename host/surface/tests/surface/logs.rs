//! Recorded logs: sessions written to a real event store and read back, as
//! a surface receives them.

use latch_engine_sdk::types::{
    KernelContextEntry, KernelContextKind, ModelProfile, Part, ToolCall, ToolResult,
};
use latch_kernel::{
    AgentReport, CertificationOutcome, EventKind, Outcome, ReportOutcome, StateOp, Store,
    StoredEvent,
};

/// A session's log as stored, and where the host's repair begins for the
/// interrupted one.
pub struct Recorded {
    pub session: String,
    pub events: Vec<StoredEvent>,
    pub repair_from: usize,
    _dir: tempfile::TempDir,
}

pub fn call(id: &str, name: &str, args: &str) -> Part {
    Part::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments_json: args.into(),
    })
}

pub fn result(id: &str, name: &str, content: &str, is_error: bool) -> EventKind {
    EventKind::ToolResult(ToolResult {
        call_id: id.into(),
        name: name.into(),
        content: content.into(),
        is_error,
        images: vec![],
    })
}

fn assistant(text: &str, calls: Vec<Part>) -> EventKind {
    let mut parts = vec![Part::Text(text.into())];
    parts.extend(calls);
    EventKind::AssistantMessage { parts }
}

fn usage(read: u64, miss: u64, prefix: u64) -> EventKind {
    EventKind::ProviderUsage {
        input_tokens: Some(1_000),
        output_tokens: Some(50),
        cache_read_tokens: Some(read),
        cache_creation_tokens: None,
        cache_miss_tokens: Some(miss),
        common_prefix_tokens: Some(prefix),
        reasoning_tokens: None,
        estimated_input_tokens: None,
        provider: None,
        model: None,
        base_url: None,
    }
}

fn run_started() -> EventKind {
    EventKind::RunStarted {
        mode: "interactive".into(),
        context: None,
    }
}

struct Log {
    store: Store,
    dir: tempfile::TempDir,
}

impl Log {
    fn new() -> Log {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("latch.db")).unwrap();
        Log { store, dir }
    }

    fn session(&self, parent: Option<&str>) -> String {
        let model = ModelProfile::with_defaults("anthropic", "claude-sonnet-4-5");
        self.store
            .create_session("/work/demo", parent, &model)
            .unwrap()
            .id
    }

    fn add(&self, session: &str, events: Vec<EventKind>) -> Vec<u64> {
        self.store.append_batch(session, events).unwrap()
    }

    /// Every event of `sessions`, in sequence order.
    fn finish(self, root: String, sessions: &[&str], repair_from: usize) -> Recorded {
        let mut events: Vec<StoredEvent> = sessions
            .iter()
            .flat_map(|s| self.store.all_events(s).unwrap())
            .collect();
        events.sort_by_key(|e| e.seq);
        Recorded {
            session: root,
            events,
            repair_from,
            _dir: self.dir,
        }
    }
}

pub const REQ: &str = "sh test.sh passes";

impl Recorded {
    /// The demo's session: read, validate, edit, validate, complete.
    pub fn single_agent() -> Recorded {
        let log = Log::new();
        let s = log.session(None);
        let validate = format!(r#"{{"requirement":"{REQ}","command":"sh test.sh"}}"#);
        log.add(
            &s,
            vec![
                run_started(),
                EventKind::user_text(
                    "`sh test.sh` fails. Find out why, fix it, and prove the fix before you complete.",
                ),
                EventKind::kernel_context(
                    "builtin:continuity",
                    KernelContextEntry {
                        generation: 1,
                        revision: 1,
                        kind: KernelContextKind::Snapshot,
                        epoch_start: Some(1),
                        text: "snapshot".into(),
                    },
                ),
                assistant(
                    "I'll record the goal and the proof it needs, then look at the code.",
                    vec![
                        call("c1", "set_goal", r#"{"text":"Make `sh test.sh` pass"}"#),
                        call("c2", "read_file", r#"{"path":"src/math.sh"}"#),
                    ],
                ),
                usage(0, 1_000, 0),
                EventKind::StateUpdate(StateOp::SetGoal {
                    text: "Make `sh test.sh` pass".into(),
                }),
                EventKind::StateUpdate(StateOp::RequireValidation {
                    requirement: REQ.into(),
                }),
                result("c1", "set_goal", "goal set", false),
                EventKind::file_observed("src/math.sh", b"add() {\n  echo $(( $1 - $2 ))\n}\n"),
                result(
                    "c2",
                    "read_file",
                    "# Arithmetic helpers.\n\nadd() {\n  echo $(( $1 - $2 ))\n}\n",
                    false,
                ),
                assistant(
                    "`add` subtracts its arguments. Fixing the operator.",
                    vec![
                        call("c3", "validate", &validate),
                        call(
                            "c4",
                            "edit_file",
                            r#"{"path":"src/math.sh","old_string":"echo $(( $1 - $2 ))","new_string":"echo $(( $1 + $2 ))"}"#,
                        ),
                    ],
                ),
                usage(600, 200, 1_200),
                EventKind::StateUpdate(StateOp::AddHypothesis {
                    text: "the test expects the wrong sum".into(),
                }),
                EventKind::StateUpdate(StateOp::RejectHypothesis {
                    text: "the test expects the wrong sum".into(),
                    reason: "2 + 3 is 5".into(),
                }),
                EventKind::Validation {
                    requirements: vec![REQ.into()],
                    command: "sh test.sh".into(),
                    outcome: Outcome::Failed,
                    exit_code: Some(1),
                    output: "FAIL: add 2 3 = -1, expected 5".into(),
                    generation: 0,
                },
                result("c3", "validate", "failed: FAIL: add 2 3 = -1, expected 5", true),
                EventKind::Mutation {
                    source: "edit_file".into(),
                    paths: vec!["src/math.sh".into()],
                    command: None, unchanged: false,
                },
                result("c4", "edit_file", "edited src/math.sh", false),
                assistant(
                    "Validating after the last edit.",
                    vec![call("c5", "validate", &validate)],
                ),
                usage(600, 0, 1_200),
                EventKind::Validation {
                    requirements: vec![REQ.into()],
                    command: "sh test.sh".into(),
                    outcome: Outcome::Passed,
                    exit_code: Some(0),
                    output: "ok: add 2 3 = 5".into(),
                    generation: 1,
                },
                result("c5", "validate", "passed: ok: add 2 3 = 5", false),
                EventKind::CertificationAttempt {
                    outcome: CertificationOutcome::Certified,
                    blockers: vec![],
                    generation: 1,
                },
                EventKind::assistant_text("Done: `add` now adds and `sh test.sh` passes."),
                EventKind::RunFinished {
                    outcome: "completed".into(),
                },
            ],
        );
        log.finish(s.clone(), &[&s], 0)
    }

    /// A parent that spawned two children: one reported, one still open.
    pub fn children() -> Recorded {
        let log = Log::new();
        let p = log.session(None);
        let c1 = log.session(Some(&p));
        let c2 = log.session(Some(&p));
        let spawn = |id: &str, role: &str| {
            call(
                id,
                "spawn_agent",
                &format!(r#"{{"role":"{role}","task":"look"}}"#),
            )
        };
        log.add(
            &p,
            vec![
                run_started(),
                EventKind::user_text("review the parser and test it"),
                assistant(
                    "Delegating.",
                    vec![spawn("s1", "reviewer"), spawn("s2", "tester")],
                ),
                EventKind::ChildSpawned {
                    child: c1.clone(),
                    role: "reviewer".into(),
                    task: "review the parser".into(),
                    model: "claude-sonnet-4-5".into(),
                    engine: "builtin:continuity".into(),
                    engine_config: "{}".into(),
                },
                result("s1", "spawn_agent", &c1, false),
                EventKind::ChildSpawned {
                    child: c2.clone(),
                    role: "tester".into(),
                    task: "test the parser".into(),
                    model: "claude-sonnet-4-5".into(),
                    engine: "builtin:continuity".into(),
                    engine_config: "{}".into(),
                },
                result("s2", "spawn_agent", &c2, false),
                EventKind::Validation {
                    requirements: vec!["parser tests pass".into()],
                    command: "cargo test -p parser".into(),
                    outcome: Outcome::Passed,
                    exit_code: Some(0),
                    output: "ok".into(),
                    generation: 0,
                },
            ],
        );
        log.add(
            &c1,
            vec![
                run_started(),
                EventKind::user_text("brief: review the parser"),
                EventKind::assistant_text("child-only text the parent never sees"),
                EventKind::Mutation {
                    source: "edit_file".into(),
                    paths: vec!["src/parser.rs".into()],
                    command: None,
                    unchanged: false,
                },
            ],
        );
        let report = log.add(
            &c1,
            vec![EventKind::AgentReport(AgentReport {
                role: "reviewer".into(),
                outcome: ReportOutcome::Completed,
                summary: "The parser is fine.\nDetails follow.".into(),
                files_changed: vec!["src/parser.rs".into()],
                validations: vec![],
                certification: "not attempted".into(),
            })],
        )[0];
        log.add(
            &c2,
            vec![run_started(), EventKind::user_text("brief: test")],
        );
        log.add(
            &p,
            vec![EventKind::AgentNotificationDelivered {
                child: c1.clone(),
                report_seq: report,
                text: "[Latch] reviewer finished: The parser is fine.".into(),
            }],
        );
        log.finish(p.clone(), &[&p, &c1, &c2], 0)
    }

    /// A run stopped mid-tool; from `repair_from` on, the host's repair.
    pub fn interrupted() -> Recorded {
        let log = Log::new();
        let s = log.session(None);
        log.add(
            &s,
            vec![
                run_started(),
                EventKind::user_text("list the files"),
                assistant(
                    "Looking.",
                    vec![call("k1", "shell", r#"{"command":"ls -la"}"#)],
                ),
            ],
        );
        log.add(
            &s,
            vec![
                result(
                    "k1",
                    "shell",
                    "interrupted: Latch stopped before this tool call finished.",
                    true,
                ),
                EventKind::RunInterrupted {
                    reason: "interrupted by the user (Esc)".into(),
                },
            ],
        );
        log.finish(s.clone(), &[&s], 3)
    }
}
