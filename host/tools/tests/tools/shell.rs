//! Shell, managed processes, validation and completion on a real workspace
//! and store.

use crate::common;

use common::{assert_err, assert_ok, env, exists};
use latch_kernel::{CertificationOutcome, EventKind, Outcome};
use serde_json::json;
use std::time::{Duration, Instant};

#[test]
fn hard_deny_is_recorded_and_nothing_runs() {
    let e = env();
    for cmd in [
        "rm -rf /",
        "rm -rf ~",
        ":(){ :|:& };:",
        "mkfs.ext4 /dev/sda1",
        "sudo reboot",
    ] {
        assert_err(&e.call("shell", json!({"command": cmd})), "hard-deny rule");
    }
    assert_err(
        &e.call("shell", json!({"command": "rm -rf /*", "background": true})),
        "rm-root-or-home",
    );
    assert_err(
        &e.call(
            "validate",
            json!({"command": "dd if=/dev/zero of=/dev/sda", "requirement": "r"}),
        ),
        "dd-to-device",
    );
    let denied = e.find(|k| matches!(k, EventKind::ToolDenied { .. }));
    assert_eq!(denied.len(), 7);
    match &denied[0].kind {
        EventKind::ToolDenied {
            tool,
            reason,
            call_id,
        } => {
            assert_eq!(tool, "shell");
            assert!(reason.contains("rm-root-or-home"), "{reason}");
            assert!(call_id.is_some());
        }
        _ => unreachable!(),
    }
    assert!(
        e.find(|k| matches!(k, EventKind::Mutation { .. }))
            .is_empty()
    );
    assert!(
        e.find(|k| matches!(k, EventKind::Validation { .. }))
            .is_empty()
    );
}

