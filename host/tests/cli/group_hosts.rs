//! Agent groups across hosts through a shared PostgreSQL group store: two
//! `latch` processes ("hosts", each with its own workspace, store and host
//! name) talk real HTTP to the scripted provider. Host A's `latch run`
//! leads (its group on PostgreSQL through `[group] store` in its user
//! config); host B's `latch group join <group-id> --store …` runs a member
//! whose agent loop claims and completes the tasks and messages the lead;
//! `latch group` on both hosts shows every member with its host;
//! `latch resume <member>` on host B runs it as that member again. An
//! unreachable store is an error naming the URL, and so is a resumed
//! member's store it cannot reach; the sessions of one process share one
//! pool. Skips (saying why) without `LATCH_PG_TEST_URL`.

use super::{at, latch};
use latch_group_pg::PgGroup;
use latch_kernel::group::{GroupEvent, GroupPort, TaskStatus};
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{CapturedRequest, FakeServer, Script, ScriptStep, ScriptedTurn};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The test cluster as a `postgres://` URL, the form `--store` takes for
/// a shared group store (a unix socket directory goes percent-encoded in
/// the host part).
fn pg_url() -> Option<String> {
    match std::env::var("LATCH_PG_TEST_URL") {
        Ok(u) if u.starts_with("postgres") => Some(u),
        Ok(u) if !u.trim().is_empty() => {
            let socket = std::env::var("LATCH_PG_TEST_SOCKET")
                .expect("LATCH_PG_TEST_SOCKET names the cluster's socket directory");
            let _ = u;
            Some(format!(
                "postgres://latch@{}/postgres",
                socket.replace('/', "%2F")
            ))
        }
        _ => {
            assert!(
                std::env::var("LATCH_PG_TEST_REQUIRED").as_deref() != Ok("1"),
                "LATCH_PG_TEST_REQUIRED=1 but LATCH_PG_TEST_URL is not set"
            );
            eprintln!("skipped: no PostgreSQL (set LATCH_PG_TEST_URL)");
            None
        }
    }
}

const PROVIDER: [&str; 6] = [
    "--provider",
    "openai-compatible",
    "--base-url",
    "http://127.0.0.1:9/v1",
    "--model",
    "local",
];

/// The phrase only a joined member's brief carries.
const MEMBER: &str = "You joined the agent group";

fn messages(r: &CapturedRequest) -> String {
    r.body["messages"].to_string()
}

