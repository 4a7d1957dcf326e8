//! Running groups from the command line: the lead's escape hatch (`latch
//! group release` and `latch group evict`, recorded with who and why), and
//! members that leave cleanly when a signal stops them — `latch group
//! join` on SIGTERM, a lead's `latch run` on SIGINT — with a banner and a
//! log that never show the store's password.

use super::{at, latch, runtime};
use latch_engine_sdk::types::ModelProfile;
use latch_group_pg::PgGroup;
use latch_kernel::group::{GroupEvent, GroupPort, TaskStatus};
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{CapturedRequest, FakeServer, Script, ScriptStep, ScriptedTurn};
use signal_hook::consts::{SIGINT, SIGTERM};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The test cluster as a `postgres://` URL (the socket directory
/// percent-encoded, its port from `LATCH_PG_TEST_URL`), or `None`.
fn pg_url() -> Option<String> {
    let url = std::env::var("LATCH_PG_TEST_URL")
        .ok()
        .filter(|u| !u.trim().is_empty());
    let Some(url) = url else {
        assert!(
            std::env::var("LATCH_PG_TEST_REQUIRED").as_deref() != Ok("1"),
            "LATCH_PG_TEST_REQUIRED=1 but LATCH_PG_TEST_URL is not set"
        );
        eprintln!("skipped: no PostgreSQL (set LATCH_PG_TEST_URL)");
        return None;
    };
    if url.starts_with("postgres") {
        return Some(url);
    }
    let socket = std::env::var("LATCH_PG_TEST_SOCKET").unwrap();
    let port = url
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("port="))
        .map(|p| format!(":{p}"))
        .unwrap_or_default();
    Some(format!(
        "postgres://latch@{}{port}/postgres",
        socket.replace('/', "%2F")
    ))
}

