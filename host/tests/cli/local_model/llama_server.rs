//! The local tier against llama.cpp's own `llama-server` (`--jinja`), with
//! Gemma 3 270M: the GGUF carries no chat template, so the server runs
//! `tests/local-models/gemma3-tools.jinja` (Gemma's turns, tool calls in
//! the `<tool_call>` shape the server's template analysis recognises and
//! constrains with a grammar once the model opens a call).
//!
//! * a session holding a tool call and its result (the assistant's
//!   `tool_calls` with `content: ""`, then a `tool` message) is accepted
//!   and answered by the server, which renders both through the template;
//! * the server streams `usage` (and `timings`): Latch stores it beside its
//!   own estimate and the calibration ratio it reduces is the server's
//!   count over Latch's, shown by `latch context`;
//! * with no `[models.X] context_window_tokens`, the window is the one
//!   the server reports (`/props`, and `meta.n_ctx` in `/v1/models`);
//! * a prompt past the window is the server's 400, read as the typed
//!   too-long error with the server's counts.

use super::*;

/// The chat template the server runs the model with.
fn template() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/local-models/gemma3-tools.jinja")
}

/// The installed `llama-server`, or `None` (the test then passes, unless
/// the tier is required).
fn binary(install: &Install) -> Option<String> {
    let found = install
        .llama_server
        .clone()
        .filter(|b| Path::new(b).exists());
    if found.is_none() {
        assert!(
            std::env::var("LATCH_LOCAL_MODEL_REQUIRED").is_err(),
            "llama-server is not installed: run tests/local-models/install.sh"
        );
        eprintln!("skipped: llama-server is not installed (run tests/local-models/run.sh)");
    }
    found
}

impl LlamaServer {
    /// `llama-server --jinja` on a free port: one slot of `n_ctx` tokens,
    /// greedy sampling, the Gemma template with tools. One thread: on two
    /// busy cores, two threads meeting at every barrier of the graph run
    /// fifteen times slower (4 prompt tokens a second against 60).
    fn native(install: &Install, bin: &str, n_ctx: u64) -> LlamaServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cmd = Command::new(bin);
        cmd.args(["--model", &install.model, "--alias", MODEL])
            .args(["--ctx-size", &n_ctx.to_string(), "--parallel", "1"])
            .arg("--jinja")
            .arg("--chat-template-file")
            .arg(template())
            .args(["--threads", "1", "--seed", "7", "--temp", "0"])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()]);
        Self::launch(cmd, port, n_ctx, "health")
    }
}

/// The first tool call of the session, and where it was committed.
fn first_call(events: &[EventKind]) -> Option<(usize, latch_engine_sdk::types::ToolCall)> {
    events.iter().enumerate().find_map(|(i, e)| match e {
        EventKind::AssistantMessage { parts } => parts.iter().find_map(|p| match p {
            latch_engine_sdk::types::Part::ToolCall(c) => Some((i, c.clone())),
            _ => None,
        }),
        _ => None,
    })
}