#[test]
fn shell_mutation_is_committed_before_the_command_runs() {
    let e = env();
    // The command stamps the time it ran, then fails.
    let o = e.call(
        "shell",
        json!({"command": "date +%s%3N > stamp.txt; echo failing >&2; exit 3"}),
    );
    assert_err(&o, "exit code 3");
    assert!(o.result.content.contains("failing"));
    let stamp: u64 = std::fs::read_to_string(e.path("stamp.txt"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mutations = e.find(|k| matches!(k, EventKind::Mutation { .. }));
    assert_eq!(
        mutations.len(),
        1,
        "a failing command still has its mutation"
    );
    let m = &mutations[0];
    match &m.kind {
        EventKind::Mutation {
            source, command, ..
        } => {
            assert_eq!(source, "shell");
            assert!(command.as_deref().unwrap().starts_with("date"));
        }
        _ => unreachable!(),
    }
    assert!(
        m.time_ms <= stamp,
        "mutation at {} ms, command ran at {stamp} ms",
        m.time_ms
    );
    assert_eq!(e.generation(), 1);

    // Read-only commands need no mutation.
    let o = e.call(
        "shell",
        json!({"command": "ls && git status 2>/dev/null; cat stamp.txt"}),
    );
    assert!(o.result.content.contains("stamp.txt"));
    assert_eq!(e.find(|k| matches!(k, EventKind::Mutation { .. })).len(), 1);
    assert_eq!(e.generation(), 1);
}

#[test]
fn foreground_timeout_kills_the_process_group() {
    let e = env();
    let start = Instant::now();
    let o = e.call(
        "shell",
        json!({"command": "(sleep 1; touch late.txt) & echo started; sleep 30", "timeout_ms": 300}),
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_err(&o, "timed out");
    assert!(o.result.content.contains("started"));
    std::thread::sleep(Duration::from_millis(1300));
    assert!(
        !exists(&e.path("late.txt")),
        "the background child was killed too"
    );
}

#[test]
fn shell_output_is_bounded() {
    let e = env();
    let o = e.call("shell", json!({"command": "seq 1 200000"}));
    assert_ok(&o);
    assert!(o.result.content.len() <= latch_kernel::READ_MAX_BYTES);
    assert!(o.result.content.starts_with("1\n2\n"));
    assert!(o.result.content.contains("200000\n"));
    assert!(o.result.content.contains("omitted"));
}

fn exited(e: &common::Env, id: &str) -> latch_kernel::StoredEvent {
    let id = id.to_string();
    e.wait_for(
        "process_exited",
        move |k| matches!(k, EventKind::ProcessExited { id: x, .. } if *x == id),
    )
}

fn started_id(o: &latch_tools::ToolOutcome) -> String {
    o.result
        .content
        .split_whitespace()
        .nth(3)
        .unwrap()
        .to_string()
}

#[test]
fn background_exit_is_committed_by_the_reaper() {
    let e = env();
    let o = e.call(
        "shell",
        json!({"command": "sleep 0.3; echo bye", "background": true}),
    );
    assert_ok(&o);
    let id = started_id(&o);
    assert!(id.starts_with('p'), "{}", o.result.content);
    let started = e.find(|k| matches!(k, EventKind::ProcessStarted { .. }));
    assert_eq!(started.len(), 1);
    let mutation = e.find(|k| matches!(k, EventKind::Mutation { .. }));
    assert!(mutation[0].seq < started[0].seq);
    assert_eq!(
        e.store
            .kernel(&e.session)
            .unwrap()
            .running_processes()
            .len(),
        1
    );

    // No tool is called: the store alone shows the exit.
    let exit = exited(&e, &id);
    assert!(exit.seq > started[0].seq);
    match &exit.kind {
        EventKind::ProcessExited {
            exit_code,
            output_tail,
            ..
        } => {
            assert_eq!(*exit_code, Some(0));
            assert!(output_tail.contains("bye"));
        }
        _ => unreachable!(),
    }
    assert!(
        e.store
            .kernel(&e.session)
            .unwrap()
            .running_processes()
            .is_empty()
    );
    let o = e.call("process_status", json!({"id": id}));
    assert!(
        o.result.content.contains("exited with code 0"),
        "{}",
        o.result.content
    );
}

#[test]
fn managed_processes_can_be_observed_and_killed() {
    let e = env();
    let o = e.call(
        "shell",
        json!({"command": "echo ready; sleep 30", "background": true}),
    );
    let id = started_id(&o);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let out = e.call("process_output", json!({"id": id}));
        if out.result.content.contains("ready") {
            break;
        }
        assert!(Instant::now() < deadline, "{}", out.result.content);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        e.call("process_status", json!({}))
            .result
            .content
            .contains("running")
    );
    let o = e.call("process_kill", json!({"id": id}));
    assert_ok(&o);
    assert!(
        o.result.content.contains("killed on request"),
        "{}",
        o.result.content
    );
    let exit = exited(&e, &id);
    assert!(matches!(
        exit.kind,
        EventKind::ProcessExited {
            exit_code: None,
            ..
        }
    ));
    assert_err(
        &e.call("process_kill", json!({"id": "p999999"})),
        "no managed process",
    );
}

fn validations(e: &common::Env) -> Vec<(Vec<String>, Outcome, u64)> {
    e.find(|k| matches!(k, EventKind::Validation { .. }))
        .into_iter()
        .map(|ev| match ev.kind {
            EventKind::Validation {
                requirements,
                outcome,
                generation,
                ..
            } => (requirements, outcome, generation),
            _ => unreachable!(),
        })
        .collect()
}

#[test]
fn validate_records_evidence_at_the_current_generation() {
    let e = env();
    assert_ok(&e.call(
        "require_validation",
        json!({"requirement": "ok file exists"}),
    ));
    let o = e.call(
        "validate",
        json!({"requirement": "ok file exists", "command": "test -f ok.txt"}),
    );
    assert_ok(&o); // a failed validation is evidence, not a tool error
    assert!(o.result.content.contains("FAILED"));
    assert_eq!(
        validations(&e),
        vec![(vec!["ok file exists".to_string()], Outcome::Failed, 0)]
    );

    assert_ok(&e.call("write_file", json!({"path": "ok.txt", "content": "ok\n"})));
    let generation = e.generation();
    assert_eq!(generation, 1);
    let o = e.call(
        "validate",
        json!({"requirements": ["ok file exists", "it is readable"], "command": "cat ok.txt"}),
    );
    assert!(
        o.result
            .content
            .contains("PASSED at workspace generation 1"),
        "{}",
        o.result.content
    );
    assert_eq!(e.generation(), generation, "validate is not a mutation");
    let v = validations(&e);
    assert_eq!(
        v[1],
        (
            vec!["ok file exists".to_string(), "it is readable".to_string()],
            Outcome::Passed,
            1
        )
    );
    let state = e.store.canonical_state(&e.session).unwrap();
    assert_eq!(state.evidence.len(), 2);
    assert!(
        state
            .evidence
            .iter()
            .all(|ev| !ev.stale && ev.generation == 1)
    );

    // A later write stales the whole set.
    assert_ok(&e.call("write_file", json!({"path": "other.txt", "content": "x"})));
    let state = e.store.canonical_state(&e.session).unwrap();
    assert!(state.evidence.iter().all(|ev| ev.stale));
    let o = e.call("complete", json!({"summary": "done"}));
    assert_err(&o, "stale: ok file exists");
    assert_eq!(
        o.completion.as_ref().map(|c| c.outcome),
        Some(CertificationOutcome::Refused)
    );
}

#[test]
fn complete_refuses_while_a_managed_process_runs() {
    let e = env();
    assert_ok(&e.call("require_validation", json!({"requirement": "check"})));
    assert_ok(&e.call(
        "validate",
        json!({"requirement": "check", "command": "true"}),
    ));
    let o = e.call("shell", json!({"command": "sleep 0.4", "background": true}));
    let id = started_id(&o);

    let o = e.call("complete", json!({"summary": "done"}));
    assert_err(&o, "managed process running");
    assert!(!o.completion.unwrap().is_certified());

    exited(&e, &id);
    let o = e.call("complete", json!({"summary": "done"}));
    assert!(
        o.result.is_error,
        "evidence predates the process: {}",
        o.result.content
    );

    assert_ok(&e.call(
        "validate",
        json!({"requirement": "check", "command": "true"}),
    ));
    let o = e.call("complete", json!({"summary": "all checks pass"}));
    assert_ok(&o);
    assert!(o.result.content.starts_with("certified"));
    assert!(o.completion.unwrap().is_certified());
    let attempts = e.find(|k| matches!(k, EventKind::CertificationAttempt { .. }));
    assert_eq!(attempts.len(), 3);
}

#[test]
fn task_state_tools_update_canonical_state() {
    let e = env();
    assert_ok(&e.call("set_goal", json!({"text": "make the tests pass"})));
    assert_ok(&e.call("add_constraint", json!({"text": "no new dependencies"})));
    assert_ok(&e.call("record_decision", json!({"text": "use std only"})));
    assert_ok(&e.call("add_hypothesis", json!({"text": "the cache is stale"})));
    assert_ok(&e.call(
        "reject_hypothesis",
        json!({"text": "the cache is stale", "reason": "hash matches"}),
    ));
    assert_ok(&e.call("add_question", json!({"text": "which platform?"})));
    assert_ok(&e.call("add_action", json!({"text": "run the suite"})));
    assert_ok(&e.call("add_criterion", json!({"text": "suite green"})));
    assert_ok(&e.call(
        "record_disproof",
        json!({"summary": "flaky test", "reason": "timing only"}),
    ));
    assert_ok(&e.call("add_note", json!({"text": "CI uses 2 cores"})));
    assert_err(
        &e.call("set_goal", json!({"text": "   "})),
        "must not be empty",
    );
    let state = e.store.canonical_state(&e.session).unwrap();
    assert_eq!(
        state.goal.as_ref().map(|g| g.text.as_str()),
        Some("make the tests pass")
    );
    assert_eq!(state.constraints.len(), 1);
    assert_eq!(state.decisions.len(), 1);
    assert_eq!(state.questions.len(), 1);
    assert_eq!(state.actions.len(), 1);
    assert_eq!(state.criteria.len(), 1);
    assert_eq!(state.notes.len(), 1);
    assert_eq!(state.disproofs.len(), 1);
    assert_eq!(state.hypotheses.len(), 1);
    assert_eq!(e.find(|k| matches!(k, EventKind::StateUpdate(_))).len(), 10);
}

#[test]
fn processes_of_an_ended_latch_process_are_reconciled() {
    let e = env();
    // An earlier run recorded a process that this table never managed.
    e.store
        .append(
            &e.session,
            EventKind::ProcessStarted {
                id: "p1".into(),
                command: "server".into(),
            },
        )
        .unwrap();
    let o = e.call("shell", json!({"command": "sleep 5", "background": true}));
    let live = started_id(&o);
    assert_err(
        &e.call("process_status", json!({"id": "p1"})),
        "earlier run",
    );
    let closed = e.ctx.processes().reconcile(&e.store, &e.session).unwrap();
    assert_eq!(closed, vec!["p1".to_string()]);
    let running = e.store.kernel(&e.session).unwrap().running_processes();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].0, live);
    e.ctx.processes().kill_all(Duration::from_secs(5));
    exited(&e, &live);
    assert!(
        e.store
            .kernel(&e.session)
            .unwrap()
            .running_processes()
            .is_empty()
    );
}

