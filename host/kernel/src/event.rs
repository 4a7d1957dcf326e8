//! The durable event model: every fact the agent loop records about a session,
//! as [`EventKind`], and its projection into the engine contract
//! ([`EventKind::to_sdk_body`]).
//!
//! An event is stored as a row whose `kind` column is [`EventKind::kind_name`] and
//! whose body is the JSON of the whole [`EventKind`] (`{"kind": ..., "data": ...}`).
//! Decoding a row whose kind this build does not know fails loudly with
//! [`EventDecodeError::UnknownKind`] instead of guessing.

use latch_engine_sdk::types::{
    EventBody, KernelContextEntry, KernelNote, KernelNoteKind, Part, ToolResult,
};
use serde::{Deserialize, Serialize};

/// A kernel-context entry as stored: the entry and the engine that wrote it.
/// An engine is given only its own entries written since the last entry of
/// another engine (see `StoreSessionView::for_engine`), so one engine's text
/// never reaches another as authoritative.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextRecord {
    /// The writing engine's configured name; empty for entries stored before
    /// engines were recorded (those are no engine's).
    #[serde(default)]
    pub engine: String,
    /// The entry.
    #[serde(flatten)]
    pub entry: KernelContextEntry,
}

impl std::ops::Deref for ContextRecord {
    type Target = KernelContextEntry;
    fn deref(&self) -> &KernelContextEntry {
        &self.entry
    }
}

/// The outcome of a validation command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The proving command succeeded.
    Passed,
    /// The proving command failed.
    Failed,
}

impl Outcome {
    /// The contract's outcome value.
    pub fn to_sdk(self) -> latch_engine_sdk::types::ValidationOutcome {
        match self {
            Outcome::Passed => latch_engine_sdk::types::ValidationOutcome::Passed,
            Outcome::Failed => latch_engine_sdk::types::ValidationOutcome::Failed,
        }
    }

    /// `passed` or `failed`.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
        }
    }
}

/// The outcome of a certification attempt (the `complete` tool).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CertificationOutcome {
    /// Every required validation has a Passed entry for the current generation
    /// and nothing blocks completion.
    Certified,
    /// Completion was refused; the event lists the blockers.
    Refused,
}

/// A typed change of the canonical task state, emitted by the task-state tools.
///
/// Texts are compared exactly (after trimming): adding an entry that already
/// exists changes nothing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum StateOp {
    /// Set (or replace) the goal.
    SetGoal {
        /// The goal.
        text: String,
    },
    /// Add a constraint.
    AddConstraint {
        /// The constraint.
        text: String,
    },
    /// Record a decision.
    RecordDecision {
        /// The decision.
        text: String,
    },
    /// Replace an earlier decision, so the old one never stays ambiguously
    /// current. When `previous` is unknown the new decision is simply added.
    ReviseDecision {
        /// The exact text of the decision being replaced.
        previous: String,
        /// The decision that replaces it.
        text: String,
    },
    /// Add an active hypothesis. A hypothesis rejected earlier stays rejected.
    AddHypothesis {
        /// The hypothesis.
        text: String,
    },
    /// Reject a hypothesis (adding it as rejected if it was never recorded).
    RejectHypothesis {
        /// The hypothesis.
        text: String,
        /// Why it was rejected.
        reason: String,
    },
    /// Add an open question.
    AddQuestion {
        /// The question.
        text: String,
    },
    /// Resolve an open question (it leaves the open list).
    ResolveQuestion {
        /// The exact question.
        text: String,
        /// The answer, when there is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
    },
    /// Add a next action.
    AddAction {
        /// The action.
        text: String,
    },
    /// Complete a next action (it leaves the list).
    CompleteAction {
        /// The exact action.
        text: String,
    },
    /// Add a completion criterion.
    AddCriterion {
        /// The criterion.
        text: String,
    },
    /// Add a note (lowest priority memory).
    AddNote {
        /// The note.
        text: String,
    },
    /// Require a validation before completion can be certified.
    RequireValidation {
        /// The exact requirement string validations must name.
        requirement: String,
    },
    /// Record a durable disproof: a failure that was understood and closed.
    ///
    /// Disproofs are workspace-wide: every session on the same workspace
    /// (later sessions, siblings and children) sees them in canonical state.
    RecordDisproof {
        /// What looked like a problem.
        summary: String,
        /// Why it is not a real problem.
        reason: String,
        /// The failure lineage key this closes in the recording session, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lineage: Option<String>,
    },
}

impl StateOp {
    /// One-line summary for the kernel note and recall.
    pub fn summary(&self) -> String {
        match self {
            StateOp::SetGoal { text } => format!("goal: {text}"),
            StateOp::AddConstraint { text } => format!("constraint: {text}"),
            StateOp::RecordDecision { text } => format!("decision: {text}"),
            StateOp::ReviseDecision { previous, text } => {
                format!("decision revised: {text} (was: {previous})")
            }
            StateOp::AddHypothesis { text } => format!("hypothesis: {text}"),
            StateOp::RejectHypothesis { text, reason } => {
                format!("hypothesis rejected: {text} (because {reason})")
            }
            StateOp::AddQuestion { text } => format!("question: {text}"),
            StateOp::ResolveQuestion { text, answer } => match answer {
                Some(a) => format!("question resolved: {text} -> {a}"),
                None => format!("question resolved: {text}"),
            },
            StateOp::AddAction { text } => format!("action: {text}"),
            StateOp::CompleteAction { text } => format!("action completed: {text}"),
            StateOp::AddCriterion { text } => format!("criterion: {text}"),
            StateOp::AddNote { text } => format!("note: {text}"),
            StateOp::RequireValidation { requirement } => {
                format!("validation required: {requirement}")
            }
            StateOp::RecordDisproof {
                summary, reason, ..
            } => format!("disproof: {summary} (not a real problem because {reason})"),
        }
    }
}

