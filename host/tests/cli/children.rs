//! Child agents through the real `latch` binary: `latch demo team`, the
//! read-only commands on a child session, and a SIGKILL of `latch run` while
//! two children are out (one finished with its report undelivered, one
//! mid-tool), then `latch resume --last`.

use super::{at, latch, project, resume_last};
use latch_kernel::{ChildState, EventKind, Store, StoredEvent};
use latch_provider::fake::{CapturedRequest, FakeServer, Script, ScriptStep, ScriptedTurn};
use serde_json::Value;
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The phrase only a child's brief carries.
const BRIEF: &str = "You are a child agent of session";

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The children of `parent`, as `(role, id)`.
fn children_by_role(store: &Store, parent: &str) -> Vec<(String, String)> {
    let tree = store.agent_tree(parent).unwrap();
    tree.children()
        .map(|c| (c.role.clone(), c.id.clone()))
        .collect()
}

fn id_of<'a>(children: &'a [(String, String)], role: &str) -> &'a str {
    &children.iter().find(|(r, _)| r == role).unwrap().1
}

/// `latch demo team` runs offline: the parent spawns two children that run
/// in parallel, the adder's first fix fails its validation and its second
/// passes, each report reaches the parent once, and the parent proves the
/// suite itself and is certified. The output shows the tree.
#[test]
fn demo_team_delegates_to_two_children_and_finishes_on_their_reports() {
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("team.db");
    let out = latch(home.path())
        .args(["demo", "team", "--store"])
        .arg(&db)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "demo team failed: {stdout}\n{stderr}");
    for needle in [
        "── agent tree ──",
        "adder     │ ✓ validate: validation FAILED",
        "adder     │ ✓ validate: validation PASSED",
        "multiplier│ ■ report: completed",
        "its validations failed → passed · delivered once",
        "its validations passed · delivered once",
        "✓ complete: certified at workspace generation",
        "src/add.sh now reads `echo $(( $1 + $2 ))`; src/mul.sh `echo $(( $1 * $2 ))`",
    ] {
        assert!(stdout.contains(needle), "missing `{needle}`:\n{stdout}");
    }
    // The tree as the store has it: two finished children, one report each,
    // each delivered exactly once; the adder failed once and recovered.
    let store = Store::open(&db).unwrap();
    let parent = stdout
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .to_string();
    let children = children_by_role(&store, &parent);
    assert_eq!(children.len(), 2, "{children:?}");
    let tree = store.agent_tree(&parent).unwrap();
    for c in tree.children() {
        assert_eq!(c.state, ChildState::Finished, "{c:?}");
        assert_eq!(c.reports.len(), 1);
        assert!(tree.is_delivered(c.reports[0].0));
    }
    assert!(tree.undelivered().is_empty());
    let adder = tree.child(id_of(&children, "adder")).unwrap();
    let outcomes: Vec<&str> = adder.reports[0]
        .1
        .validations
        .iter()
        .map(|v| v.outcome.label())
        .collect();
    assert_eq!(outcomes, ["failed", "passed"]);
    let deliveries = store
        .all_events(&parent)
        .unwrap()
        .into_iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::AgentNotificationDelivered { .. }
                    | EventKind::AgentReportReceived { .. }
            )
        })
        .count();
    assert_eq!(deliveries, 2, "one delivery per report");
    // The parent's evidence is its own validation, never a child's.
    let state = store.canonical_state(&parent).unwrap();
    let requirements: Vec<&str> = state
        .evidence
        .iter()
        .map(|e| e.requirement.as_str())
        .collect();
    assert_eq!(requirements, ["sh test.sh passes"]);

    // The three agents worked one task list: every task completed by the
    // member that claimed it, the proof (which depends on both fixes) by
    // the lead, and each child's one message delivered to the lead once.
    let group = latch_kernel::group::GroupPort::replay(&store, &parent).unwrap();
    let tasks: Vec<(String, Option<String>, latch_kernel::group::TaskStatus)> = group
        .tasks()
        .map(|t| (t.title.clone(), t.owner.clone(), t.status))
        .collect();
    let completed = latch_kernel::group::TaskStatus::Completed;
    let owner = |id: &str| Some(id.to_string());
    assert_eq!(
        tasks,
        [
            (
                "fix add() in src/add.sh".to_string(),
                owner(id_of(&children, "adder")),
                completed
            ),
            (
                "fix mul() in src/mul.sh".to_string(),
                owner(id_of(&children, "multiplier")),
                completed
            ),
            (
                "prove the whole suite".to_string(),
                owner(&parent),
                completed
            ),
        ]
    );
    let to_lead: Vec<String> = store
        .all_events(&parent)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::GroupMessageDelivered { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(to_lead.len(), 2, "{to_lead:?}");
    assert!(group.pending_for(&parent).is_empty());

    // `latch group` after the demo shows the final state the demo printed.
    let shown = latch(home.path())
        .arg("--store")
        .arg(&db)
        .args(["group", &parent])
        .output()
        .unwrap();
    let (group_text, _) = text(&shown);
    assert!(shown.status.success());
    let printed = stdout
        .split_once(&format!("── group (latch group {parent}) ──\n"))
        .map(|(_, rest)| rest)
        .expect("the demo prints its group");
    assert!(
        printed.starts_with(&group_text),
        "demo printed:\n{printed}\nlatch group:\n{group_text}"
    );

    // `latch context` and `latch recall` work on a child session: its own
    // report and its own events, nothing of the parent's or a sibling's.
    let adder_id = id_of(&children, "adder");
    let multiplier_id = id_of(&children, "multiplier");
    let run = |args: &[&str]| {
        let out = latch(home.path())
            .arg("--store")
            .arg(&db)
            .args(args)
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{args:?} failed: {stdout}\n{stderr}");
        stdout
    };
    let context = run(&["context", adder_id]);
    assert!(
        context.contains(&format!("session {adder_id} · engine builtin:continuity")),
        "{context}"
    );
    let json: Value = serde_json::from_str(&run(&["context", adder_id, "--json"])).unwrap();
    let parent_json: Value = serde_json::from_str(&run(&["context", &parent, "--json"])).unwrap();
    assert_ne!(
        json["event_count"], parent_json["event_count"],
        "the child's report counts the child's events"
    );
    // Only the adder's failed validation printed `expected`.
    let recalled = run(&["recall", adder_id, "expected"]);
    assert!(recalled.contains("add 2 3 = 1, expected 5"), "{recalled}");
    assert_eq!(
        run(&["recall", multiplier_id, "expected"]),
        "no matching events\n"
    );
    assert_eq!(
        run(&["recall", &parent, "expected"]),
        "no matching events\n",
        "a child's transcript never reaches the parent's recall"
    );
}