fn group_events(log: &[latch_kernel::StoredEvent]) -> Vec<GroupEvent> {
    log.iter()
        .filter_map(|e| match &e.kind {
            EventKind::Group(g) => Some(g.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_lead_releases_a_stuck_task_and_evicts_a_member_with_a_record() {
    let ws = tempfile::tempdir().unwrap();
    let key = ws.path().canonicalize().unwrap().display().to_string();
    let (root, child, task) = {
        let store = Store::open(ws.path().join(".latch/latch.db")).unwrap();
        let model = ModelProfile::with_defaults("openai-compatible", "local");
        let root = store.create_session(&key, None, &model).unwrap().id;
        let child = store.create_session(&key, Some(&root), &model).unwrap().id;
        latch::supervisor::groups::ensure_group(&store, &root).unwrap();
        store
            .commit(
                &root,
                GroupEvent::MemberJoined {
                    member: child.clone(),
                    role: "fixer".into(),
                },
            )
            .unwrap();
        let task = store
            .commit(
                &root,
                GroupEvent::TaskCreated {
                    title: "fix add".into(),
                    description: String::new(),
                    depends_on: vec![],
                    key: None,
                    by: root.clone(),
                },
            )
            .unwrap()
            .seq;
        store.claim(&root, task, &child).unwrap();
        (root, child, task)
    };
    let run = |args: &[&str]| {
        let out = latch(ws.path())
            .args(args)
            .env("USER", "alice")
            .env("LATCH_HOST_NAME", "host-a")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let task_arg = task.to_string();
    let (code, out, err) = run(&[
        "group",
        "release",
        &task_arg,
        "--reason",
        "stuck for an hour",
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!("released task #{task} (held by {child})"))
            && out.contains("released by alice on host-a: stuck for an hour"),
        "{out}"
    );
    // Nothing held: a clear refusal, nothing written.
    let (code, _, err) = run(&["group", "release", &task_arg]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "task #{task} is open: there is no claim to release"
        )),
        "{err}"
    );

    let store = Store::open(ws.path().join(".latch/latch.db")).unwrap();
    store.claim(&root, task, &child).unwrap();
    drop(store);
    let (code, out, err) = run(&["group", "evict", &child, "--reason", "its host is down"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!("evicted {child} from group {root}")),
        "{out}"
    );

    let store = Store::open(ws.path().join(".latch/latch.db")).unwrap();
    let events = group_events(&store.group_log(&root, 0).unwrap());
    assert!(
        events.iter().any(|g| matches!(g, GroupEvent::TaskReleased { task: t, by, reason, forced_by: Some(who) }
            if *t == task && *by == child && reason == "stuck for an hour" && who == "alice on host-a")),
        "{events:?}"
    );
    assert!(
        events.iter().any(
            |g| matches!(g, GroupEvent::MemberLeft { member, reason, forced_by: Some(who) }
            if *member == child && reason == "its host is down" && who == "alice on host-a")
        ),
        "{events:?}"
    );
    assert_eq!(
        store.projection(&root).unwrap().tasks[&task].status,
        TaskStatus::Open,
        "the evicted member's claim was released"
    );
    drop(store);
    let (code, out, _) = run(&["group"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains(&format!("{child}  fixer  left (its host is down)")),
        "{out}"
    );
    let (code, _, err) = run(&["group", "evict", &child]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains(&format!("`{child}` is not a member of this group")),
        "{err}"
    );
}

/// The member's model starts a long command; the test signals it then.
fn long_command(r: &CapturedRequest) -> ScriptStep {
    let m = r.body["messages"].to_string();
    if !m.contains("started.txt") {
        return ScriptedTurn::tool_call(
            "shell",
            r#"{"command":"echo started > started.txt; sleep 30; echo never"}"#,
        )
        .into();
    }
    ScriptedTurn::text("done").into()
}

/// Send `signal` to `child` once `file` exists; its exit status and how
/// long it took to exit after the signal.
fn signal_when(
    child: &mut std::process::Child,
    file: &std::path::Path,
    signal: i32,
) -> (std::process::ExitStatus, Duration) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !file.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            file.display()
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let sent = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(sent.success());
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "did not exit after the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, t0.elapsed())
}

#[test]
fn latch_group_join_leaves_cleanly_on_sigterm_and_never_shows_the_password() {
    let Some(url) = pg_url() else { return };
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(
            Script::default().with_responder(long_command),
        ))
        .unwrap();
    let probe_dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Store::open(probe_dir.path().join("p.db")).unwrap());
    let pg = PgGroup::connect(&url, probe).unwrap();
    let root = format!("lead-{}", std::process::id());
    latch::supervisor::groups::ensure_group(&pg, &root).unwrap();
    // The password in a query parameter (the trust authentication ignores
    // it): the banner and the record must not show it.
    let with_password = if url.contains('?') {
        format!("{url}&password=hunter2")
    } else {
        format!("{url}?password=hunter2")
    };
    let b = tempfile::tempdir().unwrap();
    let mut member = latch(b.path())
        .args(at(&server))
        .args([
            "group",
            "join",
            &root,
            "--store",
            &with_password,
            "--role",
            "fixer",
        ])
        .env("OPENAI_API_KEY", "k")
        .env("LATCH_HOST_NAME", "host-b")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = member.stdout.take().unwrap();
    let banner = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
            .join("\n")
    });
    let (status, took) = signal_when(&mut member, &b.path().join("started.txt"), SIGTERM);
    let printed = banner.join().unwrap();
    let mut err = String::new();
    use std::io::Read;
    member
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(128 + SIGTERM), "{printed}\n{err}");
    assert!(took < Duration::from_secs(10), "took {took:?} to leave");
    assert!(
        printed.contains("joined group") && printed.contains("password=***"),
        "{printed}"
    );
    assert!(
        !printed.contains("hunter2") && !err.contains("hunter2"),
        "{printed}\n{err}"
    );
    assert!(err.contains("SIGTERM: stopping the turn"), "{err}");

    let events = group_events(&pg.group_log(&root, 0).unwrap());
    let joined = events
        .iter()
        .find_map(|g| match g {
            GroupEvent::MemberJoined { member, role } if role == "fixer" => Some(member.clone()),
            _ => None,
        })
        .expect("the member joined");
    assert!(
        events.iter().any(
            |g| matches!(g, GroupEvent::MemberLeft { member, reason, .. }
            if *member == joined && reason == "stopped by a signal")
        ),
        "{events:?}"
    );
    assert!(
        pg.leases(&root)
            .unwrap()
            .unwrap()
            .iter()
            .all(|l| l.member != joined),
        "its lease went with it"
    );
    // Its record keeps the store without the password.
    let b_store = Store::open_existing(latch_kernel::default_store_path(
        &std::fs::canonicalize(b.path()).unwrap(),
    ))
    .unwrap();
    let profile = b_store.session_profile(&joined).unwrap().unwrap();
    let store = profile.group.unwrap().store;
    assert!(
        !store.contains("hunter2") && !store.contains("password"),
        "{store}"
    );
    for e in b_store.all_events(&joined).unwrap() {
        let body = serde_json::to_string(&e.kind).unwrap();
        assert!(!body.contains("hunter2"), "{body}");
    }
}

