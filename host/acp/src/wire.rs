//! The Agent Client Protocol's messages as they cross stdio (protocol
//! version 1): the JSON-RPC 2.0 envelope and the ACP types Latch reads and
//! writes, with the protocol's own field names (camelCase, `snake_case`
//! tags).
//!
//! Written here rather than taken from the `agent-client-protocol` crates:
//! those turn on serde_json's `preserve_order` feature for the whole
//! binary, and Latch's provider requests and event hashes rely on the
//! default map order staying byte-stable. Unknown fields are ignored on
//! the way in (newer clients keep working), and only what Latch sends is
//! modelled on the way out.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// The protocol version Latch speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// JSON-RPC: the message could not be parsed as JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: the parameters are wrong.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the agent failed.
pub const INTERNAL_ERROR: i64 = -32603;
/// ACP: the session (or another resource) does not exist.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} (JSON-RPC error {code})")]
pub struct RpcError {
    /// The error code (see the constants of this module).
    pub code: i64,
    /// What went wrong and what to do about it.
    pub message: String,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

/// One line read from the client, classified.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// A request: it gets exactly one response with the same id.
    Request {
        /// The client's id (a number or a string), echoed back.
        id: Value,
        /// The method, e.g. `session/prompt`.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
    /// A notification: no response.
    Notification {
        /// The method, e.g. `session/cancel`.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
    /// The client's answer to a request Latch sent.
    Response {
        /// The id Latch gave its request.
        id: Value,
        /// The result, or the client's error.
        result: Result<Value, RpcError>,
    },
}

impl Incoming {
    /// Classify one line; a line that is not a JSON-RPC message is an
    /// error to send back with a null id.
    pub fn parse(line: &str) -> Result<Incoming, RpcError> {
        let value: Value = serde_json::from_str(line)
            .map_err(|e| RpcError::new(PARSE_ERROR, format!("not JSON: {e}")))?;
        let Value::Object(mut map) = value else {
            return Err(RpcError::new(
                INVALID_REQUEST,
                "a JSON-RPC message must be an object",
            ));
        };
        let params = map.remove("params").unwrap_or(Value::Null);
        match (map.remove("method"), map.remove("id")) {
            (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
            (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
            (Some(_), _) => Err(RpcError::new(INVALID_REQUEST, "`method` must be a string")),
            (None, Some(id)) => {
                let result = match (map.remove("result"), map.remove("error")) {
                    (_, Some(error)) => Err(serde_json::from_value(error).unwrap_or_else(|e| {
                        RpcError::new(INTERNAL_ERROR, format!("malformed error object: {e}"))
                    })),
                    (Some(result), None) => Ok(result),
                    (None, None) => Ok(Value::Null),
                };
                Ok(Incoming::Response { id, result })
            }
            (None, None) => Err(RpcError::new(
                INVALID_REQUEST,
                "a JSON-RPC message needs a `method` or an `id`",
            )),
        }
    }
}

/// `initialize` parameters (what Latch reads of them).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequest {
    /// The newest protocol version the client speaks.
    pub protocol_version: u16,
}

/// `session/new` parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionRequest {
    /// The workspace: an absolute path.
    pub cwd: PathBuf,
    /// MCP servers the editor gives the session, beside Latch's own.
    #[serde(default)]
    pub mcp_servers: Vec<McpServer>,
}

/// A name and a value (an environment variable, an HTTP header).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NameValue {
    /// The name.
    pub name: String,
    /// The value.
    pub value: String,
}

/// An MCP server the editor gives a session: a stdio program (no `type`)
/// or a streamable-HTTP endpoint (`type: "http"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct McpServer {
    /// The server's name (its tools are `mcp__NAME__TOOL`).
    pub name: String,
    /// The transport: absent for stdio, `http`, or `sse` (refused).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// The program of a stdio server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables added to its environment.
    #[serde(default)]
    pub env: Vec<NameValue>,
    /// The endpoint of an HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent with every request to an HTTP server.
    #[serde(default)]
    pub headers: Vec<NameValue>,
}

/// `session/load` parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionRequest {
    /// The session to continue.
    pub session_id: String,
    /// The workspace: an absolute path.
    pub cwd: PathBuf,
    /// MCP servers the editor gives the session, beside Latch's own.
    #[serde(default)]
    pub mcp_servers: Vec<McpServer>,
}

/// `session/prompt` parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    /// The session the prompt is for.
    pub session_id: String,
    /// The user's message as content blocks.
    pub prompt: Vec<ContentBlock>,
}

/// `session/set_mode` parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionModeRequest {
    /// The session.
    pub session_id: String,
    /// One of the modes the session offered.
    pub mode_id: String,
}

/// A mode a session can run in (Latch's approval modes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionMode {
    /// Its id, e.g. `edits`.
    pub id: String,
    /// What the editor shows.
    pub name: String,
    /// What it means.
    pub description: String,
}

