//! The web surface (issue 17): `latch serve` in a child process (this test
//! binary re-executed as the `latch` command line), driven over real HTTP
//! with reqwest and a small SSE parser, against the local wire-format
//! server. Token auth, loopback-only bind, a turn posted through the API
//! and streamed, `Last-Event-ID` resume with no gap and no duplicate, a
//! snapshot for a far-behind client equal to the reducers' state, a stream
//! closed mid-turn that cancels nothing, a server killed mid-turn, and no
//! reasoning text on the wire.
//!
//! * [`browser`] — the page in headless Chromium.
//! * [`commands`] — custom slash commands and a hook's row on the page.
//! * [`control`] — interrupts, permission answers and the group view.
//! * [`attack`] — another local page and a local service trying to answer
//!   a pending permission request.
//! * [`lease`] — a driver stopped past its lease and taken over writes
//!   nothing; the server holds a session only while it writes to it.
//! * [`lifecycle`] — interrupts during `wait_agents`; one driver per
//!   session between the page, a parent agent and the terminal.
//! * [`media`] — images uploaded from the page, rewind from the page, the
//!   sidebar's cost.
//! * [`plan`] — plan mode from the header's control, the plan dialog
//!   approved into auto, the checklist, `/agents`.
//! * [`page`] — the page as a daily tool: sessions started from a task,
//!   queued messages, wrapping, panels, restarts, themes, no provider.

#[path = "web_attack.rs"]
mod attack;
#[path = "web_browser.rs"]
mod browser;
#[path = "web_commands.rs"]
mod commands;
#[path = "web_control.rs"]
mod control;
#[path = "web_lease.rs"]
mod lease;
#[path = "web_lifecycle.rs"]
mod lifecycle;
#[path = "web_media.rs"]
mod media;
#[path = "web_page.rs"]
mod page;
#[path = "web_plan.rs"]
mod plan;

use latch_kernel::Store;
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const CLI_ENV: &str = "LATCH_WEB_CLI";
const SEP: char = '\u{1f}';

/// Not a test when `LATCH_WEB_CLI` is set: the `latch` binary.
#[test]
fn serve_entry_point() {
    let Ok(args) = std::env::var(CLI_ENV) else {
        return;
    };
    let args = std::iter::once("latch".to_string())
        .chain(args.split(SEP).map(str::to_string))
        .collect();
    std::process::exit(latch::cli::main_with(args));
}

fn latch_command(ws: &Path, args: &[String]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "web::serve_entry_point",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CLI_ENV, args.join(&SEP.to_string()))
    .env(
        "LATCH_CACHE_DIR",
        std::env::temp_dir().join("latch-web-test-cache"),
    )
    .env("LATCH_CONFIG_DIR", ws.join(".config"))
    .env_remove("ANTHROPIC_API_KEY")
    .env_remove("OPENAI_API_KEY")
    .env_remove("OPENAI_BASE_URL")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