/// The lead's model puts a task on the list, claims it and starts a long
/// build.
fn lead_builds(r: &CapturedRequest) -> ScriptStep {
    let m = r.body["messages"].to_string();
    let call = |name: &str, args: &str| ScriptedTurn::tool_call(name, args).into();
    let Some(at) = m.find("Created task #") else {
        return call("task_create", r#"{"title":"build"}"#);
    };
    let id: String = m[at + "Created task #".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    if !m.contains("You hold task") {
        return call("task_claim", &format!(r#"{{"id":{id}}}"#));
    }
    long_command(r)
}

#[test]
fn a_leads_latch_run_leaves_its_shared_group_on_sigint() {
    let Some(url) = pg_url() else { return };
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(
            Script::default().with_responder(lead_builds),
        ))
        .unwrap();
    let a = tempfile::tempdir().unwrap();
    let config = a.path().join(".test-home").join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!("[group]\nstore = \"{url}\"\nlease_ttl_secs = 3\n"),
    )
    .unwrap();
    let mut lead = latch(a.path())
        .args(at(&server))
        .args(["run", "Put the build on the list and do it."])
        .env("OPENAI_API_KEY", "k")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, took) = signal_when(&mut lead, &a.path().join("started.txt"), SIGINT);
    assert_eq!(status.code(), Some(128 + SIGINT));
    assert!(took < Duration::from_secs(10), "took {took:?} to leave");
    let a_store = Store::open_existing(latch_kernel::default_store_path(
        &std::fs::canonicalize(a.path()).unwrap(),
    ))
    .unwrap();
    let root = a_store
        .list_all_sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.parent.is_none())
        .unwrap()
        .id;
    let probe = Arc::new(Store::open(a.path().join("probe.db")).unwrap());
    let pg = PgGroup::connect(&url, probe).unwrap();
    let events = group_events(&pg.group_log(&root, 0).unwrap());
    assert!(
        events.iter().any(
            |g| matches!(g, GroupEvent::MemberLeft { member, reason, .. }
            if *member == root && reason == "stopped running")
        ),
        "{events:?}"
    );
    let snap = pg.projection(&root).unwrap();
    assert!(
        snap.tasks.values().all(|t| t.status == TaskStatus::Open),
        "its claim was released: {snap:?}"
    );
    assert!(
        pg.leases(&root).unwrap().unwrap().is_empty(),
        "no lease left behind"
    );
}

/// `latch group`, `/group` in the line interface and the terminal UI's
/// GROUP block all show the group on the shared store `[group] store`
/// names — not this host's empty projection — with each member's lease; the
/// sidebar follows the store's changes while the screen is up.
#[test]
fn every_view_of_a_shared_group_reads_the_shared_store() {
    let Some(url) = pg_url() else { return };
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text("ok")])))
        .unwrap();
    let a = tempfile::tempdir().unwrap();
    let config = a.path().join(".test-home").join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!("[group]\nstore = \"{url}\"\n"),
    )
    .unwrap();
    let key = a.path().canonicalize().unwrap().display().to_string();
    let root = {
        let store = Store::open(a.path().join(".latch/latch.db")).unwrap();
        let model = ModelProfile::with_defaults("openai-compatible", "local");
        store.create_session(&key, None, &model).unwrap().id
    };
    let probe_dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Store::open(probe_dir.path().join("p.db")).unwrap());
    let pg = PgGroup::connect(&url, probe).unwrap().with_host("host-r");
    latch::supervisor::groups::ensure_group(&pg, &root).unwrap();
    let remote = format!("remote-{}", std::process::id());
    let held = pg.join(&root, &remote, "fixer").unwrap();
    let create = |title: &str| {
        pg.commit(
            &root,
            GroupEvent::TaskCreated {
                title: title.into(),
                description: String::new(),
                depends_on: vec![],
                key: None,
                by: root.clone(),
            },
        )
        .unwrap()
        .seq
    };
    let add = create("ADD");
    pg.claim(&root, add, &remote).unwrap();

    let out = latch(a.path()).args(["group"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!("GROUP of {root} · 2 members · 1 tasks")),
        "{text}"
    );
    assert!(
        text.contains(&format!("claimed    {remote}  ADD")),
        "{text}"
    );
    assert!(
        text.contains("active · lease") && text.contains("(host-r pid "),
        "{text}"
    );
    assert!(
        text.contains(&format!("{remote} (fixer) on host-r")),
        "{text}"
    );

    // `/group` in the line interface of the resumed lead.
    let mut cmd = latch(a.path());
    cmd.args(at(&server)).env("OPENAI_API_KEY", "k");
    let mut resume = cmd
        .args(["resume", &root])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        resume
            .stdin
            .as_mut()
            .unwrap()
            .write_all(b"/group\n/exit\n")
            .unwrap();
    }
    let out = resume.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("GROUP of {root} · 2 members · 1 tasks")),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("ADD"), "{text}");

    // The terminal UI's GROUP block, and a change made elsewhere.
    let tmux = super::tui::Tmux::new();
    tmux.start(
        "shared",
        &super::tui::latch_line(a.path(), &server, &["resume", &root]),
    );
    tmux.wait_for("shared", &["GROUP · 2 members · 1 tasks", "ADD"]);
    create("MUL");
    tmux.wait_for("shared", &["GROUP · 2 members · 2 tasks", "MUL"]);
    tmux.text("shared", "/exit");
    tmux.keys("shared", &["Enter"]);
    drop(tmux);
    drop(held);
}
