//! [`Surface`]: the combined reducer every surface reads.
//!
//! Its durable part ([`Durable`]) is a pure function of the ordered event
//! log, so a surface that watched a session live and one that replayed the
//! log after a restart hold equal values. Its transient part (streamed
//! text, reasoning and retry signals, the last `/context` report) exists
//! only while a live process feeds it.

use crate::activity::{Activity, Delta, Phase, Transient};
use crate::children::Children;
use crate::slots::{GroupView, PermissionPrompt};
use crate::transcript::Transcript;
use crate::usage::Usage;
use latch_engine_sdk::types::{CanonicalState, ContextReport, Part};
use latch_kernel::group::{GroupState, present};
use latch_kernel::{EventKind, KernelState, StoredEvent};

/// What a reason says when a run found open in the log has no live process
/// behind it.
pub const UNFINISHED_REASON: &str = "the run stopped before it finished (no live process)";

/// The durable part of a surface: a pure function of the event log.
#[derive(Clone, Debug, PartialEq)]
pub struct Durable {
    /// The session shown.
    pub session: String,
    /// The last event applied.
    pub watermark: u64,
    /// The session's own events applied.
    pub own_events: u64,
    /// The transcript.
    pub transcript: Transcript,
    /// The canonical task state, as the kernel reduces it (goal,
    /// constraints, decisions, hypotheses with rejected ones, evidence with
    /// stale marks, failure lineages, disproofs, ...).
    pub task: CanonicalState,
    /// The workspace generation.
    pub generation: u64,
    /// Provider-reported usage.
    pub usage: Usage,
    /// The run/request/tool phase.
    pub phase: Phase,
    /// Tool calls without a result: `(call id, tool)`.
    pub open_calls: Vec<(String, String)>,
    /// Child agents.
    pub children: Children,
    /// The GROUP block, reduced from the group events of the session's
    /// log (see [`crate::slots`]).
    pub group: Option<GroupView>,
    /// The permission request waiting for a decision, from the session's
    /// `permission_requested` event until its decision or the call's
    /// result commits.
    pub permission: Option<PermissionPrompt>,
    /// The task state's actions as a checklist (the plan).
    pub checklist: latch_kernel::Checklist,
    /// The session's mode as its latest profile records it: `plan`, or the
    /// approval mode's short name (`edits`, `auto`, `ask`, `never ask`);
    /// empty before a profile.
    pub mode: String,
}

/// The label of a session's mode on every surface: `plan` in plan mode,
/// else the approval mode's short name (`auto` for `on-request`, `ask`
/// for `untrusted`).
pub fn mode_label(approval: &str, mode: latch_kernel::SessionMode) -> &'static str {
    if mode.is_plan() {
        return "plan";
    }
    match approval {
        "edits" => "edits",
        "on-request" => "auto",
        "untrusted" => "ask",
        "never" => "never ask",
        _ => "",
    }
}

/// The shared semantic reducer of one session.
#[derive(Clone, Debug)]
pub struct Surface {
    durable: Durable,
    kernel: KernelState,
    /// The group of which the session is the lead (its group events).
    groups: GroupState,
    transient: Transient,
    /// Set when a live process drives the session: phases opened after this
    /// sequence number are live, earlier ones are not.
    live_since: Option<u64>,
    report: Option<ContextReport>,
}

impl Surface {
    /// The empty surface of `session`.
    pub fn new(session: impl Into<String>) -> Surface {
        let session = session.into();
        let kernel = KernelState::new(session.clone());
        Surface {
            durable: Durable {
                session,
                watermark: 0,
                own_events: 0,
                transcript: Transcript::default(),
                task: kernel.canonical(),
                generation: 0,
                usage: Usage::default(),
                phase: Phase::Idle,
                open_calls: Vec::new(),
                children: Children::default(),
                group: None,
                permission: None,
                checklist: latch_kernel::Checklist::default(),
                mode: String::new(),
            },
            kernel,
            groups: GroupState::default(),
            transient: Transient::default(),
            live_since: None,
            report: None,
        }
    }