/// One durable event of a session.
///
/// Serialized adjacently tagged (`{"kind": "...", "data": ...}`); the `kind`
/// column of the row repeats [`EventKind::kind_name`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum EventKind {
    /// User input: text and images (images by [`latch_engine_sdk::types::MediaRef`]).
    UserMessage {
        /// Typed parts in order.
        parts: Vec<Part>,
    },
    /// A committed assistant message: text and tool calls.
    AssistantMessage {
        /// Typed parts in order.
        parts: Vec<Part>,
    },
    /// The bounded result of one tool call (`is_error` marks a failed call).
    ToolResult(ToolResult),
    /// Kernel context persisted from an engine's view before the request,
    /// tagged with the engine that wrote it.
    KernelContext(ContextRecord),
    /// A semantic notification delivered at a safe model boundary (a child's
    /// report, a group message). Durable dedupe marker for the delivery.
    NotificationDelivered {
        /// Where it came from (a child session id, a group member).
        source: String,
        /// The provider-visible text.
        text: String,
    },
    /// `/compact`: the user reset working memory.
    ManualCompact,
    /// A typed change of the canonical task state.
    StateUpdate(StateOp),
    /// A possible workspace mutation. Committed **before** it executes; it
    /// advances the workspace generation for every session of the workspace.
    Mutation {
        /// The tool (or MCP server/tool) that may mutate.
        source: String,
        /// Workspace-relative paths it writes, when known.
        paths: Vec<String>,
        /// The shell command, for shell mutations.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        /// True when the workspace fingerprint taken before and after the
        /// command found no change: the possible mutation is recorded, but
        /// the generation does not advance and no evidence goes stale.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unchanged: bool,
    },
    /// A command that may write the workspace is about to run in a git work
    /// tree (see [`crate::ops::run_possible_mutation`]). Committed **before**
    /// the command; the [`EventKind::Mutation`] of the same source and
    /// command committed after it settles it. One left unsettled (the
    /// process died mid-command) is settled on resume by a
    /// generation-advancing mutation: what the command changed is unknown.
    /// Hidden from engines.
    MutationPending {
        /// The tool (or MCP server/tool) that may mutate.
        source: String,
        /// The command, for shell and validation commands.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        /// The git tree of the workspace's content just before the command
        /// (objects in Latch's own snapshot directory, see
        /// [`crate::snapshot`]), so a resume can checkpoint what the killed
        /// command changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        snapshot: Option<String>,
    },
    /// What a Latch write replaced: the file's bytes just before the write,
    /// kept as an artifact so [`crate::checkpoint`] can restore them. Hidden
    /// from engines.
    Checkpoint {
        /// Workspace-relative path.
        path: String,
        /// SHA-256 of the artifact holding the previous bytes; `None` when
        /// the file did not exist.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<String>,
        /// For a checkpoint recorded after a command changed the file (a
        /// shell command, seen by the workspace fingerprint): what the
        /// command left there, so a rewind can tell a later change made
        /// outside Latch. Absent for Latch's own writes, which observe the
        /// file they wrote.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<LeftBehind>,
    },
    /// `rewind`: files restored to their state before the user message
    /// `to_seq`. Preceded by the [`EventKind::Mutation`] that advances the
    /// workspace generation.
    Rewound {
        /// Sequence number of the user message the files went back before.
        to_seq: u64,
        /// Files written back.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        restored: Vec<String>,
        /// Files removed (they did not exist then).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        removed: Vec<String>,
        /// Files left alone: changed outside Latch since it last wrote them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        conflicts: Vec<String>,
    },
    /// The session observed a file (after reading or writing it).
    FileObserved {
        /// Workspace-relative path.
        path: String,
        /// SHA-256 of the whole file; only for files within
        /// [`crate::FILE_HASH_MAX_BYTES`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
        /// Size in bytes.
        size: u64,
    },
    /// A guarded write found the file changed since the session last saw it;
    /// the write was rejected. Advances the workspace generation.
    ExternalChange {
        /// Workspace-relative path.
        path: String,
        /// The hash the session last observed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected_sha256: Option<String>,
        /// The hash on disk just before the write (none when the file is gone).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actual_sha256: Option<String>,
    },
    /// A validation set: one observation per exact requirement, all proven by
    /// the same command at the same workspace generation.
    Validation {
        /// The exact requirements this command proves.
        requirements: Vec<String>,
        /// The proving command.
        command: String,
        /// What happened.
        outcome: Outcome,
        /// The command's exit code, when it exited normally.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// A bounded excerpt of the output (diagnostics).
        output: String,
        /// The workspace generation the command checked.
        generation: u64,
    },
    /// A managed background process started.
    ProcessStarted {
        /// Kernel-assigned process id (unique within the session).
        id: String,
        /// The command line.
        command: String,
    },
    /// A managed background process exited (committed on its natural exit,
    /// without anyone polling).
    ProcessExited {
        /// The id from [`EventKind::ProcessStarted`].
        id: String,
        /// Exit code, or none when killed by a signal.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// A bounded tail of its output.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        output_tail: String,
    },
    /// The model asked to complete; the kernel certified or refused.
    CertificationAttempt {
        /// Certified or refused.
        outcome: CertificationOutcome,
        /// Why it was refused (stable, sorted strings); empty when certified.
        blockers: Vec<String>,
        /// The workspace generation at the attempt.
        generation: u64,
    },
    /// The kernel asks the model to re-ground: certification was refused
    /// twice in a row, or a failure lineage repeated. Engines see it as a
    /// [`KernelNoteKind::Reground`] note (their re-ground instruction and
    /// episode marker); appended by the agent loop at a safe boundary when
    /// [`crate::KernelState::reground_due`] names one.
    Reground {
        /// What repeats, for the model (the lineage's summary and count).
        reason: String,
        /// The key of the streak it answers (a failure lineage key, or
        /// [`crate::REFUSALS_IN_A_ROW`]).
        lineage: String,
        /// The streak's length when the note was appended.
        count: u32,
    },
    /// A tool call was denied by policy (the model also sees an error result).
    ToolDenied {
        /// The tool.
        tool: String,
        /// The call id, when the denial answers a call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// Why.
        reason: String,
    },
    /// A configured hook ran (see `[hooks]` in the config). Hidden from
    /// engines: a `pre_tool` hook's denial reaches the model as the call's
    /// result.
    HookRan {
        /// When it ran: `session_start`, `user_message`, `pre_tool`,
        /// `post_tool` or `turn_end`.
        hook: String,
        /// The command line.
        command: String,
        /// The tool, for `pre_tool` and `post_tool`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        /// The call id, for `pre_tool` and `post_tool`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// Exit code; none when it was killed (timeout, signal) or could
        /// not start.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// A bounded part of its combined output.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        output: String,
        /// True when it denied the tool call (`pre_tool`, non-zero exit).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        denied: bool,
    },
    /// Provider-reported usage of one request (authoritative over estimates).
    /// Every figure is stored as reported; a figure the provider did not
    /// report is `None`, never 0 (logs written before that stored 0 for an
    /// unreported input or output and still read).
    ProviderUsage {
        /// Input tokens (all of them, cached or not).
        #[serde(default)]
        input_tokens: Option<u64>,
        /// Output tokens.
        #[serde(default)]
        output_tokens: Option<u64>,
        /// Tokens read from the provider's prompt cache.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_read_tokens: Option<u64>,
        /// Tokens written to the provider's prompt cache.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_creation_tokens: Option<u64>,
        /// Tokens the provider reported as cache misses.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_miss_tokens: Option<u64>,
        /// Latch's estimate of the prefix shared with the previous request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        common_prefix_tokens: Option<u64>,
        /// Output tokens spent reasoning, when the provider said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_tokens: Option<u64>,
        /// Latch's estimate of the same request's input (the view's total),
        /// the other half of the calibration ratio.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        estimated_input_tokens: Option<u64>,
        /// The provider (`anthropic`, `openai`, ...) that reported it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        /// The model the request was for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The base URL of the server that answered (two servers under one
        /// model name count differently); absent in logs written before it
        /// was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_url: Option<String>,
    },
    /// A child agent session was spawned from this session, with its
    /// durable profile. Hidden from engines (see
    /// [`EventKind::hidden_from_engines`]).
    ChildSpawned {
        /// The child's session id.
        child: String,
        /// Its role, e.g. `reviewer`.
        role: String,
        /// The task it was given.
        #[serde(default)]
        task: String,
        /// The model it runs.
        #[serde(default)]
        model: String,
        /// The engine it was built with.
        #[serde(default)]
        engine: String,
        /// The engine's effective configuration (JSON).
        #[serde(default)]
        engine_config: String,
    },
    /// An interrupted child was resumed (in the parent's session; hidden).
    AgentResumed {
        /// The child's session id.
        child: String,
    },
    /// A child's run ended: the host's report (in the child's session;
    /// hidden).
    AgentReport(crate::agents::AgentReport),
    /// A child's report delivered to the parent at a safe model boundary:
    /// provider-visible, and the durable dedupe marker of the delivery.
    AgentNotificationDelivered {
        /// The child's session id.
        child: String,
        /// The sequence number of the delivered [`EventKind::AgentReport`].
        report_seq: u64,
        /// The provider-visible text.
        text: String,
    },
    /// A child's report handed to the parent in a `wait_agents` result: the
    /// dedupe marker only (the result carries the text; hidden).
    AgentReportReceived {
        /// The child's session id.
        child: String,
        /// The sequence number of the [`EventKind::AgentReport`].
        report_seq: u64,
    },
    /// The parent queued information for a child (hidden).
    AgentMessageQueued {
        /// The child's session id.
        child: String,
        /// The text.
        text: String,
    },
    /// A queued message delivered to the child at its safe boundary (in the
    /// child's session): provider-visible and the dedupe marker.
    AgentMessageDelivered {
        /// The sequence number of the [`EventKind::AgentMessageQueued`].
        message_seq: u64,
        /// The provider-visible text.
        text: String,
    },
    /// A run (one turn loop) started.
    RunStarted {
        /// The interaction mode, e.g. `interactive` or `run`.
        mode: String,
        /// The session context of this run, recorded when the session's
        /// first run starts and whenever it changed since the last recorded
        /// one. The first recorded context is the one every request carries,
        /// so the first provider-visible message never changes on resume.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<latch_engine_sdk::types::SessionContext>,
    },
    /// A run finished normally.
    RunFinished {
        /// How it ended, e.g. `completed`, `stopped`.
        outcome: String,
    },
    /// A run was interrupted (cancelled, crashed, or found unfinished on resume).
    RunInterrupted {
        /// Why.
        reason: String,
    },
    /// The session was deleted from history: listing and resume omit it and
    /// its children; its events remain.
    Tombstone {
        /// The tombstoned session (the session this event is appended to).
        session: String,
    },
    /// A tool call waits for the user's approval (committed before anyone
    /// is asked): the command or the edit's diff, and why.
    PermissionRequested(crate::permission::PermissionRequest),
    /// A permission request was granted; the call runs next.
    PermissionGranted {
        /// The tool call.
        call_id: String,
        /// The tool.
        tool: String,
        /// The command or path granted.
        subject: String,
        /// Who decided.
        by: crate::permission::DecidedBy,
        /// This call, or "always for this session".
        scope: crate::permission::GrantScope,
        /// The key a session grant remembers (empty for a one-off grant).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        key: String,
    },
    /// A permission request was denied; the call's result says so.
    PermissionDenied {
        /// The tool call.
        call_id: String,
        /// The tool.
        tool: String,
        /// The command or path denied.
        subject: String,
        /// Who decided.
        by: crate::permission::DecidedBy,
        /// Why (what the model is told).
        reason: String,
    },
    /// Opaque provider state of the assistant message committed just before
    /// it, in the same batch (its sequence number is this one's minus one):
    /// signed thinking blocks or encrypted reasoning items the provider
    /// requires back unchanged. Hidden from engines and never indexed for
    /// search (see [`ENGINE_HIDDEN_KINDS`]); only the host replays it.
    ProviderState(OpaqueState),
    /// An agent-group fact (task, claim, membership, message, delivery
    /// marker) in the group's root session. Hidden from engines; checked
    /// and appended through [`crate::group::GroupPort`].
    Group(crate::group::GroupEvent),
    /// A group message delivered at the recipient's safe boundary, in the
    /// recipient's own session (its marker is in the root's, committed in
    /// the same transaction): one provider-visible, information-only
    /// observation.
    GroupMessageDelivered {
        /// The message id (the sequence number of its `MessageQueued`).
        message_seq: u64,
        /// The sender's session id.
        from: String,
        /// The provider-visible text.
        text: String,
    },
    /// What the session runs with (provider, base URL, model, approval and
    /// sandbox modes), recorded at creation and whenever a resume changes
    /// it, with the changes. Hidden from engines: host bookkeeping that
    /// surfaces show (see [`crate::profile`]).
    SessionProfile(crate::profile::SessionProfile),
}

