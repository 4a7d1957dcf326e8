//! The agent tools' names and JSON schemas (byte-stable: they are part of
//! the cached tool prefix) and the parsing of their arguments into typed
//! calls, with errors that say how to call them right.

use latch_provider::ToolSchema;
use serde_json::{Map, Value, json};

/// `spawn_agent`.
pub const SPAWN: &str = "spawn_agent";
/// `wait_agents`.
pub const WAIT: &str = "wait_agents";
/// `message_agent`.
pub const MESSAGE: &str = "message_agent";
/// `list_agents`.
pub const LIST: &str = "list_agents";
/// `cancel_agent`.
pub const CANCEL: &str = "cancel_agent";

/// The default `wait_agents` timeout, seconds.
pub const DEFAULT_WAIT_S: u64 = 600;
/// The longest `wait_agents` timeout, seconds.
pub const MAX_WAIT_S: u64 = 3_600;

/// The five schemas, in their fixed order, with no agents defined.
pub fn schemas() -> Vec<ToolSchema> {
    schemas_with(&[])
}

/// The five schemas, in their fixed order; `spawn_agent`'s description
/// lists the `agents` defined (name and description), so the model knows
/// what `agent` may name. Byte-stable for the same agents.
pub fn schemas_with(agents: &[(&str, &str)]) -> Vec<ToolSchema> {
    let tool = |name: &str, description: &str, input_schema: Value| ToolSchema {
        name: name.to_string(),
        description: description.to_string(),
        input_schema,
    };
    let mut spawn = "Start a child agent on a delegated task; returns its id at once while it \
                     works concurrently in the same workspace. It starts from a brief (role, \
                     task and the context you pass), never from your history. Its report \
                     reaches you when it finishes (or call wait_agents)."
        .to_string();
    if !agents.is_empty() {
        spawn.push_str(" Agents defined here (pass one as `agent`):");
        for (name, description) in agents {
            let first = description.lines().next().unwrap_or("");
            spawn.push_str(&format!("\n- {name}: {first}"));
        }
    }
    vec![
        tool(
            SPAWN,
            &spawn,
            json!({
                "type": "object",
                "properties": {
                    "role": {"type": "string", "description": "Short role, e.g. `tester`; default: the agent's name."},
                    "task": {"type": "string", "description": "The complete, actionable task."},
                    "context": {"type": "string", "description": "What the child needs to know from you (files, findings, constraints)."},
                    "model": {"type": "string", "description": "Model for the child; default: the agent's, else yours."},
                    "agent": {"type": "string", "description": "A defined agent to run the task as: its prompt, tools, model and sandbox."}
                },
                "required": ["task"],
                "additionalProperties": false
            }),
        ),
        tool(
            WAIT,
            "Block until at least one of the given children (default: all running) has \
             finished, or until the timeout; returns the reports not yet delivered to you.",
            json!({
                "type": "object",
                "properties": {
                    "ids": {"type": "array", "items": {"type": "string"}, "description": "Child ids; default: every child."},
                    "timeout_s": {"type": "integer", "description": format!("Seconds to wait (default {DEFAULT_WAIT_S}, at most {MAX_WAIT_S}).")}
                },
                "additionalProperties": false
            }),
        ),
        tool(
            MESSAGE,
            "Send information to a child: it arrives at the child's next safe boundary while \
             it runs (an idle child is not woken). A message to an interrupted child resumes it.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The child's id."},
                    "text": {"type": "string", "description": "The information."}
                },
                "required": ["id", "text"],
                "additionalProperties": false
            }),
        ),
        tool(
            LIST,
            "List this session's children: id, role, state (queued, running, finished, failed, \
             interrupted) and the first line of each one's latest report.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
        tool(
            CANCEL,
            "Cancel a running child at its next safe boundary; its report (outcome \
             cancelled) follows.",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "The child's id."}},
                "required": ["id"],
                "additionalProperties": false
            }),
        ),
    ]
}

/// A parsed agent-tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentCall {
    /// `spawn_agent`.
    Spawn {
        /// Role (the agent's name when only `agent` was given).
        role: String,
        /// Task.
        task: String,
        /// Handed-over context.
        context: Option<String>,
        /// Model override.
        model: Option<String>,
        /// The defined agent it runs as.
        agent: Option<String>,
    },
    /// `wait_agents`.
    Wait {
        /// The children waited for (empty: all).
        ids: Vec<String>,
        /// Timeout, seconds.
        timeout_s: u64,
    },
    /// `message_agent`.
    Message {
        /// Child.
        id: String,
        /// Text.
        text: String,
    },
    /// `list_agents`.
    List,
    /// `cancel_agent`.
    Cancel {
        /// Child.
        id: String,
    },
}

pub(crate) fn object(name: &str, json: &str) -> Result<Map<String, Value>, String> {
    let value: Value = if json.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        serde_json::from_str(json)
            .map_err(|e| format!("{name}: the arguments are not JSON ({e})"))?
    };
    match value {
        Value::Object(m) => Ok(m),
        _ => Err(format!("{name}: the arguments must be a JSON object")),
    }
}

pub(crate) fn check_keys(
    name: &str,
    m: &Map<String, Value>,
    allowed: &[&str],
) -> Result<(), String> {
    match m.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "{name}: unknown argument `{k}`; it takes {}",
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}

