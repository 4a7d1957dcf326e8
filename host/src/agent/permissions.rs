//! The agent loop's permission hook. Before a tool call runs, the approval
//! policy ([`latch_sandbox::decide`]) looks at what the call is about to do
//! (the tools' preview: a command, an escalation, an edit and its diff) and
//! the call runs, is denied, or waits for a decision:
//!
//! * `permission_requested` commits **before** anyone is asked; the loop
//!   then waits on the [`DecisionPort`] holding no store lock;
//! * `permission_granted` (by the user, or by an earlier "always for this
//!   session" grant, which is replayed from the log on resume) commits
//!   before the call runs;
//! * `permission_denied` commits together with the call's result, which
//!   tells the model why — so a denial is protocol-safe by construction.
//!
//! Without a port (`latch run`, child agents) nothing blocks: what would
//! need approval is denied with a reason the model sees. On resume a
//! request that was still waiting is denied as interrupted and its call
//! answered (see [`Agent::settle_permissions`]).
//!
//! An MCP tool not annotated read-only goes through the same policy as a
//! command ([`McpCall`]): inside the session's sandbox when its server is
//! confined there, outside it when the server runs as an ordinary program
//! (the default) or is a remote `url` server; an "always" covers that tool
//! of that server for the session.

use super::{Agent, AgentError, AgentEvent};
use latch_engine_sdk::types::{ToolCall, ToolResult};
use latch_kernel::{
    DecidedBy, EventKind, GrantScope, McpToolCall, PermissionKind, PermissionLog, PermissionRequest,
};
use latch_sandbox::{Action, ApprovalMode, SandboxMode, SandboxPolicy, Verdict, decide};
use std::sync::Arc;

/// What the user answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Run this call.
    Once,
    /// Run this call and every later one with the same command (or path)
    /// in this session, also after resume.
    Session,
    /// Do not run it; the optional text is the user's reason for the model.
    Deny(Option<String>),
    /// Approve the plan (a request of kind `plan`) and act under this
    /// approval mode from now on; for any other request, as [`Decision::Once`].
    Approve(ApprovalMode),
}

/// A surface that asks the user and waits for the answer (the plain REPL,
/// the TUI, the web page).
pub trait DecisionPort: Send + Sync {
    /// Show `request` and wait for the decision. Called with no store lock
    /// held; the request is already durable.
    fn decide(&self, request: &PermissionRequest) -> Decision;
}

/// The permission settings of an agent.
#[derive(Clone)]
pub struct Permissions {
    /// When the user is asked.
    pub approval: ApprovalMode,
    /// The sandbox every command runs in.
    pub sandbox: SandboxPolicy,
    /// Who decides; `None`: nobody can be asked, so what needs approval is
    /// denied (non-interactive runs and child agents).
    pub port: Option<Arc<dyn DecisionPort>>,
}

impl std::fmt::Debug for Permissions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permissions")
            .field("approval", &self.approval)
            .field("sandbox", &self.sandbox)
            .field("interactive", &self.port.is_some())
            .finish()
    }
}

/// Most characters of an MCP call's arguments kept in its request.
const MCP_ARGUMENT_CHARS: usize = 2_000;

/// An MCP tool call, as the approval policy sees it (see
/// [`super::ToolSet::mcp_call`]).
#[derive(Clone, Debug, PartialEq)]
pub struct McpCall {
    /// The server, as configured.
    pub server: String,
    /// The server's name for the tool.
    pub tool: String,
    /// The arguments, as the model sent them.
    pub arguments: String,
    /// True when the server annotates the tool `readOnlyHint: true`.
    pub read_only: bool,
    /// The command sandbox its server runs in; none when the server runs
    /// unconfined or remotely.
    pub confined: Option<SandboxPolicy>,
}

impl McpCall {
    /// True when its server runs inside the session's sandbox (no looser
    /// mode, no network the session lacks).
    fn inside(&self, session: &SandboxPolicy) -> bool {
        let rank = |m: SandboxMode| match m {
            SandboxMode::ReadOnly => 0,
            SandboxMode::WorkspaceWrite => 1,
            SandboxMode::FullAccess => 2,
        };
        self.confined
            .as_ref()
            .is_some_and(|p| rank(p.mode) <= rank(session.mode) && (!p.network || session.network))
    }
}

