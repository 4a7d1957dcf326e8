//! [`SessionCost`]: a session's cost from its provider-reported usage and a
//! [`PriceTable`], split into plain input, output, cache reads and cache
//! writes. Requests that cannot be priced are counted apart and named, so a
//! partial figure is shown as a lower bound and none as unknown.

use super::PriceTable;
use crate::usage::{RequestUsage, Usage};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// What a session's requests cost, as far as prices and usage are known.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionCost {
    /// Requests with reported usage.
    pub requests: usize,
    /// Requests priced (model price known, every needed count reported).
    pub priced: usize,
    /// US dollars for plain input (neither read from nor written to the
    /// cache), over the priced requests.
    pub input_usd: f64,
    /// US dollars for output, over the priced requests.
    pub output_usd: f64,
    /// US dollars for cache reads, over the priced requests.
    pub cache_read_usd: f64,
    /// US dollars for cache writes, over the priced requests.
    pub cache_write_usd: f64,
    /// Models the table has no price for.
    pub unpriced_models: BTreeSet<String>,
    /// Requests whose provider did not report a count the price needs.
    pub unreported: usize,
}

impl SessionCost {
    /// The cost of every request in `usage` under `prices`.
    pub fn of(usage: &Usage, prices: &PriceTable) -> SessionCost {
        let mut cost = SessionCost::default();
        for r in usage.requests() {
            cost.add(r, prices);
        }
        cost
    }

    fn add(&mut self, r: &RequestUsage, prices: &PriceTable) {
        self.requests += 1;
        let model = r.model.as_deref().unwrap_or("");
        let Some(price) = prices.price(model) else {
            self.unpriced_models.insert(if model.is_empty() {
                "an unnamed model".into()
            } else {
                model.to_string()
            });
            return;
        };
        let (Some(input), Some(output)) = (r.input_tokens, r.output_tokens) else {
            self.unreported += 1;
            return;
        };
        let read = r.cache_read_tokens.unwrap_or(0);
        let write = r.cache_creation_tokens.unwrap_or(0);
        let rate = |tokens: u64, per_million: Option<f64>| match (tokens, per_million) {
            (0, _) => Some(0.0),
            (n, Some(p)) => Some(n as f64 * p / 1e6),
            (_, None) => None,
        };
        let (Some(read_usd), Some(write_usd)) =
            (rate(read, price.cache_read), rate(write, price.cache_write))
        else {
            self.unpriced_models.insert(format!("{model} (cache)"));
            return;
        };
        let plain = input.saturating_sub(read).saturating_sub(write);
        self.priced += 1;
        self.input_usd += plain as f64 * price.input / 1e6;
        self.output_usd += output as f64 * price.output / 1e6;
        self.cache_read_usd += read_usd;
        self.cache_write_usd += write_usd;
    }

    /// US dollars over the priced requests.
    pub fn known_usd(&self) -> f64 {
        self.input_usd + self.output_usd + self.cache_read_usd + self.cache_write_usd
    }

    /// The whole cost, when every request was priced.
    pub fn total_usd(&self) -> Option<f64> {
        (self.priced == self.requests).then(|| self.known_usd())
    }

    /// One line for a person: `$0.0421`, `unknown (no price for local)`,
    /// or `at least $0.0421 (2 of 5 requests unpriced: local)`.
    pub fn text(&self) -> String {
        if self.requests == 0 {
            return "$0 (no requests yet)".into();
        }
        if let Some(total) = self.total_usd() {
            return usd(total);
        }
        let why = self.why_unknown();
        if self.priced == 0 {
            format!("unknown ({why})")
        } else {
            format!(
                "at least {} ({} of {} requests unpriced: {why})",
                usd(self.known_usd()),
                self.requests - self.priced,
                self.requests
            )
        }
    }

    /// The cache part for a person: `cache reads $0.0012 · writes $0.0040`.
    pub fn cache_text(&self) -> String {
        format!(
            "cache reads {} · writes {}",
            usd(self.cache_read_usd),
            usd(self.cache_write_usd)
        )
    }