#[test]
fn a_validate_command_that_writes_commits_its_mutation_first() {
    let e = env();
    assert_ok(&e.call("require_validation", json!({"requirement": "built"})));
    let o = e.call(
        "validate",
        json!({"requirement": "built", "command": "echo built > out.txt && cat out.txt"}),
    );
    assert_ok(&o);
    assert!(exists(&e.path("out.txt")));
    let events = e.events();
    let mutation = events
        .iter()
        .position(|ev| {
            matches!(&ev.kind, EventKind::Mutation { source, command: Some(c), .. }
                if source == "validate" && c.contains("out.txt"))
        })
        .expect("the writing validate committed a mutation");
    let validation = events
        .iter()
        .position(|ev| matches!(ev.kind, EventKind::Validation { .. }))
        .unwrap();
    assert!(mutation < validation, "the mutation precedes the command");
    // The evidence is at the generation that includes the command's own
    // write, not at the one the command moved past.
    assert_eq!(e.generation(), 1);
    assert_eq!(
        validations(&e),
        vec![(vec!["built".to_string()], Outcome::Passed, 1)]
    );
    let state = e.store.canonical_state(&e.session).unwrap();
    assert!(state.evidence.iter().all(|ev| !ev.stale));
    assert_ok(&e.call("complete", json!({"summary": "built"})));
    // A read-only proving command is still not a mutation.
    assert_ok(&e.call(
        "validate",
        json!({"requirement": "built", "command": "test -f out.txt"}),
    ));
    assert_eq!(e.generation(), 1);
}