/// What a command left at a checkpointed path (see [`EventKind::Checkpoint`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeftBehind {
    /// The file's bytes after the command, by SHA-256.
    Written(String),
    /// The command removed the file.
    Removed,
    /// A symbolic link, a directory or another non-file now stands where
    /// the file was (or a link lies on the way to it): Latch never reads
    /// through it, and a rewind leaves it alone and names it.
    NotAFile,
}

/// Opaque provider state as stored (see [`EventKind::ProviderState`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpaqueState {
    /// The wire format that produced it (`anthropic`, `openai-responses`,
    /// `openai-chat`).
    pub wire: String,
    /// The blocks, in the order the provider sent them.
    pub blocks: Vec<OpaqueBlock>,
    /// The provider's own ids of the message's calls whose stored id Latch
    /// chose instead (the provider's was missing or already used in the
    /// session); absent when every call kept the provider's id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub call_ids: Vec<ProviderCallId>,
}

/// A tool call's session-unique id beside the id its provider issued.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderCallId {
    /// The id the call is stored with (what engines and results see).
    pub call: String,
    /// The id the provider issued (`""`: it issued none).
    pub provider: String,
}

/// One opaque block: its exact JSON text and where it sat among the
/// assistant message's visible parts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpaqueBlock {
    /// How many visible parts came before it.
    pub before_part: usize,
    /// The block's exact JSON text (never read by Latch).
    pub json: String,
}

