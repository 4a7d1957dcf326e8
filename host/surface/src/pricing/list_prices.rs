//! The built-in price table: the providers' published list prices in US
//! dollars per million tokens (input, output, cache read, cache write), as
//! published in 2025. A deployment with other prices (a discount, a
//! gateway, a local model) sets `[prices."MODEL"]` in its config.

use super::ModelPrice;

const fn p(input: f64, output: f64, read: f64, write: f64) -> ModelPrice {
    ModelPrice {
        input,
        output,
        cache_read: Some(read),
        cache_write: Some(write),
    }
}

/// Model name → price. Anthropic bills cache writes (5-minute) at 1.25× input
/// and reads at 0.1×; OpenAI bills cached input at its own rate and nothing
/// extra for writing the cache.
pub const LIST_PRICES: &[(&str, ModelPrice)] = &[
    // Anthropic.
    ("claude-opus-4-5", p(5.0, 25.0, 0.50, 6.25)),
    ("claude-opus-4-1", p(15.0, 75.0, 1.50, 18.75)),
    ("claude-opus-4", p(15.0, 75.0, 1.50, 18.75)),
    ("claude-sonnet-4-5", p(3.0, 15.0, 0.30, 3.75)),
    ("claude-sonnet-4", p(3.0, 15.0, 0.30, 3.75)),
    ("claude-3-7-sonnet", p(3.0, 15.0, 0.30, 3.75)),
    ("claude-haiku-4-5", p(1.0, 5.0, 0.10, 1.25)),
    ("claude-3-5-haiku", p(0.80, 4.0, 0.08, 1.0)),
    // OpenAI.
    ("gpt-5", p(1.25, 10.0, 0.125, 0.0)),
    ("gpt-5-mini", p(0.25, 2.0, 0.025, 0.0)),
    ("gpt-5-nano", p(0.05, 0.40, 0.005, 0.0)),
    ("gpt-5-codex", p(1.25, 10.0, 0.125, 0.0)),
    ("gpt-4.1", p(2.0, 8.0, 0.50, 0.0)),
    ("gpt-4.1-mini", p(0.40, 1.60, 0.10, 0.0)),
    ("gpt-4.1-nano", p(0.10, 0.40, 0.025, 0.0)),
    ("gpt-4o", p(2.50, 10.0, 1.25, 0.0)),
    ("gpt-4o-mini", p(0.15, 0.60, 0.075, 0.0)),
    ("o3", p(2.0, 8.0, 0.50, 0.0)),
    ("o3-mini", p(1.10, 4.40, 0.55, 0.0)),
    ("o4-mini", p(1.10, 4.40, 0.275, 0.0)),
];
