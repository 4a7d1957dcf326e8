//! The agent's side of instructions where they live: the port through
//! which it learns what a session reads ([`InstructionSource`], implemented
//! by the configuration's discovery), the session context's repository
//! instructions at the start, and nested directories' files joining the
//! session when the model first reads or edits a file there.
//!
//! A nested directory's files are recorded once as a durable
//! `instructions_loaded` event and carried by every later request as an
//! extension source ([`NESTED_SOURCE`]), so they survive a rotation of the
//! working memory (the engine places extension sources in every view) and
//! a resume (the source is rebuilt from the events).

use super::{Agent, AgentError, AgentEvent};
use latch_engine_sdk::types::{ExtensionSource, ToolCall};
use latch_kernel::EventKind;

/// The extension source that carries nested directories' instructions.
pub const NESTED_SOURCE: &str = "instructions";

/// The files of one directory below the workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NestedInstructions {
    /// The directory, relative to the workspace.
    pub dir: String,
    /// The files read, as labelled.
    pub files: Vec<String>,
    /// Their sections.
    pub text: String,
}

/// Where a session's instructions come from.
pub trait InstructionSource: Send {
    /// The repository instructions a session starts with.
    fn start(&self) -> String;
    /// The nested directories' instructions a read or an edit of `file`
    /// (relative to the workspace) brings in, skipping the directories
    /// `loaded` says the session has.
    fn nested(&self, file: &str, loaded: &dyn Fn(&str) -> bool) -> Vec<NestedInstructions>;
}

/// The tools whose `path` names a file the model reads or edits.
const FILE_TOOLS: &[&str] = &["read_file", "write_file", "edit_file"];

impl Agent {
    /// Read the session's instructions through `source`: the repository's
    /// at the start (the session context of a new session; a resumed one
    /// keeps its first and is told of a change), nested ones as the model
    /// works. Call before the first request.
    pub fn with_instructions(mut self, source: Box<dyn InstructionSource>) -> Agent {
        let text = source.start();
        self.current_context.repository_instructions = text;
        if !self.context_recorded {
            self.session_context = self.current_context.clone();
            self.announced_context = self.current_context.clone();
        }
        self.instruction_source = Some(source);
        self
    }

    /// Rebuild the nested instructions from the session's events (on
    /// construction and resume).
    pub(crate) fn replay_nested(&mut self) -> Result<(), AgentError> {
        let events = self.store.all_events(&self.session.id)?;
        self.nested = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::InstructionsLoaded { dir, files, text } => Some(NestedInstructions {
                    dir: dir.clone(),
                    files: files.clone(),
                    text: text.clone(),
                }),
                _ => None,
            })
            .collect();
        self.refresh_nested_source();
        Ok(())
    }

    /// After `call` ran: the instructions of the directories it read or
    /// edited in for the first time join the session.
    pub(crate) fn load_nested(
        &mut self,
        call: &ToolCall,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<(), AgentError> {
        if !FILE_TOOLS.contains(&call.name.as_str()) {
            return Ok(());
        }
        let Some(source) = self.instruction_source.as_ref() else {
            return Ok(());
        };
        let path = serde_json::from_str::<serde_json::Value>(&call.arguments_json)
            .ok()
            .and_then(|v| v.get("path").and_then(|p| p.as_str()).map(str::to_string));
        let Some(path) = path else {
            return Ok(());
        };
        let loaded: Vec<String> = self.nested.iter().map(|n| n.dir.clone()).collect();
        let found = source.nested(&path, &|dir| loaded.iter().any(|d| d == dir));
        if found.is_empty() {
            return Ok(());
        }
        self.append_batch(
            found
                .iter()
                .map(|n| EventKind::InstructionsLoaded {
                    dir: n.dir.clone(),
                    files: n.files.clone(),
                    text: n.text.clone(),
                })
                .collect(),
            observer,
        )?;
        self.nested.extend(found);
        self.refresh_nested_source();
        Ok(())
    }

    /// The nested directories' instructions this session carries.
    pub fn nested_instructions(&self) -> &[NestedInstructions] {
        &self.nested
    }

    /// Put the nested instructions into the extension sources (replacing
    /// the previous version), priced into the budget.
    pub(crate) fn refresh_nested_source(&mut self) {
        let mut sources: Vec<ExtensionSource> = self
            .extensions
            .iter()
            .filter(|s| s.name != NESTED_SOURCE)
            .cloned()
            .collect();
        if !self.nested.is_empty() {
            sources.push(ExtensionSource {
                name: NESTED_SOURCE.to_string(),
                text: format!(
                    "# Instructions of the directories worked in\n{}",
                    self.nested
                        .iter()
                        .map(|n| n.text.as_str())
                        .collect::<Vec<_>>()
                        .join("\n\n")
                ),
            });
        }
        self.set_extensions(sources);
    }
}
