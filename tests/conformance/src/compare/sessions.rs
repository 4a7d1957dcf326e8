//! The scripted sessions `latch engine compare` plays: the project files
//! they need and, turn by turn, the tool calls the scripted model makes.
//!
//! * `steps80`: the user asks for the cause of a failing import; each step
//!   is one shell call printing a 4 KB log; the user follows up before step
//!   50 (at 5/8 of the steps).
//! * `mixed500`: a mixed coding session in cycles of ten steps (read, edit,
//!   shell, search, read, edit, validate, task state, shell, list) over
//!   source files of about 10 KB and 4 KB build logs; the user follows up
//!   halfway.
//!
//! Both plant the four [`super::facts::FACTS`] in their first steps: the
//! constraint and the code word in the first user message, the diagnostic
//! in the third step's output only, and a hypothesis recorded at step 2 and
//! rejected at step 6. Then the final question asks about them.

use super::facts::{DIAGNOSTIC_LINE, HYPOTHESIS, HYPOTHESIS_REASON, first_task_facts};
use serde::Serialize;
use serde_json::json;

/// Which scripted session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionKind {
    /// Shell steps printing 4 KB each, a follow-up message at 5/8.
    Steps80,
    /// A mixed coding session, a follow-up message halfway.
    Mixed500,
}

impl SessionKind {
    /// Every session, in table order.
    pub const ALL: [SessionKind; 2] = [SessionKind::Steps80, SessionKind::Mixed500];

    /// The name used on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            SessionKind::Steps80 => "steps80",
            SessionKind::Mixed500 => "mixed500",
        }
    }

    /// Tool steps at full length.
    pub fn default_steps(self) -> usize {
        match self {
            SessionKind::Steps80 => 80,
            SessionKind::Mixed500 => 500,
        }
    }

    /// The session named `name`.
    pub fn parse(name: &str) -> Result<SessionKind, String> {
        SessionKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                format!(
                    "there is no scripted session `{name}`; the sessions are steps80 and mixed500"
                )
            })
    }
}

/// One tool call the scripted model makes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Call {
    /// The tool.
    pub name: String,
    /// Its arguments, a JSON object.
    pub args: String,
}

fn call(name: &str, args: serde_json::Value) -> Call {
    Call {
        name: name.to_string(),
        args: args.to_string(),
    }
}

/// One user turn: the message, then one model request per step (each a
/// list of calls), then the closing text that ends the turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Turn {
    /// What the user says.
    pub user: String,
    /// The model's tool calls, one entry per request.
    pub steps: Vec<Vec<Call>>,
    /// The text that ends the turn.
    pub closing: String,
}

/// A whole scripted session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionPlan {
    /// Which session.
    pub kind: SessionKind,
    /// Tool steps in all turns.
    pub steps: usize,
    /// Files of the project, `(relative path, content)`.
    pub files: Vec<(String, String)>,
    /// The turns before the final question.
    pub turns: Vec<Turn>,
    /// The final question about the planted facts.
    pub question: String,
}

/// The final question. It names no fact, so it plants none.
pub const QUESTION: &str = "Before we stop, answer from this session: which constraint did I \
give you at the start, what is the release code word, what exact diagnostic did the early log \
show, and which hypothesis did you rule out?";

/// Helper functions per source file of `mixed500` (about 10 KB each, so
/// every read is the size of a real source file).
const UNIT_HELPERS: usize = 64;

/// Fewest steps a session can have (the facts are planted in the first six).
pub const MIN_STEPS: usize = 6;

/// The plan of `kind` with `steps` tool steps (default: its full length).
pub fn plan(kind: SessionKind, steps: Option<usize>) -> Result<SessionPlan, String> {
    let steps = steps.unwrap_or(kind.default_steps());
    if steps < MIN_STEPS {
        return Err(format!(
            "a session needs at least {MIN_STEPS} steps (the facts are planted in the first six), got {steps}"
        ));
    }
    let (files, all, follow_up) = match kind {
        SessionKind::Steps80 => steps80(steps),
        SessionKind::Mixed500 => mixed(steps),
    };
    let (first, second) = all.split_at(follow_up.min(all.len()));
    let task = match kind {
        SessionKind::Steps80 => {
            "The nightly ledger import fails. Go through the build logs in \
            order (`cat logs/step-NNN.log`) and find the cause."
        }
        SessionKind::Mixed500 => {
            "Finish the pending slots in src/unit_*.rs: read each unit, mark \
            its slots done, keep `sh test.sh` green and record what you decide."
        }
    };
    Ok(SessionPlan {
        kind,
        steps,
        files,
        turns: vec![
            Turn {
                user: format!("{task} {}", first_task_facts()),
                steps: first.to_vec(),
                closing: format!(
                    "Done {} steps so far; waiting for your go-ahead.",
                    first.len()
                ),
            },
            Turn {
                user: "Continue with the rest.".into(),
                steps: second.to_vec(),
                closing: "That was the last step.".into(),
            },
        ],
        question: QUESTION.into(),
    })
}

