//! What a session cost: a per-model price table (built-in list prices,
//! overridable per model) applied to the provider-reported usage of each
//! request, with cache reads and cache writes priced apart from plain
//! input. A request whose model has no price, or whose provider left a
//! needed count unreported, is unknown — never counted as free.
//!
//! * [`list_prices`] — the built-in table of published list prices.
//! * [`cost`] — [`SessionCost`], the cost of a session's usage.

pub mod cost;
pub mod list_prices;

pub use cost::SessionCost;

use std::collections::BTreeMap;

/// Prices of one model, US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelPrice {
    /// Input tokens not read from or written to the cache.
    pub input: f64,
    /// Output tokens (reasoning included).
    pub output: f64,
    /// Tokens read from the provider's prompt cache; unknown: `None`.
    pub cache_read: Option<f64>,
    /// Tokens written to the provider's prompt cache; unknown: `None`.
    pub cache_write: Option<f64>,
}

/// Prices by model name. A model is found by its exact name, else by the
/// longest listed name it starts with followed by `-` (so a dated snapshot
/// such as `claude-sonnet-4-5-20250929` takes `claude-sonnet-4-5`'s price),
/// after dropping a router's `vendor/` prefix.
#[derive(Clone, Debug, PartialEq)]
pub struct PriceTable {
    prices: BTreeMap<String, ModelPrice>,
}

impl Default for PriceTable {
    /// The built-in list prices.
    fn default() -> Self {
        PriceTable::builtin()
    }
}

impl PriceTable {
    /// The built-in list prices ([`list_prices::LIST_PRICES`]).
    pub fn builtin() -> PriceTable {
        PriceTable {
            prices: list_prices::LIST_PRICES
                .iter()
                .map(|(name, price)| (name.to_string(), *price))
                .collect(),
        }
    }

    /// A table with no prices: every cost is unknown.
    pub fn empty() -> PriceTable {
        PriceTable {
            prices: BTreeMap::new(),
        }
    }

    /// Set (or replace) the price of `model`.
    pub fn set(&mut self, model: impl Into<String>, price: ModelPrice) {
        self.prices.insert(model.into(), price);
    }

    /// The price of `model`, if the table knows it.
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        if let Some(p) = self.prices.get(model) {
            return Some(p);
        }
        let name = model.rsplit('/').next().unwrap_or(model);
        if let Some(p) = self.prices.get(name) {
            return Some(p);
        }
        self.prices
            .iter()
            .filter(|(k, _)| {
                name.strip_prefix(k.as_str())
                    .is_some_and(|rest| rest.starts_with('-') || rest.starts_with('@'))
            })
            .max_by_key(|(k, _)| k.len())
            .map(|(_, p)| p)
    }
}