/// What the policy decided about a call before anyone is asked.
struct Classified {
    request: PermissionRequest,
    /// The verdict's reason.
    reason: String,
    /// Set when the mode denies it without asking.
    denied_by: Option<DecidedBy>,
    /// How it runs once allowed.
    granted: Permit,
}

/// How a call may proceed.
pub(crate) enum Permit {
    /// Run it as usual (inside the sandbox).
    Run,
    /// Run it outside the sandbox (a granted escalation).
    RunEscalated,
    /// It was denied; the denial and the call's result are committed.
    Denied,
}

fn denial(call: &ToolCall, text: String) -> EventKind {
    EventKind::ToolResult(ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: text,
        is_error: true,
        images: vec![],
    })
}

/// A built-in tool's call, from its preview; `None`: it runs.
fn classify(
    call: &ToolCall,
    preview: latch_tools::Preview,
    perms: &Permissions,
) -> Option<Classified> {
    let sandbox = perms.sandbox.mode;
    let escalated = preview.action == Action::Escalation && sandbox != SandboxMode::FullAccess;
    let granted = if escalated {
        Permit::RunEscalated
    } else {
        Permit::Run
    };
    let (reason, denied_by) = match decide(perms.approval, sandbox, preview.action) {
        Verdict::Allow => return None,
        Verdict::Ask { reason } => (reason, None),
        Verdict::Deny { reason } => (reason, Some(DecidedBy::Mode)),
    };
    let request = PermissionRequest {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        kind: match preview.action {
            Action::Edit => PermissionKind::Edit,
            _ if escalated => PermissionKind::Escalation,
            _ => PermissionKind::Command,
        },
        command: preview.command,
        path: preview.path,
        diff: preview.diff,
        reason: reason.clone(),
        model_reason: preview.reason,
        approval: perms.approval.name().into(),
        sandbox: sandbox.name().into(),
        mcp: None,
        plan: None,
    };
    Some(Classified {
        request,
        reason,
        denied_by,
        granted,
    })
}

/// An MCP tool's call: a read-only one runs; another is a command inside
/// the sandbox when its server is confined there, and acts outside it
/// otherwise. `None`: it runs.
fn classify_mcp(call: &ToolCall, mcp: McpCall, perms: &Permissions) -> Option<Classified> {
    if mcp.read_only {
        return None;
    }
    let session = &perms.sandbox;
    let inside = mcp.inside(session);
    let action = if inside {
        Action::Command
    } else {
        Action::Escalation
    };
    let approval = perms.approval;
    let sandbox = session.mode;
    let (server, tool) = (&mcp.server, &mcp.tool);
    let outside = || {
        if mcp.confined.is_some() {
            format!("MCP server `{server}` runs in a looser sandbox than the session's `{sandbox}`")
        } else {
            format!("MCP server `{server}` runs outside the `{sandbox}` sandbox")
        }
    };
    let (reason, denied_by) = match decide(approval, sandbox, action) {
        Verdict::Allow => return None,
        Verdict::Ask { .. } if inside || sandbox == SandboxMode::FullAccess => (
            format!(
                "approval mode `{approval}` asks before every MCP tool not annotated read-only, \
                 as before a command"
            ),
            None,
        ),
        Verdict::Ask { .. } => (
            format!(
                "{} and `{tool}` is not annotated read-only; approval mode `{approval}` asks \
                 before such a call",
                outside()
            ),
            None,
        ),
        Verdict::Deny { .. } => (
            format!(
                "approval mode `{approval}` runs nothing outside the `{sandbox}` sandbox and asks \
                 nobody; {} and `{tool}` is not annotated read-only. Do without it (the user may \
                 confine the server with `sandbox = \"workspace-write\"` in [mcp.servers.{server}] \
                 or choose another --approval mode)",
                outside()
            ),
            Some(DecidedBy::Mode),
        ),
    };
    let mut arguments: String = mcp.arguments.chars().take(MCP_ARGUMENT_CHARS).collect();
    if arguments.len() < mcp.arguments.len() {
        arguments.push('…');
    }
    let request = PermissionRequest {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        kind: PermissionKind::McpTool,
        command: None,
        path: None,
        diff: None,
        reason: reason.clone(),
        model_reason: None,
        approval: approval.name().into(),
        sandbox: sandbox.name().into(),
        mcp: Some(McpToolCall {
            server: mcp.server.clone(),
            tool: mcp.tool.clone(),
            arguments,
        }),
        plan: None,
    };
    Some(Classified {
        request,
        reason,
        denied_by,
        granted: Permit::Run,
    })
}

