//! Another local page and a local service try to answer a pending
//! permission request of `latch serve`, as a dev server the agent started
//! would: headless Chromium has the Latch page open (from the URL `latch
//! serve` printed) and then visits a page served by a second HTTP server
//! on another port of 127.0.0.1. That server records every request the
//! browser sends it (cookies ignore ports, so a token in a cookie would
//! reach it), its page tries the API from the browser, and the test then
//! replays what the server captured over plain HTTP, as the service would.
//! The request still waits afterwards, the run is not interrupted, and
//! the user's own page answers it.

use super::browser::{browser, driver, until};
use super::{Served, project, runtime, serve};
use latch_kernel::EventKind;
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The attacker's page: it tries the Latch API from the browser and
/// writes what happened into `#out`.
fn attacker_page(latch: &str, session: &str, call: &str) -> String {
    format!(
        r#"<!doctype html><html><body><pre id="out"></pre><script>
const latch = "{latch}";
const session = "{session}";
const results = [];
async function attempt(name, url, init) {{
  try {{ const r = await fetch(url, init); results.push(name + ":" + r.status + ":" + r.type); }}
  catch (e) {{ results.push(name + ":blocked"); }}
}}
(async () => {{
  const answer = latch + "/api/sessions/" + session + "/permissions/{call}";
  const always = JSON.stringify({{ decision: "always" }});
  results.push("storage:" + sessionStorage.getItem("latch-token"));
  await attempt("json", answer, {{ method: "POST", credentials: "include",
    headers: {{ "content-type": "application/json" }}, body: always }});
  await attempt("simple", answer, {{ method: "POST", mode: "no-cors", credentials: "include",
    headers: {{ "content-type": "text/plain" }}, body: always }});
  await attempt("interrupt", latch + "/api/sessions/" + session + "/interrupt",
    {{ method: "POST", mode: "no-cors", credentials: "include" }});
  await attempt("read", latch + "/api/sessions/" + session, {{ credentials: "include" }});
  document.getElementById("out").textContent = results.join("\n");
  document.body.dataset.done = "1";
}})();
</script></body></html>"#
    )
}

/// A plain HTTP server on another port of 127.0.0.1 that serves `page`
/// and records every request it receives (head and body).
async fn attacker_server(page: String) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let (page, log) = (page.clone(), log.clone());
            tokio::spawn(async move {
                let mut raw = Vec::new();
                let mut buf = [0u8; 4096];
                while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => raw.extend_from_slice(&buf[..n]),
                    }
                }
                log.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&raw).into_owned());
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = conn.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, seen)
}

/// The `Cookie` headers of the requests `seen`.
fn cookies(seen: &[String]) -> Vec<String> {
    seen.iter()
        .flat_map(|r| r.lines())
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("cookie")
                .then(|| v.trim().to_string())
        })
        .collect()
}

fn decided(served: &Served, id: &str) -> Vec<EventKind> {
    served
        .store()
        .events(id, 0, u64::MAX, 100_000)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .filter(|k| {
            matches!(
                k,
                EventKind::PermissionGranted { .. }
                    | EventKind::PermissionDenied { .. }
                    | EventKind::RunInterrupted { .. }
            )
        })
        .collect()
}