pub(crate) fn text(
    name: &str,
    m: &Map<String, Value>,
    key: &str,
) -> Result<Option<String>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err(format!("{name}: `{key}` is empty; give it a value"))
        }
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("{name}: `{key}` must be a string")),
    }
}

pub(crate) fn required(name: &str, m: &Map<String, Value>, key: &str) -> Result<String, String> {
    text(name, m, key)?.ok_or_else(|| format!("{name}: `{key}` is required"))
}

/// Parse a call of one of the agent tools; `None` for other tools, and the
/// error is the tool result the model sees.
pub fn parse(name: &str, arguments_json: &str) -> Option<Result<AgentCall, String>> {
    let parsed = || -> Result<AgentCall, String> {
        let m = object(name, arguments_json)?;
        Ok(match name {
            SPAWN => {
                check_keys(name, &m, &["role", "task", "context", "model", "agent"])?;
                let agent = text(name, &m, "agent")?;
                let role = match (text(name, &m, "role")?, &agent) {
                    (Some(role), _) => role,
                    (None, Some(agent)) => agent.clone(),
                    (None, None) => {
                        return Err(format!(
                            "{name}: `role` is required (or `agent`, a defined agent's name)"
                        ));
                    }
                };
                AgentCall::Spawn {
                    role,
                    task: required(name, &m, "task")?,
                    context: text(name, &m, "context")?,
                    model: text(name, &m, "model")?,
                    agent,
                }
            }
            WAIT => {
                check_keys(name, &m, &["ids", "timeout_s"])?;
                let ids = match m.get("ids") {
                    None | Some(Value::Null) => vec![],
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|v| {
                            v.as_str().map(str::to_string).ok_or_else(|| {
                                format!("{name}: `ids` must be an array of child ids")
                            })
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => return Err(format!("{name}: `ids` must be an array of child ids")),
                };
                let timeout_s = match m.get("timeout_s") {
                    None | Some(Value::Null) => DEFAULT_WAIT_S,
                    Some(v) => v.as_u64().ok_or_else(|| {
                        format!("{name}: `timeout_s` must be a whole number of seconds")
                    })?,
                };
                AgentCall::Wait {
                    ids,
                    timeout_s: timeout_s.min(MAX_WAIT_S),
                }
            }
            MESSAGE => {
                check_keys(name, &m, &["id", "text"])?;
                AgentCall::Message {
                    id: required(name, &m, "id")?,
                    text: required(name, &m, "text")?,
                }
            }
            LIST => {
                check_keys(name, &m, &[])?;
                AgentCall::List
            }
            CANCEL => {
                check_keys(name, &m, &["id"])?;
                AgentCall::Cancel {
                    id: required(name, &m, "id")?,
                }
            }
            _ => unreachable!("only agent tools are parsed"),
        })
    };
    [SPAWN, WAIT, MESSAGE, LIST, CANCEL]
        .contains(&name)
        .then(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_byte_stable() {
        let a = serde_json::to_string(&schemas()).unwrap();
        let b = serde_json::to_string(&schemas()).unwrap();
        assert_eq!(a, b);
        let names: Vec<String> = schemas().into_iter().map(|s| s.name).collect();
        assert_eq!(names, [SPAWN, WAIT, MESSAGE, LIST, CANCEL]);
        // A fixed fingerprint: changing a schema changes every cached prefix,
        // so it must be a deliberate edit of this number.
        let digest = latch_kernel::sha256_hex(a.as_bytes());
        assert_eq!(&digest[..16], SCHEMA_DIGEST, "{digest}");
    }

    const SCHEMA_DIGEST: &str = "6173c1ebebbb6843";

    #[test]
    fn calls_parse_with_clear_errors() {
        assert_eq!(
            parse(SPAWN, r#"{"role":"tester","task":"run tests"}"#),
            Some(Ok(AgentCall::Spawn {
                role: "tester".into(),
                task: "run tests".into(),
                context: None,
                model: None,
                agent: None
            }))
        );
        assert_eq!(
            parse(SPAWN, r#"{"agent":"reviewer","task":"review"}"#),
            Some(Ok(AgentCall::Spawn {
                role: "reviewer".into(),
                task: "review".into(),
                context: None,
                model: None,
                agent: Some("reviewer".into())
            }))
        );
        let err = parse(SPAWN, r#"{"task":"x"}"#).unwrap().unwrap_err();
        assert!(err.contains("`role` is required (or `agent`"), "{err}");
        assert_eq!(
            parse(WAIT, "{}"),
            Some(Ok(AgentCall::Wait {
                ids: vec![],
                timeout_s: DEFAULT_WAIT_S
            }))
        );
        assert_eq!(
            parse(WAIT, r#"{"timeout_s": 99999}"#),
            Some(Ok(AgentCall::Wait {
                ids: vec![],
                timeout_s: MAX_WAIT_S
            }))
        );
        assert_eq!(parse(LIST, ""), Some(Ok(AgentCall::List)));
        assert_eq!(parse("read_file", "{}"), None);
        let err = parse(SPAWN, r#"{"role":"x"}"#).unwrap().unwrap_err();
        assert!(err.contains("`task` is required"), "{err}");
        let err = parse(CANCEL, r#"{"id":"a","now":true}"#)
            .unwrap()
            .unwrap_err();
        assert!(err.contains("unknown argument `now`"), "{err}");
        let err = parse(MESSAGE, "[1]").unwrap().unwrap_err();
        assert!(err.contains("JSON object"), "{err}");
    }
}
