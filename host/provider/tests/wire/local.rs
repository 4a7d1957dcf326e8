//! The Chat Completions adapter against the fake answering as llama.cpp's
//! servers do (measured against the real ones in the local-model tier):
//! tools reach the model and their results go back accepted, a call cut off
//! at the output limit goes back as valid JSON, a prompt past `n_ctx` is the
//! typed too-long error with the server's counts, and what the server says
//! about itself is discovered.

use crate::common;

use common::*;
use latch_engine_sdk::types::{Part, Role};
use latch_provider::fake::{ChatServer, FakeServer, Script, ScriptedTurn, local};
use latch_provider::{
    NoMedia, ProviderError, ProviderKind, StopReason, WindowSource, arguments_are_complete,
};

const SERVERS: [ChatServer; 2] = [ChatServer::LlamaCppPython, ChatServer::LlamaServer];

/// llama-cpp-python shows the model its tools only with `tool_choice`, and
/// refuses `content: null` beside tool calls (500): with both right, a tool
/// loop runs, on both local servers.
#[tokio::test]
async fn a_tool_loop_runs_on_the_local_servers() {
    for server_kind in SERVERS {
        let server = FakeServer::start(
            Script::new([
                ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#),
                ScriptedTurn::text("The notes say alpha."),
            ])
            .as_server(server_kind),
        )
        .await
        .unwrap();
        let provider = provider(ProviderKind::OpenAiCompatible, &server);
        let mut messages = vec![user("What do the notes say?")];
        let turn = provider
            .complete(&request(messages.clone()), &NoMedia, &mut |_| {})
            .await
            .unwrap();
        let call = turn
            .tool_calls()
            .next()
            .unwrap_or_else(|| panic!("{server_kind:?}: the model was not shown its tools"))
            .clone();
        messages.push(msg(Role::Assistant, turn.parts.clone()));
        messages.push(msg(
            Role::User,
            vec![result(&call.id, &call.name, "alpha", false)],
        ));
        let turn = provider
            .complete(&request(messages), &NoMedia, &mut |_| {})
            .await
            .unwrap_or_else(|e| panic!("{server_kind:?}: the tool result was refused: {e}"));
        assert_eq!(turn.text(), "The notes say alpha.");
        let requests = server.requests();
        assert_eq!(requests[0].body["tool_choice"], "auto");
        let assistant = &requests[1].body["messages"][2];
        assert_eq!(assistant["role"], "assistant");
        assert_eq!(assistant["content"], "", "never null: {assistant}");
    }
}

/// A call cut off at the output limit arrives with arguments that are not
/// JSON and the `length` stop; sent back, its arguments are a JSON object
/// (the servers answer 500 to anything else), carrying what the model wrote.
#[tokio::test]
async fn a_cut_off_call_goes_back_as_valid_json() {
    let cut = r#"{"path":"out.txt","content":"Once upon a ti"#;
    for server_kind in SERVERS {
        let server = FakeServer::start(
            Script::new([
                ScriptedTurn::tool_call("write_file", cut).with_stop_reason("length"),
                ScriptedTurn::text("I will write it in smaller parts."),
            ])
            .as_server(server_kind),
        )
        .await
        .unwrap();
        let provider = provider(ProviderKind::OpenAiCompatible, &server);
        let mut messages = vec![user("Write a story to out.txt")];
        let turn = provider
            .complete(&request(messages.clone()), &NoMedia, &mut |_| {})
            .await
            .unwrap();
        assert_eq!(turn.stop_reason, StopReason::MaxTokens);
        let call = turn.tool_calls().next().unwrap().clone();
        assert_eq!(call.arguments_json, cut, "recorded as the model wrote it");
        assert!(!arguments_are_complete(&call.arguments_json));
        messages.push(msg(Role::Assistant, turn.parts.clone()));
        messages.push(msg(
            Role::User,
            vec![result(&call.id, &call.name, "not run: cut off", true)],
        ));
        provider
            .complete(&request(messages), &NoMedia, &mut |_| {})
            .await
            .unwrap_or_else(|e| panic!("{server_kind:?}: {e}"));
        let sent =
            &server.requests()[1].body["messages"][2]["tool_calls"][0]["function"]["arguments"];
        let args: serde_json::Value = serde_json::from_str(sent.as_str().unwrap()).unwrap();
        assert_eq!(args, serde_json::json!({"_raw": cut}));
    }
}