/// What the model reads when Latch stopped before the user decided.
pub const INTERRUPTED_DENIAL: &str = "denied: this call waited for the user's approval when Latch stopped, so it never ran. Ask again if it is still needed.";

impl Agent {
    /// Let `port` decide this agent's permission requests from now on: a
    /// surface that asks its user in its own way (the terminal UI's modal,
    /// the web page). Children keep theirs. An agent built without
    /// permission settings asks nobody; then nothing changes and this
    /// returns false.
    pub fn set_decision_port(&mut self, port: Arc<dyn DecisionPort>) -> bool {
        match self.options.permissions.as_mut() {
            Some(p) => {
                p.port = Some(port);
                true
            }
            None => false,
        }
    }

    /// Ask as `mode` says from the next tool call on (a surface whose user
    /// changed the session's mode records the change in the session's
    /// profile first). An agent built without permission settings asks
    /// nobody; then nothing changes and this returns false.
    pub fn set_approval(&mut self, mode: ApprovalMode) -> bool {
        match self.options.permissions.as_mut() {
            Some(p) => {
                p.approval = mode;
                true
            }
            None => false,
        }
    }

    /// Decide `call` before it runs (see the module docs).
    pub(crate) fn permit(
        &mut self,
        call: &ToolCall,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<Permit, AgentError> {
        let Some(mut perms) = self.options.permissions.clone() else {
            return Ok(Permit::Run);
        };
        // Plan mode runs every command in the read-only sandbox.
        if self.session_mode.is_plan() {
            perms.sandbox.mode = SandboxMode::ReadOnly;
        }
        let classified = match self.tools.mcp_call(call) {
            Some(mcp) => classify_mcp(call, mcp, &perms),
            None => match self.tools.preview(call) {
                Some(preview) => classify(call, preview, &perms),
                None => None,
            },
        };
        match classified {
            None => Ok(Permit::Run),
            Some(c) => self.settle(call, c, perms.port, observer),
        }
    }

    /// Record the decision about a classified call: denied by the mode, an
    /// earlier session grant, nobody to ask, or the user's answer.
    fn settle(
        &mut self,
        call: &ToolCall,
        classified: Classified,
        port: Option<Arc<dyn DecisionPort>>,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<Permit, AgentError> {
        let Classified {
            request,
            reason,
            denied_by,
            granted,
        } = classified;
        let subject = request.subject();
        let key = request.grant_key();
        let requested = EventKind::PermissionRequested(request.clone());
        if let Some(by) = denied_by {
            let denied = EventKind::PermissionDenied {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                subject: subject.clone(),
                by,
                reason: reason.clone(),
            };
            let result = denial(call, format!("denied by the approval mode: {reason}"));
            self.commit_permission(vec![requested, denied, result], observer)?;
            return Ok(Permit::Denied);
        }
        if self.permission_log()?.granted(&key) {
            let granted_event = EventKind::PermissionGranted {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                subject,
                by: DecidedBy::SessionGrant,
                scope: GrantScope::Once,
                key: String::new(),
            };
            self.commit_permission(vec![requested, granted_event], observer)?;
            return Ok(granted);
        }
        let Some(port) = port else {
            let why = format!(
                "nobody can approve it in this non-interactive {} run ({reason}); do without \
                 it, or the user re-runs interactively or with another --approval mode",
                self.options.mode
            );
            let denied = EventKind::PermissionDenied {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                subject: subject.clone(),
                by: DecidedBy::NonInteractive,
                reason: why.clone(),
            };
            let result = denial(
                call,
                format!("denied: `{subject}` needs approval, but {why}"),
            );
            self.commit_permission(vec![requested, denied, result], observer)?;
            return Ok(Permit::Denied);
        };
        // Durable before anyone is asked: a crash while waiting resumes with
        // the request answered as interrupted.
        self.commit_permission(vec![requested], observer)?;
        let decision = port.decide(&request);
        let decided = |by, scope, key: String| EventKind::PermissionGranted {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            subject: subject.clone(),
            by,
            scope,
            key,
        };
        match decision {
            Decision::Once | Decision::Approve(_) => {
                let e = decided(DecidedBy::User, GrantScope::Once, String::new());
                self.commit_permission(vec![e], observer)?;
                Ok(granted)
            }
            Decision::Session => {
                let e = decided(DecidedBy::User, GrantScope::Session, key);
                self.commit_permission(vec![e], observer)?;
                Ok(granted)
            }
            Decision::Deny(why) => {
                let why = why
                    .map(|w| w.trim().to_string())
                    .filter(|w| !w.is_empty())
                    .unwrap_or_else(|| "the user declined".to_string());
                let denied = EventKind::PermissionDenied {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    subject: subject.clone(),
                    by: DecidedBy::User,
                    reason: why.clone(),
                };
                let result = denial(
                    call,
                    format!(
                        "denied by the user: `{subject}` was not run ({why}). Do not retry it \
                         unchanged; take another way or ask the user."
                    ),
                );
                self.commit_permission(vec![denied, result], observer)?;
                Ok(Permit::Denied)
            }
        }
    }

    /// The session's permission log, folded from the log on first use and
    /// kept up to date by [`Agent::commit_permission`].
    fn permission_log(&mut self) -> Result<&PermissionLog, AgentError> {
        if self.permission_log.is_none() {
            let events = self.store.all_events(&self.session.id)?;
            self.permission_log = Some(PermissionLog::replay(events.iter().map(|e| &e.kind)));
        }
        Ok(self
            .permission_log
            .get_or_insert_with(PermissionLog::default))
    }

    /// Commit permission events in one transaction and fold them.
    fn commit_permission(
        &mut self,
        events: Vec<EventKind>,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<(), AgentError> {
        self.append_batch(events.clone(), observer)?;
        if let Some(log) = self.permission_log.as_mut() {
            for e in &events {
                log.apply(e);
            }
        }
        Ok(())
    }

    /// On resume: a request that was waiting for a decision when Latch
    /// stopped is denied as interrupted, and its call (still open) answered
    /// as denied in the same transaction. Returns the events appended.
    pub(crate) fn settle_permissions(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<usize, AgentError> {
        let open = self
            .store
            .with_kernel(&self.session.id, |k| k.unfinished().open_calls.clone())?;
        if open.is_empty() {
            return Ok(0);
        }
        // A waiting request follows the assistant message whose call it
        // holds, so the newest events suffice.
        let mut recent = self.store.events_before(&self.session.id, u64::MAX, 256)?;
        recent.reverse();
        let pending = PermissionLog::replay(recent.iter().map(|e| &e.kind))
            .pending()
            .to_vec();
        let mut events = Vec::new();
        for r in pending
            .iter()
            .filter(|r| open.iter().any(|c| c.id == r.call_id))
        {
            events.push(EventKind::PermissionDenied {
                call_id: r.call_id.clone(),
                tool: r.tool.clone(),
                subject: r.subject(),
                by: DecidedBy::Interrupted,
                reason: "Latch stopped while this request waited for a decision".into(),
            });
            events.push(EventKind::ToolResult(ToolResult {
                call_id: r.call_id.clone(),
                name: r.tool.clone(),
                content: INTERRUPTED_DENIAL.into(),
                is_error: true,
                images: vec![],
            }));
        }
        let n = events.len();
        self.commit_permission(events, observer)?;
        Ok(n)
    }
}
