//! Durable truth for Latch: the SQLite event store, FTS recall and the
//! kernel's reducers.
//!
//! * [`event`] — the durable event model ([`EventKind`]) and its projection
//!   into the engine contract.
//! * [`store`] — the [`Store`]: sessions, the append-only log, artifacts,
//!   tombstones, schema migrations and full-text recall.
//! * [`state`] — the reducers ([`KernelState`]): canonical task state,
//!   workspace generation, evidence, certification, failure supervision,
//!   durable disproofs and file state, as pure functions of the log.
//! * [`ops`] — the write-side operations tools call (mutation commit, the
//!   write guard, validation records, certification attempts).
//! * [`view`] — [`StoreSessionView`], the read-only session engines receive.
//! * [`agents`] — child agents: the report a child hands back and the
//!   reducer of a parent's agent log.
//! * [`group`] — agent groups: group events, the [`GroupState`] reducer,
//!   the `/group` presentation and the store port [`GroupPort`].
//! * [`bounds`] — the byte and token bounds on stored tool output.
//! * [`permission`] — the permission lifecycle's vocabulary and the reducer
//!   of pending requests and session grants.
//! * [`git`] — Latch's own git, the one door through which the
//!   fingerprint, snapshots and checkpoints run git: never the repository's
//!   config, hooks or drivers, always confined.
//! * [`beneath`] — file I/O beneath the workspace that never follows a
//!   link, for every read and write Latch does on the user's behalf.
//! * [`profile`] — the session profile (provider, model, approval and
//!   sandbox modes, plan mode) that resume continues with.
//! * [`checklist`] — the task state's actions as a checklist (the plan
//!   every surface shows).
//! * [`request`] — the record of each model request (engine, budget,
//!   query, system prompt and tools) that replay asks other engines again.

#![warn(missing_docs)]

pub mod agents;
pub mod beneath;
pub mod bounds;
pub mod checklist;
pub mod checkpoint;
pub mod event;
pub mod fingerprint;
pub mod git;
pub mod group;
pub mod ops;
pub mod permission;
pub mod profile;
pub mod request;
pub mod snapshot;
pub mod state;
pub mod store;
pub mod view;

pub use agents::{AgentReport, AgentTree, ChildState, ReportOutcome};
pub use bounds::{
    FILE_HASH_MAX_BYTES, READ_MAX_BYTES, READ_MAX_TOKENS, bound_head, bound_tool_output,
    bound_tool_output_stored, fits_tool_output,
};
pub use checklist::{Checklist, Step, StepStatus};
pub use checkpoint::{
    FileAction, RewindError, RewindPlan, RewindPoint, apply_rewind, plan_rewind, record_checkpoint,
    record_command_checkpoints, rewind_points, rewound_summary,
};
pub use event::{
    CertificationOutcome, ENGINE_HIDDEN_KINDS, EventDecodeError, EventKind, LeftBehind,
    OpaqueBlock, OpaqueState, Outcome, ProviderCallId, StateOp, StoredEvent, sha256_hex,
};
pub use group::{GroupEvent, GroupPort, GroupState};
pub use ops::{
    GuardError, MutationReceipt, attempt_certification, check_guarded_write, commit_mutation,
    record_validation, run_possible_mutation, settle_pending_mutations,
};
pub use permission::{
    DecidedBy, GrantScope, McpToolCall, PermissionKind, PermissionLog, PermissionRequest,
};
pub use profile::{JoinedGroup, ProfileChange, SessionMode, SessionProfile};
pub use request::{RequestRecord, RequestShape};
pub use state::{
    Certification, FileKnowledge, GuardVerdict, KernelState, OpenCall, PendingMutation,
    REFUSALS_IN_A_ROW, RegroundDue, Unfinished, lineage_label, operation_of,
};
pub use store::{
    LEASE_TTL_ENV, LeaseError, LeaseHolder, RepositoryDrift, SearchRow, SessionLease,
    SessionRecord, Store, StoreError, default_store_path, lease_ttl,
};
pub use view::StoreSessionView;