/// A running `latch serve`.
struct Served {
    child: Child,
    /// The link it printed, as printed (good for one tab).
    url: String,
    /// The link's code (`#token=CODE`).
    code: String,
    base: String,
    /// The server's own token (kept per workspace, never in a URL): what a
    /// script presents.
    token: String,
    ws: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn provider_args(ws: &Path, provider: &FakeServer) -> Vec<String> {
    [
        "-C",
        &ws.display().to_string(),
        "--provider",
        "openai-compatible",
        "--base-url",
        &provider.openai_base_url(),
        "--model",
        "local",
    ]
    .map(str::to_string)
    .to_vec()
}

/// Start `latch serve --port 0 <extra>` in `ws`; wait for the URL it prints.
fn serve(ws: &Path, provider: &FakeServer, extra: &[&str]) -> Served {
    let mut args = provider_args(ws, provider);
    args.extend(["serve", "--port", "0"].map(str::to_string));
    args.extend(extra.iter().map(|s| s.to_string()));
    spawn_served(ws, latch_command(ws, &args))
}

/// Run `cmd` (a `latch serve`); wait for the URL it prints.
fn spawn_served(ws: &Path, mut cmd: Command) -> Served {
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // The test harness prints its own prefix on the same line.
            if let Some(at) = line.find("http://") {
                let _ = tx.send(line[at..].trim().to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("latch serve printed no URL");
    // `/#token=` (the fragment never reaches a server); `/?token=` from
    // servers before it.
    let (base, code) = url
        .split_once("/#token=")
        .or_else(|| url.split_once("/?token="))
        .unwrap_or_else(|| panic!("no link code in the printed URL {url}"));
    Served {
        base: base.to_string(),
        code: code.to_string(),
        token: server_token(ws),
        url,
        child,
        ws: ws.to_path_buf(),
    }
}

/// The token `latch serve` keeps for `ws` (under its config dir).
fn server_token(ws: &Path) -> String {
    let dir = ws.join(".config/serve-tokens");
    let file = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .next()
        .expect("a kept token");
    std::fs::read_to_string(file.path())
        .unwrap()
        .trim()
        .to_string()
}

impl Served {
    fn api(&self, path: &str) -> String {
        format!("{}/api{path}", self.base)
    }

    /// A new link for one more tab (`#token=CODE`; add `&session=…`).
    async fn link(&self) -> String {
        let (status, body) = self.post("/links", Value::Null).await;
        assert_eq!(status, 201, "{body}");
        format!("{}/#token={}", self.base, body["code"].as_str().unwrap())
    }

    async fn get(&self, path: &str) -> Value {
        let r = reqwest::Client::new()
            .get(self.api(path))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.unwrap()
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = reqwest::Client::new()
            .post(self.api(path))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn new_session(&self) -> String {
        let (status, s) = self.post("/sessions", Value::Null).await;
        assert_eq!(status, 201, "{s}");
        s["id"].as_str().unwrap().to_string()
    }

    /// Open the session's event stream, resuming after `last` (sent as
    /// `Last-Event-ID`, or as `?after=` when `query` is set).
    async fn stream(&self, session: &str, last: Option<u64>, query: bool) -> Sse {
        let mut url = self.api(&format!("/sessions/{session}/events"));
        let mut req = reqwest::Client::new().get(&url).bearer_auth(&self.token);
        if let Some(n) = last {
            if query {
                url.push_str(&format!("?after={n}"));
                req = reqwest::Client::new().get(&url).bearer_auth(&self.token);
            } else {
                req = req.header("Last-Event-ID", n.to_string());
            }
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        Sse {
            resp,
            buf: String::new(),
        }
    }

    fn store(&self) -> Store {
        Store::open_existing(self.ws.join(".latch/latch.db")).unwrap()
    }

    /// The committed seqs a surface of `session` reads, from the store.
    fn committed(&self, session: &str) -> Vec<u64> {
        let ws = std::fs::canonicalize(&self.ws).unwrap();
        latch_web::log::catch_up(&self.store(), session, &ws.display().to_string(), 0)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect()
    }
}

/// One SSE frame.
#[derive(Debug, Clone)]
struct Frame {
    id: Option<u64>,
    event: String,
    data: String,
}

impl Frame {
    fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap()
    }
}

/// A minimal SSE parser over a streaming response.
struct Sse {
    resp: reqwest::Response,
    buf: String,
}

impl Sse {
    /// The next frame (comments skipped), or None after `wait` of silence.
    async fn next(&mut self, wait: Duration) -> Option<Frame> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut frame = Frame {
                    id: None,
                    event: "message".into(),
                    data: String::new(),
                };
                let mut any = false;
                for line in block.lines() {
                    if line.starts_with(':') || line.is_empty() {
                        continue;
                    }
                    let (k, v) = line.split_once(':').unwrap_or((line, ""));
                    let v = v.strip_prefix(' ').unwrap_or(v);
                    any = true;
                    match k {
                        "id" => frame.id = Some(v.parse().unwrap()),
                        "event" => frame.event = v.to_string(),
                        "data" => {
                            if !frame.data.is_empty() {
                                frame.data.push('\n');
                            }
                            frame.data.push_str(v);
                        }
                        _ => {}
                    }
                }
                if any {
                    return Some(frame);
                }
                continue;
            }
            match tokio::time::timeout(wait, self.resp.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buf.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// Frames until the transient `turn` event of `receipt` (inclusive).
    async fn until_turn(&mut self, receipt: &str) -> Vec<Frame> {
        let mut frames = Vec::new();
        loop {
            let f = self
                .next(Duration::from_secs(60))
                .await
                .expect("the stream went silent before the turn ended");
            let done = f.event == "turn" && f.json()["receipt"] == receipt;
            frames.push(f);
            if done {
                return frames;
            }
        }
    }

    /// Every frame until `quiet` passes without one.
    async fn drain(&mut self, quiet: Duration) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(f) = self.next(quiet).await {
            frames.push(f);
        }
        frames
    }
}

fn ids(frames: &[Frame]) -> Vec<u64> {
    frames
        .iter()
        .filter(|f| f.event == "event")
        .map(|f| f.id.expect("a durable event without an id"))
        .collect()
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/math.sh"),
        "add() {\n  echo $(( $1 - $2 ))\n}\n",
    )
    .unwrap();
    dir
}

fn task_script() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::text("Reading the file first.")
            .with_tool_call("read_file", r#"{"path":"src/math.sh"}"#),
        ScriptedTurn::text("Fixing the operator.").with_tool_call(
            "edit_file",
            r#"{"path":"src/math.sh","old_string":"$1 - $2","new_string":"$1 + $2"}"#,
        ),
        ScriptedTurn::text("Fixed: add now adds."),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn api_refuses_requests_without_the_token() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new(task_script())))
        .unwrap();
    let served = serve(ws.path(), &provider, &[]);
    rt.block_on(async {
        let c = reqwest::Client::new();
        let url = served.api("/sessions");
        assert_eq!(c.get(&url).send().await.unwrap().status().as_u16(), 401);
        let wrong = c
            .get(&url)
            .bearer_auth("not-the-token")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status().as_u16(), 401);
        let body: Value = wrong.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("token"), "{body}");
        let events = format!("{}/api/sessions/x/events", served.base);
        assert_eq!(c.get(&events).send().await.unwrap().status().as_u16(), 401);
        let ok = c.get(&url).bearer_auth(&served.token).send().await.unwrap();
        assert_eq!(ok.status().as_u16(), 200);
        // The printed URL carries a link's code in its fragment, which no
        // server sees, and never the server's token; the page loads
        // without it and sets no cookie.
        assert_eq!(
            served.url,
            format!("{}/#token={}", served.base, served.code)
        );
        assert_ne!(served.code, served.token);
        for page in [
            format!("{}/", served.base),
            format!("{}/?token={}", served.base, served.code),
        ] {
            let page = c.get(page).send().await.unwrap();
            assert_eq!(page.status().as_u16(), 200);
            assert!(page.headers().get("set-cookie").is_none());
        }
        // The link's code is no credential: it opens one tab, once, and
        // gives that tab a credential of its own.
        let as_bearer = c.get(&url).bearer_auth(&served.code).send().await.unwrap();
        assert_eq!(as_bearer.status().as_u16(), 401);
        let tab = c
            .post(served.api("/tab"))
            .bearer_auth(&served.code)
            .send()
            .await
            .unwrap();
        assert_eq!(tab.status().as_u16(), 201);
        let credential = tab.json::<Value>().await.unwrap()["credential"]
            .as_str()
            .unwrap()
            .to_string();
        let ok = c.get(&url).bearer_auth(&credential).send().await.unwrap();
        assert_eq!(ok.status().as_u16(), 200);
        let again = c
            .post(served.api("/tab"))
            .bearer_auth(&served.code)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status().as_u16(), 401);
        let body: Value = again.json().await.unwrap();
        assert_eq!(body["kind"], "link_used", "{body}");
        // A cookie with the token authorizes nothing.
        let cookie = format!("latch_token={}", served.token);
        let with_cookie = c.get(&url).header("cookie", cookie).send().await.unwrap();
        assert_eq!(with_cookie.status().as_u16(), 401);
        // Nor does a request sent to another name for this machine.
        let rebound = c
            .get(&url)
            .bearer_auth(&served.token)
            .header("host", "rebound.example")
            .send()
            .await
            .unwrap();
        assert_eq!(rebound.status().as_u16(), 403);
    });
}

