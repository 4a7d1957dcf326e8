//! The tool schemas the model sees. They are part of the cached prompt
//! prefix, so [`schemas`] returns them in a fixed order and their JSON is
//! byte-identical across runs and builds.

use serde::Serialize;
use serde_json::{Map, Value, json};
use std::sync::OnceLock;

/// One tool as offered to the provider.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The tool's name, as the model calls it.
    pub name: String,
    /// What the tool does and when to use it.
    pub description: String,
    /// JSON Schema of the arguments: `type: object` with described
    /// properties and a `required` list.
    pub input_schema: Value,
}

impl ToolSpec {
    /// A compact signature for error messages, e.g.
    /// `read_file(path: string, offset?: integer, limit?: integer)`.
    pub fn signature(&self) -> String {
        let required = required_of(&self.input_schema);
        let params: Vec<String> = properties_of(&self.input_schema)
            .map(|props| {
                let mut names: Vec<&String> = props.keys().collect();
                // Required parameters first, each group in the schema's key order.
                names.sort_by_key(|n| !required.contains(&n.as_str()));
                names
                    .into_iter()
                    .map(|n| {
                        let opt = if required.contains(&n.as_str()) {
                            ""
                        } else {
                            "?"
                        };
                        format!("{n}{opt}: {}", type_label(&props[n]))
                    })
                    .collect()
            })
            .unwrap_or_default();
        format!("{}({})", self.name, params.join(", "))
    }
}

