//! The page as a daily tool (issue 27), in headless Chromium over
//! WebDriver against `latch serve`: a task typed with no session selected
//! starts one; a message sent while a turn runs is queued and delivered at
//! the next safe boundary, the header following the turn; long lines wrap
//! at 1400 and 420 px; `/context`, `/recall` and `/group` answer in panels
//! that stay until closed; a tab survives a server restart with its draft;
//! sessions are listed with their first message, time and state; a
//! favicon, visible focus, dark and light; and a server without a provider
//! that browses history (a re-ground in it as one dim line) and says why no
//! turn can start. Screenshots go to
//! `target/web-*.png`.

use super::browser::{browser, driver, until};
use super::{Served, latch_command, project, provider_args, runtime, serve, spawn_served};
use fantoccini::{Client, Locator};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const TRANSCRIPT: &str = "document.getElementById('transcript').innerText";

/// Save a screenshot of the page as `target/<name>.png`; with
/// `LATCH_UPDATE_SCREENSHOTS=1` also as the README's
/// `docs/screenshots/<name>.png`.
async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::write(root.join(format!("target/{name}.png")), &png).unwrap();
    if std::env::var_os("LATCH_UPDATE_SCREENSHOTS").is_some() {
        let dir = root.join("docs/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
    }
}

async fn type_and_send(c: &Client, text: &str) {
    let input = c.find(Locator::Css("#input")).await.unwrap();
    input.send_keys(text).await.unwrap();
    c.find(Locator::Css("#send"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

async fn js(c: &Client, script: &str) -> Value {
    c.execute(&format!("return ({script});"), vec![])
        .await
        .unwrap()
}

/// The page is no wider than the window: nothing scrolls sideways.
async fn fits(c: &Client, width: u32) {
    c.set_window_size(width, 900).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (scroll, inner) = (
        js(c, "document.documentElement.scrollWidth").await,
        js(c, "window.innerWidth").await,
    );
    assert!(
        scroll.as_u64().unwrap() <= inner.as_u64().unwrap(),
        "at {width} px the page is {scroll} px wide for a {inner} px window"
    );
    // And no block inside is wider than its own box (a long line wraps).
    let wide = js(
        c,
        "[...document.querySelectorAll('.item, .item pre, .panel, #session-list .session')]\
         .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.className).join(', ')",
    )
    .await;
    assert_eq!(wide, json!(""), "blocks wider than their box at {width} px");
}

/// A line with no place to break, as a command's output or a model's
/// answer can carry.
fn long_line() -> String {
    "x".repeat(400) + "/" + &"y".repeat(400)
}

#[test]
fn a_task_with_no_session_starts_one_a_message_during_a_turn_is_queued_and_lines_wrap() {
    let rt = runtime();
    let ws = project();
    let long = long_line();
    let provider = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("Running the slow check.")
                .with_tool_call("shell", format!(r#"{{"command":"sleep 4; echo {long}"}}"#)),
            ScriptedTurn::text(format!("Done, and noted your message. {long}")),
        ])))
        .unwrap();
    let served: Served = serve(ws.path(), &provider, &[]);
    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let c = browser(drv.1, profile.path()).await;
        // No session exists and none is selected.
        c.goto(&served.url).await.unwrap();
        until(&c, "the page", "document.getElementById('status').innerText === 'ready'").await;
        type_and_send(&c, "fix add").await;
        until(&c, "a session started by the task", &format!("{TRANSCRIPT}.includes('fix add')")).await;
        until(&c, "the slow command, pending", "[...document.querySelectorAll('.tool')].some(r => r.innerText.includes('[pending] shell'))").await;
        until(&c, "the header, working", "document.getElementById('turn-state').innerText.startsWith('working')").await;

        // Sent while the turn runs: queued, shown as queued, not refused.
        type_and_send(&c, "also keep the tests green").await;
        until(&c, "the queued message", "document.querySelector('#queue .queued') && document.getElementById('queue').innerText.includes('also keep the tests green')").await;
        assert_eq!(js(&c, "document.getElementById('notice').hidden").await, json!(true), "no error for a queued message");
        shot(&c, "web-queued").await;

        // Delivered at the next safe boundary (after the command, before the
        // next request): in the transcript and the model's request.
        until(&c, "the answer", &format!("{TRANSCRIPT}.includes('Done, and noted your message.')")).await;
        until(&c, "the queue emptied", "document.getElementById('queue').children.length === 0").await;
        until(&c, "the header, ready", "document.getElementById('turn-state').innerText === 'ready'").await;
        let users = js(&c, "[...document.querySelectorAll('#transcript .user')].map(e => e.innerText)").await;
        assert_eq!(users, json!(["fix add", "also keep the tests green"]));
        let requests = provider.requests();
        assert_eq!(requests.len(), 2, "one turn, two requests");
        assert!(requests[1].body.to_string().contains("also keep the tests green"));
        assert!(!requests[0].body.to_string().contains("also keep the tests green"));

        // Listed with its first message, time and state.
        until(&c, "the session listed", "document.querySelector('#session-list .first') && document.querySelector('#session-list .first').innerText === 'fix add'").await;
        until(&c, "its state and time", "document.querySelector('#session-list .meta').innerText.includes('ready') && document.querySelector('#session-list .meta').innerText.includes('just now')").await;
        let side = js(&c, "document.getElementById('sidebar').innerText").await;
        let side = side.as_str().unwrap();
        assert!(side.contains("2 requests"), "usage in words: {side}");
        assert!(!side.contains("revision"), "no bare field names: {side}");
        assert!(!side.contains("{"), "no raw JSON: {side}");

        // Long lines wrap at both widths.
        fits(&c, 1400).await;
        shot(&c, "web-page-1400").await;
        fits(&c, 420).await;
        shot(&c, "web-page-420").await;
        c.close().await.unwrap();
    });
}