/// A prompt past the server's `n_ctx`: llama-server's 400 names both
/// counts; llama-cpp-python's stream ends before `data: [DONE]`. Both are
/// the typed too-long error, never retried.
#[tokio::test]
async fn a_prompt_past_n_ctx_is_too_long() {
    let long = "word ".repeat(4_000);
    let server = FakeServer::start(
        Script::new([ScriptedTurn::text("never")])
            .as_server(ChatServer::LlamaServer)
            .with_context_window(2_048),
    )
    .await
    .unwrap();
    let llama_server = provider(ProviderKind::OpenAiCompatible, &server);
    let err = llama_server
        .complete(&request(vec![user(&long)]), &NoMedia, &mut |_| {})
        .await
        .unwrap_err();
    let ProviderError::ContextTooLong {
        reported_tokens,
        limit_tokens,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(*limit_tokens, Some(2_048));
    assert!(reported_tokens.is_some_and(|r| r > 2_048), "{err}");
    assert_eq!(server.requests().len(), 1, "not retried");
    assert_eq!(server.remaining(), 1);

    let server = FakeServer::start(
        Script::new([ScriptedTurn::text("never")])
            .as_server(ChatServer::LlamaCppPython)
            .with_context_window(2_048),
    )
    .await
    .unwrap();
    let llama_cpp_python = provider(ProviderKind::OpenAiCompatible, &server);
    let err = llama_cpp_python
        .complete(&request(vec![user(&long)]), &NoMedia, &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::ContextTooLong { .. }),
        "an empty stream from llama-cpp-python reads as too long: {err:?}"
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "the stream, then the same request not streamed"
    );
    assert_eq!(requests[1].body["stream"], false);
    assert_eq!(requests[1].body["max_tokens"], 1024, "the same request");
    assert_eq!(requests[1].body["messages"], requests[0].body["messages"]);
    let ProviderError::ContextTooLong {
        reported_tokens,
        limit_tokens,
        ..
    } = &err
    else {
        unreachable!()
    };
    assert_eq!(*limit_tokens, Some(2_048), "the server's counts: {err}");
    assert!(reported_tokens.is_some_and(|r| r > 2_048), "{err}");
}

/// llama-cpp-python streams no usage: the turn's usage is all unknown,
/// never zero.
#[tokio::test]
async fn llama_cpp_python_reports_no_usage() {
    let server = FakeServer::start(
        Script::new([ScriptedTurn::text("hello")]).as_server(ChatServer::LlamaCppPython),
    )
    .await
    .unwrap();
    let provider = provider(ProviderKind::OpenAiCompatible, &server);
    let turn = provider
        .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(turn.usage, latch_provider::Usage::default());
    assert_eq!(turn.parts, vec![Part::Text("hello".into())]);
}

/// The models and the window, as each server reports them.
#[tokio::test]
async fn the_server_says_what_it_serves_and_its_window() {
    let server = FakeServer::start(
        Script::new(Vec::<ScriptedTurn>::new())
            .as_server(ChatServer::LlamaServer)
            .with_context_window(8_192),
    )
    .await
    .unwrap();
    let info = provider(ProviderKind::OpenAiCompatible, &server)
        .discover(None)
        .await;
    assert_eq!(info.models, [local::LOCAL_MODEL_ID]);
    assert_eq!(info.window, Some((8_192, WindowSource::Server)));

    let server = FakeServer::start(
        Script::new(Vec::<ScriptedTurn>::new()).as_server(ChatServer::LlamaCppPython),
    )
    .await
    .unwrap();
    let info = provider(ProviderKind::OpenAiCompatible, &server)
        .discover(Some("gemma"))
        .await;
    assert_eq!(info.models, [local::LOCAL_MODEL_ID]);
    assert_eq!(info.window, None, "llama-cpp-python reports no window");

    // Hosted providers are never asked.
    let info = provider(ProviderKind::Anthropic, &server)
        .discover(None)
        .await;
    assert_eq!(info, latch_provider::ServerInfo::default());
}