/// What the scripted server and the test share during the kill trial.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Default)]
struct GateState {
    /// The parent's second request (after the spawns) has arrived.
    parent_waiting: bool,
    /// The first process is dead.
    killed: bool,
    /// The id of the child left mid-tool, for the resumed parent's message.
    beta: String,
}

impl Gate {
    fn set(&self, f: impl FnOnce(&mut GateState)) {
        f(&mut self.state.lock().unwrap());
        self.cv.notify_all();
    }

    /// Block (a server worker; its other tasks move on) until `ready`.
    fn wait(&self, ready: impl Fn(&GateState) -> bool) {
        tokio::task::block_in_place(|| {
            let guard = self.state.lock().unwrap();
            let _ = self
                .cv
                .wait_timeout_while(guard, Duration::from_secs(60), |s| !ready(s))
                .unwrap();
        });
    }
}

fn messages(r: &CapturedRequest) -> String {
    r.body["messages"].to_string()
}

/// The parent spawns `alpha` and `beta`; its next request hangs until the
/// process is killed. Alpha answers once the parent is inside that request
/// (so its report is committed and cannot be delivered); beta starts a
/// long shell command. After the resume the parent lists its children,
/// messages the interrupted one (which resumes it), waits and finishes.
fn kill_script(gate: Arc<Gate>) -> Script {
    Script::default().with_responder(move |r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if m.contains("working as `alpha`") {
            gate.wait(|s| s.parent_waiting);
            return ScriptedTurn::text("ALPHA-DONE: alpha finished its part").into();
        }
        if m.contains("working as `beta`") {
            if m.contains("Your run was interrupted") {
                return ScriptedTurn::text("BETA-DONE: beta finished after the resume").into();
            }
            return ScriptedTurn::text("Starting the long check.")
                .with_tool_call("shell", r#"{"command":"sleep 30; echo slow > beta.txt"}"#)
                .into();
        }
        if !m.contains("Spawned child agent") {
            return ScriptedTurn::tool_call(
                "spawn_agent",
                r#"{"role":"alpha","task":"Do part A"}"#,
            )
            .with_tool_call("spawn_agent", r#"{"role":"beta","task":"Do part B"}"#)
            .into();
        }
        if !m.contains("continue after the crash") {
            gate.set(|s| s.parent_waiting = true);
            gate.wait(|s| s.killed);
            return ScriptedTurn::text("never received: the process is dead").into();
        }
        if !m.contains(r#""name":"list_agents""#) {
            return ScriptedTurn::tool_call("list_agents", "{}").into();
        }
        if !m.contains(r#""name":"message_agent""#) {
            let beta = gate.state.lock().unwrap().beta.clone();
            return ScriptedTurn::tool_call(
                "message_agent",
                format!(r#"{{"id":"{beta}","text":"carry on from where you stopped"}}"#),
            )
            .into();
        }
        if !m.contains(r#""name":"wait_agents""#) {
            return ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s":30}"#).into();
        }
        ScriptedTurn::text("Both children reported after the crash.").into()
    })
}

fn has_tool_call(events: &[StoredEvent]) -> bool {
    events.iter().any(|e| match &e.kind {
        EventKind::AssistantMessage { parts } => parts
            .iter()
            .any(|p| matches!(p, latch_engine_sdk::types::Part::ToolCall(_))),
        _ => false,
    })
}

/// Consecutive requests keep their prefix: every message of the earlier
/// one but its last is unchanged, and the last may only grow.
fn assert_continues(earlier: &CapturedRequest, later: &CapturedRequest) {
    let (a, b) = (
        earlier.body["messages"].as_array().unwrap(),
        later.body["messages"].as_array().unwrap(),
    );
    assert!(b.len() >= a.len());
    for k in 0..a.len() - 1 {
        assert_eq!(a[k], b[k], "message {k} was rewritten");
    }
    assert_eq!(a[a.len() - 1]["role"], b[a.len() - 1]["role"]);
    assert_eq!(earlier.body["tools"], later.body["tools"]);
}

/// The acceptance trial: SIGKILL `latch run` while alpha has finished (its
/// report committed, not delivered: the parent is inside a model request)
/// and beta is inside a shell command; then `latch resume --last`.
#[test]
fn a_killed_run_with_two_children_resumes_the_tree() {
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let gate = Arc::new(Gate::default());
    let server = io
        .block_on(FakeServer::start(kill_script(gate.clone())))
        .unwrap();
    let ws = project();
    let mut run = latch(ws.path())
        .args(at(&server))
        .args(["run", "split the work in two"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    // Wait until alpha's report is committed, beta's shell call is
    // committed and running, and the parent is inside its request.
    let db = latch_kernel::default_store_path(ws.path());
    let key = ws.path().canonicalize().unwrap().display().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (parent, alpha, beta) = loop {
        assert!(Instant::now() < deadline, "the children never got there");
        std::thread::sleep(Duration::from_millis(50));
        let Ok(store) = Store::open(&db) else {
            continue;
        };
        let Ok(sessions) = store.list_sessions(&key) else {
            continue;
        };
        let Some(parent) = sessions.iter().find(|s| s.parent.is_none()) else {
            continue;
        };
        let tree = store.agent_tree(&parent.id).unwrap();
        let (Some(alpha), Some(beta)) = (
            tree.children().find(|c| c.role == "alpha"),
            tree.children().find(|c| c.role == "beta"),
        ) else {
            continue;
        };
        let beta_events = store.all_events(&beta.id).unwrap();
        let beta_in_tool = beta_events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Mutation { .. }));
        if alpha.state == ChildState::Finished
            && beta_in_tool
            && gate.state.lock().unwrap().parent_waiting
        {
            break (parent.id.clone(), alpha.id.clone(), beta.id.clone());
        }
    };
    run.kill().unwrap(); // SIGKILL
    run.wait().unwrap();
    gate.set(|s| {
        s.killed = true;
        s.beta = beta.clone();
    });

    let store = Store::open(&db).unwrap();
    let tree = store.agent_tree(&parent).unwrap();
    let alpha_report = tree.child(&alpha).unwrap().reports[0].0;
    assert!(!tree.is_delivered(alpha_report), "killed before delivery");
    assert_eq!(tree.child(&beta).unwrap().state, ChildState::Unfinished);
    let beta_before = store.all_events(&beta).unwrap();
    assert!(has_tool_call(&beta_before));
    assert!(
        !beta_before
            .iter()
            .any(|e| matches!(e.kind, EventKind::ToolResult(_))),
        "beta's shell never finished"
    );
    let alpha_before = store.all_events(&alpha).unwrap();
    let parent_before = store.all_events(&parent).unwrap();
    drop(store);
    // `latch sessions` shows the tree as the log left it.
    let listed = latch(ws.path()).arg("sessions").output().unwrap();
    let (listed, _) = text(&listed);
    assert!(
        listed.contains(&format!("    {alpha}")) && listed.contains("alpha  finished"),
        "{listed}"
    );
    assert!(listed.contains("beta  interrupted"), "{listed}");
    let requests_before = server.requests().len();

    let mut resume = latch(ws.path());
    resume.args(at(&server));
    let out = resume_last(resume, b"continue after the crash\n/exit\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "resume failed: {stdout}\n{stderr}");
    assert!(!stderr.contains("error:"), "{stderr}");
    assert!(
        stdout.contains("Both children reported after the crash."),
        "{stdout}"
    );

    // Every request was accepted by the server, which checks tool-call
    // protocol as the real services do.
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        server.served().len(),
        "a request was refused: {:?}",
        requests.last().map(|r| &r.body)
    );
    let parent_requests: Vec<&CapturedRequest> = requests
        .iter()
        .filter(|r| !messages(r).contains(BRIEF))
        .collect();
    // The parent's requests after the resume continue the killed one's.
    let killed = parent_requests
        .iter()
        .position(|r| {
            !messages(r).contains("continue after the crash")
                && messages(r).contains("Spawned child agent")
        })
        .unwrap();
    for pair in parent_requests[killed..].windows(2) {
        assert_continues(pair[0], pair[1]);
    }
    assert!(requests.len() > requests_before);

    let store = Store::open(&db).unwrap();
    // The killed history is kept, byte for byte.
    let parent_after = store.all_events(&parent).unwrap();
    for (b, a) in parent_before.iter().zip(&parent_after) {
        assert_eq!(
            (b.seq, &b.kind),
            (a.seq, &a.kind),
            "parent history rewritten"
        );
    }
    // Alpha's report was delivered exactly once, and reached the model once.
    let deliveries: Vec<u64> = parent_after
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::AgentNotificationDelivered { report_seq, .. }
            | EventKind::AgentReportReceived { report_seq, .. } => Some(*report_seq),
            _ => None,
        })
        .collect();
    assert_eq!(
        deliveries.iter().filter(|s| **s == alpha_report).count(),
        1,
        "{deliveries:?}"
    );
    let last = messages(parent_requests.last().unwrap());
    for (id, role) in [(&alpha, "alpha"), (&beta, "beta")] {
        let report = format!("Child agent {id} ({role}) completed");
        assert_eq!(last.matches(&report).count(), 1, "{last}");
    }
    assert_eq!(store.all_events(&alpha).unwrap(), alpha_before);
    // Beta came back interrupted (list_agents said so), kept its committed
    // history, had its cut-off call answered, got the message and finished.
    let listing = parent_after
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult(r) if r.name == "list_agents" => Some(r.content.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        listing.contains(&format!("{beta}  beta  interrupted")),
        "{listing}"
    );
    assert!(
        listing.contains(&format!("{alpha}  alpha  finished")),
        "{listing}"
    );
    let beta_after = store.all_events(&beta).unwrap();
    assert_eq!(&beta_after[..beta_before.len()], &beta_before[..]);
    let repaired = beta_after[beta_before.len()..]
        .iter()
        .any(|e| matches!(&e.kind, EventKind::ToolResult(r) if r.name == "shell" && r.content.contains("interrupted")));
    assert!(repaired, "beta's cut-off call is answered");
    assert!(beta_after.iter().any(|e| matches!(&e.kind,
        EventKind::AgentMessageDelivered { text, .. } if text.contains("carry on"))));
    let tree = store.agent_tree(&parent).unwrap();
    let beta_entry = tree.child(&beta).unwrap();
    assert_eq!(beta_entry.state, ChildState::Finished);
    assert_eq!(beta_entry.reports.len(), 1);
    assert!(tree.undelivered().is_empty());
    assert_eq!(
        store.kernel(&beta).unwrap().unfinished(),
        &latch_kernel::Unfinished::default(),
        "beta has no open run or unanswered call"
    );
    // The resumed child's requests continue its own history: its brief
    // first, never the parent's.
    let beta_requests: Vec<&CapturedRequest> = requests
        .iter()
        .filter(|r| messages(r).contains("working as `beta`"))
        .collect();
    assert_eq!(beta_requests.len(), 2);
    assert!(!messages(beta_requests[1]).contains("split the work in two"));
    assert!(!Path::new(&ws.path().join("beta.txt")).exists());
}

