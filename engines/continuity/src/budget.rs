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

/// How much conversation a rotation keeps: `percent` of the rotation point
/// (at 75, the spec's "about three quarters", the next rotation at the same
/// point is a quarter-budget away).
pub fn retention_target(point: u64, percent: u64) -> u64 {
    point / 100 * percent + point % 100 * percent / 100
}

/// The fewest requests a cost-aware epoch lasts: rotation stays occasional,
/// never per turn.
pub const MIN_EPOCH_REQUESTS: u64 = 4;

/// How a provider prices a prompt, in hundredths of an uncached input token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachePricing {
    /// A token read from the prompt cache.
    pub read: u64,
    /// A token sent that the cache did not hold (uncached input, or a cache
    /// write where the provider charges for writes).
    pub miss: u64,
}

impl CachePricing {
    /// OpenAI-style: cached input at 0.1×, everything else at 1×.
    pub const OPENAI: CachePricing = CachePricing {
        read: 10,
        miss: 100,
    };
    /// Anthropic-style: cache reads at 0.1×, cache writes at 1.25×.
    pub const ANTHROPIC: CachePricing = CachePricing {
        read: 10,
        miss: 125,
    };

    /// The pricing of a provider by name (`anthropic`, else OpenAI-style).
    pub fn of_provider(provider: &str) -> CachePricing {
        if provider == "anthropic" {
            CachePricing::ANTHROPIC
        } else {
            CachePricing::OPENAI
        }
    }
}

