//! Agent groups across hosts through a shared PostgreSQL group store: a
//! lead on one "host" (its own store, its own host name) creates the group,
//! `latch group join <group-id> --store …` on another joins as a member,
//! `latch group --store …` shows every member with its host, the member's
//! claim goes through the shared store, `[group] store` in the user config
//! is used without `--store`, and an unreachable store is an error naming
//! the URL. Skips (saying why) without `LATCH_PG_TEST_URL`.

use super::latch;
use latch_engine_sdk::types::ModelProfile;
use latch_group_pg::PgGroup;
use latch_kernel::Store;
use latch_kernel::group::{GroupEvent, GroupPort};
use std::sync::Arc;

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

#[test]
fn a_member_on_another_host_joins_claims_and_shows_with_its_host() {
    let Some(url) = pg_url() else { return };
    // Host A: the lead's own store and the group.
    let a = tempfile::tempdir().unwrap();
    let local = Arc::new(Store::open(a.path().join("a.db")).unwrap());
    let model = ModelProfile::with_defaults("openai-compatible", "m");
    let root = local.create_session("/a", None, &model).unwrap().id;
    let lead = PgGroup::connect(&url, local).unwrap().with_host("host-a");
    lead.commit(&root, GroupEvent::Created { lead: root.clone() })
        .unwrap();
    lead.commit(
        &root,
        GroupEvent::MemberJoined {
            member: root.clone(),
            role: "lead".into(),
        },
    )
    .unwrap();
    let task = lead
        .commit(
            &root,
            GroupEvent::TaskCreated {
                title: "review the parser".into(),
                description: String::new(),
                depends_on: vec![],
                key: None,
                by: root.clone(),
            },
        )
        .unwrap()
        .seq;

    // Host B: another workspace and store joins through the binary.
    let b = tempfile::tempdir().unwrap();
    let out = latch(b.path())
        .args(PROVIDER)
        .args([
            "group", "join", &root, "--store", &url, "--role", "reviewer",
        ])
        .env("LATCH_HOST_NAME", "host-b")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("joined group") && stdout.contains("host-b"),
        "{stdout}"
    );
    let member = stdout
        .split(" as ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    // The member's session is in host B's own store, not in host A's.
    let b_store = Store::open_existing(latch_kernel::default_store_path(
        &std::fs::canonicalize(b.path()).unwrap(),
    ))
    .unwrap();
    assert!(
        b_store.session(&member).is_ok(),
        "member session {member} on host B"
    );

    // The member claims through the shared store; the lead's view agrees.
    let b_port = PgGroup::connect(&url, Arc::new(b_store)).unwrap();
    assert!(b_port.claim(&root, task, &member).unwrap().fresh);
    let refused = lead.claim(&root, task, &root).unwrap_err().to_string();
    assert!(refused.contains(&member), "{refused}");

    // `latch group --store` on host B shows both hosts.
    let out = latch(b.path())
        .args(["group", &root, "--store", &url])
        .output()
        .unwrap();
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
        shown.contains(&format!("{member} (reviewer) on host-b")),
        "{shown}"
    );
    assert!(shown.contains("review the parser"), "{shown}");

    // `[group] store` in the user config stands in for --store.
    let config_dir = b.path().join(".test-home").join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.toml"),
        format!("[group]\nstore = {}\n", toml_string(&url)),
    )
    .unwrap();
    let out = latch(b.path()).args(["group", &root]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{shown}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        shown.contains("on host-a") && shown.contains("on host-b"),
        "{shown}"
    );
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
    let out = latch(b.path())
        .args(PROVIDER)
        .args(["group", "join", "01abc"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success());
    assert!(stderr.contains("--store postgres://"), "{stderr}");
}