/// `latch resume <session>` with `input` typed into it; its output.
fn resume_session(
    home: &Path,
    db: &Path,
    server: &FakeServer,
    session: &str,
    input: &[u8],
) -> Output {
    use std::io::Write;
    let mut child = latch(home)
        .arg("--store")
        .arg(db)
        .args(at(server))
        .args(["resume", session])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.as_mut().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// The user opens a child directly (`latch resume <child-id>`): the parent's
/// tree shows it running again, the turn the child's model ends commits a
/// report in the child's session, and the parent receives that report once,
/// at its next safe boundary.
#[test]
fn a_child_resumed_by_the_user_reports_to_its_parent() {
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("team.db");
    let out = latch(home.path())
        .args(["demo", "team", "--store"])
        .arg(&db)
        .output()
        .unwrap();
    let (stdout, _) = text(&out);
    assert!(out.status.success(), "{stdout}");
    let parent = stdout
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .to_string();
    let store = Store::open(&db).unwrap();
    let adder = id_of(&children_by_role(&store, &parent), "adder").to_string();
    drop(store);

    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let script = Script::default().with_responder(|r: &CapturedRequest| -> ScriptStep {
        if messages(r).contains("status after the user's check") {
            ScriptedTurn::text("Noted the adder's extra check.").into()
        } else {
            ScriptedTurn::text("USER-RUN: checked add() again; nothing else to fix").into()
        }
    });
    let server = io.block_on(FakeServer::start(script)).unwrap();
    let out = resume_session(
        home.path(),
        &db,
        &server,
        &adder,
        b"check it once more\n/exit\n",
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("error:"), "{stderr}");

    let store = Store::open(&db).unwrap();
    let tree = store.agent_tree(&parent).unwrap();
    let entry = tree.child(&adder).unwrap();
    assert_eq!(entry.state, ChildState::Finished);
    assert_eq!(entry.reports.len(), 2, "{entry:?}");
    let (second, report) = entry.latest_report().unwrap();
    assert!(report.summary.starts_with("USER-RUN"), "{report:?}");
    assert!(!tree.is_delivered(*second));
    assert!(
        store
            .all_events(&parent)
            .unwrap()
            .iter()
            .any(|e| matches!(&e.kind, EventKind::AgentResumed { child } if *child == adder))
    );
    drop(store);

    let out = resume_session(
        home.path(),
        &db,
        &server,
        &parent,
        b"status after the user's check\n/exit\n",
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        server.served().len(),
        "a request was refused"
    );
    let last = messages(requests.last().unwrap());
    assert_eq!(last.matches("USER-RUN").count(), 1, "{last}");
    let store = Store::open(&db).unwrap();
    let tree = store.agent_tree(&parent).unwrap();
    assert!(tree.undelivered().is_empty());
    assert!(tree.is_delivered(*second));
}

/// The text of each conversation block the request `r` shows the model in
/// Anthropic's wire format: its text blocks and tool results, without the
/// kernel context the host frames (`<latch-kernel-context …>`).
fn conversation_blocks(r: &CapturedRequest) -> Vec<String> {
    let mut out = Vec::new();
    for m in r.body["messages"].as_array().into_iter().flatten() {
        for block in m["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("text") => {
                    let text = block["text"].as_str().unwrap_or_default();
                    if !text.starts_with("<latch-kernel-context") {
                        out.push(text.to_string());
                    }
                }
                Some("tool_result") => out.push(match &block["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => String::new(),
                }),
                _ => {}
            }
        }
    }
    out
}