/// The conversation size at which a cost-aware rotation starts a new epoch.
///
/// Within an epoch every request re-reads the epoch's prefix from the
/// provider's cache at the read price `r`, so each request pays for the
/// conversation the epoch has grown by since it started; a rotation pays
/// once to send the new snapshot group and the retained tail at the miss
/// price `m` instead of reading them. With `d` tokens of conversation added
/// per request and `s` tokens re-sent at a rotation (the epoch's kernel
/// context plus the retained conversation), the cost per request of an
/// epoch that grows by `g` is about `r·g/2 + (m - r)·s·d/g`, lowest at
/// `g = sqrt(2·(m - r)/r · s · d)`: `sqrt(18·s·d)` OpenAI-style,
/// `sqrt(23·s·d)` Anthropic-style (see [`CachePricing`]). The point is
/// `retained + g`, at least [`MIN_EPOCH_REQUESTS`] requests' growth past the
/// retained tail, and never past the working-memory `threshold`.
///
/// `growth` is what the epoch's conversation grew by over `requests` model
/// requests; before [`MIN_EPOCH_REQUESTS`] requests the rate is not known and
/// the threshold applies. Integer arithmetic only, so the component and the
/// native build agree to the token.
pub fn cost_rotation_point(
    pricing: CachePricing,
    threshold: u64,
    retained: u64,
    resent_kernel: u64,
    growth: u64,
    requests: u64,
) -> u64 {
    if requests < MIN_EPOCH_REQUESTS || growth == 0 {
        return threshold;
    }
    let per_request = growth.div_ceil(requests);
    let resent = retained.saturating_add(resent_kernel);
    let g = (2 * pricing.miss.saturating_sub(pricing.read))
        .saturating_mul(resent)
        .saturating_mul(per_request)
        .checked_div(pricing.read.max(1))
        .unwrap_or(u64::MAX)
        .isqrt()
        .max(MIN_EPOCH_REQUESTS.saturating_mul(per_request));
    retained.saturating_add(g).min(threshold)
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

/// The first unit a new epoch retains, given `first` as its policy chose
/// it (the newest whole units up to a target, or none before a `/compact`):
/// reached back to `unseen`, the first unit the model has not been shown
/// yet, while the retained units stay within `cap` tokens.
///
/// The model has not read what follows its latest request (the results
/// answering its last tool calls, a notification, the user's newest
/// message): evicting it would put it in the archive before it was ever
/// sent. So a new epoch keeps those units in its tail; only when together
/// they pass `cap` do the oldest of them leave (a newest unit the policy
/// kept whole stays whole).
pub fn reach_back_to_unseen(unit_tokens: &[u64], first: usize, unseen: usize, cap: u64) -> usize {
    let mut first = first.min(unit_tokens.len());
    let mut used: u64 = unit_tokens[first..].iter().sum();
    while first > unseen {
        let t = unit_tokens[first - 1];
        if used.saturating_add(t) > cap {
            break;
        }
        used += t;
        first -= 1;
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
    fn retention_is_a_share_of_the_rotation_point() {
        assert_eq!(retention_target(10_000, 75), 7_500);
        assert_eq!(retention_target(9_999, 25), 2_499);
        assert_eq!(retention_target(u64::MAX, 90), u64::MAX / 100 * 90 + 13);
    }

    #[test]
    fn the_cost_point_balances_cached_growth_against_a_rotation() {
        const O: CachePricing = CachePricing::OPENAI;
        // Anthropic-style writes make a rotation dearer: a later point.
        assert_eq!(
            cost_rotation_point(CachePricing::ANTHROPIC, 20_000, 2_000, 1_000, 4_000, 4),
            2_000 + 8_306
        );
        // Too early to know the rate: the threshold.
        assert_eq!(
            cost_rotation_point(O, 20_000, 2_000, 1_000, 3_000, 3),
            20_000
        );
        // s = 3000, d = 1000: g = sqrt(18 · 3000 · 1000) ≈ 7348.
        assert_eq!(
            cost_rotation_point(O, 20_000, 2_000, 1_000, 4_000, 4),
            2_000 + 7_348
        );
        // Never past the threshold.
        assert_eq!(cost_rotation_point(O, 8_000, 2_000, 1_000, 4_000, 4), 8_000);
        // At least MIN_EPOCH_REQUESTS requests of growth.
        assert_eq!(
            cost_rotation_point(O, 90_000, 10, 0, 40_000, 4),
            10 + 40_000
        );
        // The cost of one request, c·g/2 + (1 - c)·s·d/g, is lowest at the point.
        let cost = |g: f64| 0.1 * g / 2.0 + 0.9 * 3_000.0 * 1_000.0 / g;
        let g = (cost_rotation_point(O, u64::MAX, 2_000, 1_000, 4_000, 4) - 2_000) as f64;
        assert!(cost(g) <= cost(g * 0.8) && cost(g) <= cost(g * 1.25));
    }

    #[test]
    fn units_the_model_has_not_seen_stay_within_the_cap() {
        let keep = |tokens: &[u64], target, unseen, cap| {
            reach_back_to_unseen(tokens, retained_from(tokens, target), unseen, cap)
        };
        // A large unseen tool unit followed by an unseen notification: the
        // target alone would keep only the notification.
        assert_eq!(retained_from(&[10, 10, 300, 20], 25), 3);
        assert_eq!(keep(&[10, 10, 300, 20], 25, 2, 1_000), 2);
        // Nothing unseen before the target's start: the target decides.
        assert_eq!(keep(&[10, 10, 300, 20], 25, 3, 1_000), 3);
        assert_eq!(keep(&[10, 10, 10, 10], 25, 4, 1_000), 2);
        // Never reaching back past the first unseen unit.
        assert_eq!(keep(&[10, 10, 10, 10], 5, 1, 1_000), 1);
        // Past the cap the oldest unseen units leave; the newest stays whole.
        assert_eq!(keep(&[10, 50, 50, 50], 5, 0, 120), 2);
        assert_eq!(keep(&[10, 50, 500], 5, 0, 120), 2);
        // A `/compact` keeps nothing the model has seen.
        assert_eq!(reach_back_to_unseen(&[10, 10, 10], 3, 3, 1_000), 3);
        assert_eq!(reach_back_to_unseen(&[10, 10, 10], 3, 1, 1_000), 1);
        // Nothing at all.
        assert_eq!(keep(&[], 5, 0, 120), 0);
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
