//! The open turn of a session: whether its last run is unfinished and which
//! tool calls of its latest assistant message still have no result, each with
//! the operation it names. Resume repairs exactly what this reports, and
//! failure lineages key a failed result by its call's operation.

use latch_engine_sdk::types::{Part, ToolCall};

/// A tool call that has no result yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenCall {
    /// The call's id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The operation the call names (see [`operation_of`]).
    pub operation: String,
}

/// What a resume must repair so the log is a valid continuation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unfinished {
    /// A run started and neither finished nor was marked interrupted.
    pub open_run: bool,
    /// Calls of the latest assistant message without a result, in call order.
    pub open_calls: Vec<OpenCall>,
    /// Possible mutations committed as pending (their command was about to
    /// run) and never settled by their mutation, oldest first.
    pub pending_mutations: Vec<PendingMutation>,
}

/// A [`crate::EventKind::MutationPending`] not yet settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingMutation {
    /// Its sequence number.
    pub seq: u64,
    /// The tool that was about to run.
    pub source: String,
    /// Its command.
    pub command: Option<String>,
    /// The workspace's snapshot tree just before the command.
    pub snapshot: Option<String>,
}

/// Most characters of an operation's target kept in its key.
const TARGET_CHARS: usize = 160;

/// The operation a tool call names: the tool and its target (the command of
/// `shell` and `validate`, the path of the file tools, the id of the process
/// tools, the pattern of `grep`), whitespace collapsed. Two calls of the same
/// tool on different targets are different operations, so a success of one
/// never closes the failures of the other.
pub fn operation_of(call: &ToolCall) -> String {
    let target = serde_json::from_str::<serde_json::Value>(&call.arguments_json)
        .ok()
        .and_then(|v| {
            ["command", "path", "id", "pattern"]
                .iter()
                .find_map(|k| v.get(*k).and_then(|t| t.as_str()).map(str::to_string))
        })
        .map(|t| {
            t.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .chars()
                .take(TARGET_CHARS)
                .collect::<String>()
        })
        .filter(|t| !t.is_empty());
    match target {
        Some(t) => format!("{} `{t}`", call.name),
        None => call.name.clone(),
    }
}

/// The open run and open calls, folded from the session's own events.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TurnState {
    open: Unfinished,
}

impl TurnState {
    pub(crate) fn run_started(&mut self) {
        self.open.open_run = true;
    }

    pub(crate) fn run_ended(&mut self) {
        self.open.open_run = false;
    }

    /// A committed assistant message: its tool calls are the open ones.
    pub(crate) fn assistant(&mut self, parts: &[Part]) {
        self.open.open_calls = parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall(c) => Some(OpenCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    operation: operation_of(c),
                }),
                _ => None,
            })
            .collect();
    }

    /// A tool result: its call is answered. Returns the call's operation
    /// when the call is known.
    pub(crate) fn result(&mut self, call_id: &str) -> Option<String> {
        let at = self.open.open_calls.iter().position(|c| c.id == call_id)?;
        Some(self.open.open_calls.remove(at).operation)
    }

    /// A possible mutation is about to run.
    pub(crate) fn mutation_pending(&mut self, pending: PendingMutation) {
        self.open.pending_mutations.push(pending);
    }

    /// A mutation: it settles the oldest pending one of the same source and
    /// command.
    pub(crate) fn mutation(&mut self, source: &str, command: Option<&str>) {
        if let Some(at) = self
            .open
            .pending_mutations
            .iter()
            .position(|p| p.source == source && p.command.as_deref() == command)
        {
            self.open.pending_mutations.remove(at);
        }
    }

    /// New user input: calls left unanswered before it are no longer open.
    pub(crate) fn user(&mut self) {
        self.open.open_calls.clear();
    }

    pub(crate) fn unfinished(&self) -> &Unfinished {
        &self.open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments_json: args.into(),
        }
    }

    #[test]
    fn operations_name_the_tool_and_its_target() {
        assert_eq!(
            operation_of(&call("shell", r#"{"command":"cargo   build"}"#)),
            "shell `cargo build`"
        );
        assert_eq!(
            operation_of(&call(
                "edit_file",
                r#"{"path":"src/a.rs","old_string":"x"}"#
            )),
            "edit_file `src/a.rs`"
        );
        assert_eq!(operation_of(&call("complete", "{}")), "complete");
        assert_eq!(operation_of(&call("shell", "not json")), "shell");
    }
}
