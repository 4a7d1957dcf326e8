//! The kernel's reducers: pure functions of the ordered event log.
//!
//! [`KernelState`] reduces, for one session, the ordered log of its
//! **workspace** (every session sharing the workspace): the session's own
//! events drive canonical task state, files, evidence, processes, failure
//! supervision and certification; events of other sessions of the workspace
//! count only where the spec makes them workspace-wide (the workspace
//! generation, and durable disproofs). [`KernelState::apply`] is the
//! incremental form and [`KernelState::replay`] the full one; they agree at
//! every prefix of any log.

pub mod call_ids;
mod evidence;
mod failures;
mod files;
mod reground;
mod task;
mod turns;

pub use evidence::Certification;
pub use failures::{lineage_label, normalize_error};
pub use files::{FileKnowledge, GuardVerdict};
pub use reground::{REFUSALS_IN_A_ROW, RegroundDue};
pub use turns::{OpenCall, PendingMutation, Unfinished, operation_of};

use crate::event::{CertificationOutcome, EventKind, Outcome, StateOp, StoredEvent};
use call_ids::CallIds;
use evidence::{EvidenceState, ProcessState};
use failures::{
    CERTIFICATION_GROUP, FailureState, first_line, normalize_blocker, tool_group, validation_group,
};
use files::FileTable;
use latch_engine_sdk::types::CanonicalState;
use reground::RefusalStreak;
use task::{EntryList, TaskState, disproof_text};
use turns::TurnState;

/// The reduced kernel state of one session.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelState {
    session: String,
    watermark: u64,
    own_events: u64,
    generation: u64,
    revision: u64,
    /// Highest generation and revision of the session's kernel-context
    /// entries.
    context_high: (u64, u64),
    task: TaskState,
    files: FileTable,
    evidence: EvidenceState,
    processes: ProcessState,
    failures: FailureState,
    refusals: RefusalStreak,
    disproofs: EntryList,
    turns: TurnState,
    call_ids: CallIds,
}

impl KernelState {
    /// The empty state of `session` (before any event).
    pub fn new(session: impl Into<String>) -> Self {
        KernelState {
            session: session.into(),
            watermark: 0,
            own_events: 0,
            generation: 0,
            revision: 0,
            context_high: (0, 0),
            task: TaskState::default(),
            files: FileTable::default(),
            evidence: EvidenceState::default(),
            processes: ProcessState::default(),
            failures: FailureState::default(),
            refusals: RefusalStreak::default(),
            disproofs: EntryList::default(),
            turns: TurnState::default(),
            call_ids: CallIds::default(),
        }
    }