#[test]
fn a_non_loopback_bind_is_refused() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new(task_script())))
        .unwrap();
    let mut args = provider_args(ws.path(), &provider);
    args.extend(["serve", "--bind", "0.0.0.0", "--port", "0"].map(str::to_string));
    let out = latch_command(ws.path(), &args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("refusing to bind 0.0.0.0"), "{stderr}");
    assert!(stderr.contains("--allow-remote"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("http://"));
}

#[test]
fn a_turn_streams_and_a_reconnect_resumes_without_gap_or_duplicate() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new(task_script())))
        .unwrap();
    let served = serve(ws.path(), &provider, &[]);
    rt.block_on(async {
        let id = served.new_session().await;
        let listing = served.get("/sessions").await;
        assert_eq!(listing["sessions"][0]["id"], id.as_str());

        let mut live = served.stream(&id, None, false).await;
        let (status, receipt) = served
            .post(
                &format!("/sessions/{id}/messages"),
                serde_json::json!({"text": "fix add"}),
            )
            .await;
        assert_eq!(status, 202, "{receipt}");
        let receipt = receipt["receipt"].as_str().unwrap().to_string();
        let frames = live.until_turn(&receipt).await;
        let turn = frames.last().unwrap().json();
        assert_eq!(turn["state"], "finished", "{turn}");
        assert!(frames.last().unwrap().id.is_none());

        // Streamed text and tool rows arrived; transient frames carry no id.
        let deltas: Vec<&Frame> = frames.iter().filter(|f| f.event == "delta").collect();
        assert!(!deltas.is_empty());
        assert!(deltas.iter().all(|f| f.id.is_none()));
        let streamed: String = deltas
            .iter()
            .filter_map(|f| f.json()["text"].as_str().map(str::to_string))
            .collect();
        assert!(streamed.contains("Fixing the operator."), "{streamed}");
        let kinds: Vec<String> = frames
            .iter()
            .filter(|f| f.event == "event")
            .map(|f| f.json()["event"]["kind"].to_string())
            .collect();
        assert!(kinds.iter().any(|k| k.contains("tool_result")), "{kinds:?}");

        // Every committed event of the session went out once, in order,
        // with its seq as the SSE id.
        let all = ids(&frames);
        assert_eq!(all, served.committed(&id));
        assert!(all.len() > 6, "{all:?}");

        // Reconnect after the Nth event: exactly N+1.. follow, by header
        // and by `?after=`.
        for n in [0, 3, all.len() - 1] {
            for query in [false, true] {
                let mut again = served.stream(&id, Some(all[n]), query).await;
                let got = ids(&again.drain(Duration::from_millis(700)).await);
                assert_eq!(got, all[n + 1..].to_vec(), "after #{n} (query {query})");
            }
        }

        // Resumed mid-history, then live: the catch-up and the next turn's
        // events join without a gap or a duplicate.
        provider.push(ScriptedTurn::text("Nothing else to do."));
        let mut resumed = served.stream(&id, Some(all[2]), false).await;
        let (status, r2) = served
            .post(
                &format!("/sessions/{id}/messages"),
                serde_json::json!({"text": "anything else?"}),
            )
            .await;
        assert_eq!(status, 202);
        let frames = resumed.until_turn(r2["receipt"].as_str().unwrap()).await;
        let everything = served.committed(&id);
        assert!(everything.len() > all.len());
        assert_eq!(ids(&frames), everything[3..].to_vec());
    });
}