#[test]
fn context_recall_and_group_answer_in_panels_that_stay_until_closed() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("Reading the file first.")
                .with_tool_call("read_file", r#"{"path":"src/math.sh"}"#),
            ScriptedTurn::text("The operator is a minus sign."),
            ScriptedTurn::text("Second answer."),
        ])))
        .unwrap();
    let served: Served = serve(ws.path(), &provider, &[]);
    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let id = served.new_session().await;
        let c = browser(drv.1, profile.path()).await;
        c.goto(&format!("{}&session={id}", served.url)).await.unwrap();
        until(&c, "the live stream", "document.getElementById('status').innerText.startsWith('live')").await;
        type_and_send(&c, "why does add subtract").await;
        until(&c, "the answer", &format!("{TRANSCRIPT}.includes('The operator is a minus sign.')")).await;
        until(&c, "the header, ready", "document.getElementById('turn-state').innerText === 'ready'").await;

        type_and_send(&c, "/context").await;
        until(&c, "the context panel", "document.getElementById('panel-context') && document.getElementById('panel-context').innerText.includes('total tokens')").await;
        type_and_send(&c, "/recall operator").await;
        until(&c, "the recall panel", "document.getElementById('panel-recall') && document.getElementById('panel-recall').innerText.includes('recalled for')").await;
        type_and_send(&c, "/group").await;
        until(&c, "the group panel", "document.getElementById('panel-group') !== null").await;
        assert_eq!(js(&c, "document.getElementById('notice').hidden").await, json!(true), "nothing in the error bar");

        // They stay through a whole further turn.
        type_and_send(&c, "and now").await;
        until(&c, "the second answer", &format!("{TRANSCRIPT}.includes('Second answer.')")).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(js(&c, "document.querySelectorAll('#panels .panel').length").await, json!(3));
        shot(&c, "web-panels").await;

        // Until closed: by its button, and by Esc inside it.
        c.find(Locator::Css("#panel-recall .close")).await.unwrap().click().await.unwrap();
        until(&c, "the recall panel closed", "document.getElementById('panel-recall') === null").await;
        c.find(Locator::Css("#panel-context .close")).await.unwrap().send_keys("\u{e00c}").await.unwrap();
        until(&c, "the context panel closed", "document.getElementById('panel-context') === null").await;
        assert_eq!(js(&c, "document.getElementById('panel-group') !== null").await, json!(true));
        c.close().await.unwrap();
    });
}

