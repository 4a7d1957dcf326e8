//! When the kernel asks the model to re-ground: certification refused twice
//! in a row, or a failure lineage that repeated (the same failing
//! validation, command or tool call failing again). A streak is due at its
//! second occurrence and again each time it doubles (2, 4, 8, ...), so a
//! model that keeps failing is told again, but a long streak costs a few
//! notes, not one per failure. The `reground` events the agent loop appends
//! for due streaks are reduced here too, so what is due is a pure function
//! of the log and a resume asks for exactly what a live session would.

use super::failures::{CERTIFICATION_GROUP, FailureState, tool_group};

/// The streak key of certification refusals in a row (whatever their
/// blockers), as a `reground` event names it.
pub const REFUSALS_IN_A_ROW: &str = "certification:refused-in-a-row";

/// A re-ground the kernel asks for now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegroundDue {
    /// The streak's key (a failure lineage key, or [`REFUSALS_IN_A_ROW`]).
    pub lineage: String,
    /// The streak's length.
    pub count: u32,
    /// What repeats, in words for the model.
    pub reason: String,
}

impl RegroundDue {
    /// The `reground` event that answers it.
    pub fn event(&self) -> crate::EventKind {
        crate::EventKind::Reground {
            reason: self.reason.clone(),
            lineage: self.lineage.clone(),
            count: self.count,
        }
    }
}

/// True when a streak of `count` whose last re-ground came at
/// `regrounded_at` (0: never) is due again.
pub(crate) fn due(count: u32, regrounded_at: u32) -> bool {
    count >= 2 && count >= regrounded_at.saturating_mul(2)
}

/// Certification refusals since the last certified completion.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RefusalStreak {
    count: u32,
    regrounded_at: u32,
    last_blockers: Vec<String>,
}

impl RefusalStreak {
    pub(crate) fn refused(&mut self, blockers: &[String]) {
        self.count = self.count.saturating_add(1);
        self.last_blockers = blockers.to_vec();
    }

    pub(crate) fn certified(&mut self) {
        *self = RefusalStreak::default();
    }

    pub(crate) fn regrounded(&mut self, count: u32) {
        self.regrounded_at = self.regrounded_at.max(count);
    }

    fn due(&self) -> Option<RegroundDue> {
        due(self.count, self.regrounded_at).then(|| RegroundDue {
            lineage: REFUSALS_IN_A_ROW.to_string(),
            count: self.count,
            reason: format!(
                "completion was refused {} times in a row; the latest blockers: {}",
                self.count,
                self.last_blockers.join("; ")
            ),
        })
    }
}

/// Every re-ground due now: the refusal streak first, then the repeating
/// failure lineages in order of first occurrence (certification lineages,
/// and the refused `complete` calls' error results, are the refusal
/// streak's business).
pub(crate) fn all_due(refusals: &RefusalStreak, failures: &FailureState) -> Vec<RegroundDue> {
    let mut out: Vec<RegroundDue> = refusals.due().into_iter().collect();
    out.extend(
        failures
            .active()
            .iter()
            .filter(|l| {
                l.group != CERTIFICATION_GROUP
                    && l.group != tool_group("complete")
                    && due(l.count, l.regrounded_at)
            })
            .map(|l| RegroundDue {
                lineage: l.key.clone(),
                count: l.count,
                reason: format!("{} ({} times in a row)", l.summary, l.count),
            }),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_is_due_at_two_and_at_each_doubling() {
        let fired: Vec<u32> = {
            let mut at = 0;
            (1..=20)
                .filter(|&n| {
                    let d = due(n, at);
                    if d {
                        at = n;
                    }
                    d
                })
                .collect()
        };
        assert_eq!(fired, vec![2, 4, 8, 16]);
    }
}
