//! The models a child may run, and how `spawn_agent {model}` picks one: the
//! parent's own model (the default), or a profile configured under
//! `[models.<name>]` (its window, output limit, reserve and estimator) on
//! the parent's provider. An unknown name is refused with the names the
//! model may use, so the model can correct its call.

use crate::config::{Config, ModelOverride};
use latch_engine_sdk::types::ModelProfile;
use std::collections::BTreeMap;

/// The profile and output limit a child runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildModel {
    /// The durable profile of the child's session (provider, model name,
    /// window, reserve, estimator).
    pub profile: ModelProfile,
    /// Most output tokens per response.
    pub max_tokens: u32,
}

/// The configured model profiles children may choose from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChildModels {
    configured: BTreeMap<String, ModelOverride>,
}

impl ChildModels {
    /// The `[models.<name>]` tables of `config`.
    pub fn from_config(config: &Config) -> ChildModels {
        ChildModels {
            configured: config.models.clone(),
        }
    }

    /// The output limit of `model`: its `[models.<name>] max_tokens`, else
    /// `default_max_tokens` (the provider's).
    pub fn max_tokens(&self, model: &str, default_max_tokens: u32) -> u32 {
        self.configured
            .get(model)
            .and_then(|m| m.max_tokens)
            .unwrap_or(default_max_tokens)
    }

    /// The model of a child of a parent running `parent`: `requested` by
    /// name (the parent's own model, or a configured one), or the parent's
    /// when `None`. The error is the tool result the model reads.
    pub fn resolve(
        &self,
        parent: &ModelProfile,
        requested: Option<&str>,
        default_max_tokens: u32,
    ) -> Result<ChildModel, String> {
        let name = requested.unwrap_or(&parent.model);
        let max_tokens = self.max_tokens(name, default_max_tokens);
        if name == parent.model {
            return Ok(ChildModel {
                profile: parent.clone(),
                max_tokens,
            });
        }
        if !self.configured.contains_key(name) {
            return Err(self.unknown(name, &parent.model));
        }
        let config = Config {
            models: self.configured.clone(),
            ..Config::default()
        };
        let profile = config
            .model_profile(&parent.provider, name, max_tokens)
            .map_err(|e| format!("spawn_agent: model `{name}` is misconfigured: {e}"))?;
        Ok(ChildModel {
            profile,
            max_tokens,
        })
    }

    /// True when `[models.<name>]` is configured.
    pub fn is_configured(&self, name: &str) -> bool {
        self.configured.contains_key(name)
    }

    /// The model `name` a user's agent file names: as [`Self::resolve`],
    /// but a name without `[models.<name>]` runs with the defaults on the
    /// parent's provider (the user chose it; the model did not).
    pub fn resolve_defined(
        &self,
        parent: &ModelProfile,
        name: &str,
        default_max_tokens: u32,
    ) -> Result<ChildModel, String> {
        if name == parent.model || self.is_configured(name) {
            return self.resolve(parent, Some(name), default_max_tokens);
        }
        let max_tokens = self.max_tokens(name, default_max_tokens);
        let profile = Config::default()
            .model_profile(&parent.provider, name, max_tokens)
            .map_err(|e| format!("spawn_agent: model `{name}` is misconfigured: {e}"))?;
        Ok(ChildModel {
            profile,
            max_tokens,
        })
    }

    fn unknown(&self, name: &str, parent: &str) -> String {
        let others: Vec<&str> = self
            .configured
            .keys()
            .map(String::as_str)
            .filter(|m| *m != parent)
            .collect();
        let choice = if others.is_empty() {
            format!("only your own model `{parent}` (no other [models.<name>] is configured)")
        } else {
            format!(
                "your own model `{parent}` (the default) or one of the configured models: {}",
                others.join(", ")
            )
        };
        format!(
            "spawn_agent: model `{name}` is not configured. A child may run {choice}. Call \
             spawn_agent again with one of these, or without `model`; the user can add \
             [models.{name}] to .latch/config.toml to allow it."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::EstimatorProfile;
    use std::path::Path;

    fn models(text: &str) -> ChildModels {
        ChildModels::from_config(&Config::parse(text, Path::new("c.toml")).unwrap())
    }

    #[test]
    fn a_configured_model_brings_its_whole_profile() {
        let m = models(
            "[models.small]\ncontext_window_tokens = 32000\nmax_tokens = 1024\n\
             estimator = \"cjk-optimized\"\n",
        );
        let parent = ModelProfile::with_defaults("anthropic", "big");
        let child = m.resolve(&parent, Some("small"), 8_192).unwrap();
        assert_eq!(child.max_tokens, 1024);
        assert_eq!(child.profile.model, "small");
        assert_eq!(child.profile.provider, "anthropic");
        assert_eq!(child.profile.context_window_tokens, 32_000);
        assert_eq!(child.profile.reserve_tokens, 1024 + 2048);
        assert_eq!(child.profile.estimator, EstimatorProfile::CjkOptimized);
        // No model, or the parent's own name: the parent's durable profile.
        for requested in [None, Some("big")] {
            let same = m.resolve(&parent, requested, 8_192).unwrap();
            assert_eq!(same.profile, parent);
            assert_eq!(same.max_tokens, 8_192);
        }
    }

    #[test]
    fn an_unknown_model_is_refused_with_the_allowed_ones() {
        let parent = ModelProfile::with_defaults("openai", "gpt");
        let err = models("[models.small]\n[models.tiny]\n")
            .resolve(&parent, Some("huge"), 8_192)
            .unwrap_err();
        assert!(
            err.contains("model `huge` is not configured")
                && err.contains("`gpt` (the default)")
                && err.contains("small, tiny")
                && err.contains("[models.huge]"),
            "{err}"
        );
        let err = models("")
            .resolve(&parent, Some("huge"), 8_192)
            .unwrap_err();
        assert!(err.contains("only your own model `gpt`"), "{err}");
    }
}
