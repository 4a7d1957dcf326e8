//! Validation evidence (latest observation per exact requirement, stale once
//! the workspace generation moves past it), managed processes, and the
//! certification rule that combines them.

use crate::event::{CertificationOutcome, Outcome};
use latch_engine_sdk::types::Evidence;
use std::collections::BTreeMap;

/// One validation observation for an exact requirement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Observation {
    pub(crate) requirement: String,
    pub(crate) command: String,
    pub(crate) outcome: Outcome,
    pub(crate) generation: u64,
    pub(crate) seq: u64,
}

/// The latest observation per requirement, in order of first observation.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct EvidenceState {
    latest: Vec<Observation>,
    index: BTreeMap<String, usize>,
}

impl EvidenceState {
    /// A validation set: one observation per requirement, same command and
    /// generation. Always changes the rendering when it names a requirement.
    pub(crate) fn validation(
        &mut self,
        requirements: &[String],
        command: &str,
        outcome: Outcome,
        generation: u64,
        seq: u64,
    ) -> bool {
        let mut changed = false;
        for r in requirements {
            let r = r.trim();
            if r.is_empty() {
                continue;
            }
            let obs = Observation {
                requirement: r.to_string(),
                command: command.to_string(),
                outcome,
                generation,
                seq,
            };
            match self.index.get(r) {
                Some(&i) => self.latest[i] = obs,
                None => {
                    self.index.insert(r.to_string(), self.latest.len());
                    self.latest.push(obs);
                }
            }
            changed = true;
        }
        changed
    }

    /// Whether moving the generation from `old` to `new` changes any stale flag.
    pub(crate) fn generation_moves(&self, old: u64, new: u64) -> bool {
        self.latest
            .iter()
            .any(|o| o.generation == old || o.generation == new)
    }

    /// The latest observation for `requirement`.
    pub(crate) fn latest(&self, requirement: &str) -> Option<&Observation> {
        self.index.get(requirement).map(|&i| &self.latest[i])
    }

    /// The contract's rendering at workspace generation `current`.
    pub(crate) fn render(&self, current: u64) -> Vec<Evidence> {
        self.latest
            .iter()
            .map(|o| Evidence {
                requirement: o.requirement.clone(),
                command: o.command.clone(),
                outcome: o.outcome.to_sdk(),
                generation: o.generation,
                stale: o.generation != current,
                seq: o.seq,
            })
            .collect()
    }
}

/// Managed background processes of the session.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ProcessState {
    /// Running processes: id → (command, start seq).
    pub(crate) running: BTreeMap<String, (String, u64)>,
    /// Sequence number of the latest exit; evidence older than it cannot
    /// certify (the process may have changed what it proved).
    pub(crate) last_exit_seq: u64,
    /// Ids of the processes whose exit is recorded.
    pub(crate) ended: std::collections::BTreeSet<String>,
}

impl ProcessState {
    pub(crate) fn started(&mut self, id: &str, command: &str, seq: u64) {
        self.running
            .insert(id.to_string(), (command.to_string(), seq));
    }

    pub(crate) fn exited(&mut self, id: &str, seq: u64) {
        if self.running.remove(id).is_some() {
            self.last_exit_seq = seq;
            self.ended.insert(id.to_string());
        }
    }
}

/// The kernel's answer to "may this session complete now?".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certification {
    /// Certified or refused.
    pub outcome: CertificationOutcome,
    /// Why not, in a stable order: running processes, then requirements in the
    /// order they were required. Empty when certified.
    pub blockers: Vec<String>,
    /// The workspace generation the decision was made at.
    pub generation: u64,
}

impl Certification {
    /// True when certified.
    pub fn is_certified(&self) -> bool {
        self.outcome == CertificationOutcome::Certified
    }
}

/// Decide certification from required validations, evidence and processes.
pub(crate) fn certify<'a>(
    required: impl Iterator<Item = &'a str>,
    evidence: &EvidenceState,
    processes: &ProcessState,
    generation: u64,
) -> Certification {
    let mut blockers = Vec::new();
    for (id, (command, _)) in &processes.running {
        blockers.push(format!("managed process running: {id} ({command})"));
    }
    for req in required {
        match evidence.latest(req) {
            None => blockers.push(format!("no evidence: {req}")),
            Some(o) if o.generation != generation => blockers.push(format!(
                "stale: {req} (checked generation {}, workspace is at {generation})",
                o.generation
            )),
            Some(o) if o.outcome == Outcome::Failed => blockers.push(format!(
                "failed: {req} (`{}` at generation {})",
                o.command, o.generation
            )),
            Some(o) if o.seq < processes.last_exit_seq => {
                blockers.push(format!("not re-run since a managed process exited: {req}"))
            }
            Some(_) => {}
        }
    }
    let outcome = if blockers.is_empty() {
        CertificationOutcome::Certified
    } else {
        CertificationOutcome::Refused
    };
    Certification {
        outcome,
        blockers,
        generation,
    }
}
