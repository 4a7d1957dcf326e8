//! Agent groups on PostgreSQL through the real agent loop: the lead's
//! group tools and deliveries go through `PgGroup` (its own session stays
//! in the local store); the database connection is cut mid-session (a TCP
//! relay, the one the port's fault tests use): `task_claim` answers with an
//! error naming the store, the turn goes on, and once the connection is
//! back nothing is claimed or delivered twice. Skips (saying why) without
//! `LATCH_PG_TEST_URL`, unless `LATCH_PG_TEST_REQUIRED=1`.

use super::children::team;
use super::groups::{created, last_result, messages};
use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentOptions};
use latch::config::Config;
use latch::supervisor::Supervisor;
use latch::supervisor::children::{ChildRuntime, ChildSettings, ParentAgents};
use latch::supervisor::groups::{GroupMember, ensure_group};
use latch_group_pg::PgGroup;
use latch_kernel::EventKind;
use latch_kernel::group::{GroupEvent, GroupPort, GroupState};
use latch_provider::Provider;
use latch_provider::fake::{CapturedRequest, Script, ScriptStep, ScriptedTurn, WireFormat};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

#[path = "../../../host/group-pg/tests/port/relay.rs"]
mod relay;

/// The test database (a libpq key-value string or URL), or `None` with the
/// reason printed.
fn pg_url() -> Option<String> {
    match std::env::var("LATCH_PG_TEST_URL") {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var("LATCH_PG_TEST_REQUIRED").as_deref() != Ok("1"),
                "LATCH_PG_TEST_REQUIRED=1 but LATCH_PG_TEST_URL is not set"
            );
            eprintln!("skipped: no PostgreSQL for the group store (set LATCH_PG_TEST_URL)");
            None
        }
    }
}

/// `key=value` from a libpq key-value string.
fn kv<'a>(url: &'a str, key: &str) -> Option<&'a str> {
    url.split_whitespace()
        .find_map(|p| p.strip_prefix(key)?.strip_prefix('='))
}

/// What the responder reaches: the relay to cut, the direct store to queue
/// a message on while the session's connection is away, the group.
struct Scene {
    relay: relay::Relay,
    direct: Arc<PgGroup>,
    root: String,
    helper: String,
    cut: AtomicBool,
    restored: AtomicBool,
    retries: AtomicUsize,
}

