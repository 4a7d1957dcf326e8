//! Permission lifecycle: what a `permission_requested` event carries, who
//! decided ([`DecidedBy`]) and for how long ([`GrantScope`]), and
//! [`PermissionLog`], the pure reducer over a session's events that knows
//! the requests still waiting for a decision (answered as denied on resume)
//! and the "always for this session" grants (replayed on resume).
//!
//! The events describe themselves — command or diff, reasons, modes,
//! decider — so a surface renders them without re-deriving anything.

use crate::event::EventKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionKind {
    /// Run a command inside the sandbox.
    Command,
    /// Run a command outside the sandbox (the model asked, with a reason).
    Escalation,
    /// Change a file through the file tools.
    Edit,
    /// Call an MCP server's tool that is not annotated read-only.
    McpTool,
    /// Approve the plan the model proposed in plan mode (`propose_plan`):
    /// approving leaves plan mode.
    Plan,
}

/// The MCP call a [`PermissionKind::McpTool`] request asks about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpToolCall {
    /// The server, as configured (`[mcp.servers.NAME]`).
    pub server: String,
    /// The server's name for the tool.
    pub tool: String,
    /// The call's arguments (JSON, as the model sent them; bounded).
    pub arguments: String,
}

/// Who (or what) decided a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// The user, asked on a surface.
    User,
    /// The approval mode, without asking (e.g. `never` refuses escalations).
    Mode,
    /// An earlier "always for this session" grant.
    SessionGrant,
    /// Nobody could be asked (`latch run`, a child agent): denied.
    NonInteractive,
    /// Latch stopped while the request waited; found on resume: denied.
    Interrupted,
}

impl DecidedBy {
    /// The word a surface shows, e.g. `the user`.
    pub fn label(self) -> &'static str {
        match self {
            DecidedBy::User => "the user",
            DecidedBy::Mode => "the approval mode",
            DecidedBy::SessionGrant => "a grant for this session",
            DecidedBy::NonInteractive => "non-interactive mode",
            DecidedBy::Interrupted => "an interruption",
        }
    }
}

/// How long a grant holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantScope {
    /// This call only.
    Once,
    /// This call and every later one with the same key, in this session
    /// (also after resume).
    Session,
}

/// The body of a `permission_requested` event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRequest {
    /// The tool call waiting for the decision.
    pub call_id: String,
    /// The tool, e.g. `shell` or `edit_file`.
    pub tool: String,
    /// What is asked for.
    pub kind: PermissionKind,
    /// The command line, for commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The workspace-relative path, for edits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The edit as a unified diff, for edits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Why approval is needed (the policy's words).
    pub reason: String,
    /// The model's own reason, when it asked to leave the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_reason: Option<String>,
    /// The approval mode in force.
    pub approval: String,
    /// The sandbox mode commands run in.
    pub sandbox: String,
    /// The MCP server, tool and arguments, for an MCP call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpToolCall>,
    /// The plan to approve (Markdown, as the model wrote it), for a plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
}

impl PermissionRequest {
    /// The key an "always for this session" grant remembers: the exact
    /// command (inside or outside the sandbox) or the edited path.
    pub fn grant_key(&self) -> String {
        match self.kind {
            PermissionKind::Command => {
                format!("command:{}", self.command.as_deref().unwrap_or(""))
            }
            PermissionKind::Escalation => {
                format!("escalation:{}", self.command.as_deref().unwrap_or(""))
            }
            PermissionKind::Edit => format!("edit:{}", self.path.as_deref().unwrap_or("")),
            // A plan is approved once: no grant remembers it.
            PermissionKind::Plan => String::new(),
            // An "always" covers the tool, whatever its arguments.
            PermissionKind::McpTool => match &self.mcp {
                Some(m) => format!("mcp:{}/{}", m.server, m.tool),
                None => format!("mcp:{}", self.tool),
            },
        }
    }

    /// One line naming what is asked: the command, the path, or the MCP
    /// server and tool (`everything/trigger-long-running-operation`).
    pub fn subject(&self) -> String {
        if let Some(m) = &self.mcp {
            return format!("{}/{}", m.server, m.tool);
        }
        if self.kind == PermissionKind::Plan {
            return "the plan".to_string();
        }
        match (&self.command, &self.path) {
            (Some(c), _) => c.clone(),
            (None, Some(p)) => p.clone(),
            (None, None) => self.tool.clone(),
        }
    }
}

/// The permission state of one session, folded from its events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PermissionLog {
    pending: Vec<PermissionRequest>,
    grants: BTreeSet<String>,
}

