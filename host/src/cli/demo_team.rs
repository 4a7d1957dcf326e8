//! `latch demo team`: an offline session in which a parent agent delegates.
//!
//! The project has two bugs in two files. The parent records the goal and
//! the proof it needs, spawns two children (`adder`, `multiplier`) that work
//! in parallel on workers of their own, waits for their reports and then
//! proves the whole suite itself: the children's validations are
//! informational and never the parent's evidence. The adder's first fix is
//! wrong; its validation fails and it recovers with a second fix. The three
//! agents form a group: the lead puts the work on a task list (the proof of
//! the suite depends on both fixes), each child claims and completes its
//! task and messages the lead once, and the lead claims the proof only when
//! the list unblocks it. Everything
//! runs on the real agent loop, tools, store, supervisor and engine against
//! a scripted model served in Anthropic's exact wire format; the scenario is
//! this module's script, so another demo (a group) can sit beside it.

use super::demo::DemoRig;
use super::render;
use super::setup::{build_agent_observed, new_session};
use crate::agent::AgentEvent;
use crate::supervisor::children::ChildObserver;
use latch_kernel::agents::AgentTree;
use latch_kernel::{ChildState, EventKind, Store};
use latch_provider::fake::{CapturedRequest, Script, ScriptStep, ScriptedTurn};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// The task the parent is given.
pub const TEAM_TASK: &str = "`sh test.sh` fails on add and on mul. Delegate the two fixes so they \
     happen in parallel, then prove the whole suite before you complete.";

/// Files of the team demo's project.
pub fn write_team_project(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::write(
        dir.join("AGENTS.md"),
        "This project is plain POSIX sh. Prove every change with `sh test.sh`.\n",
    )?;
    std::fs::write(
        dir.join("src/add.sh"),
        "# Addition.\nadd() {\n  echo $(( $1 - $2 ))\n}\n",
    )?;
    std::fs::write(
        dir.join("src/mul.sh"),
        "# Multiplication.\nmul() {\n  echo $(( $1 + $2 ))\n}\n",
    )?;
    std::fs::write(
        dir.join("test.sh"),
        "#!/bin/sh\n# sh test.sh [add|mul]: all checks, or one.\n. ./src/add.sh\n. ./src/mul.sh\n\
         status=0\ncheck() {\n  if [ \"$2\" = \"$3\" ]; then echo \"ok: $1 = $3\";\n  \
         else echo \"FAIL: $1 = $2, expected $3\"; status=1; fi\n}\n\
         case \"${1:-all}\" in add|all) check \"add 2 3\" \"$(add 2 3)\" 5 ;; esac\n\
         case \"${1:-all}\" in mul|all) check \"mul 2 3\" \"$(mul 2 3)\" 6 ;; esac\n\
         exit $status\n",
    )?;
    Ok(())
}

/// The provider-visible messages of a request, as JSON text.
fn messages(r: &CapturedRequest) -> String {
    r.body["messages"].to_string()
}

/// How many assistant turns the request already carries: a child's step.
fn step(r: &CapturedRequest) -> usize {
    r.body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count())
}