/// Log lines of about 80 characters, deterministic in
/// `seed`, padded to exactly 4096 bytes; `insert` goes in as line 20.
fn log_4k(seed: u64, insert: Option<&str>) -> String {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut out = String::new();
    let mut line = 0;
    while out.len() < 4096 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        if line == 20
            && let Some(text) = insert
        {
            out.push_str(text);
            out.push('\n');
        }
        out.push_str(&format!(
            "2026-12-03T02:{:02}:{:02} INFO worker-{} batch {} imported {} rows in {} ms crc {:08x}\n",
            (x >> 8) % 60,
            (x >> 16) % 60,
            (x >> 24) % 8,
            seed * 100 + line,
            (x >> 32) % 5000,
            (x >> 40) % 900,
            (x >> 12) as u32,
        ));
        line += 1;
    }
    out.truncate(4095);
    out.push('\n');
    out
}

fn plant(step: usize, calls: &mut Vec<Call>) {
    match step {
        2 => calls.push(call("add_hypothesis", json!({ "text": HYPOTHESIS }))),
        6 => calls.push(call(
            "reject_hypothesis",
            json!({ "text": HYPOTHESIS, "reason": HYPOTHESIS_REASON }),
        )),
        _ => {}
    }
}

type Parts = (Vec<(String, String)>, Vec<Vec<Call>>, usize);

fn steps80(steps: usize) -> Parts {
    let mut files = Vec::new();
    let mut all = Vec::new();
    for i in 1..=steps {
        let path = format!("logs/step-{i:03}.log");
        files.push((
            path.clone(),
            log_4k(i as u64, (i == 3).then_some(DIAGNOSTIC_LINE)),
        ));
        let mut calls = vec![call("shell", json!({ "command": format!("cat {path}") }))];
        plant(i, &mut calls);
        all.push(calls);
    }
    files.push(("vendor/zlib/VERSION".into(), "1.3.1 (pinned)\n".into()));
    (files, all, (steps * 5).div_ceil(8) - 1)
}