    /// Full replay of the workspace's ordered log for `session`.
    pub fn replay<'a>(
        session: impl Into<String>,
        events: impl IntoIterator<Item = &'a StoredEvent>,
    ) -> Self {
        let mut state = KernelState::new(session);
        for e in events {
            state.apply(e);
        }
        state
    }

    /// Apply the next event of the workspace log. Events at or below the
    /// watermark are ignored, so applying a page twice is harmless. Returns
    /// true when the canonical state changed (and the revision moved).
    pub fn apply(&mut self, event: &StoredEvent) -> bool {
        if event.seq <= self.watermark {
            return false;
        }
        self.watermark = event.seq;
        let own = event.session == self.session;
        let seq = event.seq;
        let mut changed = false;

        if event.kind.advances_generation() {
            let old = self.generation;
            self.generation += 1;
            changed |= self.evidence.generation_moves(old, self.generation);
        }
        if let EventKind::StateUpdate(StateOp::RecordDisproof {
            summary,
            reason,
            lineage,
        }) = &event.kind
        {
            changed |= self.disproofs.add(&disproof_text(summary, reason), seq);
            if let (true, Some(key)) = (own, lineage) {
                changed |= self.failures.close_key(key);
            }
        }
        if !own {
            if changed {
                self.revision += 1;
            }
            return changed;
        }
        self.own_events += 1;
        if let EventKind::KernelContext(k) = &event.kind {
            self.context_high = (
                self.context_high.0.max(k.generation),
                self.context_high.1.max(k.revision),
            );
        }

        match &event.kind {
            EventKind::AssistantMessage { parts } => self.call_ids.assistant(seq, parts),
            EventKind::ToolResult(r) => self.call_ids.result(seq, &r.call_id),
            EventKind::UserMessage { .. } => self.call_ids.user(),
            EventKind::ProviderState(state) => {
                self.call_ids.provider_state(&state.wire, &state.call_ids)
            }
            _ => {}
        }
        changed |= match &event.kind {
            EventKind::StateUpdate(op) => self.task.apply(op, seq),
            EventKind::Mutation {
                paths,
                source,
                command,
                ..
            } => {
                self.turns.mutation(source, command.as_deref());
                self.files.written(paths, seq)
            }
            EventKind::MutationPending {
                source,
                command,
                snapshot,
            } => {
                self.turns.mutation_pending(turns::PendingMutation {
                    seq,
                    source: source.clone(),
                    command: command.clone(),
                    snapshot: snapshot.clone(),
                });
                false
            }
            EventKind::FileObserved { path, sha256, size } => {
                self.files.observed(path, sha256.as_deref(), *size, seq)
            }
            EventKind::ExternalChange {
                path,
                actual_sha256,
                ..
            } => self
                .files
                .changed_externally(path, actual_sha256.as_deref(), seq),
            EventKind::Validation {
                requirements,
                command,
                outcome,
                output,
                generation,
                ..
            } => {
                let mut c =
                    self.evidence
                        .validation(requirements, command, *outcome, *generation, seq);
                let group = validation_group(command);
                c |= match outcome {
                    Outcome::Passed => self.failures.close_group(&group),
                    Outcome::Failed => {
                        let diag = first_line(output);
                        let summary = if diag.is_empty() {
                            format!("validation failed: `{}`", command.trim())
                        } else {
                            format!("validation failed: `{}`: {diag}", command.trim())
                        };
                        self.failures.failure(&group, group.clone(), summary, seq)
                    }
                };
                c
            }
            EventKind::ToolResult(r) => {
                let operation = self.turns.result(&r.call_id);
                let group = tool_group(operation.as_deref().unwrap_or(&r.name));
                if r.is_error {
                    let key = format!("{group}:{}", normalize_error(&r.content));
                    let summary = format!("{} failed: {}", r.name, first_line(&r.content));
                    self.failures.failure(&group, key, summary, seq)
                } else {
                    self.failures.close_group(&group)
                }
            }
            EventKind::CertificationAttempt {
                outcome, blockers, ..
            } => match outcome {
                CertificationOutcome::Certified => {
                    self.refusals.certified();
                    self.failures.close_group(CERTIFICATION_GROUP)
                }
                CertificationOutcome::Refused => {
                    self.refusals.refused(blockers);
                    // Generations quoted in a blocker do not make it new: a
                    // writer that keeps staling the same evidence is one
                    // growing lineage.
                    let normalized: Vec<String> =
                        blockers.iter().map(|b| normalize_blocker(b)).collect();
                    let key = format!("{CERTIFICATION_GROUP}:{}", normalized.join("; "));
                    self.failures.close_group_except(CERTIFICATION_GROUP, &key);
                    let summary = format!("completion refused: {}", blockers.join("; "));
                    self.failures
                        .failure(CERTIFICATION_GROUP, key, summary, seq)
                }
            },
            EventKind::Reground { lineage, count, .. } => {
                if lineage == REFUSALS_IN_A_ROW {
                    self.refusals.regrounded(*count);
                } else {
                    self.failures.regrounded(lineage, *count);
                }
                false
            }
            EventKind::ProcessStarted { id, command } => {
                self.processes.started(id, command, seq);
                false
            }
            EventKind::ProcessExited { id, .. } => {
                self.processes.exited(id, seq);
                false
            }
            EventKind::AssistantMessage { parts } => {
                self.turns.assistant(parts);
                false
            }
            EventKind::UserMessage { .. } => {
                self.turns.user();
                false
            }
            EventKind::RunStarted { .. } => {
                self.turns.run_started();
                false
            }
            EventKind::RunFinished { .. } | EventKind::RunInterrupted { .. } => {
                self.turns.run_ended();
                false
            }
            _ => false,
        };
        if changed {
            self.revision += 1;
        }
        changed
    }

    /// The session this state belongs to.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Sequence number of the last event applied (0 before any).
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// The workspace generation: generation-advancing events of every session
    /// of the workspace seen so far.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Monotone revision of the canonical state; moves on each effective change.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The highest generation and revision of the session's kernel-context
    /// entries, `(0, 0)` when there are none.
    pub fn kernel_context_high(&self) -> (u64, u64) {
        self.context_high
    }

    /// Number of the session's own events applied.
    pub fn own_event_count(&self) -> u64 {
        self.own_events
    }

    /// The canonical task state (L1) in the contract's shape.
    pub fn canonical(&self) -> CanonicalState {
        let t = &self.task;
        CanonicalState {
            revision: self.revision,
            goal: t.goal.clone(),
            constraints: t.constraints.entries().to_vec(),
            decisions: t.decisions.entries().to_vec(),
            hypotheses: t.hypotheses.clone(),
            files: self.files.render(),
            validations: t.validations.entries().to_vec(),
            evidence: self.evidence.render(self.generation),
            failures: self.failures.render(),
            disproofs: self.disproofs.entries().to_vec(),
            questions: t.questions.entries().to_vec(),
            actions: t.actions.entries().to_vec(),
            criteria: t.criteria.entries().to_vec(),
            notes: t.notes.entries().to_vec(),
        }
    }

    /// May the session complete now? Passed evidence for the current
    /// generation of every required validation, no running managed process,
    /// and evidence newer than the last process exit.
    pub fn certification(&self) -> Certification {
        evidence::certify(
            self.task
                .validations
                .entries()
                .iter()
                .map(|e| e.text.as_str()),
            &self.evidence,
            &self.processes,
            self.generation,
        )
    }

    /// Ids and commands of the managed processes still running.
    pub fn running_processes(&self) -> Vec<(String, String)> {
        self.processes
            .running
            .iter()
            .map(|(id, (cmd, _))| (id.clone(), cmd.clone()))
            .collect()
    }

    /// True when the exit of managed process `id` is recorded.
    pub fn process_ended(&self, id: &str) -> bool {
        self.processes.ended.contains(id)
    }

    /// What a resume must repair: an unfinished run and the tool calls of
    /// the latest assistant message that have no result.
    pub fn unfinished(&self) -> &Unfinished {
        self.turns.unfinished()
    }

    /// The session's tool-call ids: what the next message's calls get
    /// ([`CallIds::assign`]) and how a log with repeated ids reads
    /// ([`CallIds::repair`]).
    pub fn call_ids(&self) -> &CallIds {
        &self.call_ids
    }

    /// What the session knows about `path`.
    pub fn file(&self, path: &str) -> Option<&FileKnowledge> {
        self.files.knowledge(path)
    }

    /// The write guard for `path` whose current on-disk hash is `current`.
    pub fn guard(&self, path: &str, current_sha256: Option<&str>) -> GuardVerdict {
        self.files.guard(path, current_sha256)
    }

    /// The re-grounds due now ([`RegroundDue`]): certification refused
    /// twice in a row, or a failure lineage that repeated, not yet answered
    /// by a `reground` event at this length of its streak.
    pub fn reground_due(&self) -> Vec<RegroundDue> {
        reground::all_due(&self.refusals, &self.failures)
    }

    /// Keys of the active failure lineages with their counts.
    pub fn active_failures(&self) -> Vec<(String, u32)> {
        self.failures
            .active()
            .iter()
            .map(|l| (l.key.clone(), l.count))
            .collect()
    }
}

#[cfg(test)]
mod oracle;
#[cfg(test)]
mod tests;