/// The ids of "Created task #N" in the order they appear in `text`.
fn created(text: &str) -> Vec<u64> {
    text.match_indices("Created task #")
        .filter_map(|(i, m)| {
            text[i + m.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .ok()
        })
        .collect()
}

/// The task a child's brief tells it to claim (`Claim task #N`).
fn brief_task(m: &str) -> u64 {
    let Some(at) = m.find("Claim task #") else {
        return 0;
    };
    m[at + "Claim task #".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or(0)
}

/// What the adder tells the lead once its fix is proven.
const ADDER_NOTE: &str = "add() subtracted; fixed with `+` after a wrong first try.";
/// What the multiplier tells the lead once its fix is proven.
const MULTIPLIER_NOTE: &str = "mul() added; fixed with `*`.";

/// The adder: reads, tries a wrong fix, sees its validation fail, fixes it
/// right and proves it.
fn adder(step: usize, task: u64) -> ScriptedTurn {
    let validate = r#"{"requirement":"sh test.sh add passes","command":"sh test.sh add"}"#;
    match step {
        0 => ScriptedTurn::text("Claiming my task, then reading add().")
            .with_tool_call("task_claim", format!(r#"{{"id":{task}}}"#))
            .with_tool_call("read_file", r#"{"path":"src/add.sh"}"#),
        1 => ScriptedTurn::text("The operands look swapped; trying that.").with_tool_call(
            "edit_file",
            r#"{"path":"src/add.sh","old_string":"$1 - $2","new_string":"$2 - $1"}"#,
        ),
        2 => ScriptedTurn::tool_call("validate", validate),
        3 => ScriptedTurn::text(
            "Still failing (add 2 3 = 1): the order was not the bug, the operator is.",
        )
        .with_tool_call(
            "edit_file",
            r#"{"path":"src/add.sh","old_string":"$2 - $1","new_string":"$1 + $2"}"#,
        ),
        4 => ScriptedTurn::tool_call("validate", validate),
        5 => ScriptedTurn::tool_call(
            "task_complete",
            format!(r#"{{"id":{task},"result":"add() fixed; sh test.sh add passes"}}"#),
        )
        .with_tool_call(
            "group_message",
            format!(r#"{{"to":"lead","text":"{ADDER_NOTE}"}}"#),
        ),
        _ => ScriptedTurn::text(
            "Fixed add() in src/add.sh: it subtracted. My first fix (swapping the operands) \
             failed `sh test.sh add`; the second, `+`, passes it.",
        ),
    }
}

/// The multiplier: reads, fixes, proves.
fn multiplier(step: usize, task: u64) -> ScriptedTurn {
    match step {
        0 => ScriptedTurn::text("Claiming my task, then reading mul().")
            .with_tool_call("task_claim", format!(r#"{{"id":{task}}}"#))
            .with_tool_call("read_file", r#"{"path":"src/mul.sh"}"#),
        1 => ScriptedTurn::tool_call(
            "edit_file",
            r#"{"path":"src/mul.sh","old_string":"$1 + $2","new_string":"$1 * $2"}"#,
        ),
        2 => ScriptedTurn::tool_call(
            "validate",
            r#"{"requirement":"sh test.sh mul passes","command":"sh test.sh mul"}"#,
        ),
        3 => ScriptedTurn::tool_call(
            "task_complete",
            format!(r#"{{"id":{task},"result":"mul() fixed; sh test.sh mul passes"}}"#),
        )
        .with_tool_call(
            "group_message",
            format!(r#"{{"to":"lead","text":"{MULTIPLIER_NOTE}"}}"#),
        ),
        _ => ScriptedTurn::text("Fixed mul() in src/mul.sh: it added; `sh test.sh mul` passes."),
    }
}

/// What the scripted lead has seen so far.
#[derive(Default)]
struct LeadMemory {
    ids: Vec<u64>,
    spawned: bool,
    adder_done: bool,
    multiplier_done: bool,
    adder_told: bool,
    multiplier_told: bool,
    validated: bool,
    completed: bool,
}

/// The parent: put the work on the group's task list (the proof of the
/// suite depends on both fixes), delegate both fixes, wait for both reports
/// and both messages, then claim the proof, run the whole suite itself and
/// complete.
///
/// What the lead has seen is remembered across requests: a later request
/// may carry the early tool results only in the engine's snapshot, after an
/// epoch rotation.
fn lead(m: &str, seen: &mut LeadMemory) -> ScriptedTurn {
    for id in created(m) {
        if !seen.ids.contains(&id) {
            seen.ids.push(id);
        }
    }
    seen.spawned |= m.contains("Spawned child agent");
    seen.adder_done |= m.contains("(adder) completed");
    seen.multiplier_done |= m.contains("(multiplier) completed");
    seen.adder_told |= m.contains(ADDER_NOTE);
    seen.multiplier_told |= m.contains(MULTIPLIER_NOTE);
    seen.validated |= m.contains(r#""name":"validate""#);
    seen.completed |= m.contains(r#""name":"complete""#);
    let ids = seen.ids.clone();
    let (fix_add, fix_mul) = match ids.as_slice() {
        [] => {
            return ScriptedTurn::text(
                "Two independent bugs in two files: one task and one child for each, working \
                 in parallel. The proof of the whole suite stays with me and waits for both.",
            )
            .with_tool_call("set_goal", r#"{"text":"Make `sh test.sh` pass"}"#)
            .with_tool_call(
                "require_validation",
                r#"{"requirement":"sh test.sh passes"}"#,
            )
            .with_tool_call(
                "task_create",
                r#"{"title":"fix add() in src/add.sh","key":"add"}"#,
            )
            .with_tool_call(
                "task_create",
                r#"{"title":"fix mul() in src/mul.sh","key":"mul"}"#,
            );
        }
        [a, b] => {
            return ScriptedTurn::tool_call(
                "task_create",
                format!(
                    r#"{{"title":"prove the whole suite","depends_on":[{a},{b}],"key":"suite"}}"#
                ),
            );
        }
        [a, b, ..] => (*a, *b),
        [_] => unreachable!("the lead creates its first two tasks together"),
    };
    let suite = ids[2];
    if !seen.spawned {
        return ScriptedTurn::text("The list is set; one child per fix.")
            .with_tool_call(
                "spawn_agent",
                format!(
                    r#"{{"role":"adder","task":"Claim task #{fix_add}: make `sh test.sh add` pass by fixing add() in src/add.sh. Change no other file. Complete the task and tell the lead what the bug was.","context":"test.sh sources src/add.sh and src/mul.sh; `sh test.sh add` runs only the add check."}}"#
                ),
            )
            .with_tool_call(
                "spawn_agent",
                format!(
                    r#"{{"role":"multiplier","task":"Claim task #{fix_mul}: make `sh test.sh mul` pass by fixing mul() in src/mul.sh. Change no other file. Complete the task and tell the lead what the bug was.","context":"`sh test.sh mul` runs only the mul check."}}"#
                ),
            );
    }
    let both = seen.adder_done && seen.multiplier_done;
    let told = seen.adder_told && seen.multiplier_told;
    if !(both && told) {
        return ScriptedTurn::text("Waiting for the children's reports.")
            .with_tool_call("wait_agents", r#"{"timeout_s":120}"#);
    }
    if !seen.validated {
        return ScriptedTurn::text(
            "Both children reported and both fixes are completed on the list, so the proof is \
             unblocked. Their validations are informational: I run the whole suite myself.",
        )
        .with_tool_call("task_claim", format!(r#"{{"id":{suite}}}"#))
        .with_tool_call(
            "validate",
            r#"{"requirement":"sh test.sh passes","command":"sh test.sh"}"#,
        );
    }
    if !seen.completed {
        return ScriptedTurn::tool_call(
            "task_complete",
            format!(r#"{{"id":{suite},"result":"sh test.sh passes"}}"#),
        )
        .with_tool_call(
            "complete",
            r#"{"summary":"Two children fixed add() and mul() in parallel; `sh test.sh` passes at the current workspace generation."}"#,
        );
    }
    ScriptedTurn::text(
        "Done: the adder fixed add() (its first attempt failed, its second passed), the \
         multiplier fixed mul(), and the whole suite passes at the current workspace generation.",
    )
}

/// The scripted model of the team demo, routed by each request's own text:
/// a child's brief names its role; everything else is the parent.
pub fn team_script() -> Script {
    let seen = std::sync::Mutex::new(LeadMemory::default());
    Script::default().with_responder(move |r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if m.contains("working as `adder`") {
            adder(step(r), brief_task(&m)).into()
        } else if m.contains("working as `multiplier`") {
            multiplier(step(r), brief_task(&m)).into()
        } else {
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            lead(&m, &mut seen).into()
        }
    })
}

/// One transcript line of a child's event, prefixed with its role.
fn child_line(role: &str, event: &EventKind) -> Option<String> {
    let body = match event {
        EventKind::UserMessage { .. } => Some("▸ starts from its delegation brief".to_string()),
        EventKind::AgentReport(r) => Some(format!(
            "■ report: {} — {}",
            r.outcome.label(),
            r.summary.lines().next().unwrap_or("")
        )),
        other => render::event_line(other),
    }?;
    let lines: Vec<String> = body
        .trim_start_matches('\n')
        .lines()
        .map(|l| format!("  {role:<10}│ {}", l.trim_start()))
        .collect();
    Some(lines.join("\n"))
}

/// One transcript line of the parent's event.
fn parent_line(event: &EventKind) -> Option<String> {
    match event {
        EventKind::AgentNotificationDelivered { text, .. } => Some(format!(
            "  ◂ {}",
            text.lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("[Latch] ")
        )),
        other => render::event_line(other),
    }
}

/// The agent tree under `parent`, one block per child.
fn tree_text(store: &Store, parent: &str, tree: &AgentTree) -> anyhow::Result<String> {
    let mut out = format!("{parent}  lead\n");
    let children: Vec<_> = tree.children().collect();
    for (i, c) in children.iter().enumerate() {
        let last = i + 1 == children.len();
        let (branch, rest) = if last {
            ("└──", "    ")
        } else {
            ("├──", "│   ")
        };
        let state = match c.state {
            ChildState::Finished => "finished",
            ChildState::Failed => "failed",
            ChildState::Unfinished => "interrupted",
        };
        out.push_str(&format!(
            "{branch} {}  {:<10}  {state}  {} events\n",
            c.id,
            c.role,
            store.event_count(&c.id)?
        ));
        if let Some((seq, r)) = c.latest_report() {
            let validations: Vec<&str> = r.validations.iter().map(|v| v.outcome.label()).collect();
            out.push_str(&format!(
                "{rest}  report: {} · files {} · its validations {} · {}\n",
                r.outcome.label(),
                r.files_changed.join(", "),
                validations.join(" → "),
                if tree.is_delivered(*seq) {
                    "delivered once"
                } else {
                    "not delivered"
                }
            ));
            out.push_str(&format!(
                "{rest}  {}\n",
                r.summary.lines().next().unwrap_or("")
            ));
        }
    }
    Ok(out)
}

/// Run the team demo; `keep` leaves the project in place, and `store`
/// records the sessions there instead of in the project.
pub fn demo_team(keep: bool, store: Option<&Path>) -> anyhow::Result<i32> {
    let started = Instant::now();
    let rig = DemoRig::start(write_team_project, team_script(), store)?;
    let session = new_session(&rig.env, &rig.provider)?;
    println!("Latch demo team — workspace {}", rig.workspace.display());
    println!(
        "session {} · engine builtin:continuity · scripted model over the Anthropic wire format at {}",
        session.id,
        rig.server.anthropic_base_url()
    );
    println!("children print as `role │ …`; they run in parallel on workers of their own\n");
    let observer: ChildObserver = Arc::new(|_child: &str, role: &str, event: &EventKind| {
        if let Some(line) = child_line(role, event) {
            println!("{line}");
        }
    });
    let parent_id = session.id.clone();
    let mut agent = build_agent_observed(&rig.env, session, &rig.provider, "demo", Some(observer))?;
    let mut out = |e: AgentEvent| {
        if let AgentEvent::Committed { event, .. } = e
            && let Some(line) = parent_line(event)
        {
            println!("{line}");
        }
    };
    let outcome = agent.run_turn(TEAM_TASK, &mut out);
    let requests = rig.server.requests();
    let tree = rig.env.store.agent_tree(&parent_id)?;
    let DemoRig {
        dir,
        workspace,
        io,
        server,
        store_path,
        env,
        ..
    } = rig;
    io.block_on(server.shutdown());
    let outcome = outcome?;
    println!("\n── agent tree ──");
    print!("{}", tree_text(&env.store, &parent_id, &tree)?);
    let root = env.store.session(&parent_id)?;
    let group = super::group_cmd::group_text(
        env.store.as_ref(),
        crate::supervisor::groups::root_of(&root),
    )?;
    let state = latch_kernel::group::GroupPort::replay(env.store.as_ref(), &parent_id)?;
    let tasks_done = state.tasks().count() == 3
        && state
            .tasks()
            .all(|t| t.status == latch_kernel::group::TaskStatus::Completed);
    println!("\n── group (latch group {parent_id}) ──");
    print!("{}", super::group_cmd::printable(&group));
    let child_requests = requests
        .iter()
        .filter(|r| messages(r).contains("You are a child agent of session"))
        .count();
    let line = |file: &str| -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(workspace.join(file))?
            .lines()
            .find(|l| l.contains("echo"))
            .unwrap_or("")
            .trim()
            .to_string())
    };
    println!(
        "\n{} model requests ({} by the parent, {} by its children); parent: {} steps",
        requests.len(),
        requests.len() - child_requests,
        child_requests,
        outcome.steps
    );
    println!(
        "src/add.sh now reads `{}`; src/mul.sh `{}`",
        line("src/add.sh")?,
        line("src/mul.sh")?
    );
    println!(
        "store: {} ({} events)",
        store_path.display(),
        env.store.total_event_count()?
    );
    if keep {
        let kept = dir.keep();
        println!("project kept at {}", kept.display());
    }
    println!(
        "demo team finished in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let all_finished = tree
        .children()
        .all(|c| c.state == ChildState::Finished && c.reports.len() == 1);
    Ok(
        if all_finished && tree.children().count() == 2 && tasks_done {
            0
        } else {
            1
        },
    )
}