#[test]
fn a_far_behind_client_gets_one_snapshot_equal_to_the_reducers_state() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new(task_script())))
        .unwrap();
    let served = serve(ws.path(), &provider, &["--snapshot-after", "4"]);
    rt.block_on(async {
        let id = served.new_session().await;
        let mut live = served.stream(&id, None, false).await;
        let (_, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                serde_json::json!({"text": "fix add"}),
            )
            .await;
        let all = ids(&live.until_turn(r["receipt"].as_str().unwrap()).await);
        assert!(all.len() > 5);

        // Four behind: the events themselves.
        let mut near = served.stream(&id, Some(all[all.len() - 5]), false).await;
        let got = near.drain(Duration::from_millis(700)).await;
        assert!(got.iter().all(|f| f.event == "event"), "{got:?}");
        assert_eq!(ids(&got), all[all.len() - 4..].to_vec());

        // Far behind: one snapshot at the last seq, nothing else.
        let mut far = served.stream(&id, Some(all[0]), false).await;
        let got = far.drain(Duration::from_millis(700)).await;
        assert_eq!(got.len(), 1, "{got:?}");
        let snap = &got[0];
        assert_eq!(snap.event, "snapshot");
        let seq = *all.last().unwrap();
        assert_eq!(snap.id, Some(seq));
        let data = snap.json();
        assert_eq!(data["seq"], seq);

        // The reducers' state at that seq, replayed independently.
        let store = served.store();
        let wsk = std::fs::canonicalize(ws.path())
            .unwrap()
            .display()
            .to_string();
        let events = latch_web::log::catch_up(&store, &id, &wsk, 0).unwrap();
        let upto: Vec<_> = events.into_iter().filter(|e| e.seq <= seq).collect();
        let surface = latch_surface::Surface::replay(id.as_str(), &upto);
        // Compared as received: through the same JSON text round trip.
        let expected =
            latch_web::view::durable(surface.durable(), &latch_surface::PriceTable::builtin())
                .to_string();
        let expected: Value = serde_json::from_str(&expected).unwrap();
        assert_eq!(data["state"]["durable"], expected);
        let transcript = data["state"]["durable"]["transcript"].as_array().unwrap();
        assert!(
            transcript
                .iter()
                .any(|i| i["kind"] == "tool" && i["name"] == "edit_file")
        );
        assert_eq!(data["state"]["activity"]["kind"], "idle");

        // A client with no id at all is as far behind.
        let mut fresh = served.stream(&id, None, false).await;
        let got = fresh.drain(Duration::from_millis(700)).await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].event, "snapshot");
    });
}

