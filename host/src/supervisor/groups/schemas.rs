//! The group tools' names and JSON schemas (byte-stable: they are part of
//! the cached tool prefix) and the parsing of their arguments into typed
//! calls, with errors that say how to call them right. The argument
//! helpers are the agent tools' (`children::schemas`).

use crate::supervisor::children::schemas::{check_keys, object, required, text};
use latch_provider::ToolSchema;
use serde_json::{Map, Value, json};

/// `task_create`.
pub const CREATE: &str = "task_create";
/// `task_list`.
pub const LIST: &str = "task_list";
/// `task_claim`.
pub const CLAIM: &str = "task_claim";
/// `task_complete`.
pub const COMPLETE: &str = "task_complete";
/// `task_release`.
pub const RELEASE: &str = "task_release";
/// `group_message`.
pub const MESSAGE: &str = "group_message";

/// The six names, in schema order.
pub const NAMES: [&str; 6] = [CREATE, LIST, CLAIM, COMPLETE, RELEASE, MESSAGE];

/// The six schemas, in their fixed order.
pub fn schemas() -> Vec<ToolSchema> {
    let tool = |name: &str, description: &str, input_schema: Value| ToolSchema {
        name: name.to_string(),
        description: description.to_string(),
        input_schema,
    };
    vec![
        tool(
            CREATE,
            "Add a task to the group's shared task list (the lead and its child agents share \
             it). Returns the task id. A task can depend on others: it can be claimed only \
             once they are completed. With a `key`, creating the same task twice returns the \
             first one.",
            json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string", "description": "Short title."},
                    "description": {"type": "string", "description": "What to do and how to know it is done."},
                    "depends_on": {"type": "array", "items": {"type": "integer"}, "description": "Ids of tasks that must be completed first."},
                    "key": {"type": "string", "description": "Idempotency key, e.g. `parser-fix`."}
                },
                "required": ["title"],
                "additionalProperties": false
            }),
        ),
        tool(
            LIST,
            "List the group's tasks: id, status (open, claimed, completed, failed), holder, \
             dependencies and results, and which open tasks are ready to claim.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
        tool(
            CLAIM,
            "Claim an open task whose dependencies are completed, so nobody else works on it. \
             Exactly one agent wins a claim; a refusal names the holder.",
            json!({
                "type": "object",
                "properties": {"id": {"type": "integer", "description": "The task id."}},
                "required": ["id"],
                "additionalProperties": false
            }),
        ),
        tool(
            COMPLETE,
            "Finish a task you hold, with a short result; set `failed` when it could not be \
             done (dependent tasks then stay blocked).",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "description": "The task id."},
                    "result": {"type": "string", "description": "What was done, or why it failed."},
                    "failed": {"type": "boolean", "description": "True when the task failed."}
                },
                "required": ["id", "result"],
                "additionalProperties": false
            }),
        ),
        tool(
            RELEASE,
            "Give up a task you hold; it becomes open for others.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "description": "The task id."},
                    "reason": {"type": "string", "description": "Why."}
                },
                "required": ["id"],
                "additionalProperties": false
            }),
        ),
        tool(
            MESSAGE,
            "Send information to another member of the group (by session id or role; `lead` \
             is the root agent) or to `all`. It arrives at the recipient's next safe boundary \
             while it runs; an idle agent is not woken by it.",
            json!({
                "type": "object",
                "properties": {
                    "to": {"type": "string", "description": "A member's session id or role, `lead`, or `all`."},
                    "text": {"type": "string", "description": "The information."}
                },
                "required": ["to", "text"],
                "additionalProperties": false
            }),
        ),
    ]
}

/// A parsed group-tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupCall {
    /// `task_create`.
    Create {
        /// Title.
        title: String,
        /// Description.
        description: String,
        /// Dependencies.
        depends_on: Vec<u64>,
        /// Idempotency key.
        key: Option<String>,
    },
    /// `task_list`.
    List,
    /// `task_claim`.
    Claim {
        /// Task id.
        id: u64,
    },
    /// `task_complete`.
    Complete {
        /// Task id.
        id: u64,
        /// Result.
        result: String,
        /// Failed rather than completed.
        failed: bool,
    },
    /// `task_release`.
    Release {
        /// Task id.
        id: u64,
        /// Why.
        reason: Option<String>,
    },
    /// `group_message`.
    Message {
        /// Recipient: id, role, `lead` or `all`.
        to: String,
        /// Text.
        text: String,
    },
}

