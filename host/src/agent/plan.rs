//! Plan mode: the session's mode beside its approval mode (recorded in the
//! session profile, so a resume stays in it), and the gate the loop puts
//! in front of every tool call while it holds.
//!
//! In plan mode nothing may change the workspace: `write_file` and
//! `edit_file` are refused with a result that tells the model what to do
//! instead, a command may not leave the sandbox, an MCP tool not annotated
//! read-only and a child agent are refused, and every command runs in the
//! read-only sandbox. The model explores, then calls `propose_plan {plan}`;
//! the surfaces show the plan to approve (a `permission_requested` event of
//! kind `plan`). Approving leaves plan mode for the approval mode the user
//! picked, both recorded as a new session profile, and the plan's steps
//! become the task state's actions. The session context tells the engine
//! (and so the model) which mode the session runs in.

use super::{Agent, AgentError, AgentEvent, Decision};
use latch_engine_sdk::types::{ToolCall, ToolResult};
use latch_kernel::{
    DecidedBy, EventKind, GrantScope, PermissionKind, PermissionRequest, ProfileChange,
    SessionMode, SessionProfile, StateOp,
};
use latch_provider::ToolSchema;
use latch_sandbox::{ApprovalMode, SandboxMode};
use serde_json::json;

/// The tool the model ends plan mode with.
pub const PROPOSE_PLAN: &str = "propose_plan";

/// Longest plan accepted, in bytes.
pub const MAX_PLAN_BYTES: usize = 32 * 1024;

/// Most steps a plan adds to the task state.
pub const MAX_PLAN_STEPS: usize = 40;

/// Longest step kept, in characters.
const MAX_STEP_CHARS: usize = 300;

/// Tools that change the workspace by themselves (refused in plan mode).
const WRITING_TOOLS: &[&str] = &["write_file", "edit_file"];

/// Tools that start another agent (refused in plan mode: a child acts in
/// the same workspace).
const SPAWNING_TOOLS: &[&str] = &["spawn_agent"];

/// The tool's schema (byte-stable: it is part of the cached prefix).
pub fn schema() -> ToolSchema {
    ToolSchema {
        name: PROPOSE_PLAN.to_string(),
        description: "In plan mode, present your plan for the user to approve. Plan mode lets \
                      nothing change the workspace: explore with the read-only tools first, then \
                      call this with the plan as Markdown, its steps as a list. If the user \
                      approves, the session leaves plan mode, the steps become the task state's \
                      actions and you carry them out; if not, you get their feedback and stay \
                      in plan mode."
            .to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "plan": {
                    "type": "string",
                    "description": "The plan in Markdown: what you will change and how you will \
                                    check it, its steps as a list (`- step` or `1. step`)."
                }
            },
            "required": ["plan"],
            "additionalProperties": false
        }),
    }
}

/// The mode a surface asks the session to switch to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeChoice {
    /// Plan mode (the approval mode stays as it is, for after the plan).
    Plan,
    /// Act under this approval mode (leaving plan mode when in it).
    Act(ApprovalMode),
}

impl ModeChoice {
    /// The choice a mode id names: `plan`, or an approval mode's name.
    pub fn parse(id: &str) -> Result<ModeChoice, String> {
        if id == "plan" {
            return Ok(ModeChoice::Plan);
        }
        id.parse::<ApprovalMode>()
            .map(ModeChoice::Act)
            .map_err(|e| format!("{e}, or plan"))
    }

    /// The next mode Shift+Tab moves to from `mode` and `approval`: plan →
    /// edits → auto (`on-request`) → plan; any other approval mode moves
    /// to plan.
    pub fn cycle(mode: SessionMode, approval: ApprovalMode) -> ModeChoice {
        match (mode, approval) {
            (SessionMode::Plan, _) => ModeChoice::Act(ApprovalMode::Edits),
            (SessionMode::Act, ApprovalMode::Edits) => ModeChoice::Act(ApprovalMode::OnRequest),
            (SessionMode::Act, _) => ModeChoice::Plan,
        }
    }
}

/// The mode's label on every surface: `plan`, or the approval mode's
/// short name (`auto` for `on-request`, `ask` for `untrusted`).
pub fn mode_label(mode: SessionMode, approval: ApprovalMode) -> &'static str {
    latch_surface::mode_label(approval.name(), mode)
}

