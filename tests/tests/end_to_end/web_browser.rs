//! The page in a real browser: Debian's headless Chromium driven over
//! WebDriver (chromedriver, `fantoccini`). Send a task from the page, see
//! streamed text and tool rows, close the page mid-turn, open it again and
//! see the finished turn, including what happened while it was closed. The
//! page is opened from the URL `latch serve` printed (the token in its
//! fragment), so every request it makes carries the token as a header,
//! and reads the event stream with `fetch`: a stream cut by a dropped
//! tunnel reconnects after its last event, with no event twice. The test
//! saves a screenshot to `target/web-page.png`.

use super::{Served, project, runtime, serve};
use fantoccini::{Client, ClientBuilder, Locator};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// chromedriver on a free port; killed on drop.
pub(super) struct Driver(Child, pub(super) u16);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) fn driver() -> Driver {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect(
            "chromedriver is missing: apt-get install -y chromium chromium-driver (.ci/run does)",
        );
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "chromedriver did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Driver(child, port)
}

pub(super) async fn browser(port: u16, profile: &std::path::Path) -> Client {
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,900",
        &format!("--user-data-dir={}", profile.display()),
    ];
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({ "args": args, "binary": "/usr/bin/chromium" }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("cannot start headless Chromium through chromedriver")
}

/// Poll `script` (a JS expression) until it is true.
pub(super) async fn until(c: &Client, what: &str, script: &str) {
    let started = Instant::now();
    loop {
        let v = c
            .execute(&format!("return !!({script});"), vec![])
            .await
            .unwrap();
        if v == serde_json::Value::Bool(true) {
            return;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let body = c
                .execute("return document.body.innerText;", vec![])
                .await
                .unwrap();
            panic!("timed out waiting for {what}; the page shows:\n{body}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const TRANSCRIPT: &str = "document.getElementById('transcript').innerText";

#[test]
fn the_page_streams_a_turn_survives_closing_and_shows_it_finished() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("Reading the file first.")
                .with_tool_call("read_file", r#"{"path":"src/math.sh"}"#),
            ScriptedTurn::text("Fixing the operator.").with_tool_call(
                "edit_file",
                r#"{"path":"src/math.sh","old_string":"$1 - $2","new_string":"$1 + $2"}"#,
            ),
            ScriptedTurn::text("Running the slow check.")
                .with_tool_call("shell", r#"{"command":"sleep 4; echo slow check passed"}"#),
            ScriptedTurn::text("All done: add now adds."),
        ])))
        .unwrap();
    let served: Served = serve(ws.path(), &provider, &[]);
    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let id = served.new_session().await;
        let c = browser(drv.1, profile.path()).await;
        let page = format!("{}&session={id}", served.url);
        c.goto(&page).await.unwrap();
        until(&c, "the live stream", "document.getElementById('status').innerText.startsWith('live')").await;

        let input = c.find(Locator::Css("#input")).await.unwrap();
        input.send_keys("fix add").await.unwrap();
        c.find(Locator::Css("#send")).await.unwrap().click().await.unwrap();

        // Streamed text and tool rows, with the edit's diff.
        until(&c, "streamed text", "Number(document.body.dataset.streamed || 0) > 0").await;
        until(&c, "the read_file row", &format!("{TRANSCRIPT}.includes('read_file')")).await;
        until(&c, "the diff", "document.querySelector('.diff .added') !== null").await;
        until(&c, "the slow shell row, pending", "[...document.querySelectorAll('.tool')].some(r => r.innerText.includes('[pending] shell'))").await;

        // Close the page mid-turn: a new tab, the page's tab closed.
        let old = c.window().await.unwrap();
        let tab = c.new_window(true).await.unwrap();
        c.switch_to_window(old).await.unwrap();
        c.close_window().await.unwrap();
        c.switch_to_window(tab.handle).await.unwrap();
        assert!(
            !served.committed(&id).is_empty(),
            "the turn had committed events before the page closed"
        );
        tokio::time::sleep(Duration::from_secs(6)).await;

        // Reopen (with the next link `latch serve` printed: a link opens
        // one tab): the finished turn, including what happened while
        // closed.
        c.goto(&format!("{}&session={id}", served.link().await))
            .await
            .unwrap();
        until(&c, "the finished turn", &format!("{TRANSCRIPT}.includes('All done: add now adds.')")).await;
        until(&c, "the shell row, done", "[...document.querySelectorAll('.tool')].some(r => r.innerText.includes('[done] shell') && r.innerText.includes('slow check passed'))").await;
        until(&c, "the activity, ready", "document.getElementById('activity').innerText === 'ready'").await;
        let png = c.screenshot().await.unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/web-page.png");
        std::fs::write(&path, &png).unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        c.close().await.unwrap();
    });
}

