//! `latch` against the fake answering as llama.cpp's servers do: the model
//! and window discovered from `/v1/models` and `/props`, the note when Latch
//! assumed 256k, each retry printed once, an empty answer said, an
//! interrupted session marked in `latch sessions`, `[tools]` checked.

use super::*;
use latch_provider::fake::{ChatServer, ScriptedFailure, local};

fn compatible(server: &FakeServer) -> [String; 4] {
    [
        "--provider".into(),
        "openai-compatible".into(),
        "--base-url".into(),
        server.openai_base_url(),
    ]
}

fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The only session of `ws`.
fn only_session(ws: &Path) -> latch_kernel::SessionRecord {
    let store = Store::open(latch_kernel::default_store_path(ws)).unwrap();
    let key = ws.canonicalize().unwrap().display().to_string();
    store.list_sessions(&key).unwrap().remove(0)
}

/// Without `--model` or a configured window: llama-server names its model
/// in `/v1/models` and its window in `/props`, and the session runs with
/// both; llama-cpp-python names only the model, and Latch says it assumed
/// 256k and how to set the window.
#[test]
fn the_model_and_window_are_discovered_and_an_assumed_window_is_said() {
    let rt = runtime();
    for (server_kind, note) in [
        (
            ChatServer::LlamaServer,
            "the server runs a context window of 16384 tokens; Latch uses it",
        ),
        (
            ChatServer::LlamaCppPython,
            "no context window is configured and the server reports none, so Latch assumes 256000 tokens",
        ),
    ] {
        let server = rt
            .block_on(FakeServer::start(
                Script::new([ScriptedTurn::text("Hello.")])
                    .as_server(server_kind)
                    .with_context_window(16_384),
            ))
            .unwrap();
        let ws = project();
        let out = latch(ws.path())
            .args(compatible(&server))
            .args(["run", "Say hello."])
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stderr.contains(note), "{server_kind:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "[models.\"{}\"] context_window_tokens",
                local::LOCAL_MODEL_ID
            )),
            "{stderr}"
        );
        let session = only_session(ws.path());
        assert_eq!(session.model.model, local::LOCAL_MODEL_ID);
        let window = match server_kind {
            ChatServer::LlamaServer => 16_384,
            _ => latch_engine_sdk::DEFAULT_CONTEXT_WINDOW_TOKENS,
        };
        assert_eq!(session.model.context_window_tokens, window);
        let sent = server.requests().last().unwrap().body.clone();
        assert_eq!(sent["model"], local::LOCAL_MODEL_ID);
        // A configured window wins and nothing is said.
        std::fs::create_dir_all(ws.path().join(".latch")).unwrap();
        std::fs::write(
            ws.path().join(".latch/config.toml"),
            format!(
                "[models.\"{}\"]\ncontext_window_tokens = 12000\n",
                local::LOCAL_MODEL_ID
            ),
        )
        .unwrap();
        server.push(ScriptedTurn::text("Hello again."));
        let out = latch(ws.path())
            .args(compatible(&server))
            .args(["--trust-workspace", "run", "Say hello again."])
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(!stderr.contains("note: model"), "{stderr}");
    }
}

/// A retried request is announced once on stderr, not twice (the provider's
/// log line of it is for the log file).
#[test]
fn each_retry_is_printed_once() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptStep::from(ScriptedFailure::ServerError {
                status: 503,
                message: "loading model".into(),
            }),
            ScriptedTurn::text("Ready.").into(),
        ])))
        .unwrap();
    let ws = project();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "Are you there?"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        stderr.matches("loading model").count(),
        1,
        "the retry must be said exactly once: {stderr}"
    );
    assert!(stderr.contains("retrying (attempt 2)"), "{stderr}");
}

/// An answer with neither text nor tool calls says so, and a run stopped by
/// a provider error is marked interrupted in `latch sessions` (text and
/// JSON) with its reason.
#[test]
fn an_empty_answer_says_so_and_an_interrupted_session_is_marked() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptStep::from(ScriptedTurn::default()),
            ScriptedFailure::Reject {
                status: 400,
                message: "unsupported parameter: stream_options".into(),
            }
            .into(),
        ])))
        .unwrap();
    let ws = project();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "Anything?"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("(the model returned an empty answer)"),
        "{stdout}"
    );
    let listed = latch(ws.path()).arg("sessions").output().unwrap();
    assert!(
        !text(&listed).0.contains("interrupted"),
        "a finished run is not interrupted"
    );

    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "Again?"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let listed = latch(ws.path()).arg("sessions").output().unwrap();
    let (stdout, _) = text(&listed);
    let line = stdout
        .lines()
        .find(|l| l.contains("interrupted:"))
        .unwrap_or_else(|| panic!("no session marked interrupted: {stdout}"));
    assert!(line.contains("unsupported parameter"), "{line}");
    let json = latch(ws.path())
        .args(["sessions", "--json"])
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let marked = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["interrupted"].is_string())
        .count();
    assert_eq!(marked, 1, "{list:#}");
}

/// A `[tools]` entry that names no tool is refused with the tools there
/// are, before anything is sent.
#[test]
fn a_tools_entry_that_names_no_tool_is_refused() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text(
            "never",
        )])))
        .unwrap();
    let ws = project();
    std::fs::create_dir_all(ws.path().join(".latch")).unwrap();
    std::fs::write(
        ws.path().join(".latch/config.toml"),
        "[tools]\nallow = [\"raed_file\", \"shell\"]\n",
    )
    .unwrap();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["--trust-workspace", "run", "Read it."])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stderr.contains("`raed_file`") && stderr.contains("read_file"),
        "{stderr}"
    );
    assert!(server.requests().is_empty());
}
