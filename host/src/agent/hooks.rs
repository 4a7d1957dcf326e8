//! Hooks in the agent loop: the configured commands of each hook point run
//! in the session's sandbox (through the tool set, like `shell`), each run
//! is a durable `hook_ran` event the surfaces show, and a `pre_tool` hook
//! that exits non-zero denies the call with its output as the reason.
//!
//! The points: `session_start` (this process's first turn of the session),
//! `user_message` (after the message is committed), `pre_tool` and
//! `post_tool` (around each tool call), `turn_end` (a turn the model
//! ended). Each hook gets `LATCH_HOOK`, `LATCH_SESSION` and, by point,
//! `LATCH_PROMPT`, `LATCH_TOOL`, `LATCH_TOOL_INPUT`, `LATCH_TOOL_OUTPUT`,
//! `LATCH_TOOL_ERROR`, `LATCH_FINAL_TEXT`.
//!
//! A `pre_tool` or `post_tool` hook may carry a [`ToolMatcher`] (written as
//! Claude Code users write theirs): it then runs only for the tools it
//! matches, and a tool it does not match runs as if the hook were absent.

use super::{Agent, AgentError, AgentEvent};
use latch_engine_sdk::types::{ToolCall, ToolResult};
use latch_kernel::EventKind;
use std::time::Duration;

/// Default for [`HookCommands::timeout`].
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// Characters of a tool's input or output a hook is given.
const HOOK_VALUE_CHARS: usize = 16_000;

/// When a hook runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookPoint {
    /// The first turn this process runs of the session.
    SessionStart,
    /// A user message was committed.
    UserMessage,
    /// Before a tool call (a non-zero exit denies it).
    PreTool,
    /// After a tool call's result was committed.
    PostTool,
    /// The model ended the turn.
    TurnEnd,
}

impl HookPoint {
    /// Its name in the config and in `hook_ran` events.
    pub fn name(self) -> &'static str {
        match self {
            HookPoint::SessionStart => "session_start",
            HookPoint::UserMessage => "user_message",
            HookPoint::PreTool => "pre_tool",
            HookPoint::PostTool => "post_tool",
            HookPoint::TurnEnd => "turn_end",
        }
    }
}

/// Which tools a `pre_tool` or `post_tool` hook runs for, as Claude Code
/// reads a hook's `matcher`: empty or `*` matches every tool; tool names
/// alone (letters, digits, `_`, `-`) separated by `|` match exactly those
/// names (`write_file|edit_file`); anything else is a regular expression
/// searched in the tool's name, unanchored and case-sensitive
/// (`mcp__github__.*`, `^read_`).
#[derive(Clone, Debug)]
pub struct ToolMatcher {
    source: String,
    kind: MatchKind,
}

#[derive(Clone, Debug)]
enum MatchKind {
    All,
    Names(Vec<String>),
    Regex(regex::Regex),
}

impl ToolMatcher {
    /// Every tool.
    pub fn all() -> ToolMatcher {
        ToolMatcher {
            source: String::new(),
            kind: MatchKind::All,
        }
    }

    /// The matcher `pattern` stands for; an error when it is neither a
    /// list of names nor a valid regular expression.
    pub fn parse(pattern: &str) -> Result<ToolMatcher, regex::Error> {
        let trimmed = pattern.trim();
        let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        let kind = if trimmed.is_empty() || trimmed == "*" {
            MatchKind::All
        } else if trimmed.chars().all(|c| is_name(c) || c == '|') {
            MatchKind::Names(
                trimmed
                    .split('|')
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect(),
            )
        } else {
            MatchKind::Regex(regex::Regex::new(trimmed)?)
        };
        Ok(ToolMatcher {
            source: pattern.to_string(),
            kind,
        })
    }

    /// True when a hook with this matcher runs for the tool `name`.
    pub fn matches(&self, name: &str) -> bool {
        match &self.kind {
            MatchKind::All => true,
            MatchKind::Names(names) => names.iter().any(|n| n == name),
            MatchKind::Regex(re) => re.is_match(name),
        }
    }

    /// The pattern as written (empty for every tool).
    pub fn source(&self) -> &str {
        &self.source
    }
}

impl PartialEq for ToolMatcher {
    fn eq(&self, other: &ToolMatcher) -> bool {
        self.source == other.source
    }
}

impl Eq for ToolMatcher {}

/// One configured hook: its `sh -c` command line and the tools it runs
/// for (every tool at points without a tool).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hook {
    /// The command line.
    pub command: String,
    /// The tools it runs for.
    pub matcher: ToolMatcher,
}

impl Hook {
    /// A hook for every tool.
    pub fn new(command: impl Into<String>) -> Hook {
        Hook {
            command: command.into(),
            matcher: ToolMatcher::all(),
        }
    }
}