    /// The surface of `session` rebuilt from its log (what a restart shows).
    pub fn replay<'a>(
        session: impl Into<String>,
        events: impl IntoIterator<Item = &'a StoredEvent>,
    ) -> Surface {
        let mut s = Surface::new(session);
        for e in events {
            s.apply(e);
        }
        s
    }

    /// Apply the next durable event: one of the session's own, a
    /// workspace-wide event of another session, or an event of one of its
    /// children. Events at or below the watermark are ignored (applying a
    /// page twice is harmless); events of unknown sessions only reach the
    /// kernel reducer, which ignores what is not workspace-wide. Returns
    /// true when the event was new.
    pub fn apply(&mut self, e: &StoredEvent) -> bool {
        let d = &mut self.durable;
        if e.seq <= d.watermark {
            return false;
        }
        d.watermark = e.seq;
        let before = self.kernel.generation();
        if self.kernel.apply(e) || self.kernel.generation() != before {
            d.task = self.kernel.canonical();
        }
        d.generation = self.kernel.generation();
        if e.session == d.session {
            d.own_events += 1;
            d.transcript.apply(e.seq, &e.kind);
            d.usage.apply(e.seq, &e.kind);
            d.children.apply_parent(e.seq, &e.kind);
            phase(d, e.seq, &e.kind);
            permission(d, e.seq, &e.kind);
            d.checklist.apply(&e.kind);
            if let EventKind::SessionProfile(p) = &e.kind {
                d.mode = mode_label(&p.approval, p.mode).to_string();
            }
            if let EventKind::Group(_) = &e.kind {
                self.groups.apply(e);
                d.group = GroupView::from_present(&present::view(&self.groups));
            }
            if matches!(
                e.kind,
                EventKind::AssistantMessage { .. }
                    | EventKind::RunFinished { .. }
                    | EventKind::RunInterrupted { .. }
            ) {
                // The committed message replaces what was streamed.
                self.transient = Transient::default();
            }
        } else if d.children.contains(&e.session) {
            d.children.apply_child(&e.session, &e.kind);
        }
        true
    }

    /// Apply a transient signal. It never changes a committed item.
    pub fn delta(&mut self, d: Delta) {
        self.transient.delta(d);
    }

    /// Mark the surface as driven by a live process from now on: phases the
    /// log opens after this point are shown live; those already open stay
    /// interrupted.
    pub fn go_live(&mut self) {
        self.live_since = Some(self.durable.watermark);
    }

    /// Keep the latest `/context` report (context figures for the sidebar).
    pub fn set_report(&mut self, report: ContextReport) {
        self.report = Some(report);
    }

    /// Fill (or clear) the GROUP block (for a session whose group lives in
    /// another session's log: a child's group is its root's).
    pub fn set_group(&mut self, group: Option<GroupView>) {
        self.durable.group = group;
    }

    /// Show (or clear) a permission prompt by hand (the log's own requests
    /// fill it as they commit).
    pub fn set_permission(&mut self, prompt: Option<PermissionPrompt>) {
        self.durable.permission = prompt;
    }

    /// The durable state.
    pub fn durable(&self) -> &Durable {
        &self.durable
    }

    /// Streamed text not committed yet (empty when none).
    pub fn streaming(&self) -> &str {
        &self.transient.streaming
    }

    /// The latest `/context` report, if one was set.
    pub fn report(&self) -> Option<&ContextReport> {
        self.report.as_ref()
    }

    /// True when the open run (if any) is driven by the live process.
    pub fn run_is_live(&self) -> bool {
        match (self.durable.phase.open_run(), self.live_since) {
            (Some(run), Some(since)) => run > since,
            _ => false,
        }
    }

    /// The permission request a live process is waiting on: the pending
    /// one, when it was asked after the surface went live (a request found
    /// open in the log has nobody waiting on it; resuming denies it). A
    /// prompt set by hand (sequence number 0) counts as live.
    pub fn live_permission(&self) -> Option<&PermissionPrompt> {
        self.durable
            .permission
            .as_ref()
            .filter(|p| p.seq == 0 || self.live_since.is_some_and(|since| p.seq > since))
    }

    /// What the session is doing now, for a status line.
    pub fn activity(&self) -> Activity {
        if let Some(p) = self.live_permission() {
            return Activity::AwaitingPermission(p.tool.clone());
        }
        match &self.durable.phase {
            Phase::Idle => Activity::Idle,
            Phase::Interrupted { reason } => Activity::Interrupted(reason.clone()),
            _ if !self.run_is_live() => Activity::Interrupted(UNFINISHED_REASON.into()),
            Phase::Tools { names, .. } => Activity::RunningTools(names.clone()),
            Phase::Requesting { .. } => {
                let t = &self.transient;
                if let Some((attempt, reason)) = &t.retry {
                    Activity::Retrying {
                        attempt: *attempt,
                        reason: reason.clone(),
                    }
                } else if !t.streaming.is_empty() {
                    Activity::Streaming
                } else if t.reasoning {
                    Activity::Reasoning
                } else {
                    Activity::Waiting
                }
            }
        }
    }
}

/// The lifecycle phase after one of the session's own events.
fn phase(d: &mut Durable, seq: u64, event: &EventKind) {
    let run = d.phase.open_run();
    match event {
        EventKind::RunStarted { .. } => {
            d.open_calls.clear();
            d.phase = Phase::Requesting { run: seq };
        }
        EventKind::RunFinished { .. } => {
            d.open_calls.clear();
            d.phase = Phase::Idle;
        }
        EventKind::RunInterrupted { reason } => {
            d.open_calls.clear();
            d.phase = Phase::Interrupted {
                reason: reason.clone(),
            };
        }
        EventKind::AssistantMessage { parts } => {
            d.open_calls = parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall(c) => Some((c.id.clone(), c.name.clone())),
                    _ => None,
                })
                .collect();
            if let Some(run) = run {
                d.phase = tools_or_request(run, &d.open_calls);
            }
        }
        EventKind::ToolResult(r) => {
            d.open_calls.retain(|(id, _)| id != &r.call_id);
            if let Some(run) = run {
                d.phase = tools_or_request(run, &d.open_calls);
            }
        }
        _ => {}
    }
}

/// The permission prompt after one of the session's own events: a request
/// opens it; its decision, the call's result or the run's end closes it.
fn permission(d: &mut Durable, seq: u64, event: &EventKind) {
    let open = d.permission.as_ref().map(|p| p.call_id.clone());
    let closes = |call: &str| open.as_deref() == Some(call);
    match event {
        EventKind::PermissionRequested(r) => {
            d.permission = Some(PermissionPrompt::from_request(seq, r));
        }
        EventKind::PermissionGranted { call_id, .. }
        | EventKind::PermissionDenied { call_id, .. }
            if closes(call_id) =>
        {
            d.permission = None;
        }
        EventKind::ToolResult(r) if closes(&r.call_id) => d.permission = None,
        EventKind::RunFinished { .. } | EventKind::RunInterrupted { .. } => d.permission = None,
        _ => {}
    }
}

fn tools_or_request(run: u64, open: &[(String, String)]) -> Phase {
    if open.is_empty() {
        Phase::Requesting { run }
    } else {
        Phase::Tools {
            run,
            names: open.iter().map(|(_, n)| n.clone()).collect(),
        }
    }
}