fn mixed(steps: usize) -> Parts {
    let cycles = steps.div_ceil(10);
    let units = 10.min(cycles);
    let mut files = Vec::new();
    for u in 0..units {
        let mut text = format!("//! Unit {u} of the ledger importer.\n\n");
        for c in (u..cycles).step_by(units) {
            text.push_str(&format!(
                "// slot {c:02}a: pending\n// slot {c:02}b: pending\n"
            ));
        }
        text.push_str(&format!(
            "\npub fn unit_{u}(rows: &[u64]) -> u64 {{\n    rows.iter().map(|r| r ^ {u}).sum()\n}}\n"
        ));
        // The body of a real source file: about 10 KB of helpers.
        for k in 0..UNIT_HELPERS {
            text.push_str(&format!(
                "\n/// Folds batch {k} of unit {u} into the ledger checksum.\npub fn unit_{u}_batch_{k}(rows: &[u64]) -> u64 {{\n    rows.iter().fold({k}, |acc, r| acc.rotate_left(5) ^ (r + {u}))\n}}\n"
            ));
        }
        files.push((format!("src/unit_{u}.rs"), text));
    }
    for c in 0..cycles {
        files.push((
            format!("logs/build-{c:03}.log"),
            log_4k(1000 + c as u64, (c == 0).then_some(DIAGNOSTIC_LINE)),
        ));
    }
    files.push((
        "test.sh".into(),
        "#!/bin/sh\necho \"ok: 42 checks passed\"\n".into(),
    ));
    files.push(("vendor/zlib/VERSION".into(), "1.3.1 (pinned)\n".into()));
    let mut all = Vec::new();
    for c in 0..cycles {
        let unit = format!("src/unit_{}.rs", c % units);
        let edit = |slot: &str| {
            call(
                "edit_file",
                json!({
                    "path": unit,
                    "old_string": format!("// slot {c:02}{slot}: pending"),
                    "new_string": format!("// slot {c:02}{slot}: done in cycle {c}"),
                }),
            )
        };
        let log = format!("logs/build-{c:03}.log");
        let state = match c % 3 {
            0 => call(
                "add_action",
                json!({ "text": format!("verify {unit} after cycle {c}") }),
            ),
            1 => call(
                "record_decision",
                json!({ "text": format!("cycle {c}: {unit} keeps the xor checksum") }),
            ),
            _ => call(
                "add_note",
                json!({ "text": format!("cycle {c} left the tests green") }),
            ),
        };
        let cycle = [
            call("read_file", json!({ "path": unit })),
            edit("a"),
            call("shell", json!({ "command": format!("cat {log}") })),
            call(
                "grep",
                json!({ "pattern": format!("slot {c:02}a"), "path": "src" }),
            ),
            call("read_file", json!({ "path": unit })),
            edit("b"),
            call(
                "validate",
                json!({ "requirement": "tests pass", "command": "sh test.sh" }),
            ),
            state,
            call("shell", json!({ "command": format!("tail -n 5 {log}") })),
            call("list_files", json!({ "path": "src" })),
        ];
        for (k, first) in cycle.into_iter().enumerate() {
            let step = c * 10 + k + 1;
            if step > steps {
                break;
            }
            let mut calls = vec![first];
            if step == 1 {
                calls.push(call(
                    "require_validation",
                    json!({ "requirement": "tests pass" }),
                ));
            }
            plant(step, &mut calls);
            all.push(calls);
        }
    }
    (files, all, steps / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::facts::{FactId, fact, shows};

    fn texts_of(plan: &SessionPlan) -> Vec<String> {
        plan.turns
            .iter()
            .flat_map(|t| t.steps.iter().flatten().map(|c| c.args.clone()))
            .collect()
    }

    #[test]
    fn steps80_has_80_shell_steps_and_a_follow_up_before_step_50() {
        let p = plan(SessionKind::Steps80, None).unwrap();
        assert_eq!(p.turns[0].steps.len(), 49);
        assert_eq!(p.turns[0].steps.len() + p.turns[1].steps.len(), 80);
        assert!(
            p.turns
                .iter()
                .flat_map(|t| &t.steps)
                .all(|s| s[0].name == "shell")
        );
        let logs: Vec<_> = p
            .files
            .iter()
            .filter(|(f, _)| f.starts_with("logs/"))
            .collect();
        assert_eq!(logs.len(), 80);
        assert!(logs.iter().all(|(_, c)| c.len() == 4096));
    }

    #[test]
    fn facts_are_planted_once_and_the_question_names_none() {
        for kind in SessionKind::ALL {
            let p = plan(kind, None).unwrap();
            let with_diag: Vec<_> = p
                .files
                .iter()
                .filter(|(_, c)| c.contains(DIAGNOSTIC_LINE))
                .collect();
            assert_eq!(with_diag.len(), 1, "{kind:?}");
            let args = texts_of(&p);
            assert_eq!(args.iter().filter(|a| a.contains(HYPOTHESIS)).count(), 2);
            assert!(shows(fact(FactId::Constraint), &p.turns[0].user).is_some());
            assert!(shows(fact(FactId::CodeWord), &p.turns[0].user).is_some());
            for f in crate::compare::facts::FACTS {
                assert_eq!(shows(&f, &p.question), None, "{:?}", f.id);
                assert_eq!(shows(&f, &p.turns[1].user), None, "{:?}", f.id);
            }
        }
    }

    #[test]
    fn mixed500_edits_unique_slots_and_fits_any_length() {
        let p = plan(SessionKind::Mixed500, None).unwrap();
        let steps: Vec<&Vec<Call>> = p.turns.iter().flat_map(|t| &t.steps).collect();
        assert_eq!(steps.len(), 500);
        for s in &steps {
            for c in s.iter().filter(|c| c.name == "edit_file") {
                let args: serde_json::Value = serde_json::from_str(&c.args).unwrap();
                let path = args["path"].as_str().unwrap();
                let old = args["old_string"].as_str().unwrap();
                let content = &p.files.iter().find(|(f, _)| f == path).unwrap().1;
                assert_eq!(content.matches(old).count(), 1, "{old} in {path}");
            }
        }
        let unit = &p
            .files
            .iter()
            .find(|(f, _)| f == "src/unit_0.rs")
            .unwrap()
            .1;
        assert!((9_000..16_000).contains(&unit.len()), "{}", unit.len());
        for n in [6, 7, 23] {
            let short = plan(SessionKind::Mixed500, Some(n)).unwrap();
            let count: usize = short.turns.iter().map(|t| t.steps.len()).sum();
            assert_eq!(count, n);
        }
        assert!(plan(SessionKind::Steps80, Some(5)).is_err());
    }
}