/// Every kind name this build can decode, in declaration order.
pub const KNOWN_KINDS: &[&str] = &[
    "user_message",
    "assistant_message",
    "tool_result",
    "kernel_context",
    "notification_delivered",
    "manual_compact",
    "state_update",
    "mutation",
    "file_observed",
    "external_change",
    "validation",
    "process_started",
    "process_exited",
    "certification_attempt",
    "reground",
    "tool_denied",
    "provider_usage",
    "child_spawned",
    "agent_resumed",
    "agent_report",
    "agent_notification_delivered",
    "agent_report_received",
    "agent_message_queued",
    "agent_message_delivered",
    "run_started",
    "run_finished",
    "run_interrupted",
    "tombstone",
    "permission_requested",
    "permission_granted",
    "permission_denied",
    "provider_state",
    "group",
    "group_message_delivered",
    "session_profile",
    "hook_ran",
    "checkpoint",
    "rewound",
    "mutation_pending",
];

/// The kinds hidden from engines, from recent context, from recall and from
/// the search index: the child-lifecycle kinds (deliveries,
/// [`EventKind::AgentNotificationDelivered`] and
/// [`EventKind::AgentMessageDelivered`], are the semantic, visible part) and
/// opaque provider state ([`EventKind::ProviderState`]), which only the host
/// replays to the provider. Group coordination events are hidden the same
/// way; a delivered group message ([`EventKind::GroupMessageDelivered`]) is
/// visible.
pub const ENGINE_HIDDEN_KINDS: &[&str] = &[
    "child_spawned",
    "agent_resumed",
    "agent_report",
    "agent_report_received",
    "agent_message_queued",
    "provider_state",
    "group",
    "session_profile",
    "hook_ran",
    "checkpoint",
    "mutation_pending",
];