    fn why_unknown(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if !self.unpriced_models.is_empty() {
            parts.push(format!(
                "no price for {}; set [prices.\"MODEL\"]",
                self.unpriced_models
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if self.unreported > 0 {
            parts.push(format!(
                "{} request{} without reported usage",
                self.unreported,
                if self.unreported == 1 { "" } else { "s" }
            ));
        }
        parts.join("; ")
    }

    /// As JSON: `total_usd` is null unless every request was priced.
    pub fn json(&self) -> Value {
        json!({
            "total_usd": self.total_usd(),
            "known_usd": self.known_usd(),
            "input_usd": self.input_usd,
            "output_usd": self.output_usd,
            "cache_read_usd": self.cache_read_usd,
            "cache_write_usd": self.cache_write_usd,
            "requests": self.requests,
            "priced_requests": self.priced,
            "unpriced_models": self.unpriced_models,
            "text": self.text(),
        })
    }
}

/// Dollars for a person: four decimals under a dollar, two above.
pub fn usd(v: f64) -> String {
    if v >= 1.0 {
        format!("${v:.2}")
    } else {
        format!("${v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_kernel::EventKind;

    fn usage(model: Option<&str>, input: u64, output: u64, read: u64, write: u64) -> EventKind {
        EventKind::ProviderUsage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            cache_read_tokens: Some(read),
            cache_creation_tokens: Some(write),
            cache_miss_tokens: Some(input - read),
            common_prefix_tokens: None,
            reasoning_tokens: None,
            estimated_input_tokens: None,
            provider: Some("anthropic".into()),
            model: model.map(str::to_string),
            base_url: None,
        }
    }

    #[test]
    fn cache_reads_and_writes_are_priced_apart_from_input() {
        let mut u = Usage::default();
        // 1M input of which 600k read and 300k written, 100k output.
        u.apply(
            1,
            &usage(
                Some("claude-sonnet-4-5-20250929"),
                1_000_000,
                100_000,
                600_000,
                300_000,
            ),
        );
        let c = SessionCost::of(&u, &PriceTable::builtin());
        assert!((c.input_usd - 0.30).abs() < 1e-9, "{c:?}");
        assert!((c.output_usd - 1.50).abs() < 1e-9);
        assert!((c.cache_read_usd - 0.18).abs() < 1e-9);
        assert!((c.cache_write_usd - 1.125).abs() < 1e-9);
        assert_eq!(c.text(), "$3.10");
    }

    #[test]
    fn unknown_prices_stay_unknown() {
        let mut u = Usage::default();
        u.apply(1, &usage(Some("local"), 1000, 10, 0, 0));
        let c = SessionCost::of(&u, &PriceTable::builtin());
        assert_eq!(c.total_usd(), None);
        assert!(
            c.text().starts_with("unknown (no price for local"),
            "{}",
            c.text()
        );
        u.apply(2, &usage(Some("gpt-4o"), 1_000_000, 0, 0, 0));
        let c = SessionCost::of(&u, &PriceTable::builtin());
        assert!(
            c.text()
                .starts_with("at least $2.50 (1 of 2 requests unpriced"),
            "{}",
            c.text()
        );
        let mut table = PriceTable::empty();
        table.set(
            "local",
            super::super::ModelPrice {
                input: 1.0,
                output: 2.0,
                cache_read: None,
                cache_write: None,
            },
        );
        let c = SessionCost::of(&u, &table);
        assert!(c.unpriced_models.contains("gpt-4o"));
    }

    #[test]
    fn a_longer_listed_name_wins_and_vendors_are_dropped() {
        let t = PriceTable::builtin();
        assert_eq!(t.price("gpt-4o-mini-2024-07-18").unwrap().input, 0.15);
        assert_eq!(t.price("gpt-4o-2024-08-06").unwrap().input, 2.50);
        assert_eq!(t.price("anthropic/claude-opus-4-5").unwrap().input, 5.0);
        assert!(t.price("gpt-4").is_none());
    }
}
