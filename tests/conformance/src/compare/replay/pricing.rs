//! What a replayed request would have cost: its canonical tokens (system
//! prompt, messages and the reserved tool schemas, as the hard budget counts
//! them), the prefix it shares with the same engine's previous request (what
//! a provider's prompt cache could serve), the uncached rest, and the cost
//! in uncached-token units (uncached + 0.1 × cached) and, where the model
//! is priced, in dollars.
//!
//! The prefix is counted in whole segments, as a prompt cache matches them:
//! the tool schemas, then the system prompt, then every leading message
//! equal to the previous request's message at the same place.

use super::super::metrics::CACHED_INPUT_PRICE;
use latch_engine_sdk::estimate;
use latch_engine_sdk::estimate::message_tokens;
use latch_engine_sdk::types::{EstimatorProfile, Message};
use serde::Serialize;

/// The price of one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Priced {
    /// Canonical tokens of the whole request.
    pub tokens: u64,
    /// Of those, the prefix shared with the engine's previous request.
    pub prefix_tokens: u64,
}

impl Priced {
    /// Tokens a prompt cache could not serve.
    pub fn uncached(&self) -> u64 {
        self.tokens.saturating_sub(self.prefix_tokens)
    }

    /// Uncached + 0.1 × cached, in uncached-token units.
    pub fn cost_units(&self) -> f64 {
        self.uncached() as f64 + CACHED_INPUT_PRICE * self.prefix_tokens as f64
    }

    /// Share of the request that repeats the previous request's prefix.
    pub fn prefix_ratio(&self) -> f64 {
        if self.tokens == 0 {
            1.0
        } else {
            self.prefix_tokens as f64 / self.tokens as f64
        }
    }
}

/// A model's input prices, US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct InputPrice {
    /// Uncached input.
    pub input: f64,
    /// Input read from the prompt cache; unknown: `None` (the cost of a
    /// request with a cached prefix is then unknown, never free).
    pub cache_read: Option<f64>,
}

impl InputPrice {
    /// Dollars for `priced`, when the prices it needs are known.
    pub fn dollars(&self, priced: &Priced) -> Option<f64> {
        let cached = match (priced.prefix_tokens, self.cache_read) {
            (0, _) => 0.0,
            (n, Some(p)) => n as f64 * p,
            (_, None) => return None,
        };
        Some((priced.uncached() as f64 * self.input + cached) / 1e6)
    }
}

/// One engine's previous request, to price the next against.
#[derive(Clone, Debug, Default)]
pub struct PrefixTracker {
    tools_key: Option<u64>,
    tools_tokens: u64,
    system: String,
    system_tokens: u64,
    messages: Vec<Message>,
    message_tokens: Vec<u64>,
}

impl PrefixTracker {
    /// Price a request of `messages` under `system`, with tool schemas
    /// identified by `tools_key` costing `tools_tokens`, and remember it as
    /// the engine's previous request.
    pub fn price(
        &mut self,
        profile: EstimatorProfile,
        (tools_key, tools_tokens): (u64, u64),
        system: &str,
        messages: &[Message],
    ) -> Priced {
        let same_tools = self.tools_key == Some(tools_key) && self.tools_tokens == tools_tokens;
        let same_system = same_tools && self.system == system;
        let system_tokens = if self.system == system && self.tools_key.is_some() {
            self.system_tokens
        } else {
            estimate(profile, system) as u64
        };
        let mut prefix = 0;
        if same_tools {
            prefix += tools_tokens;
        }
        if same_system {
            prefix += system_tokens;
        }
        let mut tokens = Vec::with_capacity(messages.len());
        let mut leading = same_system;
        for (i, m) in messages.iter().enumerate() {
            let equal = leading && self.messages.get(i) == Some(m);
            let t = if equal {
                self.message_tokens[i]
            } else {
                message_tokens(profile, m)
            };
            if equal {
                prefix += t;
            } else {
                leading = false;
            }
            tokens.push(t);
        }
        let total = tools_tokens + system_tokens + tokens.iter().sum::<u64>();
        *self = PrefixTracker {
            tools_key: Some(tools_key),
            tools_tokens,
            system: system.to_string(),
            system_tokens,
            messages: messages.to_vec(),
            message_tokens: tokens,
        };
        Priced {
            tokens: total,
            prefix_tokens: prefix,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::{ContextView, Role};
    use latch_engine_sdk::validate::request_tokens;

    const P: EstimatorProfile = EstimatorProfile::Anthropic;

    fn msgs(texts: &[&str]) -> Vec<Message> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                Message::text(
                    if i % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    *t,
                )
            })
            .collect()
    }

    #[test]
    fn the_prefix_is_the_leading_equal_segments_of_the_previous_request() {
        let mut t = PrefixTracker::default();
        let first = t.price(P, (7, 100), "You are Latch.", &msgs(&["task", "ok"]));
        assert_eq!(first.prefix_tokens, 0, "nothing before the first request");
        let view = ContextView {
            system: "You are Latch.".into(),
            kept_messages: 0,
            messages: msgs(&["task", "ok", "more"]),
            persist: vec![],
            report: latch_engine_sdk::types::ContextReport::empty("t"),
        };
        let appended = t.price(P, (7, 100), &view.system, &view.messages);
        assert_eq!(appended.tokens, request_tokens(P, &view, 100));
        let shared = first.tokens;
        assert_eq!(appended.prefix_tokens, shared, "the whole previous request");
        assert_eq!(appended.uncached(), appended.tokens - shared);
        let rewritten = t.price(P, (7, 100), &view.system, &msgs(&["TASK", "ok", "more"]));
        let head = 100 + estimate(P, "You are Latch.") as u64;
        assert_eq!(rewritten.prefix_tokens, head, "tools and system only");
        let other_tools = t.price(P, (8, 100), &view.system, &msgs(&["TASK", "ok", "more"]));
        assert_eq!(other_tools.prefix_tokens, 0);
        assert_eq!(
            appended.cost_units(),
            appended.uncached() as f64 + 0.1 * shared as f64
        );
    }

    #[test]
    fn dollars_need_the_cache_read_price_only_when_something_is_cached() {
        let p = Priced {
            tokens: 3_000_000,
            prefix_tokens: 2_000_000,
        };
        let known = InputPrice {
            input: 3.0,
            cache_read: Some(0.3),
        };
        assert!((known.dollars(&p).unwrap() - 3.6).abs() < 1e-9);
        let unknown = InputPrice {
            input: 3.0,
            cache_read: None,
        };
        assert_eq!(unknown.dollars(&p), None);
        let uncached = Priced {
            tokens: 1_000_000,
            prefix_tokens: 0,
        };
        assert_eq!(unknown.dollars(&uncached), Some(3.0));
    }
}