/// Why a stored event could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum EventDecodeError {
    /// The row's kind is not one this build knows (written by a newer Latch?).
    #[error(
        "event {seq} has kind `{kind}`, which this version of Latch does not know \
         (known kinds: {known})",
        known = KNOWN_KINDS.join(", ")
    )]
    UnknownKind {
        /// The event's sequence number.
        seq: u64,
        /// The unknown kind.
        kind: String,
    },
    /// The body is not valid JSON for its kind.
    #[error("event {seq} (kind `{kind}`) has a malformed body: {source}")]
    Malformed {
        /// The event's sequence number.
        seq: u64,
        /// The row's kind.
        kind: String,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// The body's own tag disagrees with the row's kind column.
    #[error("event {seq} is stored as kind `{column}` but its body says `{body}`")]
    KindMismatch {
        /// The event's sequence number.
        seq: u64,
        /// The kind column.
        column: String,
        /// The body's tag.
        body: String,
    },
}

impl EventKind {
    /// The stable snake-case name stored in the `kind` column.
    pub fn kind_name(&self) -> &'static str {
        match self {
            EventKind::UserMessage { .. } => "user_message",
            EventKind::AssistantMessage { .. } => "assistant_message",
            EventKind::ToolResult(_) => "tool_result",
            EventKind::KernelContext(_) => "kernel_context",
            EventKind::NotificationDelivered { .. } => "notification_delivered",
            EventKind::ManualCompact => "manual_compact",
            EventKind::StateUpdate(_) => "state_update",
            EventKind::Mutation { .. } => "mutation",
            EventKind::MutationPending { .. } => "mutation_pending",
            EventKind::FileObserved { .. } => "file_observed",
            EventKind::Checkpoint { .. } => "checkpoint",
            EventKind::Rewound { .. } => "rewound",
            EventKind::ExternalChange { .. } => "external_change",
            EventKind::Validation { .. } => "validation",
            EventKind::ProcessStarted { .. } => "process_started",
            EventKind::ProcessExited { .. } => "process_exited",
            EventKind::CertificationAttempt { .. } => "certification_attempt",
            EventKind::Reground { .. } => "reground",
            EventKind::ToolDenied { .. } => "tool_denied",
            EventKind::HookRan { .. } => "hook_ran",
            EventKind::ProviderUsage { .. } => "provider_usage",
            EventKind::ChildSpawned { .. } => "child_spawned",
            EventKind::AgentResumed { .. } => "agent_resumed",
            EventKind::AgentReport(_) => "agent_report",
            EventKind::AgentNotificationDelivered { .. } => "agent_notification_delivered",
            EventKind::AgentReportReceived { .. } => "agent_report_received",
            EventKind::AgentMessageQueued { .. } => "agent_message_queued",
            EventKind::AgentMessageDelivered { .. } => "agent_message_delivered",
            EventKind::RunStarted { .. } => "run_started",
            EventKind::RunFinished { .. } => "run_finished",
            EventKind::RunInterrupted { .. } => "run_interrupted",
            EventKind::Tombstone { .. } => "tombstone",
            EventKind::PermissionRequested(_) => "permission_requested",
            EventKind::PermissionGranted { .. } => "permission_granted",
            EventKind::PermissionDenied { .. } => "permission_denied",
            EventKind::ProviderState(_) => "provider_state",
            EventKind::Group(_) => "group",
            EventKind::GroupMessageDelivered { .. } => "group_message_delivered",
            EventKind::SessionProfile(_) => "session_profile",
        }
    }

    /// True for the asynchronous child-lifecycle kinds, which engines never
    /// see: the store leaves them out of every session-view read and of the
    /// search index (see [`ENGINE_HIDDEN_KINDS`]).
    pub fn hidden_from_engines(&self) -> bool {
        ENGINE_HIDDEN_KINDS.contains(&self.kind_name())
    }

    /// True for events that advance the workspace generation (a possible
    /// mutation, or a change found on disk).
    pub fn advances_generation(&self) -> bool {
        matches!(
            self,
            EventKind::Mutation {
                unchanged: false,
                ..
            } | EventKind::ExternalChange { .. }
        )
    }

    /// True for events that matter to every session of the workspace, not
    /// only their own: generation advances and durable disproofs.
    pub fn is_workspace_wide(&self) -> bool {
        self.advances_generation()
            || matches!(self, EventKind::StateUpdate(StateOp::RecordDisproof { .. }))
    }

    /// A file observation of `content` at `path`: the SHA-256 is recorded only
    /// when the file is within [`crate::FILE_HASH_MAX_BYTES`].
    pub fn file_observed(path: impl Into<String>, content: &[u8]) -> EventKind {
        let size = content.len() as u64;
        let sha256 = (content.len() <= crate::FILE_HASH_MAX_BYTES).then(|| sha256_hex(content));
        EventKind::FileObserved {
            path: path.into(),
            sha256,
            size,
        }
    }

    /// Kernel context written by `engine` (its configured name, e.g.
    /// `builtin:continuity` or a component path).
    pub fn kernel_context(engine: &str, entry: KernelContextEntry) -> EventKind {
        EventKind::KernelContext(ContextRecord {
            engine: engine.to_string(),
            entry,
        })
    }

    /// The engine that wrote a kernel-context event (`None` for every other
    /// kind, and for entries stored before engines were recorded).
    pub fn author(&self) -> Option<&str> {
        match self {
            EventKind::KernelContext(k) if !k.engine.is_empty() => Some(&k.engine),
            _ => None,
        }
    }

    /// A user text message.
    pub fn user_text(text: impl Into<String>) -> EventKind {
        EventKind::UserMessage {
            parts: vec![Part::Text(text.into())],
        }
    }

    /// An assistant text message.
    pub fn assistant_text(text: impl Into<String>) -> EventKind {
        EventKind::AssistantMessage {
            parts: vec![Part::Text(text.into())],
        }
    }

    /// Encode as the JSON stored in the row.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("event kinds always serialize")
    }

    /// Decode a stored row (`kind` column and JSON body).
    pub fn from_row(seq: u64, kind: &str, json: &str) -> Result<EventKind, EventDecodeError> {
        if !KNOWN_KINDS.contains(&kind) {
            return Err(EventDecodeError::UnknownKind {
                seq,
                kind: kind.to_string(),
            });
        }
        let event: EventKind =
            serde_json::from_str(json).map_err(|source| EventDecodeError::Malformed {
                seq,
                kind: kind.to_string(),
                source,
            })?;
        if event.kind_name() != kind {
            return Err(EventDecodeError::KindMismatch {
                seq,
                column: kind.to_string(),
                body: event.kind_name().to_string(),
            });
        }
        Ok(event)
    }

    /// Project into the engine contract's [`EventBody`].
    ///
    /// Conversation, kernel context, notifications and `/compact` map directly;
    /// everything kernel-side becomes an [`EventBody::Kernel`] note whose kind
    /// engines use as an episode marker.
    pub fn to_sdk_body(&self) -> EventBody {
        let note = |kind: KernelNoteKind, summary: String, files: Vec<String>| {
            EventBody::Kernel(KernelNote {
                kind,
                summary,
                files,
            })
        };
        match self {
            EventKind::UserMessage { parts } => EventBody::UserMessage(parts.clone()),
            EventKind::AssistantMessage { parts } => EventBody::AssistantMessage(parts.clone()),
            EventKind::ToolResult(r) => EventBody::ToolResult(r.clone()),
            EventKind::KernelContext(k) => EventBody::KernelContext(k.entry.clone()),
            EventKind::NotificationDelivered { text, .. } => EventBody::Notification(text.clone()),
            EventKind::ManualCompact => EventBody::ManualCompact,
            EventKind::StateUpdate(op) => note(KernelNoteKind::StateUpdate, op.summary(), vec![]),
            EventKind::Mutation {
                source,
                paths,
                command,
                unchanged,
            } => {
                let summary = match command {
                    Some(c) if *unchanged => {
                        format!("possible mutation by {source} left the workspace unchanged: {c}")
                    }
                    Some(c) => format!("possible mutation by {source}: {c}"),
                    None => format!("mutation by {source}"),
                };
                note(KernelNoteKind::Mutation, summary, paths.clone())
            }
            EventKind::FileObserved { path, sha256, size } => {
                let summary = match sha256 {
                    Some(h) => format!("observed {path} ({size} bytes, sha256 {})", short(h)),
                    None => format!("observed {path} ({size} bytes, not hashed)"),
                };
                note(KernelNoteKind::Other, summary, vec![path.clone()])
            }
            EventKind::MutationPending {
                source, command, ..
            } => note(
                KernelNoteKind::Mutation,
                match command {
                    Some(c) => format!("{source} is about to run (may write): {c}"),
                    None => format!("{source} is about to run (may write)"),
                },
                vec![],
            ),
            EventKind::Checkpoint { path, before, .. } => note(
                KernelNoteKind::Other,
                match before {
                    Some(h) => format!("checkpoint of {path} (artifact {})", short(h)),
                    None => format!("checkpoint of {path} (did not exist)"),
                },
                vec![path.clone()],
            ),
            EventKind::Rewound {
                restored, removed, ..
            } => {
                let files = restored.iter().chain(removed).cloned().collect();
                let summary = crate::checkpoint::rewound_summary(self).unwrap_or_default();
                note(KernelNoteKind::ExternalChange, summary, files)
            }
            EventKind::ExternalChange {
                path,
                expected_sha256,
                actual_sha256,
            } => note(
                KernelNoteKind::ExternalChange,
                format!(
                    "{path} changed outside the session (expected {}, found {}); re-read it before editing",
                    expected_sha256.as_deref().map(short).unwrap_or("nothing"),
                    actual_sha256.as_deref().map(short).unwrap_or("no file"),
                ),
                vec![path.clone()],
            ),
            EventKind::Validation {
                requirements,
                command,
                outcome,
                exit_code,
                generation,
                ..
            } => {
                let kind = match outcome {
                    Outcome::Passed => KernelNoteKind::ValidationPassed,
                    Outcome::Failed => KernelNoteKind::ValidationFailed,
                };
                let exit = exit_code
                    .map(|c| format!("exit {c}"))
                    .unwrap_or_else(|| "no exit code".to_string());
                note(
                    kind,
                    format!(
                        "validation {}: {} via `{command}` ({exit}, generation {generation})",
                        outcome.label(),
                        requirements.join("; "),
                    ),
                    vec![],
                )
            }
            EventKind::ProcessStarted { id, command } => note(
                KernelNoteKind::Process,
                format!("process {id} started: {command}"),
                vec![],
            ),
            EventKind::ProcessExited { id, exit_code, .. } => note(
                KernelNoteKind::Process,
                match exit_code {
                    Some(c) => format!("process {id} exited with code {c}"),
                    None => format!("process {id} was killed by a signal"),
                },
                vec![],
            ),
            EventKind::CertificationAttempt {
                outcome, blockers, ..
            } => match outcome {
                CertificationOutcome::Certified => note(
                    KernelNoteKind::Evidence,
                    "completion certified".to_string(),
                    vec![],
                ),
                CertificationOutcome::Refused => note(
                    KernelNoteKind::Failure,
                    format!("completion refused: {}", blockers.join("; ")),
                    vec![],
                ),
            },
            EventKind::Reground { reason, .. } => {
                note(KernelNoteKind::Reground, reason.clone(), vec![])
            }
            EventKind::ToolDenied { tool, reason, .. } => note(
                KernelNoteKind::Failure,
                format!("{tool} denied: {reason}"),
                vec![],
            ),
            // Hidden from engines (see `ENGINE_HIDDEN_KINDS`); for recall.
            EventKind::HookRan {
                hook,
                command,
                exit_code,
                ..
            } => note(
                KernelNoteKind::Other,
                match exit_code {
                    Some(c) => format!("{hook} hook `{command}` exited with code {c}"),
                    None => format!("{hook} hook `{command}` did not finish"),
                },
                vec![],
            ),
            EventKind::ProviderUsage {
                input_tokens,
                output_tokens,
                cache_read_tokens,
                ..
            } => {
                let n = |v: &Option<u64>| v.map_or("unknown".to_string(), |v| v.to_string());
                note(
                    KernelNoteKind::Other,
                    match cache_read_tokens {
                        Some(r) => format!(
                            "provider usage: {} in, {} out, {r} cached",
                            n(input_tokens),
                            n(output_tokens)
                        ),
                        None => format!(
                            "provider usage: {} in, {} out",
                            n(input_tokens),
                            n(output_tokens)
                        ),
                    },
                    vec![],
                )
            }
            EventKind::ChildSpawned { child, role, .. } => note(
                KernelNoteKind::Other,
                format!("child agent {child} spawned as {role}"),
                vec![],
            ),
            EventKind::AgentResumed { child } => note(
                KernelNoteKind::Other,
                format!("child agent {child} resumed"),
                vec![],
            ),
            EventKind::AgentReport(r) => note(
                KernelNoteKind::Other,
                format!("agent report ({}): {}", r.outcome.label(), r.summary),
                r.files_changed.clone(),
            ),
            EventKind::AgentNotificationDelivered { text, .. }
            | EventKind::AgentMessageDelivered { text, .. } => {
                EventBody::Notification(text.clone())
            }
            EventKind::AgentReportReceived { child, .. } => note(
                KernelNoteKind::Other,
                format!("report of child agent {child} received"),
                vec![],
            ),
            EventKind::AgentMessageQueued { child, text } => note(
                KernelNoteKind::Other,
                format!("message queued for child agent {child}: {text}"),
                vec![],
            ),
            EventKind::RunStarted { mode, .. } => note(
                KernelNoteKind::Other,
                format!("run started ({mode})"),
                vec![],
            ),
            EventKind::RunFinished { outcome } => note(
                KernelNoteKind::Other,
                format!("run finished ({outcome})"),
                vec![],
            ),
            EventKind::RunInterrupted { reason } => note(
                KernelNoteKind::Other,
                format!("run interrupted: {reason}"),
                vec![],
            ),
            EventKind::Tombstone { session } => note(
                KernelNoteKind::Other,
                format!("session {session} deleted from history"),
                vec![],
            ),
            EventKind::PermissionRequested(r) => note(
                KernelNoteKind::Other,
                format!(
                    "permission requested for {} `{}`: {}",
                    r.tool,
                    r.subject(),
                    r.reason
                ),
                r.path.iter().cloned().collect(),
            ),
            EventKind::PermissionGranted {
                tool, subject, by, ..
            } => note(
                KernelNoteKind::Other,
                format!("{tool} `{subject}` granted by {}", by.label()),
                vec![],
            ),
            EventKind::PermissionDenied {
                tool,
                subject,
                by,
                reason,
                ..
            } => note(
                KernelNoteKind::Failure,
                format!("{tool} `{subject}` denied by {}: {reason}", by.label()),
                vec![],
            ),
            // Its content is opaque and never leaves the host.
            EventKind::ProviderState(state) => note(
                KernelNoteKind::Other,
                format!("opaque provider state ({} blocks)", state.blocks.len()),
                vec![],
            ),
            EventKind::Group(g) => note(KernelNoteKind::Other, g.summary(), vec![]),
            EventKind::GroupMessageDelivered { text, .. } => EventBody::Notification(text.clone()),
            EventKind::SessionProfile(p) => note(
                KernelNoteKind::Other,
                format!("session runs {} on {}", p.model, p.provider),
                vec![],
            ),
        }
    }
}

