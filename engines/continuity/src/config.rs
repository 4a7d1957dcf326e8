//! Engine configuration: the keys `set_config` accepts and `config` reports.
//!
//! Every key has a default; `set_config` validates the whole object before it
//! changes anything, so a refused configuration leaves the engine as it was.

use latch_engine_sdk::types::ConfigError;

/// Most entries the episode index may show (the spec's bound).
pub const MAX_INDEX_ENTRIES: u32 = 16;

/// When a cache epoch rotates (`rotation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// When the epoch's conversation passes the working-memory threshold
    /// (`"threshold"`): the spec's rule, the most verbatim context.
    Threshold,
    /// When a fresh epoch becomes cheaper than growing this one
    /// (`"cost"`), and at the threshold at the latest; see
    /// [`crate::budget::cost_rotation_point`].
    Cost,
}

/// Which of recalled originals and the episode index a new epoch's
/// snapshot group allocates first (`allocation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// The spec's priority order (`"recall-first"`): targeted recalled
    /// originals (item 4) take what they need of the room left after the
    /// state and the user's pinned messages, up to `recall_tokens`; the
    /// episode index (item 5) gets what is left, up to `index_tokens`, and
    /// follows them in the group.
    RecallFirst,
    /// The index first (`"index-first"`): the index takes up to half of the
    /// room left, up to `index_tokens`, and recalled originals fill the
    /// rest after it. A map of the whole archive outlives the originals
    /// when the budget is tight.
    IndexFirst,
}

impl Allocation {
    fn name(self) -> &'static str {
        match self {
            Allocation::RecallFirst => "recall-first",
            Allocation::IndexFirst => "index-first",
        }
    }
}

impl Rotation {
    fn name(self) -> &'static str {
        match self {
            Rotation::Threshold => "threshold",
            Rotation::Cost => "cost",
        }
    }
}

/// The engine's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Working-memory high-water mark overriding `request.budget.recent_tokens`
    /// when set (`recent_tokens`, `null` to follow the request).
    pub recent_tokens: Option<u64>,
    /// Volume cap of one episode in estimated tokens; a longer intent is split
    /// (`episode_volume_tokens`).
    pub episode_volume_tokens: u64,
    /// Most entries the episode index shows, at most 16 (`max_index_entries`).
    pub max_index_entries: u32,
    /// Most original events recalled for one query (`recall_limit`).
    pub recall_limit: u32,
    /// Tokens recalled originals may take within one cache epoch
    /// (`recall_tokens`).
    pub recall_tokens: u64,
    /// Tokens the episode index may take (`index_tokens`).
    pub index_tokens: u64,
    /// Longest single recalled original, in tokens; longer ones are cut with
    /// a pointer to the durable log (`recall_event_tokens`).
    pub recall_event_tokens: u64,
    /// Tokens the user's earlier messages may take in a new epoch's
    /// snapshot group (`user_tokens`): the session's first message always
    /// (cut to this budget), then the newest, verbatim. The rest stays
    /// reachable through the episode index and recall.
    pub user_tokens: u64,
    /// When an epoch rotates (`rotation`: `"threshold"` or `"cost"`).
    ///
    /// The defaults (`"cost"`, keeping 10 %) were picked by
    /// `latch engine compare` over both scripted sessions at 32k, 128k and
    /// 256k windows: the lowest cost per step with every planted fact
    /// visible or recalled. `{"rotation": "threshold", "retain_percent": 75}`
    /// is the spec's rule, with the most verbatim conversation.
    pub rotation: Rotation,
    /// How much of the rotation point a rotation keeps verbatim, in percent
    /// (`retain_percent`, 1 to 90; the spec's "about three quarters" is 75).
    pub retain_percent: u64,
    /// Whether a new epoch allocates recalled originals or the episode
    /// index first (`allocation`: `"recall-first"`, the spec's order, or
    /// `"index-first"`).
    pub allocation: Allocation,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            recent_tokens: None,
            episode_volume_tokens: 8_000,
            max_index_entries: MAX_INDEX_ENTRIES,
            recall_limit: 8,
            recall_tokens: 8_000,
            index_tokens: 2_000,
            recall_event_tokens: 1_500,
            user_tokens: 4_000,
            rotation: Rotation::Cost,
            retain_percent: 10,
            allocation: Allocation::RecallFirst,
        }
    }
}

impl Config {
    /// The configuration as a JSON object with every key, in a fixed order.
    pub fn to_json(&self) -> String {
        let recent = match self.recent_tokens {
            Some(n) => n.to_string(),
            None => "null".to_string(),
        };
        format!(
            "{{\"allocation\":\"{}\",\"episode_volume_tokens\":{},\"index_tokens\":{},\"max_index_entries\":{},\"recall_event_tokens\":{},\"recall_limit\":{},\"recall_tokens\":{},\"recent_tokens\":{},\"retain_percent\":{},\"rotation\":\"{}\",\"user_tokens\":{}}}",
            self.allocation.name(),
            self.episode_volume_tokens,
            self.index_tokens,
            self.max_index_entries,
            self.recall_event_tokens,
            self.recall_limit,
            self.recall_tokens,
            recent,
            self.retain_percent,
            self.rotation.name(),
            self.user_tokens,
        )
    }