fn task_id(name: &str, m: &Map<String, Value>) -> Result<u64, String> {
    let v = m
        .get("id")
        .ok_or_else(|| format!("{name}: `id` is required (a task id from task_list)"))?;
    v.as_u64()
        .or_else(|| {
            v.as_str()
                .and_then(|s| s.trim_start_matches('#').parse().ok())
        })
        .ok_or_else(|| format!("{name}: `id` must be a task id number such as 12, got {v}"))
}

/// Parse a call of one of the group tools; `None` for other tools, and the
/// error is the tool result the model sees.
pub fn parse(name: &str, arguments_json: &str) -> Option<Result<GroupCall, String>> {
    let parsed = || -> Result<GroupCall, String> {
        let m = object(name, arguments_json)?;
        Ok(match name {
            CREATE => {
                check_keys(name, &m, &["title", "description", "depends_on", "key"])?;
                let depends_on = match m.get("depends_on") {
                    None | Some(Value::Null) => vec![],
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|v| {
                            v.as_u64().ok_or_else(|| {
                                format!(
                                    "{name}: `depends_on` must be an array of task ids, got {v}"
                                )
                            })
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => {
                        return Err(format!("{name}: `depends_on` must be an array of task ids"));
                    }
                };
                GroupCall::Create {
                    title: required(name, &m, "title")?,
                    description: text(name, &m, "description")?.unwrap_or_default(),
                    depends_on,
                    key: text(name, &m, "key")?,
                }
            }
            LIST => {
                check_keys(name, &m, &[])?;
                GroupCall::List
            }
            CLAIM => {
                check_keys(name, &m, &["id"])?;
                GroupCall::Claim {
                    id: task_id(name, &m)?,
                }
            }
            COMPLETE => {
                check_keys(name, &m, &["id", "result", "failed"])?;
                let failed = match m.get("failed") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => return Err(format!("{name}: `failed` must be true or false")),
                };
                GroupCall::Complete {
                    id: task_id(name, &m)?,
                    result: required(name, &m, "result")?,
                    failed,
                }
            }
            RELEASE => {
                check_keys(name, &m, &["id", "reason"])?;
                GroupCall::Release {
                    id: task_id(name, &m)?,
                    reason: text(name, &m, "reason")?,
                }
            }
            MESSAGE => {
                check_keys(name, &m, &["to", "text"])?;
                GroupCall::Message {
                    to: required(name, &m, "to")?,
                    text: required(name, &m, "text")?,
                }
            }
            _ => unreachable!("only group tools are parsed"),
        })
    };
    NAMES.contains(&name).then(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_byte_stable() {
        let a = serde_json::to_string(&schemas()).unwrap();
        assert_eq!(a, serde_json::to_string(&schemas()).unwrap());
        let names: Vec<String> = schemas().into_iter().map(|s| s.name).collect();
        assert_eq!(names, NAMES);
        // A fixed fingerprint: changing a schema changes every cached prefix,
        // so it must be a deliberate edit of this number.
        let digest = latch_kernel::sha256_hex(a.as_bytes());
        assert_eq!(&digest[..16], SCHEMA_DIGEST, "{digest}");
    }

    const SCHEMA_DIGEST: &str = "42d0394041824f09";

    #[test]
    fn calls_parse_with_clear_errors() {
        assert_eq!(
            parse(CREATE, r#"{"title":"fix","depends_on":[3,4],"key":"k"}"#),
            Some(Ok(GroupCall::Create {
                title: "fix".into(),
                description: String::new(),
                depends_on: vec![3, 4],
                key: Some("k".into())
            }))
        );
        assert_eq!(
            parse(CLAIM, r##"{"id":"#7"}"##),
            Some(Ok(GroupCall::Claim { id: 7 }))
        );
        assert_eq!(parse(LIST, ""), Some(Ok(GroupCall::List)));
        assert_eq!(parse("read_file", "{}"), None);
        let err = parse(CLAIM, "{}").unwrap().unwrap_err();
        assert!(err.contains("`id` is required"), "{err}");
        let err = parse(CLAIM, r#"{"id":"seven"}"#).unwrap().unwrap_err();
        assert!(err.contains("task id number"), "{err}");
        let err = parse(CREATE, r#"{"title":"x","depends_on":"3"}"#)
            .unwrap()
            .unwrap_err();
        assert!(err.contains("array of task ids"), "{err}");
        let err = parse(COMPLETE, r#"{"id":1}"#).unwrap().unwrap_err();
        assert!(err.contains("`result` is required"), "{err}");
        let err = parse(MESSAGE, r#"{"to":"all","text":"x","cc":1}"#)
            .unwrap()
            .unwrap_err();
        assert!(err.contains("unknown argument `cc`"), "{err}");
    }
}