/// An event as stored: its global sequence number, session and commit time.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredEvent {
    /// Global, monotone sequence number.
    pub seq: u64,
    /// The session it belongs to.
    pub session: String,
    /// Milliseconds since the Unix epoch when it was committed.
    pub time_ms: u64,
    /// The event.
    pub kind: EventKind,
}

impl StoredEvent {
    /// The contract's view of this event.
    pub fn to_sdk(&self) -> latch_engine_sdk::types::Event {
        latch_engine_sdk::types::Event {
            seq: self.seq,
            time_ms: self.time_ms,
            body: self.kind.to_sdk_body(),
        }
    }
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_row_encoding() {
        let events = [
            EventKind::user_text("hello"),
            EventKind::StateUpdate(StateOp::RejectHypothesis {
                text: "cache is stale".into(),
                reason: "hash matches".into(),
            }),
            EventKind::Mutation {
                source: "shell".into(),
                paths: vec![],
                command: Some("cargo fmt".into()),
                unchanged: false,
            },
            EventKind::ManualCompact,
            EventKind::SessionProfile(crate::profile::SessionProfile {
                provider: "openai-compatible".into(),
                base_url: Some("http://127.0.0.1:9/v1".into()),
                model: "local".into(),
                approval: "untrusted".into(),
                sandbox: "read-only".into(),
                changes: vec![],
                group: Some(crate::profile::JoinedGroup {
                    group: "01lead".into(),
                    role: "fixer".into(),
                    store: "postgres://latch@db/groups".into(),
                }),
            }),
        ];
        for (i, e) in events.iter().enumerate() {
            let back = EventKind::from_row(i as u64, e.kind_name(), &e.to_json()).unwrap();
            assert_eq!(&back, e);
            assert!(KNOWN_KINDS.contains(&e.kind_name()));
        }
    }