/// The lead creates two tasks and claims the first; then the connection is
/// cut (and a member queues a message for the lead meanwhile) just as it
/// claims the second; told the store is away, it asks again until the
/// store is back, claims the first again (it already holds it) and the
/// second.
fn step(r: &CapturedRequest, scene: &Scene) -> ScriptStep {
    let m = messages(r);
    let last = last_result(r);
    let call = |name: &str, args: String| ScriptedTurn::tool_call(name, args).into();
    let ids = created(&m);
    let (a, b) = match ids.as_slice() {
        [] => return call("task_create", r#"{"title":"one"}"#.into()),
        [_] => return call("task_create", r#"{"title":"two"}"#.into()),
        [a, b, ..] => (*a, *b),
    };
    if !m.contains(&format!("You hold task #{a}")) {
        return call("task_claim", format!(r#"{{"id":{a}}}"#));
    }
    if last.contains(&format!("You hold task #{b}")) {
        return ScriptedTurn::text("Both claimed.").into();
    }
    if !scene.cut.swap(true, Ordering::SeqCst) {
        scene.relay.cut();
        scene
            .direct
            .commit(
                &scene.root,
                GroupEvent::MessageQueued {
                    from: scene.helper.clone(),
                    to: scene.root.clone(),
                    recipients: vec![],
                    text: "WHILE-CUT: the build is green".into(),
                },
            )
            .unwrap();
        return call("task_claim", format!(r#"{{"id":{b}}}"#));
    }
    if !scene.restored.swap(true, Ordering::SeqCst) {
        // The session saw the store away: bring it back.
        scene.relay.restore();
    }
    if last.contains("unavailable") {
        // The pool may need a moment to reconnect through the relay.
        if scene.retries.fetch_add(1, Ordering::SeqCst) > 100 {
            return ScriptedTurn::text("The store did not come back.").into();
        }
        tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(100)));
    }
    // The claim it already holds first, then the one that failed.
    if !m.contains("You already hold task #") {
        return call("task_claim", format!(r#"{{"id":{a}}}"#));
    }
    call("task_claim", format!(r#"{{"id":{b}}}"#))
}

/// The lead's agent on `port`: its group tools and deliveries go through
/// it, its children (none here) would too.
fn lead_agent(t: &super::children::Team, port: Arc<PgGroup>, root: &str) -> Agent {
    let supervisor = Arc::new(Supervisor::from_config(&Config::default(), &t.ws).unwrap());
    let engine = supervisor
        .root_engine(&t.parent.id, &t.parent.model)
        .unwrap();
    let options = AgentOptions {
        mode: "run".into(),
        max_steps: Some(200),
        ..AgentOptions::default()
    };
    let rt = ChildRuntime::with_settings(
        t.store.clone(),
        t.ws.clone(),
        supervisor,
        t.provider.clone(),
        options.clone(),
        ChildSettings {
            group: Some(port.clone()),
            ..ChildSettings::default()
        },
    );
    let member = GroupMember::for_root(
        Box::new(ParentAgents::new(rt.clone())),
        t.store.clone(),
        root,
        rt,
    )
    .with_port(port);
    let tools = latch_tools::ToolContext::new(t.store.clone(), root.to_string(), &t.ws).unwrap();
    Agent::new(
        t.store.clone(),
        t.parent.clone(),
        t.ws.clone(),
        engine,
        Provider::new(t.provider.config().clone()).unwrap(),
        Box::new(StandardTools::new(tools)),
        options,
    )
    .unwrap()
    .with_delegation(Box::new(member))
}

#[test]
fn a_lost_group_store_is_a_tool_error_and_the_turn_goes_on_without_duplicates() {
    let Some(url) = pg_url() else { return };
    let Some(socket) = relay::socket() else {
        eprintln!("skipped: LATCH_PG_TEST_SOCKET names no PostgreSQL socket directory");
        return;
    };
    let scene: Arc<OnceLock<Scene>> = Arc::new(OnceLock::new());
    let during = scene.clone();
    let t = team(
        WireFormat::OpenAi,
        Script::default().with_responder(move |r| step(r, during.get().unwrap())),
    );
    let root = t.parent.id.clone();
    let relay = relay::Relay::start(socket);
    // With a password (the server's trust authentication ignores it), so
    // the session's log shows whether it leaks.
    let relayed = format!(
        "host=127.0.0.1 port={} user={} password=hunter2 dbname={}",
        relay.port,
        kv(&url, "user").unwrap_or("postgres"),
        kv(&url, "dbname").unwrap_or("postgres"),
    );
    let direct = Arc::new(PgGroup::connect(&url, t.store.clone()).unwrap());
    let session_port = Arc::new(PgGroup::connect(&relayed, t.store.clone()).unwrap());
    let helper = format!("{root}-helper");
    ensure_group(&*direct, &root).unwrap();
    direct
        .commit(
            &root,
            GroupEvent::MemberJoined {
                member: helper.clone(),
                role: "helper".into(),
            },
        )
        .unwrap();
    scene
        .set(Scene {
            relay,
            direct: direct.clone(),
            root: root.clone(),
            helper: helper.clone(),
            cut: AtomicBool::new(false),
            restored: AtomicBool::new(false),
            retries: AtomicUsize::new(0),
        })
        .ok()
        .unwrap();

    // The lead's agent, its group on PostgreSQL through the relay.
    let mut agent = lead_agent(&t, session_port.clone(), &root);
    let outcome = agent
        .run_turn("Create two tasks and claim both.", &mut |_| {})
        .unwrap();
    assert_eq!(outcome.final_text, "Both claimed.");

    // The claim while the store was away: a tool error naming the store,
    // after which the turn went on.
    let results: Vec<(String, bool)> = t
        .store
        .all_events(&root)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ToolResult(r) if r.name == "task_claim" => Some((r.content, r.is_error)),
            _ => None,
        })
        .collect();
    let (lost, is_error) = results
        .iter()
        .find(|(c, _)| c.contains("unavailable"))
        .unwrap_or_else(|| panic!("no claim met the lost store: {results:?}"));
    assert!(*is_error, "{lost}");
    let shown = relayed.replace("hunter2", "***");
    assert!(
        lost.contains(&format!("the shared group store {shown} is unavailable")),
        "{lost}"
    );
    // The password is nowhere in the session's log: not in a tool result
    // the model and provider saw, not in any other event.
    for e in t.store.all_events(&root).unwrap() {
        let body = serde_json::to_string(&e.kind).unwrap();
        assert!(!body.contains("hunter2"), "event {}: {body}", e.seq);
    }
    for r in t.server.requests() {
        assert!(
            !r.body.to_string().contains("hunter2"),
            "sent to the provider"
        );
    }
    assert!(
        results
            .iter()
            .any(|(c, e)| !e && c.starts_with("You already hold task #")),
        "the retried claim of the held task: {results:?}"
    );

    // After the reconnection: one claim per task, the message queued while
    // the connection was away delivered once, into the local session.
    let log = direct.group_log(&root, 0).unwrap();
    let count = |f: &dyn Fn(&GroupEvent) -> bool| {
        log.iter()
            .filter(|e| matches!(&e.kind, EventKind::Group(g) if f(g)))
            .count()
    };
    let ids = created(
        &t.store
            .all_events(&root)
            .unwrap()
            .iter()
            .map(|e| format!("{:?}", e.kind))
            .collect::<String>(),
    );
    for id in &ids[..2] {
        assert_eq!(
            count(&|g| matches!(g, GroupEvent::TaskClaimed { task, .. } if task == id)),
            1,
            "task #{id}"
        );
    }
    assert_eq!(
        count(&|g| matches!(g, GroupEvent::MessageDelivered { .. })),
        1
    );
    let delivered: Vec<String> = t
        .store
        .all_events(&root)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::GroupMessageDelivered { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert!(delivered[0].contains("WHILE-CUT"), "{delivered:?}");
    let last = t.server.requests().last().map(messages).unwrap();
    assert_eq!(last.matches("WHILE-CUT").count(), 1, "{last}");
    assert!(direct.pending(&root, &root).unwrap().is_empty());
    assert_eq!(
        direct.projection(&root).unwrap(),
        GroupState::replay(&log).snapshot()
    );
}

/// What the lead's model does in the fencing test: create a task, claim it
/// and start a long build; after the stopped turn, claim it again.
fn fenced_step(r: &CapturedRequest) -> ScriptStep {
    let m = messages(r);
    let last = last_result(r);
    let call = |name: &str, args: String| ScriptedTurn::tool_call(name, args).into();
    let Some(id) = created(&m).first().copied() else {
        return call("task_create", r#"{"title":"one"}"#.into());
    };
    if m.contains("Try again") {
        if last.contains(&format!("You hold task #{id}")) {
            return ScriptedTurn::text("Claimed again.").into();
        }
        return call("task_claim", format!(r#"{{"id":{id}}}"#));
    }
    if !m.contains(&format!("You hold task #{id}")) {
        return call("task_claim", format!(r#"{{"id":{id}}}"#));
    }
    if m.contains("build-started") && last.contains("after") {
        // The build ran to its end: the turn was not stopped.
        return ScriptedTurn::text("Build ended.").into();
    }
    call(
        "shell",
        r#"{"command":"echo started > build-started.txt; sleep 10; echo never"}"#.into(),
    )
}

/// A member whose lease is lost (here: the operator evicts it while its
/// build runs) has its turn stopped at once with the reason, its claim
/// released; at its next turn it rejoins with a new epoch and can claim
/// again.
#[test]
fn a_member_whose_lease_is_lost_is_stopped_and_rejoins_at_its_next_turn() {
    let Some(url) = pg_url() else { return };
    let t = team(
        WireFormat::OpenAi,
        Script::default().with_responder(fenced_step),
    );
    let root = t.parent.id.clone();
    let ttl = Duration::from_millis(1500);
    let port = Arc::new(
        PgGroup::connect(&url, t.store.clone())
            .unwrap()
            .with_lease_ttl(ttl),
    );
    let direct = Arc::new(PgGroup::connect(&url, t.store.clone()).unwrap());
    let mut agent = lead_agent(&t, port, &root);
    let started = t.ws.join("build-started.txt");
    let evictor = {
        let (direct, root, started) = (direct.clone(), root.clone(), started.clone());
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while !started.exists() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the build never started"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            direct
                .commit(
                    &root,
                    GroupEvent::MemberLeft {
                        member: root.clone(),
                        reason: "its host looks hung".into(),
                        forced_by: Some("alice on host-a".into()),
                    },
                )
                .unwrap();
            std::time::Instant::now()
        })
    };
    let stopped = agent.run_turn("Claim it and build.", &mut |_| {});
    let evicted_at = evictor.join().unwrap();
    let took = evicted_at.elapsed();
    let Err(latch::agent::AgentError::Cancelled(reason)) = &stopped else {
        panic!("the turn was not stopped: {stopped:?}");
    };
    assert!(
        reason.contains("membership of its group ended") && reason.contains("evicted"),
        "{reason}"
    );
    assert!(
        took < ttl + Duration::from_secs(2),
        "stopped {took:?} after the eviction; the running build was not interrupted"
    );
    let log = direct.group_log(&root, 0).unwrap();
    let evicted = log
        .iter()
        .find(|e| {
            matches!(
                &e.kind,
                EventKind::Group(GroupEvent::MemberLeft {
                    forced_by: Some(_),
                    ..
                })
            )
        })
        .unwrap()
        .seq;
    let id = created(
        &t.store
            .all_events(&root)
            .unwrap()
            .iter()
            .map(|e| format!("{:?}", e.kind))
            .collect::<String>(),
    )[0];
    assert_eq!(
        direct.projection(&root).unwrap().tasks[&id].status,
        latch_kernel::group::TaskStatus::Open,
        "its claim was released"
    );

    // Its next turn: it rejoins (a new epoch) and claims again.
    let outcome = agent.run_turn("Try again.", &mut |_| {}).unwrap();
    assert_eq!(outcome.final_text, "Claimed again.");
    let log = direct.group_log(&root, 0).unwrap();
    let rejoined = log
        .iter()
        .find(|e| {
            e.seq > evicted
                && matches!(&e.kind, EventKind::Group(GroupEvent::MemberJoined { member, .. }) if *member == root)
        })
        .expect("rejoined")
        .seq;
    assert!(
        log.iter().any(|e| matches!(&e.kind,
            EventKind::Group(GroupEvent::TaskClaimed { task, epoch: Some(ep), .. })
                if *task == id && *ep == rejoined)),
        "the new claim carries the new epoch"
    );
    drop(agent);
}

/// When the lead's turn woke: the moment its model was asked again after
/// the team's work moved.
static WOKEN: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

/// The lead puts a fix on the list and ends its turn; woken by the group,
/// it says the team is done.
fn waiting_lead(r: &CapturedRequest) -> ScriptStep {
    let m = messages(r);
    if m.contains("was completed by") {
        WOKEN
            .lock()
            .unwrap()
            .get_or_insert_with(std::time::Instant::now);
        return ScriptedTurn::text("The team is done.").into();
    }
    if created(&m).is_empty() {
        return ScriptedTurn::tool_call("task_create", r#"{"title":"fix"}"#).into();
    }
    // The lead waits only while a live member could take the task: answer
    // once the helper has joined, whatever the machine's load.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !HELPER_JOINED.load(std::sync::atomic::Ordering::SeqCst)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    ScriptedTurn::text("Waiting for the team.").into()
}

/// Set once the helper of [`the_lead_waits_for_its_team_and_wakes_on_notify`]
/// has joined the group.
static HELPER_JOINED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A lead whose team works elsewhere waits at the end of its turn — while
/// a live member could take the open task — and is woken by the store's
/// NOTIFY when the member completes it, well before its periodic
/// re-check; the turn goes on with a note of what changed.
#[test]
fn the_lead_waits_for_its_team_and_wakes_on_notify() {
    let Some(url) = pg_url() else { return };
    let t = team(
        WireFormat::OpenAi,
        Script::default().with_responder(waiting_lead),
    );
    let root = t.parent.id.clone();
    let port = Arc::new(PgGroup::connect(&url, t.store.clone()).unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !port.listening() {
        assert!(std::time::Instant::now() < deadline, "LISTEN never came up");
        std::thread::sleep(Duration::from_millis(10));
    }
    let helper_port = Arc::new(PgGroup::connect(&url, t.store.clone()).unwrap());
    let mut agent = lead_agent(&t, port, &root);
    let helper = {
        let (store, root, helper_port) = (t.store.clone(), root.clone(), helper_port.clone());
        std::thread::spawn(move || {
            let me = format!("{root}-helper");
            // A live member: its lease renewed by this process.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while !helper_port
                .projection(&root)
                .map(|p| p.created)
                .unwrap_or(false)
            {
                assert!(std::time::Instant::now() < deadline, "no group");
                std::thread::sleep(Duration::from_millis(20));
            }
            let held = helper_port.join(&root, &me, "fixer").unwrap();
            HELPER_JOINED.store(true, std::sync::atomic::Ordering::SeqCst);
            // Once the lead's model ended its turn, the lead waits.
            let waiting = || {
                store.all_events(&root).unwrap().iter().any(|e| {
                    matches!(&e.kind, EventKind::AssistantMessage { parts }
                        if format!("{parts:?}").contains("Waiting for the team."))
                })
            };
            while !waiting() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the lead never waited"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(Duration::from_millis(200));
            let task = *helper_port
                .projection(&root)
                .unwrap()
                .tasks
                .keys()
                .next()
                .unwrap();
            let epoch = Some(held.epoch);
            helper_port
                .submit(
                    &root,
                    latch_kernel::group::Commit {
                        event: GroupEvent::TaskClaimed {
                            task,
                            by: me.clone(),
                            epoch: None,
                        },
                        epoch,
                        id: None,
                    },
                )
                .unwrap();
            helper_port
                .submit(
                    &root,
                    latch_kernel::group::Commit {
                        event: GroupEvent::TaskCompleted {
                            task,
                            by: me.clone(),
                            ok: true,
                            result: "fixed add".into(),
                        },
                        epoch,
                        id: None,
                    },
                )
                .unwrap();
            let done = std::time::Instant::now();
            (done, held)
        })
    };
    let outcome = agent
        .run_turn(
            "Put the fix on the list and wait for the team.",
            &mut |_| {},
        )
        .unwrap();
    let (completed, _held) = helper.join().unwrap();
    assert_eq!(outcome.final_text, "The team is done.");
    let woken = WOKEN.lock().unwrap().expect("woken");
    let after = woken.saturating_duration_since(completed);
    assert!(
        after < Duration::from_millis(1500),
        "woken {after:?} after the completion: not by NOTIFY"
    );
    let note: Vec<String> = t
        .store
        .all_events(&root)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::NotificationDelivered { source, text } if source == "group" => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(note.len(), 1, "{note:?}");
    assert!(
        note[0].contains("was completed by") && note[0].contains("fixed add"),
        "{note:?}"
    );
    drop(agent);
}