impl PermissionLog {
    /// Fold `events` (a session's, ascending).
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a EventKind>) -> PermissionLog {
        let mut log = PermissionLog::default();
        for e in events {
            log.apply(e);
        }
        log
    }

    /// Fold one more event.
    pub fn apply(&mut self, event: &EventKind) {
        match event {
            EventKind::PermissionRequested(r) => {
                self.pending.retain(|p| p.call_id != r.call_id);
                self.pending.push(r.clone());
            }
            EventKind::PermissionGranted {
                call_id,
                scope,
                key,
                ..
            } => {
                self.pending.retain(|p| &p.call_id != call_id);
                if *scope == GrantScope::Session && !key.is_empty() {
                    self.grants.insert(key.clone());
                }
            }
            EventKind::PermissionDenied { call_id, .. } => {
                self.pending.retain(|p| &p.call_id != call_id);
            }
            EventKind::ToolResult(r) => self.pending.retain(|p| p.call_id != r.call_id),
            _ => {}
        }
    }

    /// Requests without a decision (and without a result), oldest first.
    pub fn pending(&self) -> &[PermissionRequest] {
        &self.pending
    }

    /// True when `key` was granted for the session.
    pub fn granted(&self, key: &str) -> bool {
        self.grants.contains(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::ToolResult;

    fn request(call: &str, command: &str) -> PermissionRequest {
        PermissionRequest {
            call_id: call.into(),
            tool: "shell".into(),
            kind: PermissionKind::Command,
            command: Some(command.into()),
            path: None,
            diff: None,
            reason: "approval mode `untrusted` asks".into(),
            model_reason: None,
            approval: "untrusted".into(),
            sandbox: "workspace-write".into(),
            mcp: None,
            plan: None,
        }
    }

    fn events() -> Vec<EventKind> {
        vec![
            EventKind::PermissionRequested(request("c1", "make")),
            EventKind::PermissionGranted {
                call_id: "c1".into(),
                tool: "shell".into(),
                subject: "make".into(),
                by: DecidedBy::User,
                scope: GrantScope::Session,
                key: "command:make".into(),
            },
            EventKind::PermissionRequested(request("c2", "rm x")),
            EventKind::PermissionDenied {
                call_id: "c2".into(),
                tool: "shell".into(),
                subject: "rm x".into(),
                by: DecidedBy::User,
                reason: "no".into(),
            },
            EventKind::PermissionRequested(request("c3", "curl")),
            EventKind::PermissionRequested(request("c4", "ls")),
            EventKind::ToolResult(ToolResult {
                call_id: "c4".into(),
                name: "shell".into(),
                content: "interrupted".into(),
                is_error: true,
                images: vec![],
            }),
        ]
    }

    #[test]
    fn pending_requests_and_session_grants() {
        let log = PermissionLog::replay(&events());
        assert_eq!(
            log.pending()
                .iter()
                .map(|p| p.call_id.as_str())
                .collect::<Vec<_>>(),
            ["c3"]
        );
        assert!(log.granted("command:make"));
        assert!(!log.granted("command:rm x"));
    }

    #[test]
    fn incremental_equals_replay_at_every_prefix_and_events_round_trip() {
        let all = events();
        let mut log = PermissionLog::default();
        for (i, e) in all.iter().enumerate() {
            log.apply(e);
            assert_eq!(log, PermissionLog::replay(&all[..=i]), "prefix {i}");
            let back = EventKind::from_row(i as u64, e.kind_name(), &e.to_json()).unwrap();
            assert_eq!(&back, e);
        }
    }

    #[test]
    fn grant_keys_name_the_command_or_the_path() {
        let mut r = request("c", "cargo test");
        assert_eq!(r.grant_key(), "command:cargo test");
        r.kind = PermissionKind::Escalation;
        assert_eq!(r.grant_key(), "escalation:cargo test");
        r.kind = PermissionKind::Edit;
        r.command = None;
        r.path = Some("src/a.rs".into());
        assert_eq!(
            (r.grant_key().as_str(), r.subject().as_str()),
            ("edit:src/a.rs", "src/a.rs")
        );
        // An MCP grant covers the tool, whatever its arguments.
        r.kind = PermissionKind::McpTool;
        r.path = None;
        r.mcp = Some(McpToolCall {
            server: "fs".into(),
            tool: "write_file".into(),
            arguments: r#"{"path":"a"}"#.into(),
        });
        assert_eq!(
            (r.grant_key().as_str(), r.subject().as_str()),
            ("mcp:fs/write_file", "fs/write_file")
        );
        let e = EventKind::PermissionRequested(r);
        let back = EventKind::from_row(1, e.kind_name(), &e.to_json()).unwrap();
        assert_eq!(back, e);
    }
}