    #[test]
    fn usage_written_before_unknown_stayed_unknown_still_reads() {
        let old = r#"{"kind":"provider_usage","data":{"input_tokens":120,"output_tokens":0,"cache_read_tokens":100}}"#;
        let e = EventKind::from_row(1, "provider_usage", old).unwrap();
        let EventKind::ProviderUsage {
            input_tokens,
            output_tokens,
            reasoning_tokens,
            estimated_input_tokens,
            ..
        } = e
        else {
            panic!("{e:?}")
        };
        assert_eq!((input_tokens, output_tokens), (Some(120), Some(0)));
        assert_eq!((reasoning_tokens, estimated_input_tokens), (None, None));
        let unknown = EventKind::ProviderUsage {
            input_tokens: None,
            output_tokens: None,
            cache_read_tokens: None,
            cache_creation_tokens: None,
            cache_miss_tokens: None,
            common_prefix_tokens: None,
            reasoning_tokens: None,
            estimated_input_tokens: None,
            provider: None,
            model: None,
            base_url: None,
        };
        let back = EventKind::from_row(2, "provider_usage", &unknown.to_json()).unwrap();
        assert_eq!(back, unknown, "unknown stays unknown, never 0");
    }

    #[test]
    fn provider_state_is_hidden_and_shows_no_content() {
        let e = EventKind::ProviderState(OpaqueState {
            wire: "anthropic".into(),
            blocks: vec![OpaqueBlock {
                before_part: 0,
                json: r#"{"type":"thinking","thinking":"secret plan","signature":"c2ln"}"#.into(),
            }],
            call_ids: vec![],
        });
        assert!(e.hidden_from_engines());
        let text = latch_engine_sdk::event_search_text(&e.to_sdk_body());
        assert!(!text.contains("secret"), "{text}");
        let back = EventKind::from_row(3, "provider_state", &e.to_json()).unwrap();
        assert_eq!(back, e);
        // The provider's call ids round-trip; a state stored without them
        // (an older build) reads with none.
        assert!(!e.to_json().contains("call_ids"));
        let with_ids = EventKind::ProviderState(OpaqueState {
            wire: "openai-chat".into(),
            blocks: vec![],
            call_ids: vec![ProviderCallId {
                call: "call_latch_2".into(),
                provider: "call_0".into(),
            }],
        });
        let back = EventKind::from_row(4, "provider_state", &with_ids.to_json()).unwrap();
        assert_eq!(back, with_ids);
    }