/// `llama-server` streams `usage` (and its `timings`): Latch stores the
/// server's count beside its own estimate of the same request, and the
/// calibration `latch context` shows is their ratio.
#[test]
#[ignore = "local tier: needs tests/local-models/install.sh"]
fn llama_server_usage_is_stored_and_calibrates_the_budget() {
    let Some(install) = install() else { return };
    let Some(bin) = binary(&install) else { return };
    let server = LlamaServer::native(&install, &bin, 8_192);
    let ws = workspace(&config(8_192, 32));
    // Whether the run ends well is the model's business (Gemma 3 270M may
    // echo its prompt until the output limit, four times, and Latch then
    // stops the run); every request it made was counted by the server.
    on(&server, ws.path())
        .args(["--model", MODEL, "run", "Say hello in one short sentence."])
        .output()
        .unwrap();
    let usage: Vec<(Option<u64>, Option<u64>, Option<u64>)> = events_of(ws.path())
        .into_iter()
        .filter_map(|e| match e {
            EventKind::ProviderUsage {
                input_tokens,
                output_tokens,
                estimated_input_tokens,
                ..
            } => Some((input_tokens, output_tokens, estimated_input_tokens)),
            _ => None,
        })
        .collect();
    assert!(!usage.is_empty(), "no usage event:\n{}", server.log());
    let (input, output, estimated) = (
        usage[0].0.expect("the server's prompt count"),
        usage[0].1.expect("the server's completion count"),
        usage[0].2.expect("Latch's estimate"),
    );
    // The count is the server's own: its log says how many prompt tokens
    // it evaluated for the first request (nothing cached yet).
    let log = server.log();
    let evaluated = prompt_tokens_logged(&log);
    assert_eq!(evaluated, Some(input), "server log:\n{log}");
    assert!(output > 0 && output <= 32, "{output}");
    eprintln!(
        "first request: llama-server counted {input} prompt tokens, Latch estimated {estimated} ({:.3})",
        input as f64 / estimated as f64
    );
    let reported: u64 = usage.iter().map(|u| u.0.unwrap()).sum();
    let estimated_all: u64 = usage.iter().map(|u| u.2.unwrap()).sum();
    let ratio = reported as f64 / estimated_all as f64;
    eprintln!(
        "{} requests: llama-server counted {reported} prompt tokens, Latch estimated {estimated_all}: ratio {ratio:.3}",
        usage.len()
    );
    let last = usage.last().unwrap();
    let (report, _) = ok(&on(&server, ws.path()).args(["context"]).output().unwrap());
    eprintln!("{report}");
    let line = |k: &str| {
        report
            .lines()
            .find(|l| l.trim_start().starts_with(k))
            .unwrap_or_else(|| panic!("no {k:?} row:\n{report}"))
            .to_string()
    };
    assert!(
        line("last request input (provider)").contains(&format!(
            "{} (Latch estimated ≈{})",
            last.0.unwrap(),
            last.2.unwrap()
        )),
        "{report}"
    );
    let calibration = line("calibration (provider ÷ estimate)");
    assert!(
        calibration.contains(&format!("{ratio:.3} over {} requests", usage.len())),
        "{report}"
    );
    assert!(
        calibration.contains(if ratio > 1.0 {
            "(budget tightened)"
        } else {
            "(estimator kept)"
        }),
        "{report}"
    );
}

/// The prompt tokens `llama-server` says it evaluated for its first
/// request (`prompt eval time = … ms / N tokens`).
fn prompt_tokens_logged(log: &str) -> Option<u64> {
    let line = log.lines().find(|l| l.contains("prompt eval time"))?;
    let (_, rest) = line.split_once(" / ")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// With no `[models.X] context_window_tokens`, the model's name comes from
/// `/v1/models` and its window from the server: `llama-server` reports the
/// slot's `n_ctx` both at `/props` (`default_generation_settings.n_ctx`)
/// and in `/v1/models` (`meta.n_ctx`, beside `meta.n_ctx_train`, 32768 for
/// this model); Latch says which it uses.
#[test]
#[ignore = "local tier: needs tests/local-models/install.sh"]
fn llama_server_the_window_is_discovered_from_the_server() {
    let Some(install) = install() else { return };
    let Some(bin) = binary(&install) else { return };
    let server = LlamaServer::native(&install, &bin, 6_144);
    let ws = workspace(&format!("[provider]\nmax_tokens = 32\n{TOOLS}"));
    // Discovery is done before the first request; how the model answers
    // does not matter here.
    let out = on(&server, ws.path())
        .args(["run", "Say hi."])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "model `{MODEL}`: the server runs a context window of 6144 tokens; Latch uses it"
        )),
        "{stderr}"
    );
    let store = store_of(ws.path());
    let key = ws.path().canonicalize().unwrap().display().to_string();
    let session = store.list_sessions(&key).unwrap().remove(0);
    assert_eq!(session.model.model, MODEL);
    assert_eq!(session.model.context_window_tokens, 6_144);
}

