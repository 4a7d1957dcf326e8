//! `[prices."MODEL"]`: a model's prices in US dollars per million tokens,
//! over Latch's built-in list prices (a discount, a gateway, a local model
//! that costs nothing).

use latch_surface::{ModelPrice, PriceTable};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One model's prices, US dollars per million tokens.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// Input tokens not read from or written to the cache.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Cache reads (default: unknown, so a request with reads is unpriced).
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Cache writes (default: unknown).
    #[serde(default)]
    pub cache_write: Option<f64>,
}

/// The price table: the built-in list prices with `prices` over them.
pub fn price_table(prices: &BTreeMap<String, PriceConfig>) -> PriceTable {
    let mut table = PriceTable::builtin();
    for (model, p) in prices {
        table.set(
            model.clone(),
            ModelPrice {
                input: p.input,
                output: p.output,
                cache_read: p.cache_read,
                cache_write: p.cache_write,
            },
        );
    }
    table
}