/// The modes a session offers and the one it runs in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModeState {
    /// The mode in force.
    pub current_mode_id: String,
    /// Every mode offered.
    pub available_modes: Vec<SessionMode>,
}

impl SessionModeState {
    /// The same modes as session config options (the protocol's preferred
    /// form): one `select` option, id `mode`, category `mode`.
    pub fn config_options(&self) -> Vec<SessionConfigOption> {
        vec![SessionConfigOption {
            id: MODE_CONFIG_ID.into(),
            name: "Mode".into(),
            description: Some(
                "Plan changes nothing in the workspace until you approve the plan; the others \
                 say when Latch asks before acting"
                    .into(),
            ),
            category: Some("mode".into()),
            kind: "select".into(),
            current_value: self.current_mode_id.clone(),
            options: self
                .available_modes
                .iter()
                .map(|m| SessionConfigSelectOption {
                    value: m.id.clone(),
                    name: m.name.clone(),
                    description: Some(m.description.clone()),
                })
                .collect(),
        }]
    }
}

/// The id of the mode's config option.
pub const MODE_CONFIG_ID: &str = "mode";

/// A session config option (a `select`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionConfigOption {
    /// Its id, used to set it.
    pub id: String,
    /// What the editor shows.
    pub name: String,
    /// What it controls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `mode`, `model`, `thought_level`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// `select`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The value in force.
    pub current_value: String,
    /// The values it takes.
    pub options: Vec<SessionConfigSelectOption>,
}

/// One value of a `select` config option.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionConfigSelectOption {
    /// The value sent to set it.
    pub value: String,
    /// What the editor shows.
    pub name: String,
    /// What it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `session/set_config_option` parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionConfigOptionRequest {
    /// The session.
    pub session_id: String,
    /// The option's id.
    pub config_id: String,
    /// Its new value.
    pub value: String,
}

/// `session/cancel` parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelNotification {
    /// The session whose turn stops.
    pub session_id: String,
}

/// Why a prompt turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// The model's answer was cut at the output limit.
    MaxTokens,
    /// The turn reached the configured most model requests.
    MaxTurnRequests,
    /// The client cancelled the turn.
    Cancelled,
}

/// A piece of content: text, an image, a link to or the text of a resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text (Markdown).
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// Base64 bytes.
        data: String,
        /// e.g. `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// Audio, base64-encoded.
    Audio {
        /// Base64 bytes.
        data: String,
        /// e.g. `audio/wav`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A reference to a resource the agent can read itself.
    ResourceLink {
        /// Its URI, e.g. `file:///repo/src/lib.rs`.
        uri: String,
        /// A display name.
        name: String,
    },
    /// A resource's contents, embedded by the client.
    Resource {
        /// The contents.
        resource: EmbeddedResource,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text { text: text.into() }
    }
}

/// The contents of an embedded resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedResource {
    /// Where it came from.
    pub uri: String,
    /// Its text, for a text resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Its bytes in base64, for a binary resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// What a tool call does, for the editor's icons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads files or data.
    Read,
    /// Changes files.
    Edit,
    /// Searches.
    Search,
    /// Runs a command.
    Execute,
    /// Fetches from outside.
    Fetch,
    /// Anything else.
    Other,
}

/// Where a tool call is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// Not started (waiting for input or approval).
    Pending,
    /// Running.
    InProgress,
    /// Finished.
    Completed,
    /// Failed (or was denied).
    Failed,
}

/// What a tool call shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolCallContent {
    /// Ordinary content.
    Content {
        /// The content.
        content: ContentBlock,
    },
    /// A file change.
    Diff {
        /// The file's absolute path.
        path: PathBuf,
        /// What was there (none: a new file).
        #[serde(rename = "oldText")]
        old_text: Option<String>,
        /// What is there after.
        #[serde(rename = "newText")]
        new_text: String,
    },
}

/// A file a tool call works on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallLocation {
    /// The file's absolute path.
    pub path: PathBuf,
    /// A line in it, counting from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// A new tool call, as reported to the editor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The call's id, unique in the session.
    pub tool_call_id: String,
    /// A human-readable title.
    pub title: String,
    /// What it does.
    pub kind: ToolKind,
    /// Where it is in its life.
    pub status: ToolCallStatus,
    /// What it shows (a diff for an edit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ToolCallContent>,
    /// The files it works on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<ToolCallLocation>,
    /// The arguments the model gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
}

/// A change to a reported tool call: only the fields set change.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallUpdate {
    /// The call's id.
    pub tool_call_id: String,
    /// A new title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A new kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    /// A new status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolCallStatus>,
    /// New content (replaces what was shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ToolCallContent>>,
}