#[test]
fn an_open_tab_reconnects_after_a_server_restart_and_keeps_what_was_typed() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("First answer."),
            ScriptedTurn::text("Answer after the restart."),
        ])))
        .unwrap();
    let served: Served = serve(ws.path(), &provider, &[]);
    let port = served.base.rsplit(':').next().unwrap().to_string();
    let (url, token) = (served.url.clone(), served.token.clone());
    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let id = served.new_session().await;
        let c = browser(drv.1, profile.path()).await;
        c.goto(&format!("{url}&session={id}")).await.unwrap();
        until(&c, "the live stream", "document.getElementById('status').innerText.startsWith('live')").await;
        type_and_send(&c, "first").await;
        until(&c, "the first answer", &format!("{TRANSCRIPT}.includes('First answer.')")).await;

        // The server stops: the tab says what happened and how it recovers.
        drop(served);
        until(&c, "the server unreachable", "document.getElementById('status').innerText.includes('unreachable') || document.getElementById('status').innerText.includes('reconnecting')").await;
        until(&c, "why, in the notice", "document.getElementById('notice').innerText.includes('not answering')").await;
        // Typed and sent while it is down: kept in the input.
        type_and_send(&c, "sent while down").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        until(&c, "the text kept", "document.getElementById('input').value.includes('sent while down')").await;
        shot(&c, "web-restart").await;

        // The server restarts on the same port, with the kept token: the
        // tab reconnects by itself.
        let mut args = provider_args(ws.path(), &provider);
        args.extend(["serve", "--port", &port].map(str::to_string));
        let again = spawn_served(ws.path(), latch_command(ws.path(), &args));
        assert_eq!(again.token, token, "the token is kept per workspace");
        until(&c, "the live stream again", "document.getElementById('status').innerText.startsWith('live')").await;
        until(&c, "the notice cleared", "document.getElementById('notice').hidden").await;
        // A reload keeps the draft too.
        c.refresh().await.unwrap();
        until(&c, "the live stream after a reload", "document.getElementById('status').innerText.startsWith('live')").await;
        until(&c, "the draft after a reload", "document.getElementById('input').value.includes('sent while down')").await;
        c.find(Locator::Css("#send")).await.unwrap().click().await.unwrap();
        until(&c, "the answer after the restart", &format!("{TRANSCRIPT}.includes('Answer after the restart.')")).await;
        until(&c, "the input emptied", "document.getElementById('input').value === ''").await;
        drop(again);

        // --new-token replaces it: the open tab is refused, and told how
        // to reconnect.
        let mut args = provider_args(ws.path(), &provider);
        args.extend(["serve", "--port", &port, "--new-token"].map(str::to_string));
        let rotated = spawn_served(ws.path(), latch_command(ws.path(), &args));
        assert_ne!(rotated.token, token);
        until(&c, "the refusal, with how to reconnect", "document.getElementById('notice').innerText.includes('open the URL')").await;
        c.close().await.unwrap();
    });
}

