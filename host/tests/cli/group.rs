//! `latch group`: a `latch run` whose model creates two tasks (one after
//! the other), claims and completes the first and claims the second, then
//! `latch group` prints the group's state from the store; bad selectors and
//! a missing store get clear errors.

use super::{at, latch, runtime};
use latch_kernel::Store;
use latch_provider::fake::{CapturedRequest, FakeServer, Script, ScriptStep, ScriptedTurn};

fn last_result(r: &CapturedRequest) -> (usize, String) {
    let msgs = r.body["messages"].as_array().cloned().unwrap_or_default();
    let results: Vec<_> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    (
        results.len(),
        results
            .last()
            .map(|m| m["content"].to_string())
            .unwrap_or_default(),
    )
}

fn first_id(text: &str) -> u64 {
    let at = text.find("task #").unwrap() + "task #".len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// The lead alone: two tasks, the second after the first.
fn lead_script(r: &CapturedRequest) -> ScriptStep {
    let all = r.body["messages"].to_string();
    let (n, last) = last_result(r);
    let first = || first_id(&all);
    let call = |name: &str, args: String| ScriptedTurn::tool_call(name, args).into();
    match n {
        0 => call("task_create", r#"{"title":"alpha","key":"a"}"#.into()),
        1 => call(
            "task_create",
            format!(r#"{{"title":"beta","depends_on":[{}]}}"#, first_id(&last)),
        ),
        2 => call("task_claim", format!(r#"{{"id":{}}}"#, first())),
        3 => call(
            "task_complete",
            format!(r#"{{"id":{},"result":"alpha done"}}"#, first()),
        ),
        4 => {
            let beta = all
                .match_indices("Created task #")
                .nth(1)
                .map(|(i, m)| first_id(&all[i + m.len() - "task #".len()..]))
                .unwrap();
            call("task_claim", format!(r#"{{"id":{beta}}}"#))
        }
        _ => ScriptedTurn::text("Alpha is done; beta is mine.").into(),
    }
}

#[test]
fn latch_group_prints_the_state_a_run_left() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(
            Script::default().with_responder(lead_script),
        ))
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "plan and start the work"])
        .env("OPENAI_API_KEY", "k")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let store = Store::open(ws.path().join(".latch/latch.db")).unwrap();
    let root = store
        .latest_root_session(&ws.path().canonicalize().unwrap().display().to_string())
        .unwrap()
        .or_else(|| {
            store
                .latest_root_session(&ws.path().display().to_string())
                .unwrap()
        })
        .unwrap()
        .id;
    drop(store);
    for args in [vec!["group"], vec!["group", &root[..8]]] {
        let out = latch(ws.path()).args(&args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("GROUP of {root} · 1 members · 2 tasks")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{root}  lead  active  pending 0  holds #")),
            "{text}"
        );
        assert!(
            text.contains(&format!("completed  {root}  alpha")) && text.contains("→ alpha done"),
            "{text}"
        );
        assert!(
            text.contains(&format!("claimed    {root}  beta  after #")),
            "{text}"
        );
    }

    let out = latch(ws.path()).args(["group", "zzzz"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no session matches `zzzz`"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let out = latch(empty.path()).arg("group").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("there is no Latch store"), "{err}");
    assert!(!empty.path().join(".latch").exists(), "nothing was created");
}
