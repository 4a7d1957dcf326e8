//! Plan mode on the page, in headless Chromium: the header's mode control
//! enters plan mode; the scripted model's write_file, edit_file and
//! `echo x > f` change nothing on disk; its plan comes up as a dialog; the
//! user approves it into auto and the same calls succeed; the plan is the
//! sidebar's checklist, ticked as the model completes a step. `/agents`
//! lists the agents users defined.

use super::browser::{browser, driver, until};
use super::{Served, project, runtime, serve};
use fantoccini::Locator;
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn};
use serde_json::json;
use std::path::Path;

/// The calls plan mode refuses, then runs once the plan is approved.
const WRITES: [(&str, &str); 3] = [
    ("write_file", r#"{"path":"new.txt","content":"x\n"}"#),
    (
        "edit_file",
        r#"{"path":"src/math.sh","old_string":"$1 - $2","new_string":"$1 + $2"}"#,
    ),
    ("shell", r#"{"command":"echo x > f"}"#),
];

const PLAN: &str =
    "Make add add.\n\n1. Write new.txt\n2. Fix the operator in src/math.sh\n3. Write f";

fn plan_script() -> Script {
    let mut turns = vec![ScriptedTurn::tool_call(
        "read_file",
        r#"{"path":"src/math.sh"}"#,
    )];
    turns.extend(WRITES.iter().map(|(t, a)| ScriptedTurn::tool_call(*t, *a)));
    turns.push(ScriptedTurn::tool_call(
        "propose_plan",
        json!({ "plan": PLAN }).to_string(),
    ));
    turns.extend(WRITES.iter().map(|(t, a)| ScriptedTurn::tool_call(*t, *a)));
    turns.push(ScriptedTurn::tool_call(
        "complete_action",
        r#"{"text":"Write new.txt"}"#,
    ));
    turns.push(ScriptedTurn::text("Done as planned."));
    Script::new(turns).with_responder(|_| ScriptStep::Turn(ScriptedTurn::text("Nothing else.")))
}

fn untouched(ws: &Path) -> bool {
    !ws.join("new.txt").exists()
        && !ws.join("f").exists()
        && std::fs::read_to_string(ws.join("src/math.sh")).unwrap()
            == "add() {\n  echo $(( $1 - $2 ))\n}\n"
}

fn written(ws: &Path) -> bool {
    std::fs::read_to_string(ws.join("new.txt")).ok().as_deref() == Some("x\n")
        && std::fs::read_to_string(ws.join("f")).ok().as_deref() == Some("x\n")
        && std::fs::read_to_string(ws.join("src/math.sh"))
            .unwrap()
            .contains("$1 + $2")
}

#[test]
fn the_page_enters_plan_mode_and_the_approved_plan_runs() {
    let rt = runtime();
    let ws = project();
    std::fs::create_dir_all(ws.path().join(".latch/agents")).unwrap();
    std::fs::write(
        ws.path().join(".latch/agents/reviewer.md"),
        "---\ndescription: Reviews changes.\ntools: Read, Grep\n---\nReview.\n",
    )
    .unwrap();
    let provider = rt.block_on(FakeServer::start(plan_script())).unwrap();
    let served: Served = serve(ws.path(), &provider, &["--approval", "on-request"]);
    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let id = served.new_session().await;
        let c = browser(drv.1, profile.path()).await;
        c.goto(&format!("{}&session={id}", served.url)).await.unwrap();
        until(&c, "the live stream", "document.getElementById('status').innerText.startsWith('live')").await;
        until(&c, "the mode", "document.getElementById('mode').value === 'on-request'").await;
        c.find(Locator::Css("#mode"))
            .await
            .unwrap()
            .select_by_value("plan")
            .await
            .unwrap();
        until(&c, "plan mode", "document.body.classList.contains('plan-mode')").await;
        let input = c.find(Locator::Css("#input")).await.unwrap();
        input.send_keys("make add add\n").await.unwrap();
        until(&c, "the plan dialog", "(document.getElementById('plan-text') || {innerText: ''}).innerText.includes('2. Fix the operator')").await;
        assert!(untouched(ws.path()), "plan mode let a write through");
        c.find(Locator::Css("#plan-approve-on-request")).await.unwrap().click().await.unwrap();
        let transcript = "document.getElementById('transcript').innerText";
        until(&c, "the end of the turn", &format!("{transcript}.includes('Done as planned.')")).await;
        until(&c, "the ticked step", "document.getElementById('checklist').innerText.includes('[x] Write new.txt')").await;
        until(&c, "the open steps", "document.getElementById('checklist').innerText.includes('[ ] Write f')").await;
        until(&c, "auto", "document.getElementById('mode').value === 'on-request' && !document.body.classList.contains('plan-mode')").await;
        input.send_keys("/agents\n").await.unwrap();
        until(&c, "the agents", "document.getElementById('panels').innerText.includes('reviewer (workspace, ')").await;
        c.close().await.unwrap();
    });
    assert!(written(ws.path()), "the approved calls did not all run");
}