fn last_result(r: &CapturedRequest) -> String {
    r.body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "tool"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

/// The number after the first `marker` in `text`.
fn id_after(text: &str, marker: &str) -> Option<u64> {
    let at = text.find(marker)? + marker.len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()
}

/// Both hosts' models. The lead (host A) puts two fixes on the list and
/// looks at it until the member's message arrives; the member (host B)
/// claims whatever is ready, completes it, and once nothing is ready tells
/// the lead.
fn two_hosts() -> impl Fn(&CapturedRequest) -> ScriptStep + Send + Sync {
    let created = AtomicUsize::new(0);
    move |r| step(r, &created)
}

fn step(r: &CapturedRequest, created: &AtomicUsize) -> ScriptStep {
    let m = messages(r);
    let last = last_result(r);
    let call = |name: &str, args: String| ScriptedTurn::tool_call(name, args).into();
    if m.contains(MEMBER) && m.contains(RESUMED) {
        return resumed_step(r, &last);
    }
    if m.contains(MEMBER) {
        if let Some(id) = id_after(&last, "Ready to claim: #") {
            return call("task_claim", format!(r#"{{"id":{id}}}"#));
        }
        if let Some(id) = id_after(&last, "You hold task #") {
            return call(
                "task_complete",
                format!(r#"{{"id":{id},"result":"fixed on host-b"}}"#),
            );
        }
        if last.contains("No open task is ready") {
            return call(
                "group_message",
                r#"{"to":"lead","text":"BOTH-FIXED on host-b."}"#.into(),
            );
        }
        if last.contains("Queued for") {
            return ScriptedTurn::text("Fixed add and mul from host-b.").into();
        }
        return call("task_list", "{}".into());
    }
    // Counted here: the lead's context need not repeat old tool results.
    if last.contains("Created task #") || created.load(Ordering::SeqCst) == 0 {
        created.fetch_add(1, Ordering::SeqCst);
    }
    match created.load(Ordering::SeqCst) - 1 {
        0 => call("task_create", r#"{"title":"fix add"}"#.into()),
        1 => call("task_create", r#"{"title":"fix mul"}"#.into()),
        _ if m.contains("BOTH-FIXED") => ScriptedTurn::text("The team is done.").into(),
        _ => {
            // Look again shortly (on a server worker: let the member's
            // requests run meanwhile).
            tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(100)));
            call("task_list", "{}".into())
        }
    }
}

/// The phrase of the resumed member's new turn.
const RESUMED: &str = "RESUMED-MEMBER";

/// The member resumed on host B: it looks at the list, claims what is
/// ready and says it holds it; a list it does not share with the lead
/// (an empty one: it runs without its group) ends the turn at once.
fn resumed_step(r: &CapturedRequest, last: &str) -> ScriptStep {
    let from_user = r.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "user");
    if from_user {
        return ScriptedTurn::tool_call("task_list", "{}").into();
    }
    if let Some(id) = id_after(last, "Ready to claim: #") {
        return ScriptedTurn::tool_call("task_claim", format!(r#"{{"id":{id}}}"#)).into();
    }
    if let Some(id) = id_after(last, "You hold task #") {
        return ScriptedTurn::text(format!("HOLDING #{id}")).into();
    }
    ScriptedTurn::text("NO-GROUP").into()
}

/// A process killed if the test ends before it does.
struct Reaped(Option<std::process::Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_ok(mut reaped: Reaped, what: &str) -> String {
    let mut child = reaped.0.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{what}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn two_hosts_run_agents_that_share_one_group_on_postgres() {
    let Some(url) = pg_url() else { return };
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .enable_all()
        .build()
        .unwrap();
    let server = io
        .block_on(FakeServer::start(
            Script::default().with_responder(two_hosts()),
        ))
        .unwrap();

    // Host A: its own workspace and store; `[group] store` in its user
    // config puts the lead's group on PostgreSQL.
    let a = tempfile::tempdir().unwrap();
    let config_dir = a.path().join(".test-home").join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.toml"),
        format!("[group]\nstore = {}\n", toml_string(&url)),
    )
    .unwrap();
    let lead = Reaped(Some(
        latch(a.path())
            .args(at(&server))
            .args([
                "run",
                "Put the fixes on the task list and wait for the team.",
            ])
            .env("OPENAI_API_KEY", "k")
            .env("LATCH_HOST_NAME", "host-a")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));

    // The group's id is the lead's session: read it from host A's store
    // once both tasks are on the shared list.
    let probe = Arc::new(Store::open(a.path().join("probe.db")).unwrap());
    let pg = PgGroup::connect(&url, probe).unwrap();
    let a_db = a.path().join(".latch/latch.db");
    let deadline = Instant::now() + Duration::from_secs(60);
    let root = loop {
        assert!(Instant::now() < deadline, "the lead never made its tasks");
        let root = a_db
            .exists()
            .then(|| Store::open_existing(&a_db).ok())
            .flatten()
            .and_then(|s| s.list_all_sessions().ok())
            .and_then(|all| all.into_iter().find(|s| s.parent.is_none()))
            .map(|s| s.id);
        if let Some(root) = root {
            break root;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    while pg.projection(&root).unwrap().tasks.len() < 2 {
        assert!(Instant::now() < deadline, "the lead never made its tasks");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Host B: another workspace and store joins through the binary and
    // works the list through its own agent loop. The password in the URL
    // is never recorded (the test cluster trusts the user: any will do).
    let b = tempfile::tempdir().unwrap();
    let join_url = url.replacen("postgres://latch@", "postgres://latch:pw-not-kept@", 1);
    assert_ne!(join_url, url);
    let member = Reaped(Some(
        latch(b.path())
            .args(at(&server))
            .args([
                "group", "join", &root, "--store", &join_url, "--role", "fixer",
            ])
            .env("OPENAI_API_KEY", "k")
            .env("LATCH_HOST_NAME", "host-b")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let joined = wait_ok(member, "the member");
    let lead_out = wait_ok(lead, "the lead");
    assert!(lead_out.contains("The team is done."), "{lead_out}");
    assert!(
        joined.contains("joined group") && joined.contains("host-b"),
        "{joined}"
    );
    assert!(
        joined.contains("Fixed add and mul from host-b."),
        "{joined}"
    );
    let member = joined
        .split(" as ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();

    // Each task claimed once and completed by the member on host B; the
    // member left when its turn ended; its message reached the lead's own
    // session on host A once.
    let snap = pg.projection(&root).unwrap();
    assert_eq!(snap.tasks.len(), 2);
    for t in snap.tasks.values() {
        assert_eq!(t.status, TaskStatus::Completed, "{t:?}");
        assert_eq!(t.owner.as_ref(), Some(&member), "{t:?}");
    }
    let claims = pg
        .group_log(&root, 0)
        .unwrap()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Group(GroupEvent::TaskClaimed { .. })))
        .count();
    assert_eq!(claims, 2);
    let members = pg.members(&root).unwrap();
    let b_member = members.iter().find(|m| m.id == member).unwrap();
    assert_eq!((b_member.host.as_str(), b_member.active), ("host-b", false));
    let a_store = Store::open_existing(&a_db).unwrap();
    let delivered: Vec<String> = a_store
        .all_events(&root)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::GroupMessageDelivered { from, text, .. } if from == member => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert!(delivered[0].contains("BOTH-FIXED"), "{delivered:?}");
    // Each member's session stays in its own host's store.
    let b_store = Store::open_existing(latch_kernel::default_store_path(
        &std::fs::canonicalize(b.path()).unwrap(),
    ))
    .unwrap();
    assert!(b_store.session(&member).is_ok());
    assert!(a_store.session(&member).is_err());
    assert!(b_store.session(&root).is_err());

    // `latch group --store` on host B, and on host A through its config,
    // show every member with its host.
    for (ws, args) in [
        (b.path(), vec!["group", &root, "--store", &url]),
        (a.path(), vec!["group"]),
    ] {
        let out = latch(ws).args(&args).output().unwrap();
        let shown = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{shown}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            shown.contains(&format!("{root} (lead) on host-a")),
            "{shown}"
        );
        assert!(
            shown.contains(&format!("{member} (fixer) on host-b (left)")),
            "{shown}"
        );
        assert!(
            shown.contains("fix add") && shown.contains("fix mul"),
            "{shown}"
        );
    }
    resume_the_member(&server, &pg, b.path(), &root, &member);
}

/// Host B's member, resumed after it left: `latch resume <member>` runs it
/// as that member of the group on PostgreSQL again (the store and role
/// from its profile, which keeps no password): its new turn's claim lands
/// in the shared group under its id, and when the session ends it leaves,
/// the claim released.
fn resume_the_member(
    server: &FakeServer,
    pg: &PgGroup,
    b: &std::path::Path,
    root: &str,
    member: &str,
) {
    use std::io::Write;
    let b_db = latch_kernel::default_store_path(&std::fs::canonicalize(b).unwrap());
    let profile = Store::open_existing(&b_db)
        .unwrap()
        .session_profile(member)
        .unwrap()
        .unwrap();
    let joined = profile
        .group
        .expect("the member's profile records its group");
    assert_eq!(
        (joined.group.as_str(), joined.role.as_str()),
        (root, "fixer")
    );
    assert!(!joined.store.contains("pw-not-kept"), "{joined:?}");
    // A new task on the list (the lead, active or back, puts it there).
    pg.commit(
        root,
        GroupEvent::MemberJoined {
            member: root.to_string(),
            role: "lead".into(),
        },
    )
    .unwrap();
    let task = pg
        .commit(
            root,
            GroupEvent::TaskCreated {
                title: "fix div".into(),
                description: String::new(),
                depends_on: vec![],
                key: None,
                by: root.to_string(),
            },
        )
        .unwrap()
        .seq;
    let mut resume = latch(b)
        .args(at(server))
        .args(["resume", member])
        .env("OPENAI_API_KEY", "k")
        .env("LATCH_HOST_NAME", "host-b")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    resume
        .stdin
        .as_mut()
        .unwrap()
        .write_all(format!("{RESUMED}: work the list again\n/exit\n").as_bytes())
        .unwrap();
    let out = wait_ok(Reaped(Some(resume)), "the resumed member");
    assert!(out.contains(&format!("HOLDING #{task}")), "{out}");
    let log: Vec<GroupEvent> = pg
        .group_log(root, 0)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Group(g) => Some(g),
            _ => None,
        })
        .collect();
    let claimed = |e: &GroupEvent| matches!(e, GroupEvent::TaskClaimed { task: t, by } if *t == task && by == member);
    assert_eq!(log.iter().filter(|e| claimed(e)).count(), 1, "{log:?}");
    let rejoined = log
        .iter()
        .filter(|e| matches!(e, GroupEvent::MemberJoined { member: m, role } if m == member && role == "fixer"))
        .count();
    assert_eq!(rejoined, 2, "joined, then rejoined on resume: {log:?}");
    assert!(
        log.iter().any(|e| matches!(e, GroupEvent::TaskReleased { task: t, by, .. } if *t == task && by == member)),
        "its claim is released when the resumed session ends: {log:?}"
    );
    let members = pg.members(root).unwrap();
    let b_member = members.iter().find(|m| m.id == member).unwrap();
    assert_eq!((b_member.host.as_str(), b_member.active), ("host-b", false));
    // No password anywhere in host B's store.
    for file in [b_db.clone(), b_db.with_extension("db-wal")] {
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(
            !bytes.windows(11).any(|w| w == b"pw-not-kept"),
            "the store's password reached {}",
            file.display()
        );
    }
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[test]
fn an_unreachable_group_store_is_an_error_naming_the_url() {
    let b = tempfile::tempdir().unwrap();
    let url = "postgres://latch:hunter2@127.0.0.1:1/groups";
    let out = latch(b.path())
        .args(PROVIDER)
        .args(["group", "join", "01abc", "--store", url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success());
    assert!(
        stderr.contains("postgres://latch:***@127.0.0.1:1/groups"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    // `[group] store` in the config: a session's start names it too.
    let config_dir = b.path().join(".test-home").join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.toml"),
        format!("[group]\nstore = {}\n", toml_string(url)),
    )
    .unwrap();
    let out = latch(b.path())
        .args(PROVIDER)
        .args(["run", "hello"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot reach the group store at postgres://latch:***@127.0.0.1:1/groups"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    std::fs::remove_file(config_dir.join("config.toml")).unwrap();
    let out = latch(b.path())
        .args(PROVIDER)
        .args(["group", "join", "01abc"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success());
    assert!(stderr.contains("--store postgres://"), "{stderr}");
}

/// The group store of every session of one process comes from one pool:
/// the handles `open_pg` (behind `[group] store`, `latch group join` and a
/// resumed member) gives for one URL share it, whatever their local store.
#[test]
fn the_sessions_of_one_process_share_one_group_store_pool() {
    let Some(url) = pg_url() else { return };
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let ports: Vec<Arc<PgGroup>> = dirs
        .iter()
        .map(|d| {
            let local = Arc::new(Store::open(d.path().join("latch.db")).unwrap());
            latch::supervisor::groups::open_pg(&url, local).unwrap()
        })
        .collect();
    assert!(ports[0].shares_pool_with(&ports[1]));
    assert!(ports[0].shares_pool_with(&ports[2]));
}

/// A member whose record has no usable store URL, or whose recorded
/// store is away, is refused on resume with how to give the store.
#[test]
fn a_resumed_member_without_a_usable_store_says_how_to_give_it() {
    use latch_kernel::{JoinedGroup, SessionProfile};
    let b = tempfile::tempdir().unwrap();
    let db = latch_kernel::default_store_path(&std::fs::canonicalize(b.path()).unwrap());
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let store = Store::open(&db).unwrap();
    let model = latch_engine_sdk::types::ModelProfile::with_defaults("openai-compatible", "local");
    let ws = std::fs::canonicalize(b.path())
        .unwrap()
        .display()
        .to_string();
    for (recorded, says) in [
        ("", "no usable group store URL"),
        (
            "postgres://latch@127.0.0.1:1/groups",
            "cannot reach the group store at postgres://latch@127.0.0.1:1/groups",
        ),
    ] {
        let id = store.create_session(&ws, None, &model).unwrap().id;
        let profile = SessionProfile {
            provider: "openai-compatible".into(),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            model: "local".into(),
            approval: "untrusted".into(),
            sandbox: "read-only".into(),
            changes: vec![],
            group: Some(JoinedGroup {
                group: "01lead".into(),
                role: "fixer".into(),
                store: recorded.into(),
            }),
        };
        store
            .append(&id, EventKind::SessionProfile(profile))
            .unwrap();
        // The recorded endpoint is the user's own (named by the provider's
        // variable): the key may go there, and the group store is what is
        // missing.
        let out = latch(b.path())
            .args(["resume", &id])
            .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(
            stderr.contains("member `fixer` of group 01lead")
                && stderr.contains("--store postgres://"),
            "{stderr}"
        );
    }
    // Given as it says, the store is used and recorded (without password)
    // as a change of the member's profile.
    let Some(url) = pg_url() else { return };
    let id = store.list_all_sessions().unwrap()[0].id.clone();
    let given = url.replacen("postgres://latch@", "postgres://latch:pw-not-kept@", 1);
    let out = latch(b.path())
        .args(["resume", &id, "--store", &given])
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let profile = store.session_profile(&id).unwrap().unwrap();
    assert_eq!(profile.group.unwrap().store, url);
    let change = &profile.changes[0];
    assert_eq!(change.setting, "group_store");
    assert!(!change.by.contains("pw-not-kept"), "{change:?}");
}