#[test]
fn another_local_page_or_service_cannot_answer_a_pending_permission() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("Reading it first.")
                .with_tool_call("read_file", r#"{"path":"src/math.sh"}"#),
            ScriptedTurn::text("Fixing the operator.").with_tool_call(
                "edit_file",
                r#"{"path":"src/math.sh","old_string":"$1 - $2","new_string":"$1 + $2"}"#,
            ),
            ScriptedTurn::text("Fixed."),
        ])))
        .unwrap();
    let served = serve(ws.path(), &provider, &["--approval", "untrusted"]);
    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let id = served.new_session().await;
        let c = browser(drv.1, profile.path()).await;
        // The user's tab: the page from the printed URL.
        c.goto(&format!("{}&session={id}", served.url))
            .await
            .unwrap();
        until(
            &c,
            "the live stream",
            "document.getElementById('status').innerText.startsWith('live')",
        )
        .await;
        let input = c.find(fantoccini::Locator::Css("#input")).await.unwrap();
        input.send_keys("fix add").await.unwrap();
        c.find(fantoccini::Locator::Css("#send"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        until(
            &c,
            "the edit's prompt",
            "!document.getElementById('permission').hidden",
        )
        .await;
        let state = served.get(&format!("/sessions/{id}")).await;
        let call = state["state"]["permission"]["call_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no request waits: {state}"))
            .to_string();
        let user_tab = c.window().await.unwrap();

        // The user visits a local dev server on another port.
        let (port, seen) = attacker_server(attacker_page(&served.base, &id, &call)).await;
        let tab = c.new_window(true).await.unwrap();
        c.switch_to_window(tab.handle).await.unwrap();
        c.goto(&format!("http://127.0.0.1:{port}/")).await.unwrap();
        until(
            &c,
            "the attacker page's attempts",
            "document.body.dataset.done === '1'",
        )
        .await;
        let out = c
            .execute("return document.getElementById('out').innerText;", vec![])
            .await
            .unwrap();
        let out = out.as_str().unwrap().to_string();
        // Its origin cannot read the token, and the browser keeps the API's
        // answers from it.
        assert!(out.contains("storage:null"), "{out}");
        assert!(out.contains("json:blocked"), "{out}");
        assert!(out.contains("read:blocked"), "{out}");

        // The dev server never received the token.
        let seen: Vec<String> = seen.lock().unwrap().clone();
        assert!(!seen.is_empty());
        for request in &seen {
            assert!(
                !request.contains(&served.token),
                "the token reached another port:\n{request}"
            );
        }

        // The service replays what it captured, with and without its
        // page's Origin, as "always".
        let api = served.api(&format!("/sessions/{id}/permissions/{call}"));
        let mut replays = vec![(String::new(), None)];
        for cookie in cookies(&seen) {
            replays.push((cookie.clone(), None));
            replays.push((cookie, Some(format!("http://127.0.0.1:{port}"))));
        }
        for (cookie, origin) in replays {
            let mut req = reqwest::Client::new()
                .post(&api)
                .json(&serde_json::json!({"decision": "always"}));
            if !cookie.is_empty() {
                req = req.header("cookie", &cookie);
            }
            if let Some(o) = &origin {
                req = req.header("origin", o);
            }
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            assert!(
                status == 401 || status == 403,
                "a replay with cookie `{cookie}` and origin {origin:?} got {status}: {body}"
            );
        }

        // Nothing was decided and nothing interrupted: the request waits.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            decided(&served, &id).is_empty(),
            "{:?}",
            decided(&served, &id)
        );
        let state = served.get(&format!("/sessions/{id}")).await;
        assert_eq!(
            state["state"]["permission"]["call_id"],
            call.as_str(),
            "{state}"
        );
        let math = ws.path().join("src/math.sh");
        assert!(std::fs::read_to_string(&math).unwrap().contains("$1 - $2"));

        // The user's own page answers it.
        c.close_window().await.unwrap();
        c.switch_to_window(user_tab).await.unwrap();
        c.find(fantoccini::Locator::Css("#permission-allow"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let started = Instant::now();
        while !std::fs::read_to_string(&math).unwrap().contains("$1 + $2") {
            if started.elapsed() > Duration::from_secs(30) {
                let shown = c
                    .execute("return document.body.innerText;", vec![])
                    .await
                    .unwrap();
                panic!(
                    "the user's answer did not reach the turn; decided: {:?}; the page shows:\n{}",
                    decided(&served, &id),
                    shown.as_str().unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(matches!(
            decided(&served, &id).first(),
            Some(EventKind::PermissionGranted { .. })
        ));
        c.close().await.unwrap();
    });
}
