//! The agent loop against the fake answering as llama.cpp's servers do (as
//! measured against the real ones in the local-model tier): a tool call cut
//! off at the output limit is never run and the session goes on, also when
//! an older Latch recorded one; a prompt past the server's `n_ctx` is the
//! typed too-long error that names the window and the setting, and the
//! session goes on after the window is lowered with nothing lost; a 4k
//! window is refused with the window, the reserve and what fits, and an 8k
//! one works with the tools trimmed; usage carries its server; a server
//! that reports no usage is said so.

use crate::providers::{Setup, setup};
use latch::agent::{AgentError, AgentOptions, ToolFilter};
use latch_engine_sdk::types::{Part, ToolCall, ToolResult};
use latch_kernel::EventKind;
use latch_provider::fake::{ChatServer, Script, ScriptedTurn, WireFormat};

/// A window the fake's local servers never refuse a request at.
const ROOMY: u64 = 1_000_000;

/// The tools a small window keeps.
const TRIMMED: [&str; 5] = ["read_file", "write_file", "edit_file", "shell", "complete"];

fn options(tools: ToolFilter) -> AgentOptions {
    AgentOptions {
        mode: "run".into(),
        max_tokens: 512,
        tools,
        ..AgentOptions::default()
    }
}

fn trimmed() -> ToolFilter {
    ToolFilter::new(Some(TRIMMED.map(str::to_string).to_vec()), Vec::new())
}

fn local(script: Script, server: ChatServer, n_ctx: u64) -> Setup {
    setup(
        WireFormat::OpenAi,
        script.as_server(server).with_context_window(n_ctx),
        false,
        |_| {},
    )
}

fn results(s: &Setup) -> Vec<ToolResult> {
    s.all_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ToolResult(r) => Some(r),
            _ => None,
        })
        .collect()
}

fn user_texts(s: &Setup) -> Vec<String> {
    s.all_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::UserMessage { parts } => parts.into_iter().find_map(|p| match p {
                Part::Text(t) => Some(t),
                _ => None,
            }),
            _ => None,
        })
        .collect()
}

/// The model's answer stopped at the output limit mid-way through a
/// `write_file` call: the call is recorded as written but never run, its
/// result tells the model what happened, the next request carries valid
/// JSON (llama.cpp's servers answer 500 otherwise) and the turn goes on.
#[test]
fn a_cut_off_tool_call_is_never_run_and_the_model_is_told() {
    let cut = r#"{"path":"out.txt","content":"Once upon a ti"#;
    for server in [ChatServer::LlamaCppPython, ChatServer::LlamaServer] {
        let s = local(
            Script::new([
                ScriptedTurn::tool_call("write_file", cut).with_stop_reason("length"),
                ScriptedTurn::text("I will write it in smaller parts."),
            ]),
            server,
            ROOMY,
        );
        let outcome = s
            .agent()
            .run_turn("Write a story to out.txt", &mut |_| {})
            .unwrap_or_else(|e| panic!("{server:?}: {e}"));
        assert_eq!(outcome.final_text, "I will write it in smaller parts.");
        assert!(
            !s.ws.join("out.txt").exists(),
            "{server:?}: the cut call ran"
        );
        let r = &results(&s)[0];
        assert!(r.is_error, "{r:?}");
        assert!(
            r.content.contains("was not run")
                && r.content.contains("output limit (4096 tokens)")
                && r.content.contains("Once upon a ti"),
            "{}",
            r.content
        );
        let requests = s.server.requests();
        assert_eq!(requests.len(), 2);
        let sent = requests[1].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "assistant")
            .unwrap()
            .clone();
        let args: serde_json::Value = serde_json::from_str(
            sent["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(args, serde_json::json!({"_raw": cut}));
        assert_eq!(sent["content"], "", "never null");
    }
}

/// A call whose arguments are not JSON at all is answered the same way,
/// also when the model did not stop at the limit.
#[test]
fn a_call_with_arguments_that_are_not_json_is_never_run() {
    let s = local(
        Script::new([
            ScriptedTurn::tool_call("shell", "command: rm -rf build"),
            ScriptedTurn::text("Sorry, I will send JSON."),
        ]),
        ChatServer::LlamaCppPython,
        ROOMY,
    );
    s.agent().run_turn("Clean the build", &mut |_| {}).unwrap();
    let r = &results(&s)[0];
    assert!(r.is_error && r.content.contains("not a complete JSON object"));
}

/// A session in which an older Latch recorded (and ran) a call with cut-off
/// arguments opens and continues: what goes back is valid JSON.
#[test]
fn a_session_holding_a_cut_off_call_opens_and_continues() {
    let cut = r#"{"path":"out.txt","content":"Once upon"#;
    let s = local(
        Script::new([ScriptedTurn::text("Continuing.")]),
        ChatServer::LlamaCppPython,
        ROOMY,
    );
    let id = &s.session.id;
    for event in [
        EventKind::RunStarted {
            mode: "run".into(),
            context: None,
        },
        EventKind::UserMessage {
            parts: vec![Part::Text("Write a story to out.txt".into())],
        },
        EventKind::AssistantMessage {
            parts: vec![Part::ToolCall(ToolCall {
                id: "call_0".into(),
                name: "write_file".into(),
                arguments_json: cut.into(),
            })],
        },
        EventKind::ToolResult(ToolResult {
            call_id: "call_0".into(),
            name: "write_file".into(),
            content: "invalid arguments: EOF while parsing a string".into(),
            is_error: true,
            images: vec![],
        }),
        EventKind::RunFinished {
            outcome: "completed".into(),
        },
    ] {
        s.store.append(id, event).unwrap();
    }
    let mut agent = s.agent();
    agent.resume(&mut |_| {}).unwrap();
    let outcome = agent
        .run_turn("Please continue.", &mut |_| {})
        .unwrap_or_else(|e| panic!("the recorded cut-off call bricked the session: {e}"));
    assert_eq!(outcome.final_text, "Continuing.");
    let body = &s.server.requests()[0].body;
    let call = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|m| m["tool_calls"].get(0))
        .unwrap()
        .clone();
    assert_eq!(
        call["function"]["arguments"],
        serde_json::json!({"_raw": cut}).to_string()
    );
}