/// The hooks of every hook point (from `[hooks]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookCommands {
    /// `session_start`.
    pub session_start: Vec<Hook>,
    /// `user_message`.
    pub user_message: Vec<Hook>,
    /// `pre_tool`.
    pub pre_tool: Vec<Hook>,
    /// `post_tool`.
    pub post_tool: Vec<Hook>,
    /// `turn_end`.
    pub turn_end: Vec<Hook>,
    /// How long one hook may run before it is killed.
    pub timeout: Duration,
}

impl Default for HookCommands {
    fn default() -> Self {
        HookCommands {
            session_start: Vec::new(),
            user_message: Vec::new(),
            pre_tool: Vec::new(),
            post_tool: Vec::new(),
            turn_end: Vec::new(),
            timeout: DEFAULT_HOOK_TIMEOUT,
        }
    }
}

impl HookCommands {
    /// The hooks of `point`.
    pub fn of(&self, point: HookPoint) -> &[Hook] {
        match point {
            HookPoint::SessionStart => &self.session_start,
            HookPoint::UserMessage => &self.user_message,
            HookPoint::PreTool => &self.pre_tool,
            HookPoint::PostTool => &self.post_tool,
            HookPoint::TurnEnd => &self.turn_end,
        }
    }
}

fn clip(text: &str) -> String {
    text.chars().take(HOOK_VALUE_CHARS).collect()
}

impl Agent {
    /// Run these hooks (replacing any set before).
    pub fn with_hooks(mut self, hooks: HookCommands) -> Agent {
        self.hooks = hooks;
        self
    }

    /// Run the hooks of `point` (for a tool call: those whose matcher
    /// matches its tool) in order, each committed as `hook_ran`. For
    /// `pre_tool`, the first that exits non-zero stops the rest and its
    /// denial reason is returned.
    pub(super) fn run_hooks(
        &mut self,
        point: HookPoint,
        call: Option<&ToolCall>,
        extra: &[(&'static str, String)],
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<Option<String>, AgentError> {
        let commands: Vec<String> = self
            .hooks
            .of(point)
            .iter()
            .filter(|h| call.is_none_or(|c| h.matcher.matches(&c.name)))
            .map(|h| h.command.clone())
            .collect();
        if commands.is_empty() {
            return Ok(None);
        }
        let mut env: Vec<(&str, String)> = vec![
            ("LATCH_HOOK", point.name().to_string()),
            ("LATCH_SESSION", self.session.id.clone()),
        ];
        if let Some(c) = call {
            env.push(("LATCH_TOOL", c.name.clone()));
            env.push(("LATCH_TOOL_INPUT", clip(&c.arguments_json)));
        }
        env.extend(extra.iter().map(|(k, v)| (*k, clip(v))));
        for command in commands {
            let run = self.tools.run_hook(&command, &env, self.hooks.timeout);
            let denied = point == HookPoint::PreTool && !run.succeeded();
            self.append(
                EventKind::HookRan {
                    hook: point.name().to_string(),
                    command: command.clone(),
                    tool: call.map(|c| c.name.clone()),
                    call_id: call.map(|c| c.id.clone()),
                    exit_code: run.exit_code,
                    output: run.output.clone(),
                    denied,
                },
                observer,
            )?;
            if denied {
                let why = if run.output.is_empty() {
                    "(no output)".to_string()
                } else {
                    run.output
                };
                return Ok(Some(format!(
                    "the pre_tool hook `{command}` refused it: {why}"
                )));
            }
        }
        Ok(None)
    }

    /// `pre_tool` for `call`: `Some(result)` when a hook denied it (the
    /// denial and the result are for the caller to commit).
    pub(super) fn pre_tool_hooks(
        &mut self,
        call: &ToolCall,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<Option<ToolResult>, AgentError> {
        let Some(reason) = self.run_hooks(HookPoint::PreTool, Some(call), &[], observer)? else {
            return Ok(None);
        };
        self.append(
            EventKind::ToolDenied {
                tool: call.name.clone(),
                call_id: Some(call.id.clone()),
                reason: reason.clone(),
            },
            observer,
        )?;
        Ok(Some(ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: format!("denied: {reason}"),
            is_error: true,
            images: Vec::new(),
        }))
    }

    /// `post_tool` for `call` and its committed `result`.
    pub(super) fn post_tool_hooks(
        &mut self,
        call: &ToolCall,
        result: &ToolResult,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<(), AgentError> {
        self.run_hooks(
            HookPoint::PostTool,
            Some(call),
            &[
                ("LATCH_TOOL_OUTPUT", result.content.clone()),
                ("LATCH_TOOL_ERROR", result.is_error.to_string()),
            ],
            observer,
        )
        .map(drop)
    }
}