fn type_label(prop: &Value) -> String {
    match prop.get("type").and_then(Value::as_str) {
        Some("array") => {
            let item = prop
                .get("items")
                .and_then(|i| i.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("value");
            format!("{item}[]")
        }
        Some(t) => t.to_string(),
        None => "value".to_string(),
    }
}

pub(crate) fn properties_of(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

pub(crate) fn required_of(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A parameter's type.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Int,
    Bool,
    StrList,
}

/// A parameter: name, type, required, description.
struct P(&'static str, Ty, bool, &'static str);

fn spec(name: &str, description: &str, params: &[P]) -> ToolSpec {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for P(pname, ty, req, desc) in params {
        let prop = match ty {
            Ty::Str => json!({"type": "string", "description": desc}),
            Ty::Int => json!({"type": "integer", "minimum": 0, "description": desc}),
            Ty::Bool => json!({"type": "boolean", "description": desc}),
            Ty::StrList => {
                json!({"type": "array", "items": {"type": "string"}, "description": desc})
            }
        };
        properties.insert(pname.to_string(), prop);
        if *req {
            required.push(Value::String(pname.to_string()));
        }
    }
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        input_schema: json!({
            "type": "object",
            "properties": Value::Object(properties),
            "required": Value::Array(required),
            "additionalProperties": false,
        }),
    }
}

fn text_tool(name: &str, description: &str, what: &'static str) -> ToolSpec {
    spec(name, description, &[P("text", Ty::Str, true, what)])
}

fn build() -> Vec<ToolSpec> {
    use Ty::*;
    vec![
        spec(
            "read_file",
            "Read a text file of the workspace, with line numbers. Returns at most 24 KiB \
             (about 8000 tokens) per call; page through longer files with offset and limit. \
             Reading a file records what the session saw, which write_file and edit_file require.",
            &[
                P(
                    "path",
                    Str,
                    true,
                    "File path, relative to the workspace root.",
                ),
                P(
                    "offset",
                    Int,
                    false,
                    "First line to return, counting from 1 (default 1).",
                ),
                P(
                    "limit",
                    Int,
                    false,
                    "Most lines to return (default: as many as fit).",
                ),
            ],
        ),
        spec(
            "read_artifact",
            "Read a stored artifact of this session, with line numbers: a tool output too \
             long to show whole is stored as one, and its result names it (`artifact \
             <sha256>`). Returns at most 24 KiB (about 8000 tokens) per call; page through \
             with offset and limit.",
            &[
                P(
                    "id",
                    Str,
                    true,
                    "The artifact's SHA-256 (64 hex digits), as the tool result names it.",
                ),
                P(
                    "offset",
                    Int,
                    false,
                    "First line to return, counting from 1 (default 1).",
                ),
                P(
                    "limit",
                    Int,
                    false,
                    "Most lines to return (default: as many as fit).",
                ),
            ],
        ),
        spec(
            "write_file",
            "Create a file or replace its whole content. An existing file must have been read \
             in this session and must not have changed since; otherwise the write is rejected \
             and the file has to be re-read. Parent directories are created.",
            &[
                P(
                    "path",
                    Str,
                    true,
                    "File path, relative to the workspace root.",
                ),
                P(
                    "content",
                    Str,
                    true,
                    "The complete new content of the file.",
                ),
            ],
        ),
        spec(
            "edit_file",
            "Replace an exact string in a file that was read in this session and has not \
             changed since. old_string must occur exactly once unless replace_all is true; \
             include enough surrounding lines to make it unique.",
            &[
                P(
                    "path",
                    Str,
                    true,
                    "File path, relative to the workspace root.",
                ),
                P(
                    "old_string",
                    Str,
                    true,
                    "The exact text to replace (whitespace included).",
                ),
                P("new_string", Str, true, "The text to put in its place."),
                P(
                    "replace_all",
                    Bool,
                    false,
                    "Replace every occurrence (default false).",
                ),
            ],
        ),
        spec(
            "list_files",
            "List files under a directory of the workspace, respecting .gitignore and skipping \
             .git and .latch. Paths are relative to the workspace root, sorted.",
            &[
                P(
                    "path",
                    Str,
                    false,
                    "Directory to list (default: the workspace root).",
                ),
                P(
                    "pattern",
                    Str,
                    false,
                    "Glob the path or file name must match, e.g. `*.rs` or `src/**/mod.rs`.",
                ),
            ],
        ),
        spec(
            "grep",
            "Search file contents with a regular expression (Rust regex syntax), respecting \
             .gitignore and skipping .git, .latch and binary files. Prints `path:line: text` \
             for each matching line.",
            &[
                P("pattern", Str, true, "Regular expression to search for."),
                P(
                    "path",
                    Str,
                    false,
                    "File or directory to search (default: the workspace root).",
                ),
                P(
                    "glob",
                    Str,
                    false,
                    "Only search files whose path or name matches this glob, e.g. `*.rs`.",
                ),
                P(
                    "case_insensitive",
                    Bool,
                    false,
                    "Match case-insensitively (default false).",
                ),
            ],
        ),
        spec(
            "shell",
            "Run a command with `sh -c` in the workspace root. In the foreground it returns the \
             combined stdout and stderr (bounded) and the exit code, and is killed after \
             timeout_ms (default 120000); processes it leaves behind are stopped when it exits. With \
             background: true it starts a managed process and \
             returns its id at once; observe it with process_status / process_output and stop it \
             with process_kill. A running managed process blocks completion. Clearly destructive \
             commands (e.g. `rm -rf /`, mkfs, fork bombs) are refused. Commands run in a sandbox \
             (by default: writes only in the workspace and $TMPDIR, no network); when one needs \
             more, set escalate: true with a reason and the user decides.",
            &[
                P("command", Str, true, "The shell command line."),
                P(
                    "timeout_ms",
                    Int,
                    false,
                    "Foreground timeout in milliseconds (default 120000).",
                ),
                P(
                    "background",
                    Bool,
                    false,
                    "Start a managed background process instead (default false).",
                ),
                P(
                    "escalate",
                    Bool,
                    false,
                    "Ask the user to run this command outside the sandbox (default false); \
                     give the reason.",
                ),
                P(
                    "reason",
                    Str,
                    false,
                    "Why the command must run outside the sandbox (shown to the user).",
                ),
            ],
        ),
        spec(
            "process_status",
            "Status of a managed background process (running, or its exit code), or of all of \
             them when id is omitted.",
            &[P(
                "id",
                Str,
                false,
                "The process id returned by shell with background: true.",
            )],
        ),
        spec(
            "process_output",
            "The most recent output (stdout and stderr, bounded) of a managed background process.",
            &[P(
                "id",
                Str,
                true,
                "The process id returned by shell with background: true.",
            )],
        ),
        spec(
            "process_kill",
            "Stop a managed background process and its children; its exit is recorded.",
            &[P(
                "id",
                Str,
                true,
                "The process id returned by shell with background: true.",
            )],
        ),
        spec(
            "validate",
            "Run the command that proves one or more named requirements (e.g. `cargo test`) and \
             record the result as evidence at the current workspace generation. Any later change \
             of the workspace makes the evidence stale, so validate after the last edit. Name \
             each requirement exactly as it was given to require_validation.",
            &[
                P(
                    "command",
                    Str,
                    true,
                    "The proving command, run with `sh -c` in the workspace root.",
                ),
                P(
                    "requirement",
                    Str,
                    false,
                    "The exact requirement this command proves.",
                ),
                P(
                    "requirements",
                    StrList,
                    false,
                    "Several exact requirements proven by the same command.",
                ),
                P(
                    "timeout_ms",
                    Int,
                    false,
                    "Timeout in milliseconds (default 120000).",
                ),
            ],
        ),
        spec(
            "complete",
            "Declare the task done. The kernel certifies completion only when every required \
             validation passed at the current workspace generation and no managed process is \
             running; otherwise it refuses and says why.",
            &[P(
                "summary",
                Str,
                true,
                "What was done and how it was verified.",
            )],
        ),
        text_tool(
            "set_goal",
            "Set (or replace) the task's goal in the canonical task state.",
            "The goal.",
        ),
        text_tool(
            "add_constraint",
            "Record a constraint the work must respect.",
            "The constraint.",
        ),
        text_tool(
            "record_decision",
            "Record a decision that was made.",
            "The decision.",
        ),
        spec(
            "revise_decision",
            "Replace an earlier decision so the old one is no longer current.",
            &[
                P(
                    "previous",
                    Str,
                    true,
                    "The exact text of the decision being replaced.",
                ),
                P("text", Str, true, "The decision that replaces it."),
            ],
        ),
        text_tool(
            "add_hypothesis",
            "Record an active hypothesis under investigation.",
            "The hypothesis.",
        ),
        spec(
            "reject_hypothesis",
            "Reject a hypothesis, with the reason; it stays rejected.",
            &[
                P("text", Str, true, "The hypothesis."),
                P("reason", Str, true, "Why it is rejected."),
            ],
        ),
        text_tool("add_question", "Record an open question.", "The question."),
        spec(
            "resolve_question",
            "Resolve an open question.",
            &[
                P("text", Str, true, "The exact question."),
                P("answer", Str, false, "The answer, if there is one."),
            ],
        ),
        text_tool("add_action", "Record a next action.", "The action."),
        text_tool(
            "complete_action",
            "Mark a next action as done.",
            "The exact action.",
        ),
        text_tool(
            "add_criterion",
            "Record a completion criterion.",
            "The criterion.",
        ),
        spec(
            "require_validation",
            "Require a named validation before completion can be certified; prove it later with \
             validate using exactly the same requirement text.",
            &[P(
                "requirement",
                Str,
                true,
                "The exact requirement, e.g. `unit tests pass`.",
            )],
        ),
        spec(
            "record_disproof",
            "Record a failure that was understood and is not a real problem, so later sessions \
             of this workspace do not chase it again.",
            &[
                P("summary", Str, true, "What looked like a problem."),
                P("reason", Str, true, "Why it is not a real problem."),
                P(
                    "lineage",
                    Str,
                    false,
                    "The failure lineage key this closes, if known.",
                ),
            ],
        ),
        text_tool(
            "add_note",
            "Record a note (lowest-priority memory).",
            "The note.",
        ),
    ]
}

/// Every tool, in a fixed order. The JSON of the returned specs is
/// byte-identical across calls, runs and builds.
pub fn schemas() -> Vec<ToolSpec> {
    specs().to_vec()
}

pub(crate) fn specs() -> &'static [ToolSpec] {
    static SPECS: OnceLock<Vec<ToolSpec>> = OnceLock::new();
    SPECS.get_or_init(build)
}

/// The spec of the tool called `name`.
pub fn spec_of(name: &str) -> Option<&'static ToolSpec> {
    specs().iter().find(|s| s.name == name)
}