/// llama-cpp-python shows the model its tools only with `tool_choice` and
/// refuses `content: null` beside tool calls: the whole tool loop runs.
/// It streams no usage: `/context`'s figures say so, with no calibration.
#[test]
fn a_tool_loop_runs_on_llama_cpp_python_which_reports_no_usage() {
    let s = local(
        Script::new([
            ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#),
            ScriptedTurn::text("The notes list alpha and beta."),
        ]),
        ChatServer::LlamaCppPython,
        ROOMY,
    );
    let mut agent = s.agent();
    let outcome = agent
        .run_turn("What do the notes say?", &mut |_| {})
        .unwrap();
    assert_eq!(outcome.final_text, "The notes list alpha and beta.");
    let r = &results(&s)[0];
    assert!(!r.is_error && r.content.contains("alpha"), "{r:?}");
    let figures = agent.provider_figures().unwrap();
    assert_eq!(figures.last, Some(latch_provider::Usage::default()));
    assert_eq!(figures.calibration, None);
    // Usage events name the server they came from.
    let base = s.server.openai_base_url();
    assert!(s.all_events().iter().any(|e| matches!(&e.kind,
        EventKind::ProviderUsage { base_url: Some(b), .. } if *b == base)));
}

/// A prompt past llama-server's `n_ctx`: the typed too-long error, naming
/// Latch's window, the server's and the setting to change; nothing
/// committed is lost, and with the window lowered the session goes on.
#[test]
fn too_long_for_the_server_names_the_window_and_goes_on_once_lowered() {
    const N_CTX: u64 = 8_192;
    let s = local(
        Script::new([
            ScriptedTurn::text("Noted the first log."),
            // The refusal consumes no turn.
            ScriptedTurn::text("Continuing with less."),
        ]),
        ChatServer::LlamaServer,
        N_CTX,
    );
    let log = |n: u32| {
        format!(
            "log {n}: {}",
            "timeout while reading the socket; ".repeat(400)
        )
    };
    let mut agent = s.agent_with(options(trimmed()));
    agent.run_turn(&log(1), &mut |_| {}).unwrap();
    let err = agent.run_turn(&log(2), &mut |_| {}).unwrap_err();
    assert!(matches!(err, AgentError::ContextTooLong { .. }), "{err:?}");
    let text = err.to_string();
    for want in [
        "window to be 256000 tokens",
        "the server's window is 8192",
        "[models.\"test-model\"] context_window_tokens = 8192",
        "Nothing committed is lost",
    ] {
        assert!(text.contains(want), "{want:?} missing from: {text}");
    }
    assert_eq!(s.server.requests().len(), 2, "never retried unchanged");
    assert_eq!(user_texts(&s), [log(1), log(2)], "both messages kept");
    drop(agent);

    // The user sets the window the error named and resumes.
    let mut lowered = s.session.clone();
    lowered.model.context_window_tokens = N_CTX;
    lowered.model.reserve_tokens = 2_048;
    let mut agent = s.agent_of(lowered, options(trimmed()));
    agent.resume(&mut |_| {}).unwrap();
    let outcome = agent
        .run_turn("Please continue.", &mut |_| {})
        .unwrap_or_else(|e| panic!("the session did not go on: {e}"));
    assert_eq!(outcome.final_text, "Continuing with less.");
    assert_eq!(
        user_texts(&s),
        [log(1), log(2), "Please continue.".to_string()]
    );
}

