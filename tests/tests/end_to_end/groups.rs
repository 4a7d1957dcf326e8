//! Agent groups end to end over real HTTP to the scripted provider: a lead
//! and two child agents work a task list with a dependency, message each
//! other once and finish, and the group's final state — the same text
//! `latch group` prints — is what the live session showed; an idle agent is
//! never woken by a message, which reaches it at its next safe boundary
//! after its tool results, exactly once.

use super::children::{Team, team};
use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentOptions};
use latch::config::Config;
use latch::supervisor::Supervisor;
use latch::supervisor::children::{ChildRuntime, ParentAgents};
use latch::supervisor::groups::{GroupMember, LiveGroup, ensure_group};
use latch_kernel::group::{GroupEvent, GroupPort, GroupState, TaskStatus};
use latch_kernel::{EventKind, Store};
use latch_provider::Provider;
use latch_provider::fake::{CapturedRequest, Script, ScriptStep, ScriptedTurn, WireFormat};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

/// The phrase only a child's brief carries.
const BRIEF: &str = "You are a child agent of session";

pub(super) fn messages(r: &CapturedRequest) -> String {
    r.body["messages"].to_string()
}

/// Tool results in an OpenAI-format request.
fn results(r: &CapturedRequest) -> usize {
    r.body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
        .unwrap_or(0)
}