/// A prompt past the server's window is `llama-server`'s 400
/// (`exceed_context_size_error`): the typed too-long error with the
/// server's counts, the window Latch used and the setting to change.
#[test]
#[ignore = "local tier: needs tests/local-models/install.sh"]
fn llama_server_a_prompt_past_the_window_is_the_typed_too_long_error() {
    let Some(install) = install() else { return };
    let Some(bin) = binary(&install) else { return };
    let server = LlamaServer::native(&install, &bin, 4_096);
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
        "too long for the model's context window (",
        " tokens > 4096)",
        "window to be 32768 tokens",
        &format!("[models.\"{MODEL}\"] context_window_tokens"),
    ] {
        assert!(stderr.contains(want), "{want:?} missing:\n{stderr}");
    }
    assert!(!stderr.contains("retrying"), "not retried: {stderr}");
    eprintln!(
        "the refusal: {}",
        stderr
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or("")
    );
}

/// A session holding a tool call and its result (recorded against the
/// scripted server answering as `llama-server`) resumed on the real
/// `llama-server`: the assistant's `tool_calls` (arguments as a JSON
/// string, `content: ""`) and the `tool` message answering it are accepted
/// by the server, which renders them through the template, and the turn is
/// answered.
#[test]
#[ignore = "local tier: needs tests/local-models/install.sh"]
fn llama_server_accepts_a_recorded_tool_call_and_its_result() {
    use latch_provider::fake::{ChatServer, FakeServer, Script, ScriptedTurn};
    let Some(install) = install() else { return };
    let Some(bin) = binary(&install) else { return };
    let ws = workspace(&format!(
        "[provider]\nmax_tokens = 32\n[models.{MODEL}]\ncontext_window_tokens = 8192\n\
         [tools]\nallow = [\"read_file\"]\n"
    ));
    let rt = runtime();
    let scripted = rt
        .block_on(FakeServer::start(
            Script::new([
                ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#),
                ScriptedTurn::text("I read notes.txt."),
            ])
            .as_server(ChatServer::LlamaServer),
        ))
        .unwrap();
    ok(&latch(ws.path())
        .args(["--provider", "openai-compatible", "--base-url"])
        .arg(scripted.openai_base_url())
        .args([
            "--trust-workspace",
            "--model",
            MODEL,
            "run",
            "Read notes.txt.",
        ])
        .output()
        .unwrap());
    drop(scripted);
    let events = events_of(ws.path());
    let (_, call) = first_call(&events).expect("the recorded call");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, EventKind::ToolResult(r) if r.call_id == call.id && r.content.contains("4242"))),
        "{events:?}"
    );

    let server = LlamaServer::native(&install, &bin, 8_192);
    let before = events_of(ws.path()).len();
    let resumed = resume_last(on(&server, ws.path()), b"What is the launch code?\n/exit\n");
    let stderr = String::from_utf8_lossy(&resumed.stderr).into_owned();
    // Every request of the resumed turn carries the call and its result;
    // the server answered them (whether Gemma 3 270M's answer ends before
    // the output limit is the model's business).
    let after: Vec<EventKind> = events_of(ws.path()).into_iter().skip(before).collect();
    let answered = after
        .iter()
        .filter(|e| matches!(e, EventKind::ProviderUsage { .. }))
        .count();
    assert!(
        answered >= 1,
        "no request with the tool history was answered:\n{stderr}\nserver:\n{}",
        server.log()
    );
    assert!(
        after
            .iter()
            .any(|e| matches!(e, EventKind::AssistantMessage { .. })),
        "{stderr}"
    );
    for refusal in ["refused", "status 4", "status 5", "server error"] {
        assert!(!stderr.contains(refusal), "{refusal:?}:\n{stderr}");
    }
    let log = server.log();
    assert!(
        !log.lines()
            .any(|l| l.split_whitespace().nth(1) == Some("E")),
        "the server logged an error:\n{log}"
    );
    eprintln!("{answered} requests carrying the tool call and its result answered");
}