#[test]
fn the_page_has_a_favicon_visible_focus_and_dark_and_light() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text("Hi.")])))
        .unwrap();
    let served: Served = serve(ws.path(), &provider, &[]);
    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let icon = reqwest::get(format!("{}/favicon.svg", served.base)).await.unwrap();
        assert_eq!(icon.status().as_u16(), 200);
        assert_eq!(icon.headers()["content-type"], "image/svg+xml");
        assert!(icon.text().await.unwrap().starts_with("<svg"));

        let c = browser(drv.1, profile.path()).await;
        c.goto(&served.url).await.unwrap();
        until(&c, "the page", "document.getElementById('status').innerText === 'ready'").await;
        assert_eq!(js(&c, "document.querySelector('link[rel=icon]').getAttribute('href')").await, json!("/favicon.svg"));

        // Keyboard focus is visible.
        c.find(Locator::Css("#input")).await.unwrap().click().await.unwrap();
        c.find(Locator::Css("body")).await.unwrap().send_keys("\u{e004}").await.unwrap();
        c.execute("document.getElementById('new-session').focus({focusVisible: true});", vec![]).await.unwrap();
        let outline = js(&c, "(() => { const b = document.getElementById('new-session'); b.focus(); return getComputedStyle(b).outlineStyle + ' ' + getComputedStyle(b).outlineWidth; })()").await;
        let outline = outline.as_str().unwrap().to_string();
        assert!(!outline.starts_with("none"), "focus is visible: {outline}");

        // Light, then dark with the theme switch, kept across a reload.
        let bg = "getComputedStyle(document.body).backgroundColor";
        let light = js(&c, bg).await;
        c.find(Locator::Css("#theme")).await.unwrap().click().await.unwrap();
        let dark = js(&c, bg).await;
        assert_ne!(light, dark, "the theme switch changes the colours");
        let channels = |v: &Value| -> u32 {
            v.as_str().unwrap().trim_start_matches("rgb(").trim_end_matches(')')
                .split(',').map(|n| n.trim().parse::<u32>().unwrap()).sum()
        };
        let (l, d) = (channels(&light), channels(&dark));
        assert!(l > d, "one is light ({light}), the other dark ({dark})");
        shot(&c, "web-dark").await;
        c.refresh().await.unwrap();
        until(&c, "the page", "document.getElementById('status').innerText === 'ready'").await;
        assert_eq!(js(&c, bg).await, dark, "the chosen theme is kept");
        c.close().await.unwrap();
    });
}

