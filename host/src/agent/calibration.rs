//! Calibration of Latch's token estimate by the provider's own count.
//!
//! Every usage report stores the provider's input figure beside Latch's
//! estimate of the same request (the view's total). Per server (provider,
//! base URL) and model the ratio `Σ reported ÷ Σ estimated` over the newest
//! [`WINDOW`] reports is the calibration: two local servers that serve one
//! model name with different tokenizers never pool their figures. When the
//! provider counts more than the estimate (ratio above 1), the budget the
//! engine receives is tightened so that the hard invariant holds in the
//! provider's own tokens: the usable part of the window (window − reserve)
//! is divided by the ratio. A ratio below 1 never loosens the budget: the
//! conservative estimator stays the floor.
//!
//! The reduction is durable because its inputs are: it is recomputed from
//! the stored usage events, across sessions. A report recorded before the
//! base URL was (it has none) counts for the provider's default server
//! only, where a hosted provider's reports came from.

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

/// Whose figures a calibration is reduced from: one server and one model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CalibrationKey<'a> {
    /// The provider's name (`anthropic`, `openai-compatible`, ...).
    pub provider: &'a str,
    /// The base URL requests go to (no trailing slash).
    pub base_url: &'a str,
    /// The provider's default base URL, which reports without one count
    /// for; `None` for providers without a default (compatible servers).
    pub default_base_url: Option<&'a str>,
    /// The model.
    pub model: &'a str,
}

impl CalibrationKey<'_> {
    /// True when a report by `provider` at `base_url` for `model` is this
    /// key's.
    fn matches(&self, provider: &str, base_url: Option<&str>, model: &str) -> bool {
        let base_url = base_url.map(|b| b.trim_end_matches('/'));
        let same_server = match base_url {
            Some(b) => b == self.base_url.trim_end_matches('/'),
            None => self
                .default_base_url
                .is_some_and(|d| d.trim_end_matches('/') == self.base_url.trim_end_matches('/')),
        };
        provider == self.provider && model == self.model && same_server
    }
}

/// The calibration of `key` from usage events (any order; the newest
/// [`WINDOW`] by sequence number count). `None` until one request reported
/// its input and had an estimate.
pub fn reduce(events: &[StoredEvent], key: &CalibrationKey) -> Option<Calibration> {
    let mut samples: Vec<(u64, u64, u64)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ProviderUsage {
                input_tokens: Some(reported),
                estimated_input_tokens: Some(estimated),
                provider: Some(p),
                model: Some(m),
                base_url,
                ..
            } if key.matches(p, base_url.as_deref(), m) && *estimated > 0 && *reported > 0 => {
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
        at(
            seq,
            reported,
            estimated,
            model,
            Some("https://api.anthropic.com"),
        )
    }

    fn at(
        seq: u64,
        reported: u64,
        estimated: u64,
        model: &str,
        base_url: Option<&str>,
    ) -> StoredEvent {
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
                provider: Some(if base_url.is_some_and(|b| b.contains("127.0.0.1")) {
                    "openai-compatible".into()
                } else {
                    "anthropic".into()
                }),
                model: Some(model.into()),
                base_url: base_url.map(str::to_string),
            },
        }
    }

    const ANTHROPIC: CalibrationKey = CalibrationKey {
        provider: "anthropic",
        base_url: "https://api.anthropic.com",
        default_base_url: Some("https://api.anthropic.com"),
        model: "m",
    };

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
        let c = reduce(&events, &ANTHROPIC).unwrap();
        assert_eq!(c.samples, WINDOW);
        assert!((c.ratio - 1.3).abs() < 1e-9, "{c:?}");
        let openai = CalibrationKey {
            provider: "openai",
            ..ANTHROPIC
        };
        assert_eq!(reduce(&events, &openai), None);
    }

    #[test]
    fn two_servers_under_one_model_name_keep_their_own_ratio() {
        let a = "http://127.0.0.1:8080/v1";
        let b = "http://127.0.0.1:8081/v1";
        let events = vec![
            at(1, 1_300, 1_000, "gemma", Some(a)),
            at(2, 600, 1_000, "gemma", Some(b)),
            at(3, 1_300, 1_000, "gemma", Some(&format!("{a}/"))),
            // Recorded before base URLs were: no default server for a
            // compatible provider, so it counts for neither.
            at(4, 9_000, 1_000, "gemma", None),
        ];
        let key = |base_url| CalibrationKey {
            provider: "openai-compatible",
            base_url,
            default_base_url: None,
            model: "gemma",
        };
        let first = reduce(&events, &key(a)).unwrap();
        assert_eq!(first.samples, 2);
        assert!((first.ratio - 1.3).abs() < 1e-9, "{first:?}");
        let second = reduce(&events, &key(b)).unwrap();
        assert_eq!(second.samples, 1);
        assert!((second.ratio - 0.6).abs() < 1e-9, "{second:?}");
        // A hosted provider's older reports count for its default server.
        let old = vec![at(5, 1_200, 1_000, "m", None)];
        let hosted = CalibrationKey {
            provider: "anthropic",
            base_url: "https://api.anthropic.com",
            default_base_url: Some("https://api.anthropic.com/"),
            model: "m",
        };
        assert_eq!(reduce(&old, &hosted).unwrap().samples, 1);
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