#[test]
fn closing_the_stream_mid_turn_cancels_nothing() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("Waiting for the build.")
                .with_tool_call("shell", r#"{"command":"sleep 2; echo built"}"#),
            ScriptedTurn::text("The build finished."),
        ])))
        .unwrap();
    let served = serve(ws.path(), &provider, &[]);
    rt.block_on(async {
        let id = served.new_session().await;
        let mut live = served.stream(&id, None, false).await;
        let (_, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                serde_json::json!({"text": "build it"}),
            )
            .await;
        let receipt = r["receipt"].as_str().unwrap().to_string();
        // Wait for the tool call, then close the page's stream.
        let mut seen = Vec::new();
        loop {
            let f = live.next(Duration::from_secs(30)).await.unwrap();
            let call = f.event == "event" && f.data.contains("\"shell\"");
            seen.push(f);
            if call {
                break;
            }
        }
        drop(live);
        let state = served.get(&format!("/sessions/{id}")).await;
        assert_eq!(state["state"]["activity"]["kind"], "tools", "{state}");
        // Reopen later: the finished turn is there, including what
        // happened while no one watched.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let mut again = served
            .stream(&id, Some(ids(&seen).last().copied().unwrap()), false)
            .await;
        let rest = again.drain(Duration::from_millis(700)).await;
        let texts: String = rest.iter().map(|f| f.data.clone()).collect();
        assert!(texts.contains("built"), "{texts}");
        assert!(texts.contains("The build finished."), "{texts}");
        let state = served.get(&format!("/sessions/{id}")).await;
        assert_eq!(state["state"]["activity"]["kind"], "idle", "{state}");
        let _ = receipt;
    });
}

