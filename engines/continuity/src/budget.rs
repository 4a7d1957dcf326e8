//! The token budget of one request, in the spec's priority order.
//!
//! The hard invariant is
//! `instructions + state + recent + recall + tools + extension <= context_window_tokens - reserve_tokens`,
//! every figure from the canonical estimator. Tool schemas and extension
//! context are reserved first, then the compiled instructions; what remains
//! (`avail`) is shared by the canonical state, working memory, recalled
//! originals and the episode index, in that order.

use latch_engine_sdk::types::{ContextBudget, EngineError};

/// The fixed part of a request's budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// `context_window_tokens - reserve_tokens`.
    pub limit: u64,
    /// System prompt plus session-context message.
    pub instructions: u64,
    /// Tool schemas.
    pub tools: u64,
    /// `instructions + tools`: every request pays it.
    pub fixed: u64,
    /// Room left for state, working memory, recall and the index after the
    /// instructions, tools and the extension reservation.
    pub avail: u64,
    /// The working-memory high-water mark before the hard budget lowers it.
    pub recent_cap: u64,
}

impl Plan {
    /// The plan for `budget`; fails when the instructions, tools and
    /// extension context alone do not fit.
    pub fn new(
        budget: &ContextBudget,
        instructions: u64,
        extension_reserve: u64,
        recent_override: Option<u64>,
    ) -> Result<Plan, EngineError> {
        let limit = budget.limit_tokens();
        let tools = budget.tools_tokens;
        let fixed = instructions.saturating_add(tools);
        let reserved = fixed.saturating_add(extension_reserve);
        if reserved > limit {
            return Err(EngineError::BudgetExceeded(format!(
                "instructions ({instructions}), tool schemas ({tools}) and extension context ({extension_reserve}) need {reserved} tokens but the request limit is {limit}"
            )));
        }
        Ok(Plan {
            limit,
            instructions,
            tools,
            fixed,
            avail: limit - reserved,
            recent_cap: recent_override.unwrap_or(budget.recent_tokens).max(1),
        })
    }

    /// The effective working-memory threshold: `recent_cap`, lowered by the
    /// hard budget so that state plus a quarter of headroom for recall, the
    /// index and kernel deltas still fit.
    pub fn threshold(&self, state_tokens: u64) -> u64 {
        self.recent_cap
            .min(self.avail.saturating_sub(state_tokens) / 4 * 3)
    }
}

/// How much conversation a rotation keeps: about three quarters of the
/// threshold, so the next rotation is a quarter-budget away.
pub fn retention_target(threshold: u64) -> u64 {
    threshold / 4 * 3
}

/// Index of the first retained unit: the largest suffix of whole units whose
/// total fits `target`; a single oversized newest unit is kept whole.
pub fn retained_from(unit_tokens: &[u64], target: u64) -> usize {
    let mut used = 0u64;
    let mut first = unit_tokens.len();
    for (i, t) in unit_tokens.iter().enumerate().rev() {
        if used + t > target && first != unit_tokens.len() {
            break;
        }
        used += t;
        first = i;
        if used > target {
            break;
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_largest_fitting_suffix() {
        assert_eq!(retained_from(&[10, 10, 10, 10], 25), 2);
        assert_eq!(retained_from(&[10, 10, 10, 10], 40), 0);
        assert_eq!(retained_from(&[], 40), 0);
    }

    #[test]
    fn an_oversized_unit_is_kept_whole() {
        assert_eq!(retained_from(&[10, 10, 500], 25), 2);
        assert_eq!(retained_from(&[10, 500, 10], 25), 2);
    }

    #[test]
    fn tiny_budgets_are_refused_clearly() {
        let b = ContextBudget {
            context_window_tokens: 100,
            reserve_tokens: 50,
            recent_tokens: 10,
            tools_tokens: 40,
            extension_tokens: 0,
        };
        assert!(matches!(
            Plan::new(&b, 20, 0, None),
            Err(EngineError::BudgetExceeded(_))
        ));
        let p = Plan::new(&b, 5, 0, None).expect("fits");
        assert_eq!(p.avail, 5);
        assert_eq!(p.threshold(0), 3);
    }
}