/// The steps of a plan: its top-level list items (`- `, `* `, `+ `,
/// `1. `, `1) `, with or without a `[ ]` box), or, when it has none, its
/// non-empty lines that are not headings. At most [`MAX_PLAN_STEPS`], each
/// cut at [`MAX_STEP_CHARS`] characters.
pub fn plan_steps(plan: &str) -> Vec<String> {
    let items: Vec<(usize, String)> = plan
        .lines()
        .filter_map(|line| {
            let indent = line.len() - line.trim_start().len();
            list_item(line.trim_start()).map(|t| (indent, t.to_string()))
        })
        .collect();
    let steps: Vec<String> = match items.iter().map(|(i, _)| *i).min() {
        Some(top) => items
            .into_iter()
            .filter(|(i, _)| *i == top)
            .map(|(_, t)| t)
            .collect(),
        None => plan
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect(),
    };
    steps
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s.chars().count() > MAX_STEP_CHARS {
                let mut cut: String = s.chars().take(MAX_STEP_CHARS).collect();
                cut.push('…');
                cut
            } else {
                s
            }
        })
        .take(MAX_PLAN_STEPS)
        .collect()
}

/// The text of a list item, without its marker and check box.
fn list_item(line: &str) -> Option<&str> {
    let rest = if let Some(r) = ["- ", "* ", "+ "].iter().find_map(|m| line.strip_prefix(m)) {
        r
    } else {
        let digits = line.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let after = &line[digits..];
        after
            .strip_prefix(". ")
            .or_else(|| after.strip_prefix(") "))?
    };
    let rest = rest.trim_start();
    Some(
        ["[ ] ", "[x] ", "[X] "]
            .iter()
            .find_map(|b| rest.strip_prefix(b))
            .unwrap_or(rest),
    )
}

/// What the model reads when a writing call was refused in plan mode.
fn refusal(call: &ToolCall, what: &str) -> ToolResult {
    ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: format!(
            "[plan mode] `{}` was not run: {what}. The session is in plan mode, where nothing may \
             change the workspace. Keep exploring with read_file, grep, list_files and read-only \
             commands, then call {PROPOSE_PLAN} with your plan; once the user approves it, the \
             session leaves plan mode and you can make this change.",
            call.name
        ),
        is_error: true,
        images: Vec::new(),
    }
}

/// The note a command's result gets in plan mode.
pub const READ_ONLY_NOTE: &str = "[plan mode] This command ran in the read-only sandbox: nothing \
     it tried to write was kept. Propose the change with propose_plan instead.";

impl Agent {
    /// The session's mode (plan or act), as last recorded.
    pub fn session_mode(&self) -> SessionMode {
        self.session_mode
    }

    /// The approval mode the session runs with (the configured default for
    /// an agent built without permission settings).
    pub fn approval_mode(&self) -> ApprovalMode {
        self.options
            .permissions
            .as_ref()
            .map(|p| p.approval)
            .unwrap_or_default()
    }

    /// The refusal of `call` in plan mode; `None`: it may run (a command
    /// then runs in the read-only sandbox).
    pub(crate) fn plan_gate(&self, call: &ToolCall) -> Option<ToolResult> {
        if !self.session_mode.is_plan() {
            return None;
        }
        let name = call.name.as_str();
        if WRITING_TOOLS.contains(&name) {
            return Some(refusal(call, "it writes a file"));
        }
        if SPAWNING_TOOLS.contains(&name) {
            return Some(refusal(
                call,
                "a child agent would act in the same workspace",
            ));
        }
        if let Some(mcp) = self.tools.mcp_call(call)
            && !mcp.read_only
        {
            return Some(refusal(
                call,
                &format!(
                    "MCP server `{}` does not annotate `{}` read-only",
                    mcp.server, mcp.tool
                ),
            ));
        }
        if let Some(preview) = self.tools.preview(call)
            && preview.action == latch_sandbox::Action::Escalation
        {
            return Some(refusal(
                call,
                "it asks to run outside the sandbox, and plan mode runs every command read-only",
            ));
        }
        None
    }

