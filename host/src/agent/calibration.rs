//! Calibration of Latch's token estimate by the provider's own count.
//!
//! Every usage report stores the provider's input figure beside Latch's
//! estimate of the same request (the view's total). Per provider and model
//! the ratio `Σ reported ÷ Σ estimated` over the newest [`WINDOW`] reports
//! is the calibration. When the provider counts more than the estimate
//! (ratio above 1), the budget the engine receives is tightened so that the
//! hard invariant holds in the provider's own tokens: the usable part of
//! the window (window − reserve) is divided by the ratio. A ratio below 1
//! never loosens the budget: the conservative estimator stays the floor.
//!
//! The reduction is durable because its inputs are: it is recomputed from
//! the stored usage events, across sessions.

use latch_engine_sdk::types::ContextBudget;
use latch_kernel::{EventKind, StoredEvent};

/// Usage reports a calibration is reduced from (the newest ones).
pub const WINDOW: usize = 10;
/// Usage events read from the store to find [`WINDOW`] matching ones.
pub const SCAN: u32 = 400;

/// The provider-to-estimate ratio of one provider and model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// `Σ provider-reported input ÷ Σ Latch's estimate` over the samples.
    pub ratio: f64,
    /// How many requests it was reduced from.
    pub samples: usize,
}

impl Calibration {
    /// The factor the budget is divided by: the ratio, never below 1.
    pub fn tightening(&self) -> f64 {
        self.ratio.max(1.0)
    }
}

/// The calibration of `provider` / `model` from usage events (any order;
/// the newest [`WINDOW`] by sequence number count). `None` until one
/// request reported its input and had an estimate.
pub fn reduce(events: &[StoredEvent], provider: &str, model: &str) -> Option<Calibration> {
    let mut samples: Vec<(u64, u64, u64)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ProviderUsage {
                input_tokens: Some(reported),
                estimated_input_tokens: Some(estimated),
                provider: Some(p),
                model: Some(m),
                ..
            } if p == provider && m == model && *estimated > 0 && *reported > 0 => {
                Some((e.seq, *reported, *estimated))
            }
            _ => None,
        })
        .collect();
    samples.sort_by_key(|s| std::cmp::Reverse(s.0));
    samples.truncate(WINDOW);
    if samples.is_empty() {
        return None;
    }
    let reported: u64 = samples.iter().map(|s| s.1).sum();
    let estimated: u64 = samples.iter().map(|s| s.2).sum();
    Some(Calibration {
        ratio: reported as f64 / estimated as f64,
        samples: samples.len(),
    })
}

/// Tightens `budget` by `calibration`: the usable window (window − reserve)
/// shrinks by the ratio when the provider counts more; it never grows.
pub fn tighten(budget: &mut ContextBudget, calibration: Option<Calibration>) {
    let Some(c) = calibration else { return };
    let factor = c.tightening();
    if factor <= 1.0 {
        return;
    }
    let usable = budget
        .context_window_tokens
        .saturating_sub(budget.reserve_tokens);
    let tightened = (usable as f64 / factor).floor() as u64;
    budget.context_window_tokens = budget.reserve_tokens + tightened.min(usable);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(seq: u64, reported: u64, estimated: u64, model: &str) -> StoredEvent {
        StoredEvent {
            seq,
            session: "s".into(),
            time_ms: 0,
            kind: EventKind::ProviderUsage {
                input_tokens: Some(reported),
                output_tokens: None,
                cache_read_tokens: None,
                cache_creation_tokens: None,
                cache_miss_tokens: None,
                common_prefix_tokens: None,
                reasoning_tokens: None,
                estimated_input_tokens: Some(estimated),
                provider: Some("anthropic".into()),
                model: Some(model.into()),
            },
        }
    }

    fn budget() -> ContextBudget {
        ContextBudget {
            context_window_tokens: 10_000,
            reserve_tokens: 2_000,
            recent_tokens: 64_000,
            tools_tokens: 0,
            extension_tokens: 0,
        }
    }

    #[test]
    fn ratio_is_per_provider_and_model_over_the_newest_reports() {
        let mut events = vec![usage(1, 5_000, 1_000, "m")];
        events.extend((2..=11).map(|s| usage(s, 1_300, 1_000, "m")));
        events.push(usage(12, 9_000, 1_000, "other"));
        let c = reduce(&events, "anthropic", "m").unwrap();
        assert_eq!(c.samples, WINDOW);
        assert!((c.ratio - 1.3).abs() < 1e-9, "{c:?}");
        assert_eq!(reduce(&events, "openai", "m"), None);
    }

    #[test]
    fn budget_tightens_when_the_provider_counts_more_and_never_loosens() {
        let mut b = budget();
        tighten(
            &mut b,
            Some(Calibration {
                ratio: 1.6,
                samples: 3,
            }),
        );
        assert_eq!(b.context_window_tokens, 2_000 + 5_000);
        let mut b = budget();
        tighten(
            &mut b,
            Some(Calibration {
                ratio: 0.5,
                samples: 3,
            }),
        );
        assert_eq!(b, budget(), "a provider that counts less never loosens");
        let mut b = budget();
        tighten(&mut b, None);
        assert_eq!(b, budget());
    }
}