#[test]
fn the_page_answers_a_permission_prompt_and_stops_a_turn() {
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
            ScriptedTurn::text("Checking it.")
                .with_tool_call("shell", r#"{"command":"touch checked.txt"}"#),
        ])))
        .unwrap();
    let served: Served = serve(ws.path(), &provider, &["--approval", "untrusted"]);
    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let id = served.new_session().await;
        let c = browser(drv.1, profile.path()).await;
        let page = format!("{}&session={id}", served.url);
        c.goto(&page).await.unwrap();
        until(&c, "the live stream", "document.getElementById('status').innerText.startsWith('live')").await;
        let input = c.find(Locator::Css("#input")).await.unwrap();
        input.send_keys("fix add").await.unwrap();
        c.find(Locator::Css("#send")).await.unwrap().click().await.unwrap();

        // The edit waits for the page: its prompt shows the diff and why.
        until(&c, "the edit's prompt", "!document.getElementById('permission').hidden").await;
        until(&c, "the diff in the prompt", "[...document.querySelectorAll('#permission .diff .added')].some(l => l.innerText.includes('$1 + $2'))").await;
        until(&c, "why it asks", "document.getElementById('permission').innerText.includes('untrusted')").await;
        until(&c, "the Stop button", "!document.getElementById('interrupt').hidden").await;
        let png = c.screenshot().await.unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/web-permission.png");
        std::fs::write(&path, &png).unwrap();
        let math = ws.path().join("src/math.sh");
        assert!(std::fs::read_to_string(&math).unwrap().contains("$1 - $2"));
        c.find(Locator::Css("#permission-allow")).await.unwrap().click().await.unwrap();

        // Allowed: the edit is made; the command asks next; Esc stops the
        // turn while it waits, which denies it.
        until(&c, "the command's prompt", "document.getElementById('permission').innerText.includes('touch checked.txt')").await;
        assert!(std::fs::read_to_string(&math).unwrap().contains("$1 + $2"));
        c.find(Locator::Css("#input")).await.unwrap().send_keys("\u{e00c}").await.unwrap();
        until(&c, "the interruption", &format!("{TRANSCRIPT}.includes('interrupted')")).await;
        until(&c, "the prompt gone", "document.getElementById('permission').hidden").await;
        until(&c, "the Stop button gone", "document.getElementById('interrupt').hidden").await;
        assert!(!ws.path().join("checked.txt").exists());
        c.close().await.unwrap();
    });
}

/// A TCP proxy on another local port in front of `target`; every
/// connection through it can be cut at once (a dropped SSH tunnel).
struct Proxy {
    port: u16,
    links: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Proxy {
    async fn start(target: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let links = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let registry = links.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                registry.lock().unwrap().push(link.abort_handle());
            }
        });
        Proxy { port, links }
    }

    /// Cut every open connection.
    fn cut(&self) {
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }
}

#[test]
fn the_page_reconnects_a_dropped_stream_after_its_last_event() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("First answer."),
            ScriptedTurn::text("Second answer."),
        ])))
        .unwrap();
    let served: Served = serve(ws.path(), &provider, &[]);
    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let id = served.new_session().await;
        let target = served.base.trim_start_matches("http://").to_string();
        let proxy = Proxy::start(target).await;
        let c = browser(drv.1, profile.path()).await;
        let link = served.link().await;
        let code = link.split_once("#token=").unwrap().1.to_string();
        c.goto(&format!(
            "http://127.0.0.1:{}/#token={code}&session={id}",
            proxy.port
        ))
        .await
        .unwrap();
        until(
            &c,
            "the live stream",
            "document.getElementById('status').innerText.startsWith('live')",
        )
        .await;
        let send = |text: &'static str| async {
            let input = c.find(Locator::Css("#input")).await.unwrap();
            input.send_keys(text).await.unwrap();
            c.find(Locator::Css("#send"))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
        };
        send("first").await;
        until(
            &c,
            "the first answer",
            &format!("{TRANSCRIPT}.includes('First answer.')"),
        )
        .await;
        until(
            &c,
            "the turn's end",
            "document.getElementById('activity').innerText === 'ready'",
        )
        .await;

        // The tunnel drops: the stream reconnects by itself, after the
        // last event it delivered.
        proxy.cut();
        until(
            &c,
            "a second connection",
            "Number(document.body.dataset.connects) >= 2",
        )
        .await;
        until(
            &c,
            "the live stream again",
            "document.getElementById('status').innerText.startsWith('live')",
        )
        .await;
        send("second").await;
        until(
            &c,
            "the second answer, streamed",
            &format!("{TRANSCRIPT}.includes('Second answer.')"),
        )
        .await;
        let duplicates = c
            .execute(
                "return Number(document.body.dataset.duplicates || 0);",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(
            duplicates,
            serde_json::json!(0),
            "events were delivered twice"
        );
        c.close().await.unwrap();
    });
}