    #[test]
    fn unknown_kinds_fail_loudly() {
        let err = EventKind::from_row(7, "teleport", r#"{"kind":"teleport","data":{}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("event 7") && err.contains("teleport"), "{err}");
        let err = EventKind::from_row(8, "mutation", r#"{"kind":"mutation","data":{}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("malformed"), "{err}");
        let err = EventKind::from_row(9, "tombstone", &EventKind::ManualCompact.to_json())
            .unwrap_err()
            .to_string();
        assert!(err.contains("stored as kind"), "{err}");
    }

    #[test]
    fn kernel_side_events_project_to_notes() {
        let v = EventKind::Validation {
            requirements: vec!["tests pass".into()],
            command: "cargo test".into(),
            outcome: Outcome::Failed,
            exit_code: Some(101),
            output: "error[E0425]".into(),
            generation: 3,
        };
        match v.to_sdk_body() {
            EventBody::Kernel(n) => {
                assert_eq!(n.kind, KernelNoteKind::ValidationFailed);
                assert!(n.summary.contains("cargo test"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            EventKind::ManualCompact.to_sdk_body(),
            EventBody::ManualCompact
        );
    }

    #[test]
    fn large_files_are_observed_without_a_hash() {
        let small = EventKind::file_observed("a", b"abc");
        let big = EventKind::file_observed("b", &vec![0u8; crate::FILE_HASH_MAX_BYTES + 1]);
        assert!(matches!(
            small,
            EventKind::FileObserved {
                sha256: Some(_),
                size: 3,
                ..
            }
        ));
        assert!(matches!(big, EventKind::FileObserved { sha256: None, .. }));
    }
}