    /// Switch the session to `choice`, recorded first as a new session
    /// profile naming `by` (e.g. `/plan`, `Shift+Tab`); the profile
    /// recorded, `None` when nothing changed. Takes effect from the next
    /// tool call; the model is told when its next run starts.
    pub fn switch_mode(
        &mut self,
        choice: ModeChoice,
        by: &str,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<Option<SessionProfile>, AgentError> {
        let (mode, approval) = match choice {
            ModeChoice::Plan => (SessionMode::Plan, self.approval_mode()),
            ModeChoice::Act(a) => (SessionMode::Act, a),
        };
        let Some(profile) = self.changed_profile(mode, approval, by)? else {
            return Ok(None);
        };
        self.append(EventKind::SessionProfile(profile.clone()), observer)?;
        self.set_approval(approval);
        self.apply_mode(mode)?;
        Ok(Some(profile))
    }

    /// The profile that records `mode` and `approval` after the latest
    /// one; `None` when both are as recorded.
    fn changed_profile(
        &self,
        mode: SessionMode,
        approval: ApprovalMode,
        by: &str,
    ) -> Result<Option<SessionProfile>, AgentError> {
        let previous = self.store.session_profile(&self.session.id)?;
        let current_approval = self.approval_mode();
        let sandbox = self
            .options
            .permissions
            .as_ref()
            .map(|p| p.sandbox.mode)
            .unwrap_or_default();
        let mut next = match &previous {
            Some(p) => SessionProfile {
                changes: Vec::new(),
                ..p.clone()
            },
            None => SessionProfile {
                provider: self.provider.kind().name().to_string(),
                base_url: None,
                model: self.session.model.model.clone(),
                approval: current_approval.name().to_string(),
                sandbox: sandbox.name().to_string(),
                changes: Vec::new(),
                group: None,
                mode: self.session_mode,
            },
        };
        let from_approval = next.approval.clone();
        if from_approval != approval.name() {
            next.changes.push(ProfileChange {
                setting: "approval".into(),
                from: from_approval.clone(),
                to: approval.name().into(),
                by: by.to_string(),
                looser: from_approval
                    .parse::<ApprovalMode>()
                    .is_ok_and(|old| approval.is_looser_than(old)),
            });
            next.approval = approval.name().to_string();
        }
        if next.mode != mode {
            next.changes.push(ProfileChange {
                setting: "mode".into(),
                from: next.mode.name().into(),
                to: mode.name().into(),
                by: by.to_string(),
                looser: next.mode.is_plan(),
            });
            next.mode = mode;
        }
        Ok((!next.changes.is_empty()).then_some(next))
    }

    /// Run under `mode` from the next tool call on: commands in the
    /// read-only sandbox while planning, in the session's sandbox after;
    /// the session context names the mode.
    pub(crate) fn apply_mode(&mut self, mode: SessionMode) -> Result<(), AgentError> {
        let changed = self.session_mode != mode;
        self.session_mode = mode;
        self.current_context.mode = super::prompt::mode_text(&self.options.mode, mode);
        let sandboxed = self.options.permissions.as_ref().map(|p| p.sandbox.clone());
        match (sandboxed, mode) {
            (Some(mut policy), SessionMode::Plan) => {
                policy.mode = SandboxMode::ReadOnly;
                self.tools.use_sandbox(&policy)?;
            }
            (Some(policy), SessionMode::Act) if changed => self.tools.use_sandbox(&policy)?,
            (None, SessionMode::Plan) => {
                let policy = latch_sandbox::SandboxPolicy {
                    mode: SandboxMode::ReadOnly,
                    ..Default::default()
                };
                self.tools.use_sandbox(&policy)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Answer the model's `propose_plan`: ask the user (the request, of
    /// kind `plan`, is durable first); approved, leave plan mode and turn
    /// the steps into actions. Without anyone to ask the plan stays
    /// recorded and the session in plan mode.
    pub(crate) fn propose_plan(
        &mut self,
        call: &ToolCall,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<Option<ToolResult>, AgentError> {
        let result = |content: String, is_error: bool| ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error,
            images: Vec::new(),
        };
        let plan = serde_json::from_str::<serde_json::Value>(&call.arguments_json)
            .ok()
            .and_then(|v| v.get("plan").and_then(|p| p.as_str()).map(str::to_string))
            .map(|p| p.trim().to_string())
            .unwrap_or_default();
        if plan.is_empty() {
            return Ok(Some(result(
                format!("{PROPOSE_PLAN} needs `plan`: the plan as Markdown, its steps as a list."),
                true,
            )));
        }
        if plan.len() > MAX_PLAN_BYTES {
            return Ok(Some(result(
                format!(
                    "the plan has {} bytes; at most {MAX_PLAN_BYTES} are accepted. Shorten it \
                     (the steps and how you will check them) and propose it again.",
                    plan.len()
                ),
                true,
            )));
        }
        if !self.session_mode.is_plan() {
            return Ok(Some(result(
                "The session is not in plan mode: nothing waits for approval, so go ahead \
                 (record the steps with add_action if it helps)."
                    .into(),
                true,
            )));
        }
        let approval = self.approval_mode();
        let request = PermissionRequest {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            kind: PermissionKind::Plan,
            command: None,
            path: None,
            diff: None,
            reason: "the session is in plan mode; approving the plan leaves it".into(),
            model_reason: None,
            approval: approval.name().into(),
            sandbox: SandboxMode::ReadOnly.name().into(),
            mcp: None,
            plan: Some(plan.clone()),
        };
        let subject = request.subject();
        let requested = EventKind::PermissionRequested(request.clone());
        let port = self
            .options
            .permissions
            .as_ref()
            .and_then(|p| p.port.clone());
        let Some(port) = port else {
            let why = "nobody can approve a plan in this non-interactive run".to_string();
            let denied = EventKind::PermissionDenied {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                subject,
                by: DecidedBy::NonInteractive,
                reason: why.clone(),
            };
            let answer = result(
                format!(
                    "The plan is recorded, but {why}, so the session stays in plan mode. End \
                     your turn with a short summary of the plan; the user approves it by \
                     resuming the session and leaving plan mode."
                ),
                false,
            );
            self.append_batch(
                vec![requested, denied, EventKind::ToolResult(answer)],
                observer,
            )?;
            return Ok(None);
        };
        self.append(requested, observer)?;
        let chosen = match port.decide(&request) {
            Decision::Deny(why) => {
                let why = why
                    .map(|w| w.trim().to_string())
                    .filter(|w| !w.is_empty())
                    .unwrap_or_else(|| "the user wants to keep planning".to_string());
                let denied = EventKind::PermissionDenied {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    subject,
                    by: DecidedBy::User,
                    reason: why.clone(),
                };
                let answer = result(
                    format!(
                        "The user did not approve the plan ({why}). The session stays in plan \
                         mode: revise the plan with their feedback and propose it again."
                    ),
                    true,
                );
                self.append_batch(vec![denied, EventKind::ToolResult(answer)], observer)?;
                return Ok(None);
            }
            Decision::Approve(mode) => mode,
            Decision::Once | Decision::Session => approval,
        };
        self.append(
            EventKind::PermissionGranted {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                subject,
                by: DecidedBy::User,
                scope: GrantScope::Once,
                key: String::new(),
            },
            observer,
        )?;
        self.switch_mode(ModeChoice::Act(chosen), "approving the plan", observer)?;
        let steps = plan_steps(&plan);
        self.append_batch(
            steps
                .iter()
                .map(|s| EventKind::StateUpdate(StateOp::AddAction { text: s.clone() }))
                .collect(),
            observer,
        )?;
        Ok(Some(result(
            format!(
                "The user approved the plan. The session left plan mode and runs in approval \
                 mode `{chosen}`: carry the plan out now. Its {} step(s) are the task state's \
                 actions; mark each done with complete_action as you finish it.",
                steps.len()
            ),
            false,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_the_top_level_list_items() {
        let plan = "# Plan\nFix the parser.\n\n1. Read `src/parse.rs`\n   - note the bug\n2. [ ] Change `parse`\n3) Run `cargo test`\n";
        assert_eq!(
            plan_steps(plan),
            ["Read `src/parse.rs`", "Change `parse`", "Run `cargo test`"]
        );
        assert_eq!(
            plan_steps("- a\n- [x] b\n  * c\n"),
            ["a", "b"],
            "nested items are details of their step"
        );
        assert_eq!(
            plan_steps("## Plan\nWrite f.\nTest it.\n"),
            ["Write f.", "Test it."]
        );
        let many: String = (0..100).map(|i| format!("- step {i}\n")).collect();
        assert_eq!(plan_steps(&many).len(), MAX_PLAN_STEPS);
    }

    #[test]
    fn shift_tab_cycles_plan_edits_auto() {
        use ApprovalMode::*;
        let mut mode = SessionMode::Act;
        let mut approval = Untrusted;
        let mut seen = Vec::new();
        for _ in 0..4 {
            match ModeChoice::cycle(mode, approval) {
                ModeChoice::Plan => mode = SessionMode::Plan,
                ModeChoice::Act(a) => {
                    mode = SessionMode::Act;
                    approval = a;
                }
            }
            seen.push(mode_label(mode, approval));
        }
        assert_eq!(seen, ["plan", "edits", "auto", "plan"]);
        assert_eq!(ModeChoice::parse("plan"), Ok(ModeChoice::Plan));
        assert_eq!(ModeChoice::parse("edits"), Ok(ModeChoice::Act(Edits)));
        assert!(ModeChoice::parse("yolo").unwrap_err().contains("plan"));
    }
}