#[test]
fn a_server_killed_mid_turn_restarts_with_history_and_the_turn_interrupted() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("Starting a long build.")
                .with_tool_call("shell", r#"{"command":"sleep 60"}"#),
            ScriptedTurn::text("Continuing after the restart."),
        ])))
        .unwrap();
    let mut served = serve(ws.path(), &provider, &[]);
    let id = rt.block_on(async {
        let id = served.new_session().await;
        let mut live = served.stream(&id, None, false).await;
        served
            .post(
                &format!("/sessions/{id}/messages"),
                serde_json::json!({"text": "build it"}),
            )
            .await;
        loop {
            let f = live.next(Duration::from_secs(30)).await.unwrap();
            if f.event == "event" && f.data.contains("\"shell\"") {
                break;
            }
        }
        id
    });
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    // What the killed process committed (the shell call may have committed
    // more after the stream showed it).
    let before = served.committed(&id);
    drop(served);

    let served = serve(ws.path(), &provider, &[]);
    rt.block_on(async {
        // Committed history, nothing invented: the store holds what it held.
        assert_eq!(served.committed(&id), before);
        let state = served.get(&format!("/sessions/{id}")).await;
        let d = &state["state"]["durable"];
        assert_eq!(d["transcript"][0]["kind"], "user");
        assert_eq!(d["transcript"][0]["text"], "build it");
        let texts = d["transcript"].to_string();
        assert!(texts.contains("Starting a long build."), "{texts}");
        assert!(!texts.contains("Continuing"), "{texts}");
        assert_eq!(state["state"]["activity"]["kind"], "interrupted", "{state}");

        // The user continues: the interrupted run is marked, a new turn runs.
        let mut live = served
            .stream(&id, Some(*before.last().unwrap()), false)
            .await;
        let (status, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                serde_json::json!({"text": "go on"}),
            )
            .await;
        assert_eq!(status, 202);
        let frames = live.until_turn(r["receipt"].as_str().unwrap()).await;
        assert_eq!(frames.last().unwrap().json()["state"], "finished");
        let state = served.get(&format!("/sessions/{id}")).await;
        let t = state["state"]["durable"]["transcript"].to_string();
        assert!(t.contains("\"divider\":\"interrupted\""), "{t}");
        assert!(t.contains("Continuing after the restart."), "{t}");
        assert_eq!(state["state"]["activity"]["kind"], "idle");
    });
}

#[test]
fn reasoning_is_reported_on_the_wire_and_its_text_never_is() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text(
            "The operator is wrong.",
        )
        .with_reasoning()])))
        .unwrap();
    // Anthropic's wire: thinking arrives in the clear and is stored (as
    // `provider_state`) to be replayed to the provider.
    let args: Vec<String> = [
        "-C",
        &ws.path().display().to_string(),
        "--provider",
        "anthropic",
        "--base-url",
        &provider.anthropic_base_url(),
        "--model",
        "claude-test",
        "serve",
        "--port",
        "0",
    ]
    .map(str::to_string)
    .to_vec();
    let mut cmd = latch_command(ws.path(), &args);
    cmd.env("ANTHROPIC_API_KEY", "test-key");
    let served = spawn_served(ws.path(), cmd);
    rt.block_on(async {
        let id = served.new_session().await;
        let mut live = served.stream(&id, None, false).await;
        let (status, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                serde_json::json!({"text": "why does add subtract?"}),
            )
            .await;
        assert_eq!(status, 202, "{r}");
        let frames = live.until_turn(r["receipt"].as_str().unwrap()).await;
        assert_eq!(frames.last().unwrap().json()["state"], "finished");

        // The store holds the thinking, so the checks below can fail.
        let word = "Considering";
        assert!(latch_provider::fake::REASONING_TEXT.contains(word));
        let stored = served.store().all_events(&id).unwrap();
        assert!(
            stored
                .iter()
                .any(|e| e.kind.kind_name() == "provider_state" && e.kind.to_json().contains(word)),
            "no thinking stored"
        );

        // Live stream: reasoning reported (a delta, and the event), no text.
        let live_text: String = frames.iter().map(|f| f.data.clone()).collect();
        assert!(!live_text.contains(word), "{live_text}");
        assert!(
            frames
                .iter()
                .any(|f| f.event == "delta" && f.json()["reasoning"] == true),
            "reasoning was not reported"
        );
        let reported = frames
            .iter()
            .find(|f| f.event == "event" && f.json()["event"]["kind"] == "provider_state")
            .expect("the provider_state event went out");
        assert_eq!(reported.json()["event"]["data"]["reasoning"], "reported");

        // Replayed from the store, and the reducers' state.
        let mut again = served.stream(&id, Some(0), false).await;
        let replayed: String = again
            .drain(Duration::from_millis(700))
            .await
            .iter()
            .map(|f| f.data.clone())
            .collect();
        assert!(replayed.contains("The operator is wrong."), "{replayed}");
        assert!(!replayed.contains(word), "{replayed}");
        let state = served.get(&format!("/sessions/{id}")).await.to_string();
        assert!(state.contains("The operator is wrong."), "{state}");
        assert!(!state.contains(word), "{state}");
    });
}