/// The last tool result's text.
pub(super) fn last_result(r: &CapturedRequest) -> String {
    r.body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "tool"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

/// The ids of "Created task #N" in the order they appear.
pub(super) fn created(text: &str) -> Vec<u64> {
    text.match_indices("Created task #")
        .map(|(i, m)| {
            text[i + m.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap()
        })
        .collect()
}

/// The first `#N` after `marker` in `text`.
fn id_after(text: &str, marker: &str) -> u64 {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} in {text}"))
        + marker.len();
    text[at..]
        .chars()
        .skip_while(|c| *c != '#')
        .skip(1)
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// The lead creates two tasks (tests after the parser), spawns a fixer and
/// a tester, and waits for them until both reported and the tester's
/// message reached it. The fixer claims and does the parser, messages the
/// tester and completes it (so the message is queued while the tester
/// still runs: an agent that finished is not woken by information); the
/// tester claims the tests once they are unblocked, completes them and
/// messages the lead.
///
/// The fixer holds its completion until the tester was refused once
/// (at most 20 s), so the dependency is met on every run.
fn team_script(blocked: Arc<(Mutex<bool>, Condvar)>) -> impl Fn(&CapturedRequest) -> ScriptStep {
    move |r| step(r, &blocked)
}

fn step(r: &CapturedRequest, blocked: &(Mutex<bool>, Condvar)) -> ScriptStep {
    let m = messages(r);
    let call = |name: &str, args: String| ScriptedTurn::tool_call(name, args).into();
    if m.contains(BRIEF) {
        let n = results(r);
        if m.contains("working as `fixer`") {
            let task = id_after(&m, "Claim task");
            return match n {
                0 => call("task_claim", format!(r#"{{"id":{task}}}"#)),
                1 => call(
                    "write_file",
                    r#"{"path":"parser.txt","content":"parse()"}"#.into(),
                ),
                2 => call(
                    "group_message",
                    r#"{"to":"tester","text":"The parser is ready in parser.txt."}"#.into(),
                ),
                3 => {
                    // On a server worker: let its other requests run.
                    tokio::task::block_in_place(|| {
                        let seen = blocked.0.lock().unwrap();
                        let _ = blocked
                            .1
                            .wait_timeout_while(seen, Duration::from_secs(20), |seen| !*seen)
                            .unwrap();
                    });
                    call(
                        "task_complete",
                        format!(r#"{{"id":{task},"result":"parser written to parser.txt"}}"#),
                    )
                }
                _ => ScriptedTurn::text("Parser written.").into(),
            };
        }
        let task = id_after(&m, "Claim task");
        let last = last_result(r);
        if last.contains("waits for") {
            *blocked.0.lock().unwrap() = true;
            blocked.1.notify_all();
        }
        if n == 0 || last.contains("waits for") {
            // Blocked until the parser is completed: ask again shortly.
            std::thread::sleep(Duration::from_millis(if n == 0 { 0 } else { 40 }));
            return call("task_claim", format!(r#"{{"id":{task}}}"#));
        }
        if last.contains("You hold task") {
            return call(
                "task_complete",
                format!(r#"{{"id":{task},"result":"3 parser tests pass"}}"#),
            );
        }
        if last.contains("completed.") {
            return call(
                "group_message",
                r#"{"to":"lead","text":"Parser tests pass."}"#.into(),
            );
        }
        return ScriptedTurn::text("Tests pass.").into();
    }
    let ids = created(&m);
    match ids.as_slice() {
        [] => call("task_create", r#"{"title":"write the parser","key":"parser"}"#.into()),
        [a] => call(
            "task_create",
            format!(r#"{{"title":"test the parser","depends_on":[{a}],"key":"tests"}}"#),
        ),
        [a, b, ..] if !m.contains("Spawned child agent") => ScriptedTurn::tool_call(
            "spawn_agent",
            format!(r#"{{"role":"fixer","task":"Claim task #{a} (write the parser), do it and complete it, then tell the tester."}}"#),
        )
        .with_tool_call(
            "spawn_agent",
            format!(r#"{{"role":"tester","task":"Claim task #{b} (test the parser) once #{a} is done, complete it and tell the lead."}}"#),
        )
        .into(),
        _ if m.contains("(fixer) completed")
            && m.contains("(tester) completed")
            && m.contains("Parser tests pass.") =>
        {
            ScriptedTurn::text("The parser is written and tested.").into()
        }
        _ => call("wait_agents", r#"{"timeout_s":60}"#.into()),
    }
}

/// The lead's agent with its children and its group membership; the live
/// group state it keeps.
fn lead(t: &Team) -> (Agent, Arc<ChildRuntime>, Arc<LiveGroup>) {
    let supervisor = Arc::new(Supervisor::from_config(&Config::default(), &t.ws).unwrap());
    let engine = supervisor
        .root_engine(&t.parent.id, &t.parent.model)
        .unwrap();
    let options = AgentOptions {
        mode: "run".into(),
        max_steps: Some(300),
        ..AgentOptions::default()
    };
    let rt = ChildRuntime::new(
        t.store.clone(),
        t.ws.clone(),
        supervisor,
        t.provider.clone(),
        options.clone(),
        4,
    );
    let tools = latch_tools::ToolContext::new(t.store.clone(), t.parent.id.clone(), &t.ws).unwrap();
    let member = GroupMember::for_root(
        Box::new(ParentAgents::new(rt.clone())),
        t.store.clone(),
        &t.parent.id,
        rt.clone(),
    );
    let live = member.live();
    let agent = Agent::new(
        t.store.clone(),
        t.parent.clone(),
        t.ws.clone(),
        engine,
        Provider::new(t.provider.config().clone()).unwrap(),
        Box::new(StandardTools::new(tools)),
        options,
    )
    .unwrap()
    .with_delegation(Box::new(member));
    (agent, rt, live)
}

/// The recipient-side deliveries of a session: `(seq, from, text)`.
fn delivered_to(store: &Store, session: &str) -> Vec<(u64, String, String)> {
    store
        .all_events(session)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::GroupMessageDelivered { from, text, .. } => Some((e.seq, from, text)),
            _ => None,
        })
        .collect()
}

#[test]
fn three_agents_work_a_task_list_with_dependencies_and_message_each_other_once() {
    let t = team(
        WireFormat::OpenAi,
        Script::default().with_responder(team_script(Arc::default())),
    );
    let (mut agent, rt, live) = lead(&t);
    let outcome = agent.run_turn("Write the parser and test it, as a team.", &mut |_| {});
    let outcome = outcome.unwrap_or_else(|e| {
        let reqs = t.server.requests();
        let tail: Vec<String> = reqs
            .iter()
            .rev()
            .take(4)
            .map(|r| {
                let m = messages(r);
                m[m.len().saturating_sub(1500)..].to_string()
            })
            .collect();
        panic!("{e}\n{}\n{}", live.render().unwrap(), tail.join("\n----\n"))
    });
    assert_eq!(outcome.final_text, "The parser is written and tested.");
    assert!(rt.wait_idle(Duration::from_secs(20)));

    let root = &t.parent.id;
    let state = t.store.replay(root).unwrap();
    let tree = t.store.agent_tree(root).unwrap();
    let id_of = |role: &str| {
        tree.children()
            .find(|c| c.role == role)
            .map(|c| c.id.clone())
            .unwrap()
    };
    let (fixer, tester) = (id_of("fixer"), id_of("tester"));

    // The task list: the tests depended on the parser, and each was done by
    // the agent that claimed it.
    let tasks: Vec<_> = state.tasks().cloned().collect();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[1].depends_on, vec![tasks[0].id]);
    for (task, owner) in [(&tasks[0], &fixer), (&tasks[1], &tester)] {
        assert_eq!(task.status, TaskStatus::Completed, "{task:?}");
        assert_eq!(task.owner.as_ref(), Some(owner), "{task:?}");
    }
    // The tester was refused while the parser was not done, naming why.
    let refused = t.server.requests().iter().any(|r| {
        messages(r).contains("working as `tester`") && last_result(r).contains("waits for")
    });
    assert!(refused, "the tester met the dependency at least once");
    let log = t.store.group_log(root, 0).unwrap();
    let claims_of = |task: u64| {
        log.iter()
            .filter(|e| matches!(&e.kind, EventKind::Group(GroupEvent::TaskClaimed { task: t, .. }) if *t == task))
            .count()
    };
    assert_eq!((claims_of(tasks[0].id), claims_of(tasks[1].id)), (1, 1));

    // Each message went once, to its recipient's own session, as one
    // compact observation; nothing waits.
    let to_tester = delivered_to(&t.store, &tester);
    let to_lead = delivered_to(&t.store, root);
    assert_eq!(to_tester.len(), 1, "{to_tester:?}");
    assert_eq!(to_lead.len(), 1, "{to_lead:?}");
    assert_eq!(to_tester[0].1, fixer);
    assert!(to_tester[0].2.contains("The parser is ready") && to_tester[0].2.contains("(fixer)"));
    assert_eq!(to_lead[0].1, tester);
    assert!(to_lead[0].2.contains("Parser tests pass."));
    assert_eq!(state.delivered(), 2);
    assert!(state.pending_for(root).is_empty() && state.pending_for(&tester).is_empty());
    // The children left when their runs ended; the lead is still active.
    assert!(state.member(root).unwrap().active);
    for c in [&fixer, &tester] {
        let m = state.member(c).unwrap();
        assert!(!m.active, "{m:?}");
        assert_eq!(m.left_reason.as_deref(), Some("completed"));
    }

    // `/group` of the live session equals `/group` (and `latch group`)
    // after a resume: a fresh handle that rebuilt its projection at open.
    let live_text = live.render().unwrap();
    drop(agent);
    let reopened = Store::open(t.store.path()).unwrap();
    let root_of =
        |s: &latch_kernel::SessionRecord| latch::supervisor::groups::root_of(s).to_string();
    let resumed = latch::cli::group_cmd::group_text(&reopened, &root_of(&t.parent)).unwrap();
    assert_eq!(live_text, resumed);
    let from_child =
        latch::cli::group_cmd::group_text(&reopened, &root_of(&t.store.session(&tester).unwrap()))
            .unwrap();
    assert_eq!(
        from_child, resumed,
        "a child's /group shows its root's group"
    );
    assert_eq!(
        reopened.projection(root).unwrap(),
        GroupState::replay(&reopened.group_log(root, 0).unwrap()).snapshot()
    );
    for expected in [
        "3 members · 2 tasks · 0 pending · 2 delivered",
        &format!("{root}  lead  active  pending 0"),
        &format!("{fixer}  fixer  left (completed)"),
        &format!("{tester}  tester  left (completed)"),
        &format!("#{}  completed  {fixer}  write the parser", tasks[0].id),
        &format!(
            "#{}  completed  {tester}  test the parser  after #{}",
            tasks[1].id, tasks[0].id
        ),
    ] {
        assert!(resumed.contains(expected), "{expected}\n{resumed}");
    }
    println!("{resumed}");
}

/// An idle lead with a member that sends it information.
struct Idle {
    t: Team,
    helper: String,
}

fn idle_lead(script: Script) -> Idle {
    let t = team(WireFormat::OpenAi, script);
    let helper = t
        .store
        .create_session(&t.parent.workspace, Some(&t.parent.id), &t.parent.model)
        .unwrap()
        .id;
    ensure_group(&*t.store, &t.parent.id).unwrap();
    t.store
        .commit(
            &t.parent.id,
            GroupEvent::MemberJoined {
                member: helper.clone(),
                role: "helper".into(),
            },
        )
        .unwrap();
    Idle { t, helper }
}

fn send(store: &Store, root: &str, from: &str, text: &str) -> u64 {
    store
        .commit(
            root,
            GroupEvent::MessageQueued {
                from: from.into(),
                to: root.into(),
                recipients: vec![],
                text: text.into(),
            },
        )
        .unwrap()
        .seq
}

#[test]
fn an_idle_agent_is_not_woken_and_gets_messages_at_its_next_safe_boundary() {
    // The responder queues a second message while the lead's first request
    // is in flight, i.e. before its tool call runs.
    let shared: Arc<OnceLock<(Arc<Store>, String, String)>> = Arc::new(OnceLock::new());
    let during = shared.clone();
    let script = Script::default().with_responder(move |r: &CapturedRequest| {
        if results(r) == 0 {
            let (store, root, helper) = during.get().unwrap();
            send(store, root, helper, "SECOND: the build is green again");
            return ScriptedTurn::tool_call("task_list", "{}").into();
        }
        ScriptedTurn::text("Noted.").into()
    });
    let Idle { t, helper } = idle_lead(script);
    let root = t.parent.id.clone();
    shared
        .set((t.store.clone(), root.clone(), helper.clone()))
        .ok()
        .unwrap();

    // Information for an idle agent: queued, nobody is woken.
    let first = send(&t.store, &root, &helper, "FIRST: the build is red");
    let (mut agent, rt, _live) = lead(&t);
    let before = t.store.event_count(&root).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(t.server.requests().is_empty(), "no model request was made");
    assert_eq!(t.store.event_count(&root).unwrap(), before, "nothing ran");
    assert_eq!(rt.live_count(), 0);
    let pending = t.store.pending(&root, &root).unwrap();
    assert_eq!(
        pending.iter().map(|p| p.message).collect::<Vec<_>>(),
        [first]
    );

    // Its next turn: the first message at the boundary before the first
    // request, the second at the boundary after the tool result.
    agent
        .run_turn("What is the state of the build?", &mut |_| {})
        .unwrap();
    let events = t.store.all_events(&root).unwrap();
    let seq_of = |pred: &dyn Fn(&EventKind) -> bool| -> Vec<u64> {
        events
            .iter()
            .filter(|e| pred(&e.kind))
            .map(|e| e.seq)
            .collect()
    };
    let deliveries = seq_of(&|k| matches!(k, EventKind::GroupMessageDelivered { .. }));
    let assistants = seq_of(&|k| matches!(k, EventKind::AssistantMessage { .. }));
    let results_at = seq_of(&|k| matches!(k, EventKind::ToolResult(_)));
    assert_eq!(deliveries.len(), 2, "each message delivered once");
    assert_eq!(assistants.len(), 2);
    assert!(
        deliveries[0] < assistants[0],
        "the first before the first request"
    );
    assert!(
        assistants[0] < results_at[0]
            && results_at[0] < deliveries[1]
            && deliveries[1] < assistants[1],
        "the second after the tool result, before the next request: {deliveries:?} {assistants:?} {results_at:?}"
    );
    // FIFO, exactly once, as compact user-role observations.
    let texts: Vec<String> = delivered_to(&t.store, &root)
        .into_iter()
        .map(|d| d.2)
        .collect();
    assert!(
        texts[0].contains("FIRST") && texts[1].contains("SECOND"),
        "{texts:?}"
    );
    let requests = t.server.requests();
    assert_eq!(requests.len(), 2);
    let user_with = |r: &CapturedRequest, needle: &str| {
        r.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["content"].to_string().contains(needle))
            .map(|m| m["role"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(user_with(&requests[0], "FIRST: the build is red"), ["user"]);
    assert!(user_with(&requests[0], "SECOND").is_empty());
    assert_eq!(
        user_with(&requests[1], "SECOND: the build is green"),
        ["user"]
    );
    assert_eq!(user_with(&requests[1], "FIRST: the build is red"), ["user"]);
    assert!(t.store.pending(&root, &root).unwrap().is_empty());

    // A restart delivers nothing twice.
    drop(agent);
    let (mut again, _rt, _live) = lead(&t);
    again.run_turn("And now?", &mut |_| {}).unwrap();
    assert_eq!(delivered_to(&t.store, &root).len(), 2);
}

/// The release events of `task` in the log: their reasons.
fn releases(store: &Store, root: &str, task: u64) -> Vec<String> {
    store
        .group_log(root, 0)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Group(GroupEvent::TaskReleased {
                task: t, reason, ..
            }) if t == task => Some(reason),
            _ => None,
        })
        .collect()
}

#[test]
fn a_member_that_stops_running_leaves_and_its_claims_are_released() {
    // A child claims a task and ends its run without completing it, while
    // the lead is idle: the supervisor releases the claim when the child's
    // report is committed.
    let script = Script::default().with_responder(|r: &CapturedRequest| {
        let m = messages(r);
        if m.contains(BRIEF) {
            return match results(r) {
                0 => ScriptedTurn::tool_call(
                    "task_claim",
                    format!(r#"{{"id":{}}}"#, id_after(&m, "Claim task")),
                )
                .into(),
                _ => ScriptedTurn::text("I stop here.").into(),
            };
        }
        match created(&m).as_slice() {
            [] => ScriptedTurn::tool_call("task_create", r#"{"title":"refactor"}"#).into(),
            [a] if !m.contains("Spawned child agent") => ScriptedTurn::tool_call(
                "spawn_agent",
                format!(r#"{{"role":"helper","task":"Claim task #{a} and stop."}}"#),
            )
            .into(),
            _ => ScriptedTurn::text("Delegated.").into(),
        }
    });
    let t = team(WireFormat::OpenAi, script);
    let root = t.parent.id.clone();
    let (mut agent, rt, _live) = lead(&t);
    agent
        .run_turn("Get the refactor done.", &mut |_| {})
        .unwrap();
    assert!(rt.wait_idle(Duration::from_secs(20)));
    let state = t.store.replay(&root).unwrap();
    let task = state.tasks().next().unwrap().clone();
    let helper = t
        .store
        .agent_tree(&root)
        .unwrap()
        .children()
        .next()
        .unwrap()
        .id
        .clone();
    assert_eq!(task.status, TaskStatus::Open, "{task:?}");
    assert_eq!(releases(&t.store, &root, task.id), ["its holder completed"]);
    assert_eq!(
        state.member(&helper).unwrap().left_reason.as_deref(),
        Some("completed")
    );
    assert!(
        t.store.claim(&root, task.id, &root).unwrap().fresh,
        "claimable again"
    );

    // A child that was running when its process died holds a claim; the
    // lead, resumed in a new process, releases it at its first boundary.
    let orphan = t
        .store
        .create_session(&t.parent.workspace, Some(&root), &t.parent.model)
        .unwrap()
        .id;
    t.store
        .append(
            &root,
            EventKind::ChildSpawned {
                child: orphan.clone(),
                role: "orphan".into(),
                task: "t".into(),
                model: "test-model".into(),
                engine: "builtin:continuity".into(),
                engine_config: "{}".into(),
            },
        )
        .unwrap();
    t.store
        .commit(
            &root,
            GroupEvent::MemberJoined {
                member: orphan.clone(),
                role: "orphan".into(),
            },
        )
        .unwrap();
    let second = t
        .store
        .commit(
            &root,
            GroupEvent::TaskCreated {
                title: "second".into(),
                description: String::new(),
                depends_on: vec![],
                key: None,
                by: root.clone(),
            },
        )
        .unwrap()
        .seq;
    t.store.claim(&root, second, &orphan).unwrap();
    drop(agent);
    let (mut resumed, _rt, _live) = lead(&t);
    resumed.run_turn("Status?", &mut |_| {}).unwrap();
    assert_eq!(
        releases(&t.store, &root, second),
        ["its holder was interrupted"]
    );
    let state = t.store.replay(&root).unwrap();
    assert_eq!(state.task(second).unwrap().status, TaskStatus::Open);
    assert!(!state.member(&orphan).unwrap().active);
}