/// Instructions and every tool schema do not fit a 4k window: the refusal
/// names the window, the reserve and what fits, and nothing is sent. An
/// 8k window works with the tools trimmed, and only they are offered.
#[test]
fn a_4k_window_is_refused_with_what_fits_and_8k_works_with_the_tools_trimmed() {
    let s = local(
        Script::new([ScriptedTurn::text("never")]),
        ChatServer::LlamaCppPython,
        4_096,
    );
    let mut small = s.session.clone();
    small.model.context_window_tokens = 4_096;
    small.model.reserve_tokens = 1_024;
    let err = s
        .agent_of(small, options(ToolFilter::default()))
        .run_turn("Read notes.txt", &mut |_| {})
        .unwrap_err();
    let AgentError::Window(shortfall) = &err else {
        panic!("{err:?}")
    };
    assert!(shortfall.engine_message.is_none(), "the fixed part alone");
    let text = err.to_string();
    for want in [
        "window is 4,096 tokens",
        "1,024 of it are reserved",
        "may use 3,072",
        "tool schemas",
        "alone need",
        "[models.test-model] context_window_tokens",
        "[tools] allow",
        "Nothing was sent",
    ] {
        assert!(text.contains(want), "{want:?} missing from: {text}");
    }
    assert!(s.server.requests().is_empty(), "nothing was sent");

    let eight_k = |tools: ToolFilter| {
        let s = local(
            Script::new([
                ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#),
                ScriptedTurn::text("alpha and beta"),
            ]),
            ChatServer::LlamaCppPython,
            8_192,
        );
        let mut session = s.session.clone();
        session.model.context_window_tokens = 8_192;
        session.model.reserve_tokens = 2_048;
        let result = s
            .agent_of(session, options(tools))
            .run_turn("Read notes.txt", &mut |_| {});
        (result, s)
    };
    let (trimmed, s) = eight_k(trimmed());
    assert_eq!(trimmed.unwrap().final_text, "alpha and beta");
    let offered: Vec<String> = s.server.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(offered, TRIMMED);
}

/// A call to a tool `[tools]` removed is answered with an error, never run.
#[test]
fn a_call_to_a_tool_not_offered_is_refused() {
    let s = local(
        Script::new([
            ScriptedTurn::tool_call("write_file", r#"{"path":"x.txt","content":"x"}"#),
            ScriptedTurn::text("Understood."),
        ]),
        ChatServer::LlamaCppPython,
        ROOMY,
    );
    let read_only = ToolFilter::new(None, vec!["write_file".into(), "edit_file".into()]);
    s.agent_with(options(read_only))
        .run_turn("Write x.txt", &mut |_| {})
        .unwrap();
    assert!(!s.ws.join("x.txt").exists());
    let r = &results(&s)[0];
    assert!(r.is_error && r.content.contains("not offered"), "{r:?}");
}
