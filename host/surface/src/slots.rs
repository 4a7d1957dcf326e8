//! The sidebar's GROUP block and the permission prompt.
//!
//! Both are reduced from the durable log by [`Surface`](crate::Surface):
//! the prompt from the session's own `permission_requested` event until
//! its decision (or the call's result) commits, the GROUP block from the
//! group events of the session's log through the kernel's one presentation
//! reducer ([`latch_kernel::group::present`]). A surface whose session is
//! a child (its group lives in the root's log) fills the block through
//! [`Surface::set_group`](crate::Surface::set_group). Renderers draw
//! whatever the slot holds and nothing when it is empty.

use latch_kernel::group::present;
use latch_kernel::{PermissionKind, PermissionRequest};

/// The sidebar's GROUP block: lines a group reducer produced for display.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupView {
    /// The block's title, e.g. `GROUP team-a (3 members)`.
    pub title: String,
    /// One line per task, member or pending message.
    pub lines: Vec<String>,
}

impl GroupView {
    /// The block for a group's presentation (`None` when there is no
    /// group): a title with the counts, then one line per member (role,
    /// state, pending messages, tasks held) and one per task (status,
    /// holder, title, dependencies).
    pub fn from_present(view: &present::GroupView) -> Option<GroupView> {
        if view.lead.is_empty() {
            return None;
        }
        let mut lines = Vec::new();
        for m in &view.members {
            let holds = if m.holding.is_empty() {
                String::new()
            } else {
                format!(" · holds {}", ids(&m.holding))
            };
            let pending = if m.pending > 0 {
                format!(" · {} pending", m.pending)
            } else {
                String::new()
            };
            lines.push(format!(
                "{} {} {}{pending}{holds}",
                m.role,
                short(&m.id),
                m.state
            ));
        }
        for t in &view.tasks {
            let after = if t.depends_on.is_empty() {
                String::new()
            } else {
                format!(" (after {})", ids(&t.depends_on))
            };
            let owner = t
                .owner
                .as_deref()
                .map(|o| format!(" {}", short(o)))
                .unwrap_or_default();
            lines.push(format!(
                "#{} {}{owner}: {}{after}",
                t.id,
                t.status.label(),
                t.title
            ));
        }
        Some(GroupView {
            title: format!(
                "GROUP · {} members · {} tasks · {} pending",
                view.members.len(),
                view.tasks.len(),
                view.pending
            ),
            lines,
        })
    }
}

/// The first characters of a session id (enough to tell members apart).
fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

/// Task ids as `#4,#5`.
fn ids(v: &[u64]) -> String {
    v.iter()
        .map(|i| format!("#{i}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A permission request waiting for the user's answer, shown as a modal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PermissionPrompt {
    /// The tool asking, e.g. `shell` or `edit_file`.
    pub tool: String,
    /// What it wants to do: the command line, or the path it edits.
    pub subject: String,
    /// The command or unified diff to show in full.
    pub detail: Vec<String>,
    /// Why the policy asks (the rule that matched).
    pub reason: String,
    /// The tool call waiting for the decision (empty when the prompt was
    /// not reduced from an event).
    pub call_id: String,
    /// Sequence number of the `permission_requested` event (0 when none).
    pub seq: u64,
    /// The modal's heading, e.g. `shell wants to run:` (empty: a generic
    /// one).
    pub action: String,
}

impl PermissionPrompt {
    /// The modal for the durable `permission_requested` event at `seq`: the
    /// command (or the path and its unified diff), the model's reason when
    /// it asked to leave the sandbox, and why the policy asks.
    pub fn from_request(seq: u64, r: &PermissionRequest) -> PermissionPrompt {
        let mut detail: Vec<String> = r
            .diff
            .as_deref()
            .map(|d| d.lines().map(str::to_string).collect())
            .unwrap_or_default();
        if let Some(why) = &r.model_reason {
            detail.push(format!("the model says: {why}"));
        }
        let action = match r.kind {
            PermissionKind::Command => format!("{} wants to run:", r.tool),
            PermissionKind::Escalation => format!(
                "{} wants to run OUTSIDE the `{}` sandbox:",
                r.tool, r.sandbox
            ),
            PermissionKind::Edit => format!("{} wants to change:", r.tool),
            PermissionKind::Plan => "the plan to approve (approving leaves plan mode):".to_string(),
            PermissionKind::McpTool => match &r.mcp {
                Some(m) => format!("MCP server `{}` wants to run its tool:", m.server),
                None => format!("{} wants to run:", r.tool),
            },
        };
        if let Some(m) = &r.mcp {
            detail.insert(0, format!("arguments: {}", m.arguments));
        }
        if let Some(plan) = &r.plan {
            detail = plan.lines().map(str::to_string).collect();
        }
        PermissionPrompt {
            tool: r.tool.clone(),
            subject: r.subject(),
            detail,
            reason: r.reason.clone(),
            call_id: r.call_id.clone(),
            seq,
            action,
        }
    }
}