#[test]
fn process_kill_answers_for_a_process_an_ended_latch_started() {
    let e = env();
    e.store
        .append(
            &e.session,
            EventKind::ProcessStarted {
                id: "p7".into(),
                command: "npm run dev".into(),
            },
        )
        .unwrap();
    let o = e.call("process_kill", json!({"id": "p7"}));
    assert_ok(&o);
    assert!(
        o.result.content.contains("already ended"),
        "{}",
        o.result.content
    );
    assert!(
        e.store
            .kernel(&e.session)
            .unwrap()
            .running_processes()
            .is_empty(),
        "its end is recorded, so certification is no longer blocked"
    );
    // Asked again, the answer stands.
    assert_ok(&e.call("process_kill", json!({"id": "p7"})));
}

#[test]
fn commands_do_not_inherit_the_lifeline() {
    // The lifeline's read end belongs to the watchdog; the command itself
    // runs without it, so nothing it starts can hold it.
    let e = env();
    let o = e.call(
        "shell",
        json!({"command": "if [ -e /proc/self/fd/3 ]; then echo has-fd-3; else echo no-fd-3; fi"}),
    );
    assert_ok(&o);
    assert!(o.result.content.contains("no-fd-3"), "{}", o.result.content);
}

#[test]
fn a_repository_a_command_creates_is_named_once_and_left_to_the_user() {
    let e = env();
    let o = e.call("shell", json!({"command": "git init -q && touch a.txt"}));
    assert_ok(&o);
    let said = &o.result.content;
    assert!(
        said.contains("the workspace is now in the git repository")
            && said.contains(&format!("latch git {} --adopt", e.session))
            && said.contains("not checkpointed"),
        "{said}"
    );
    assert_eq!(e.store.session_repository(&e.session).unwrap(), None);
    // Said once: the next command changes nothing about it.
    let o = e.call("shell", json!({"command": "touch b.txt"}));
    assert_ok(&o);
    assert!(
        !o.result.content.contains("--adopt"),
        "{}",
        o.result.content
    );
    // Gone again: no note either (the session never used it).
    let o = e.call("shell", json!({"command": "rm -rf .git"}));
    assert_ok(&o);
    assert!(
        !o.result.content.contains("--adopt"),
        "{}",
        o.result.content
    );
}