/// One `session/update`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum SessionUpdate {
    /// A piece of a user's message (replayed by `session/load`).
    UserMessageChunk {
        /// The content.
        content: ContentBlock,
    },
    /// A piece of the agent's answer.
    AgentMessageChunk {
        /// The content.
        content: ContentBlock,
    },
    /// A note on the agent's reasoning (Latch never sends reasoning text,
    /// only that it was reported).
    AgentThoughtChunk {
        /// The content.
        content: ContentBlock,
    },
    /// A new tool call.
    ToolCall(ToolCall),
    /// A change to a tool call.
    ToolCallUpdate(ToolCallUpdate),
    /// The agent's plan: every entry, each time (the task state's actions
    /// as a checklist).
    Plan {
        /// The entries, in order.
        entries: Vec<PlanEntry>,
    },
    /// The session's mode changed (a plan approved leaves `plan`).
    CurrentModeUpdate {
        /// The mode it runs in now.
        #[serde(rename = "currentModeId")]
        current_mode_id: String,
    },
    /// The session's config options changed (the mode's value).
    ConfigOptionUpdate {
        /// Every option, with its value now.
        #[serde(rename = "configOptions")]
        config_options: Vec<SessionConfigOption>,
    },
}

/// One entry of a `plan` update.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEntry {
    /// What the step is.
    pub content: String,
    /// How important it is (Latch's steps are all `medium`).
    pub priority: PlanPriority,
    /// Where it stands.
    pub status: PlanStatus,
}

/// A plan entry's priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanPriority {
    /// High.
    High,
    /// Medium.
    Medium,
    /// Low.
    Low,
}

/// A plan entry's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// `session/update` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNotification {
    /// The session.
    pub session_id: String,
    /// What changed.
    pub update: SessionUpdate,
}

/// What the user can answer to a permission request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOptionKind {
    /// Allow this call.
    AllowOnce,
    /// Allow this call and every like it in the session.
    AllowAlways,
    /// Deny this call.
    RejectOnce,
    /// Deny this call and every like it.
    RejectAlways,
}

/// One answer offered to the user.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// The id the client answers with.
    pub option_id: String,
    /// What the editor shows.
    pub name: String,
    /// What it means.
    pub kind: PermissionOptionKind,
}

/// `session/request_permission` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPermissionRequest {
    /// The session.
    pub session_id: String,
    /// The call waiting (already reported with `tool_call`).
    pub tool_call: ToolCallUpdate,
    /// The answers offered.
    pub options: Vec<PermissionOption>,
}

/// The client's answer to a permission request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PermissionOutcome {
    /// The prompt turn was cancelled before the user answered.
    Cancelled,
    /// The user chose one of the options.
    Selected {
        /// The option's id.
        #[serde(rename = "optionId")]
        option_id: String,
    },
}

/// `session/request_permission` result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestPermissionResponse {
    /// What the user chose.
    pub outcome: PermissionOutcome,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_are_classified_as_requests_notifications_and_responses() {
        let r = Incoming::parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#);
        assert!(matches!(r, Ok(Incoming::Request { ref method, .. }) if method == "initialize"));
        let n = Incoming::parse(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#);
        assert!(matches!(n, Ok(Incoming::Notification { .. })));
        let e = Incoming::parse(r#"{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}}"#);
        assert_eq!(
            e,
            Ok(Incoming::Response {
                id: json!(7),
                result: Err(RpcError::new(-1, "no"))
            })
        );
        assert_eq!(Incoming::parse("nope").unwrap_err().code, PARSE_ERROR);
        assert_eq!(Incoming::parse("[1]").unwrap_err().code, INVALID_REQUEST);
    }

    #[test]
    fn updates_use_the_protocols_names() {
        let update = SessionUpdate::ToolCall(ToolCall {
            tool_call_id: "c1".into(),
            title: "Edit src/a.rs".into(),
            kind: ToolKind::Edit,
            status: ToolCallStatus::Pending,
            content: vec![ToolCallContent::Diff {
                path: "/w/src/a.rs".into(),
                old_text: Some("a".into()),
                new_text: "b".into(),
            }],
            locations: vec![],
            raw_input: None,
        });
        assert_eq!(
            serde_json::to_value(&update).unwrap(),
            json!({"sessionUpdate":"tool_call","toolCallId":"c1","title":"Edit src/a.rs",
                   "kind":"edit","status":"pending",
                   "content":[{"type":"diff","path":"/w/src/a.rs","oldText":"a","newText":"b"}]})
        );
        let answer: RequestPermissionResponse = serde_json::from_value(
            json!({"outcome":{"outcome":"selected","optionId":"allow_once"}}),
        )
        .unwrap();
        assert_eq!(
            answer.outcome,
            PermissionOutcome::Selected {
                option_id: "allow_once".into()
            }
        );
    }
}
