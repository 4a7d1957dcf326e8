//! Images: user images and tool-result images are resolved through the
//! caller's resolver and base64-encoded in each wire format.

use crate::common;

use common::*;
use latch_engine_sdk::types::{MediaRef, Part, Role, ToolResult};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use latch_provider::{NoMedia, ProviderError, ProviderKind};
use serde_json::json;

fn messages() -> Vec<latch_engine_sdk::types::Message> {
    vec![
        msg(
            Role::User,
            vec![
                Part::Text("What is in this screenshot?".into()),
                Part::Image(png("aa")),
            ],
        ),
        msg(Role::Assistant, vec![call("toolu_1", "screenshot", "{}")]),
        msg(
            Role::User,
            vec![Part::ToolResult(ToolResult {
                call_id: "toolu_1".into(),
                name: "screenshot".into(),
                content: "captured".into(),
                is_error: false,
                images: vec![png("bb")],
            })],
        ),
    ]
}

fn resolver(m: &MediaRef) -> Result<Vec<u8>, String> {
    match m.sha256.as_str() {
        "aa" => Ok(PNG_BYTES.to_vec()),
        "bb" => Ok(b"second".to_vec()),
        other => Err(format!("no artifact {other}")),
    }
}

#[tokio::test]
async fn images_are_base64_in_both_formats() {
    for kind in KINDS {
        let server = FakeServer::start(Script::new([ScriptedTurn::text("A login form.")]))
            .await
            .unwrap();
        let provider = provider(kind, &server);
        provider
            .complete(&request(messages()), &resolver, &mut |_| {})
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        let body = server.requests()[0].body.clone();
        let msgs = &body["messages"];
        if kind == ProviderKind::Anthropic {
            assert_eq!(
                msgs[0]["content"][1],
                json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_BASE64}})
            );
            assert_eq!(
                msgs[2]["content"][0],
                json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                    {"type": "text", "text": "captured"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "c2Vjb25k"}},
                ], "cache_control": {"type": "ephemeral"}})
            );
        } else {
            assert_eq!(
                msgs[1]["content"][1],
                json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_BASE64}")}})
            );
            assert_eq!(
                msgs[3],
                json!({"role": "tool", "tool_call_id": "toolu_1", "content": "captured"})
            );
            assert_eq!(
                msgs[4],
                json!({"role": "user", "content": [
                    {"type": "text", "text": "Images returned by tool call toolu_1 (screenshot):"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,c2Vjb25k"}},
                ]})
            );
        }
        server.shutdown().await;
    }
}

#[tokio::test]
async fn an_unreadable_image_fails_before_anything_is_sent() {
    for kind in KINDS {
        let server = FakeServer::start(Script::new([ScriptedTurn::text("never")]))
            .await
            .unwrap();
        let provider = provider(kind, &server);
        let err = provider
            .complete(&request(messages()), &NoMedia, &mut |_| {})
            .await
            .unwrap_err();
        assert!(
            matches!(err, ProviderError::Media { ref sha256, .. } if sha256 == "aa"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("cannot send image aa (image/png)"),
            "{err}"
        );
        assert!(server.requests().is_empty());
        server.shutdown().await;
    }
}