#[test]
fn serve_without_a_provider_browses_history_and_says_why_no_turn_can_start() {
    let rt = runtime();
    let ws = project();
    // The recorded turn's `complete` is refused twice in a row: a re-ground.
    let provider = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call("require_validation", r#"{"requirement":"tests pass"}"#),
            ScriptedTurn::tool_call("complete", r#"{"summary":"done?"}"#),
            ScriptedTurn::tool_call("complete", r#"{"summary":"done now?"}"#),
            ScriptedTurn::text("Recorded answer."),
        ])))
        .unwrap();
    // A session recorded with a provider.
    let id = {
        let served: Served = serve(ws.path(), &provider, &[]);
        rt.block_on(async {
            let id = served.new_session().await;
            let (status, _) = served
                .post(
                    &format!("/sessions/{id}/messages"),
                    json!({"text": "fix add"}),
                )
                .await;
            assert_eq!(status, 202);
            for _ in 0..300 {
                let s = served.get(&format!("/sessions/{id}")).await;
                if s["state"]["activity"]["kind"] == "idle"
                    && s["state"]["durable"]["transcript"]
                        .to_string()
                        .contains("Recorded answer.")
                {
                    // The state the page renders carries the re-ground.
                    let regrounds: Vec<&Value> = s["state"]["durable"]["transcript"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|i| i["kind"] == "reground")
                        .collect();
                    assert_eq!(regrounds.len(), 1, "{}", s["state"]["durable"]);
                    return id;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("the recorded turn did not finish");
        })
    };

    // No provider: no flags, no keys in the environment, no config.
    let args: Vec<String> = [
        "-C",
        &ws.path().display().to_string(),
        "serve",
        "--port",
        "0",
    ]
    .map(str::to_string)
    .to_vec();
    let mut cmd = latch_command(ws.path(), &args);
    let stderr_path = ws.path().join("serve.err");
    cmd.stderr(std::fs::File::create(&stderr_path).unwrap());
    let served = spawn_served(ws.path(), cmd);
    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let info = served.get("/server").await;
        assert_eq!(info["provider"]["configured"], json!(false));
        assert!(info["provider"]["reason"].as_str().unwrap().contains("no model provider is configured"));
        let err = std::fs::read_to_string(&stderr_path).unwrap();
        assert!(err.contains("history is browsable, but no new session can start"), "{err}");
        assert!(err.contains("no model provider is configured"), "{err}");
        assert!(!err.contains("\\n"), "real line breaks: {err}");

        let c = browser(drv.1, profile.path()).await;
        c.goto(&served.url).await.unwrap();
        // History is browsable: the recorded session opens with its turn.
        until(&c, "the recorded turn", &format!("{TRANSCRIPT}.includes('Recorded answer.')")).await;
        until(&c, "why no turn can start", "!document.getElementById('server-notice').hidden && document.getElementById('server-notice').innerText.includes('no model provider is configured')").await;
        assert_eq!(js(&c, "document.querySelector('#session-list .first').innerText").await, json!("fix add"));
        // The re-ground, rebuilt from the log: one dim line.
        let reground = js(&c, "[...document.querySelectorAll('#transcript .reground')].map(e => e.innerText)").await;
        assert_eq!(reground, json!(["↺ re-ground: completion refused twice in a row — the agent re-reads the task"]));
        let dim = "(() => { const d = document.createElement('span'); d.className = 'dim'; document.body.appendChild(d); const c = getComputedStyle(d).color; d.remove(); return c; })()";
        assert_eq!(js(&c, "getComputedStyle(document.querySelector('#transcript .reground')).color").await, js(&c, dim).await, "dim");
        shot(&c, "web-no-provider").await;
        // A new session is refused with the reason, and the task is kept.
        c.find(Locator::Css("#new-session")).await.unwrap().click().await.unwrap();
        until(&c, "the refusal", "document.getElementById('notice').innerText.includes('needs a model provider')").await;
        let _ = id;
        c.close().await.unwrap();
    });
}

#[test]
fn the_printed_link_opens_one_tab_and_a_second_visit_opens_nothing() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text("Hi.")])))
        .unwrap();
    let served: Served = serve(ws.path(), &provider, &[]);
    let drv = driver();
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    rt.block_on(async {
        // The first visit opens the page and leaves no code in the address
        // bar (nor in what history records of the tab from now on).
        let c = browser(drv.1, first.path()).await;
        c.goto(&served.url).await.unwrap();
        until(
            &c,
            "the page",
            "document.getElementById('status').innerText === 'ready'",
        )
        .await;
        let href = js(&c, "location.href").await;
        assert!(!href.as_str().unwrap().contains(&served.code), "{href}");
        let kept = js(&c, "sessionStorage.getItem('latch-token')").await;
        let kept = kept.as_str().unwrap().to_string();
        assert!(
            kept.starts_with("tab.") && !kept.contains(&served.code),
            "{kept}"
        );
        // A reload keeps the tab's own credential.
        c.refresh().await.unwrap();
        until(
            &c,
            "the page after a reload",
            "document.getElementById('status').innerText === 'ready'",
        )
        .await;
        c.close().await.unwrap();

        // The same link again — from the history, in another profile —
        // opens nothing, and says why.
        let again = browser(drv.1, second.path()).await;
        again.goto(&served.url).await.unwrap();
        until(
            &again,
            "the refusal",
            "document.getElementById('notice').innerText.includes('used already')",
        )
        .await;
        assert_eq!(
            js(&again, "sessionStorage.getItem('latch-token')").await,
            json!(null)
        );
        // The link printed after the first one was used opens a tab.
        let next = served.link().await;
        again.goto(&next).await.unwrap();
        until(
            &again,
            "the page from a fresh link",
            "document.getElementById('status').innerText === 'ready'",
        )
        .await;
        again.close().await.unwrap();
    });
}