    /// This configuration with the keys of `json` applied; unknown keys and
    /// bad values are refused and nothing is changed.
    pub fn apply_json(&self, json: &str) -> Result<Config, ConfigError> {
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| ConfigError::Malformed(e.to_string()))?;
        let map = value.as_object().ok_or_else(|| {
            ConfigError::Malformed(format!("expected a JSON object, got {value}"))
        })?;
        let mut next = self.clone();
        // serde_json's map may preserve insertion order; sort the keys so the
        // first error reported does not depend on it.
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for key in keys {
            let v = &map[key.as_str()];
            match key.as_str() {
                "recent_tokens" => {
                    next.recent_tokens = if v.is_null() {
                        None
                    } else {
                        Some(int(key, v, 1, u64::MAX / 4)?)
                    }
                }
                "episode_volume_tokens" => {
                    next.episode_volume_tokens = int(key, v, 64, 10_000_000)?
                }
                "max_index_entries" => {
                    next.max_index_entries = int(key, v, 0, MAX_INDEX_ENTRIES as u64)? as u32
                }
                "recall_limit" => {
                    next.recall_limit = int(key, v, 0, latch_engine_sdk::MAX_SEARCH as u64)? as u32
                }
                "recall_tokens" => next.recall_tokens = int(key, v, 0, u64::MAX / 4)?,
                "index_tokens" => next.index_tokens = int(key, v, 0, u64::MAX / 4)?,
                "recall_event_tokens" => next.recall_event_tokens = int(key, v, 64, u64::MAX / 4)?,
                "user_tokens" => next.user_tokens = int(key, v, 0, u64::MAX / 4)?,
                "retain_percent" => next.retain_percent = int(key, v, 1, 90)?,
                "rotation" => {
                    next.rotation = match v.as_str() {
                        Some("threshold") => Rotation::Threshold,
                        Some("cost") => Rotation::Cost,
                        _ => {
                            return Err(ConfigError::InvalidValue((
                                key.to_string(),
                                format!("expected \"threshold\" or \"cost\", got {v}"),
                            )));
                        }
                    }
                }
                "allocation" => {
                    next.allocation = match v.as_str() {
                        Some("recall-first") => Allocation::RecallFirst,
                        Some("index-first") => Allocation::IndexFirst,
                        _ => {
                            return Err(ConfigError::InvalidValue((
                                key.to_string(),
                                format!("expected \"recall-first\" or \"index-first\", got {v}"),
                            )));
                        }
                    }
                }
                other => return Err(ConfigError::UnknownKey(other.to_string())),
            }
        }
        Ok(next)
    }
}

fn int(key: &str, v: &serde_json::Value, min: u64, max: u64) -> Result<u64, ConfigError> {
    v.as_u64()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            ConfigError::InvalidValue((
                key.to_string(),
                format!("expected an integer from {min} to {max}, got {v}"),
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_bad_input() {
        let c = Config::default();
        let back = c.apply_json(&c.to_json()).expect("own output is accepted");
        assert_eq!(back, c);
        let c2 = c
            .apply_json(r#"{"recent_tokens": 5000, "max_index_entries": 4, "recall_limit": 3}"#)
            .expect("valid");
        assert_eq!(c2.recent_tokens, Some(5000));
        assert_eq!(c2.apply_json(&c2.to_json()).expect("round trip"), c2);
        assert_eq!(
            c2.apply_json(r#"{"recent_tokens": null}"#)
                .expect("null")
                .recent_tokens,
            None
        );
        assert_eq!(
            c.apply_json(r#"{"recnet_tokens": 1}"#),
            Err(ConfigError::UnknownKey("recnet_tokens".into()))
        );
        assert!(matches!(
            c.apply_json(r#"{"max_index_entries": 17}"#),
            Err(ConfigError::InvalidValue(_))
        ));
        assert!(matches!(
            c.apply_json(r#"{"recent_tokens": -1}"#),
            Err(ConfigError::InvalidValue(_))
        ));
        assert!(matches!(
            c.apply_json(r#"{"recall_limit": "8"}"#),
            Err(ConfigError::InvalidValue(_))
        ));
        assert!(matches!(
            c.apply_json("[1]"),
            Err(ConfigError::Malformed(_))
        ));
        assert!(matches!(c.apply_json("{"), Err(ConfigError::Malformed(_))));
        let c3 = c
            .apply_json(r#"{"rotation": "cost", "retain_percent": 40, "user_tokens": 0}"#)
            .expect("valid");
        assert_eq!(
            (c3.rotation, c3.retain_percent, c3.user_tokens),
            (Rotation::Cost, 40, 0)
        );
        assert_eq!(c3.apply_json(&c3.to_json()).expect("round trip"), c3);
        let c4 = c
            .apply_json(r#"{"allocation": "index-first"}"#)
            .expect("valid");
        assert_eq!(c4.allocation, Allocation::IndexFirst);
        assert_eq!(c.allocation, Allocation::RecallFirst, "the spec's order");
        assert_eq!(c4.apply_json(&c4.to_json()).expect("round trip"), c4);
        for bad in [
            r#"{"allocation": "index"}"#,
            r#"{"rotation": "sometimes"}"#,
            r#"{"retain_percent": 0}"#,
            r#"{"retain_percent": 95}"#,
        ] {
            assert!(
                matches!(c.apply_json(bad), Err(ConfigError::InvalidValue(_))),
                "{bad}"
            );
        }
    }
}