/// In `latch demo team` the lead is shown each child's report in the very
/// request after it was handed over (as `wait_agents`' result or as a
/// delivered notification), as conversation, not only in the archive: a
/// rotation of the lead's epoch never evicts what the model has not seen.
/// Run in process, so the requests the scripted model received are at hand.
#[test]
fn the_team_lead_is_shown_each_report_in_its_next_request() {
    use latch::cli::demo::DemoRig;
    use latch::cli::demo_team::{TEAM_TASK, team_script, write_team_project};
    use latch::cli::setup::{build_agent, new_session};
    let home = tempfile::tempdir().unwrap();
    let rig = DemoRig::start(
        write_team_project,
        team_script(),
        Some(&home.path().join("team.db")),
    )
    .unwrap();
    let session = new_session(&rig.env, &rig.provider).unwrap();
    let lead = session.id.clone();
    let mut agent = build_agent(&rig.env, session, &rig.provider, "demo").unwrap();
    let outcome = agent.run_turn(TEAM_TASK, &mut |_| {});
    let requests: Vec<CapturedRequest> = rig
        .server
        .requests()
        .into_iter()
        .filter(|r| !messages(r).contains(BRIEF))
        .collect();
    rig.io.block_on(rig.server.shutdown());
    outcome.unwrap();
    let events = rig.env.store.all_events(&lead).unwrap();
    let replies = |before: u64| {
        events
            .iter()
            .filter(|e| e.seq < before && matches!(e.kind, EventKind::AssistantMessage { .. }))
            .count()
    };
    assert_eq!(replies(u64::MAX), requests.len(), "one reply per request");
    for role in ["adder", "multiplier"] {
        let report = format!("({role}) completed");
        let delivered = events
            .iter()
            .find(|e| match &e.kind {
                EventKind::ToolResult(r) => r.name == "wait_agents" && r.content.contains(&report),
                EventKind::AgentNotificationDelivered { text, .. } => text.contains(&report),
                _ => false,
            })
            .unwrap_or_else(|| panic!("the {role}'s report reached the lead's log"));
        // The lead's next request is the one its next reply answers.
        let next = &requests[replies(delivered.seq)];
        assert!(
            conversation_blocks(next)
                .iter()
                .any(|b| b.contains(&report)),
            "the lead's request after the {role}'s report (event {}) does not show it:\n{:#}",
            delivered.seq,
            next.body["messages"]
        );
    }
}
