//! The task part of canonical state: goal, constraints, decisions, hypotheses,
//! questions, actions, criteria, notes and required validations, reduced from
//! [`StateOp`]s. Each change handler reports whether the rendered state changed,
//! so the revision moves exactly on effective changes.

use crate::event::StateOp;
use latch_engine_sdk::types::{Hypothesis, HypothesisStatus, StateEntry};
use std::collections::{BTreeMap, BTreeSet};

/// An ordered list of unique texts, each with the sequence number that set it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct EntryList {
    items: Vec<StateEntry>,
    index: BTreeSet<String>,
}

impl EntryList {
    /// Add `text` unless it is already present.
    pub(crate) fn add(&mut self, text: &str, seq: u64) -> bool {
        if text.is_empty() || self.index.contains(text) {
            return false;
        }
        self.index.insert(text.to_string());
        self.items.push(StateEntry {
            text: text.to_string(),
            seq,
        });
        true
    }

    /// Remove `text` if present.
    pub(crate) fn remove(&mut self, text: &str) -> bool {
        if !self.index.remove(text) {
            return false;
        }
        self.items.retain(|e| e.text != text);
        true
    }

    /// Replace `previous` with `text` in place (or add `text` when `previous`
    /// is absent).
    pub(crate) fn replace(&mut self, previous: &str, text: &str, seq: u64) -> bool {
        if text.is_empty() {
            return false;
        }
        if previous == text || !self.index.contains(previous) {
            return self.add(text, seq);
        }
        if self.index.contains(text) {
            return self.remove(previous);
        }
        self.index.remove(previous);
        self.index.insert(text.to_string());
        if let Some(e) = self.items.iter_mut().find(|e| e.text == previous) {
            *e = StateEntry {
                text: text.to_string(),
                seq,
            };
        }
        true
    }

    /// True when `text` is present.
    #[cfg(test)]
    pub(crate) fn contains(&self, text: &str) -> bool {
        self.index.contains(text)
    }

    /// The entries in insertion order.
    pub(crate) fn entries(&self) -> &[StateEntry] {
        &self.items
    }
}

/// Goal, lists and hypotheses of one session.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TaskState {
    pub(crate) goal: Option<StateEntry>,
    pub(crate) constraints: EntryList,
    pub(crate) decisions: EntryList,
    pub(crate) questions: EntryList,
    pub(crate) actions: EntryList,
    pub(crate) criteria: EntryList,
    pub(crate) notes: EntryList,
    pub(crate) validations: EntryList,
    pub(crate) hypotheses: Vec<Hypothesis>,
    hypothesis_index: BTreeMap<String, usize>,
}

impl TaskState {
    /// Apply one operation; true when the rendered state changed. Disproofs
    /// are workspace-wide and handled by the caller.
    pub(crate) fn apply(&mut self, op: &StateOp, seq: u64) -> bool {
        match op {
            StateOp::SetGoal { text } => {
                let text = text.trim();
                if text.is_empty() || self.goal.as_ref().is_some_and(|g| g.text == text) {
                    return false;
                }
                self.goal = Some(StateEntry {
                    text: text.to_string(),
                    seq,
                });
                true
            }
            StateOp::AddConstraint { text } => self.constraints.add(text.trim(), seq),
            StateOp::RecordDecision { text } => self.decisions.add(text.trim(), seq),
            StateOp::ReviseDecision { previous, text } => {
                self.decisions.replace(previous.trim(), text.trim(), seq)
            }
            StateOp::AddHypothesis { text } => {
                let text = text.trim();
                if text.is_empty() || self.hypothesis_index.contains_key(text) {
                    return false;
                }
                self.push_hypothesis(text, seq, HypothesisStatus::Active, None);
                true
            }
            StateOp::RejectHypothesis { text, reason } => {
                let text = text.trim();
                if text.is_empty() {
                    return false;
                }
                match self.hypothesis_index.get(text) {
                    Some(&i) => {
                        let h = &mut self.hypotheses[i];
                        if h.status == HypothesisStatus::Rejected {
                            return false;
                        }
                        h.status = HypothesisStatus::Rejected;
                        h.reason = Some(reason.trim().to_string());
                        h.seq = seq;
                        true
                    }
                    None => {
                        let reason = Some(reason.trim().to_string());
                        self.push_hypothesis(text, seq, HypothesisStatus::Rejected, reason);
                        true
                    }
                }
            }
            StateOp::AddQuestion { text } => self.questions.add(text.trim(), seq),
            StateOp::ResolveQuestion { text, .. } => self.questions.remove(text.trim()),
            StateOp::AddAction { text } => self.actions.add(text.trim(), seq),
            StateOp::CompleteAction { text } => self.actions.remove(text.trim()),
            StateOp::AddCriterion { text } => self.criteria.add(text.trim(), seq),
            StateOp::AddNote { text } => self.notes.add(text.trim(), seq),
            StateOp::RequireValidation { requirement } => {
                self.validations.add(requirement.trim(), seq)
            }
            StateOp::RecordDisproof { .. } => false,
        }
    }

    fn push_hypothesis(
        &mut self,
        text: &str,
        seq: u64,
        status: HypothesisStatus,
        reason: Option<String>,
    ) {
        self.hypothesis_index
            .insert(text.to_string(), self.hypotheses.len());
        self.hypotheses.push(Hypothesis {
            text: text.to_string(),
            seq,
            status,
            reason,
        });
    }
}

/// The text of a disproof entry as canonical state renders it.
pub(crate) fn disproof_text(summary: &str, reason: &str) -> String {
    format!("{} (not a real problem: {})", summary.trim(), reason.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejected_hypotheses_stay_rejected() {
        let mut t = TaskState::default();
        assert!(t.apply(&StateOp::AddHypothesis { text: "h".into() }, 1));
        assert!(t.apply(
            &StateOp::RejectHypothesis {
                text: "h".into(),
                reason: "r".into()
            },
            2
        ));
        assert!(!t.apply(&StateOp::AddHypothesis { text: "h".into() }, 3));
        assert_eq!(t.hypotheses[0].status, HypothesisStatus::Rejected);
        assert_eq!(t.hypotheses[0].seq, 2);
    }

    #[test]
    fn lists_dedupe_and_remove() {
        let mut l = EntryList::default();
        assert!(l.add("a", 1));
        assert!(!l.add("a", 2));
        assert!(l.add("b", 3));
        assert!(l.replace("a", "c", 4));
        assert_eq!(
            l.entries()
                .iter()
                .map(|e| e.text.as_str())
                .collect::<Vec<_>>(),
            ["c", "b"]
        );
        assert!(
            l.replace("c", "b", 5),
            "replacing with an existing text drops the old"
        );
        assert_eq!(l.entries().len(), 1);
        assert!(l.remove("b") && !l.remove("b"));
        assert!(!l.contains("b"));
    }
}
