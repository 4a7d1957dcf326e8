//! Configuration: TOML files, `.latch/config.toml` in the workspace layered over
//! the user's `latch/config.toml`. Every table refuses unknown keys with the
//! key's name and line, so a typo is never silently ignored.

pub mod hooks;
mod permissions;
pub mod prices;

pub use permissions::{PermissionsConfig, SandboxConfig};
pub mod skills_mcp;
pub mod trust;

use trust::{TrustGrant, WorkspaceTrust};

use crate::engine::SandboxLimits;
use crate::engine::runtime::EngineSource;
use latch_engine_sdk::types::{EstimatorProfile, ModelProfile};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {message}")]
    Read { path: PathBuf, message: String },
    /// The file is not valid TOML or has an unknown key or a bad value; the
    /// message names the key and its line.
    #[error("config file {path} is invalid: {message}")]
    Invalid { path: PathBuf, message: String },
    /// The engine configuration cannot be passed to an engine.
    #[error("[engine.config] in {path} cannot be passed to the engine: {message}")]
    EngineConfig { path: String, message: String },
    /// The user's recorded workspace-trust answers cannot be read.
    #[error(transparent)]
    Trust(#[from] trust::TrustStoreError),
}

/// The whole configuration.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The context engine.
    #[serde(default)]
    pub engine: EngineConfig,
    /// Context settings the host applies to every engine's budget.
    #[serde(default)]
    pub context: ContextConfig,
    /// The model provider.
    #[serde(default)]
    pub provider: ProviderConfig,
    /// Per-model overrides, keyed by model name.
    #[serde(default)]
    pub models: BTreeMap<String, ModelOverride>,
    /// The agent loop.
    #[serde(default)]
    pub agent: AgentConfig,
    /// Child agents.
    #[serde(default)]
    pub agents: AgentsConfig,
    /// `[permissions]` and `[sandbox]`: approvals and the command sandbox.
    #[serde(default)]
    pub permissions: PermissionsConfig,
    /// `[sandbox]`: what commands may touch.
    #[serde(default)]
    pub sandbox: SandboxConfig,
    /// Agent Skills: discovery and the skill list's cap.
    #[serde(default)]
    pub skills: skills_mcp::SkillsConfig,
    /// MCP servers, started at session start.
    #[serde(default)]
    pub mcp: skills_mcp::McpConfig,
    /// Commands run at session start, around tool calls, on a user message
    /// and at the end of a turn.
    #[serde(default)]
    pub hooks: hooks::HooksConfig,
    /// `[prices."MODEL"]`: prices over the built-in list prices.
    #[serde(default)]
    pub prices: BTreeMap<String, prices::PriceConfig>,
    /// `[group]`: where agent groups coordinate.
    #[serde(default)]
    pub group: GroupConfig,
    /// `[tools]`: which tools the model is offered.
    #[serde(default)]
    pub tools: ToolsConfig,
}

/// `[tools]`: which tools the model is offered. A model with a small
/// window cannot take every schema: `allow` keeps only the named tools,
/// `deny` removes some. Entries are tool names or prefixes ending in `*`
/// (`mcp__fs__*`); one that names no tool of the session is refused.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// Only these tools (all of them when unset).
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// Never these tools.
    #[serde(default)]
    pub deny: Vec<String>,
}

impl ToolsConfig {
    /// The filter the agent applies.
    pub fn filter(&self) -> crate::agent::ToolFilter {
        crate::agent::ToolFilter::new(self.allow.clone(), self.deny.clone())
    }
}

/// `[group]`: where agent groups coordinate.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GroupConfig {
    /// A shared group store, `postgres://user:password@host/db`, so
    /// members on several hosts join one group; unset: the local SQLite
    /// store. In a workspace config it needs trust.
    #[serde(default)]
    pub store: Option<String>,
}

/// `[agents]`: child agents.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentsConfig {
    /// Most children running at once (more wait for a free worker);
    /// default 4.
    #[serde(
        default = "default_max_concurrent",
        deserialize_with = "at_least_one_child"
    )]
    pub max_concurrent: usize,
    /// What the user's interrupt of a parent's turn does to its running
    /// children: `keep` them running (the default; their reports arrive
    /// at the parent's next turn) or `cancel` them with the turn.
    #[serde(default)]
    pub on_interrupt: ChildrenOnInterrupt,
}

/// `[agents] on_interrupt`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ChildrenOnInterrupt {
    /// Children keep running; only the parent's turn stops.
    #[default]
    Keep,
    /// Children are cancelled with the parent's turn.
    Cancel,
}

fn default_max_concurrent() -> usize {
    4
}

fn at_least_one_child<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let n = usize::deserialize(d)?;
    if n == 0 {
        return Err(serde::de::Error::custom(
            "[agents] max_concurrent must be at least 1 (children wait for a free worker beyond it)",
        ));
    }
    Ok(n)
}

impl Default for AgentsConfig {
    fn default() -> Self {
        AgentsConfig {
            max_concurrent: default_max_concurrent(),
            on_interrupt: ChildrenOnInterrupt::default(),
        }
    }
}

/// `[agent]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Most model requests per turn. Unset (the default): a turn runs until
    /// the model ends it, the user interrupts it or a provider error stops
    /// it. `--max-steps N` overrides it.
    pub max_steps: Option<usize>,
}

/// Tokens the default reserve keeps beyond the model's output limit, for the
/// estimator's error and the provider's framing.
pub const RESERVE_SAFETY_MARGIN_TOKENS: u64 = 2_048;

/// The default reserve of a model: its output limit (`max_tokens`) plus
/// [`RESERVE_SAFETY_MARGIN_TOKENS`], never more than a quarter of the window,
/// so a small window keeps three quarters of itself for the request.
pub fn default_reserve_tokens(context_window_tokens: u64, max_tokens: u32) -> u64 {
    (u64::from(max_tokens) + RESERVE_SAFETY_MARGIN_TOKENS).min(context_window_tokens / 4)
}

/// `[engine]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// `builtin:continuity` (the default) or a path to a component.
    #[serde(default = "default_engine")]
    pub component: String,
    /// Passed to the engine's `set-config` as a JSON object.
    #[serde(default)]
    pub config: Option<toml::Table>,
    /// Sandbox limits.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// The engine policy for child agents (required when `component` is not
    /// the default).
    #[serde(default)]
    pub child_policy: Option<ChildPolicyConfig>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            component: default_engine(),
            config: None,
            limits: LimitsConfig::default(),
            child_policy: None,
        }
    }
}

fn default_engine() -> String {
    crate::engine::builtin::DEFAULT_ENGINE.to_string()
}

/// `[engine.limits]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Deadline of one engine call in milliseconds (default 5000).
    #[serde(default = "default_deadline")]
    pub deadline_ms: u64,
    /// Memory cap of one engine instance in MiB (default 512).
    #[serde(default = "default_memory")]
    pub memory_mib: u64,
    /// Most bytes of one kernel-context entry an engine may persist
    /// (default 1 MiB).
    #[serde(default = "default_context_entry_bytes")]
    pub context_entry_bytes: u64,
    /// Most bytes of kernel context one view may persist (default 2 MiB).
    #[serde(default = "default_context_view_bytes")]
    pub context_view_bytes: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            deadline_ms: default_deadline(),
            memory_mib: default_memory(),
            context_entry_bytes: default_context_entry_bytes(),
            context_view_bytes: default_context_view_bytes(),
        }
    }
}

fn default_deadline() -> u64 {
    SandboxLimits::default().deadline_ms
}
fn default_memory() -> u64 {
    SandboxLimits::default().memory_mib
}
fn default_context_entry_bytes() -> u64 {
    SandboxLimits::default().context_entry_bytes
}
fn default_context_view_bytes() -> u64 {
    SandboxLimits::default().context_view_bytes
}

/// `[engine.child_policy]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChildPolicyConfig {
    /// A child-policy component path, or `builtin:same` to give children the
    /// root's engine and configuration.
    pub component: String,
}

/// `[context]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// Working-memory high-water mark in tokens (default 64,000).
    pub recent_tokens: Option<u64>,
}

/// `[provider]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// `anthropic`, `openai` or `openai-compatible`.
    pub kind: Option<String>,
    /// Model name.
    pub model: Option<String>,
    /// Base URL (e.g. `http://localhost:11434/v1` for Ollama).
    pub base_url: Option<String>,
    /// API key (prefer the `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` variables).
    pub api_key: Option<String>,
    /// Most output tokens per response.
    pub max_tokens: Option<u32>,
    /// The OpenAI API `kind = "openai"` speaks: `responses` (the default)
    /// or `chat` (Chat Completions).
    pub wire: Option<String>,
}

/// `[models.<name>]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelOverride {
    /// Context window in tokens (default 256,000).
    pub context_window_tokens: Option<u64>,
    /// Reserve for output plus safety (default: the output limit plus a
    /// margin, at most a quarter of the window; see
    /// [`default_reserve_tokens`]).
    pub reserve_tokens: Option<u64>,
    /// `openai`, `anthropic` or `cjk-optimized`.
    pub estimator: Option<String>,
    /// Most output tokens per response of this model (default: `[provider]
    /// max_tokens`); a child spawned on this model answers within it.
    pub max_tokens: Option<u32>,
    /// Anthropic extended thinking: the thinking budget in tokens (at least
    /// 1024, below `[provider] max_tokens`); unset leaves thinking off.
    pub thinking_budget_tokens: Option<u32>,
    /// OpenAI reasoning effort (`minimal`, `low`, `medium`, `high`) for a
    /// reasoning model on the Responses API; unset sends none.
    pub reasoning_effort: Option<String>,
}

impl Config {
    /// How each configured model reasons (`[models.X]`
    /// `thinking_budget_tokens` / `reasoning_effort`), by model name.
    pub fn reasoning(&self) -> BTreeMap<String, latch_provider::ReasoningOptions> {
        self.models
            .iter()
            .filter(|(_, m)| m.thinking_budget_tokens.is_some() || m.reasoning_effort.is_some())
            .map(|(name, m)| {
                (
                    name.clone(),
                    latch_provider::ReasoningOptions {
                        thinking_budget_tokens: m.thinking_budget_tokens,
                        reasoning_effort: m.reasoning_effort.clone(),
                    },
                )
            })
            .collect()
    }
}

/// A configuration and the files it came from.
#[derive(Clone, Debug, Default)]
pub struct LoadedConfig {
    /// The merged configuration.
    pub config: Config,
    /// Files read, lowest precedence first.
    pub sources: Vec<PathBuf>,
    /// Whether the workspace's `.latch/config.toml` is trusted, and the
    /// keys of it that need trust (left out of `config` until it is).
    pub trust: WorkspaceTrust,
}

impl Config {
    /// Parse one TOML document; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Load the configuration for `workspace`: the user file, then
    /// `.latch/config.toml` in the workspace (later wins), its keys that
    /// need trust applied only when the user trusted this config (see
    /// [`trust`]). With `explicit`, only that file is read (the user named
    /// it: trusted).
    pub fn load(workspace: &Path, explicit: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
        Config::load_with(workspace, explicit, TrustGrant::Recorded)
    }

    /// [`Config::load`], trusting the workspace's config for this run when
    /// `grant` says so (`--trust-workspace`, or the user just said yes).
    pub fn load_with(
        workspace: &Path,
        explicit: Option<&Path>,
        grant: TrustGrant,
    ) -> Result<LoadedConfig, ConfigError> {
        let mut layers = Vec::new();
        let mut trust = WorkspaceTrust::default();
        match explicit {
            Some(p) => layers.extend(read_layer(p, true)?),
            None => {
                let user = match user_config_dir() {
                    Some(dir) => read_layer(&dir.join("config.toml"), false)?,
                    None => None,
                };
                let ws_file = workspace.join(".latch").join("config.toml");
                let ws = read_layer(&ws_file, false)?;
                if let Some((path, text, mut table)) = ws {
                    let base = user.as_ref().map(|(_, _, t)| t.clone()).unwrap_or_default();
                    trust =
                        WorkspaceTrust::assess(workspace, &path, &text, &mut table, &base, grant)?;
                    hooks::keep_user_hooks(&base, &mut table);
                    layers.extend(user);
                    layers.push((path, text, table));
                } else {
                    layers.extend(user);
                }
            }
        }
        let mut merged = toml::Table::new();
        let mut sources = Vec::new();
        for (path, _, table) in layers {
            merge(&mut merged, table);
            sources.push(path);
        }
        let mut config: Config =
            toml::Value::Table(merged)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::Invalid {
                    path: sources.last().cloned().unwrap_or_default(),
                    message: e.to_string(),
                })?;
        // A trusted server from the workspace starts only while the files
        // it runs are the ones the user trusted.
        for (name, server) in config.mcp.servers.iter_mut() {
            server.trusted_files = trust
                .files_of(&["mcp", "servers", name])
                .into_iter()
                .map(|f| latch_mcp::TrustedFile {
                    path: f.path,
                    shown: f.shown,
                    sha256: f.sha256,
                })
                .collect();
        }
        Ok(LoadedConfig {
            config,
            sources,
            trust,
        })
    }

    /// The engine source, relative paths resolved against `base`.
    pub fn engine_source(&self, base: &Path) -> EngineSource {
        EngineSource::parse(&self.engine.component, base)
    }

    /// True when the root engine is the embedded default.
    pub fn engine_is_default(&self) -> bool {
        self.engine.component == crate::engine::builtin::DEFAULT_ENGINE
    }

    /// `[engine.config]` as a JSON object, if set.
    pub fn engine_config_json(&self) -> Result<Option<String>, ConfigError> {
        match &self.engine.config {
            None => Ok(None),
            Some(table) => {
                serde_json::to_string(table)
                    .map(Some)
                    .map_err(|e| ConfigError::EngineConfig {
                        path: "[engine.config]".into(),
                        message: e.to_string(),
                    })
            }
        }
    }

    /// The price table costs are computed with: the built-in list prices
    /// with `[prices]` over them.
    pub fn price_table(&self) -> latch_surface::PriceTable {
        prices::price_table(&self.prices)
    }

    /// The sandbox limits.
    pub fn limits(&self) -> SandboxLimits {
        SandboxLimits {
            deadline_ms: self.engine.limits.deadline_ms,
            memory_mib: self.engine.limits.memory_mib,
            context_entry_bytes: self.engine.limits.context_entry_bytes,
            context_view_bytes: self.engine.limits.context_view_bytes,
            ..SandboxLimits::default()
        }
    }

    /// The model profile for `provider` / `model` answering with at most
    /// `max_tokens` output tokens, with `[models.<model>]` overrides applied.
    /// Unless configured, the reserve follows the output limit (see
    /// [`default_reserve_tokens`]).
    pub fn model_profile(
        &self,
        provider: &str,
        model: &str,
        max_tokens: u32,
    ) -> Result<ModelProfile, ConfigError> {
        self.model_profile_with(provider, model, max_tokens, None)
    }

    /// [`Config::model_profile`] with the window a server reported for the
    /// model: used unless `[models.<model>] context_window_tokens` is set.
    pub fn model_profile_with(
        &self,
        provider: &str,
        model: &str,
        max_tokens: u32,
        discovered_window: Option<u64>,
    ) -> Result<ModelProfile, ConfigError> {
        let mut profile = ModelProfile::with_defaults(provider, model);
        let overrides = self.models.get(model);
        if let Some(w) = overrides
            .and_then(|o| o.context_window_tokens)
            .or(discovered_window)
        {
            profile.context_window_tokens = w;
        }
        profile.reserve_tokens = overrides
            .and_then(|o| o.reserve_tokens)
            .unwrap_or_else(|| default_reserve_tokens(profile.context_window_tokens, max_tokens));
        if let Some(e) = overrides.and_then(|o| o.estimator.as_ref()) {
            profile.estimator = parse_estimator(e).ok_or_else(|| ConfigError::Invalid {
                path: PathBuf::from(format!("[models.{model}]")),
                message: format!("estimator `{e}` is not one of openai, anthropic, cjk-optimized"),
            })?;
        }
        Ok(profile)
    }
}

/// Parse an estimator profile name.
pub fn parse_estimator(name: &str) -> Option<EstimatorProfile> {
    match name {
        "openai" => Some(EstimatorProfile::Openai),
        "anthropic" => Some(EstimatorProfile::Anthropic),
        "cjk-optimized" => Some(EstimatorProfile::CjkOptimized),
        _ => None,
    }
}

/// The user's Latch config directory: `$LATCH_CONFIG_DIR`, else
/// `$XDG_CONFIG_HOME/latch`, else `~/.config/latch` — the directory the
/// command sandbox hides, so both always agree
/// ([`latch_sandbox::env::latch_config_dir`]).
pub fn user_config_dir() -> Option<PathBuf> {
    latch_sandbox::env::latch_config_dir()
}

/// One config file: its path, text and table, validated alone so errors
/// carry its own line numbers. A missing file is `None` unless `required`.
fn read_layer(
    path: &Path,
    required: bool,
) -> Result<Option<(PathBuf, String, toml::Table)>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => return Ok(None),
        Err(e) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                message: e.to_string(),
            });
        }
    };
    Config::parse(&text, path)?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Invalid {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(Some((path.to_path_buf(), text, table)))
}

fn merge(into: &mut toml::Table, from: toml::Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, v) => {
                into.insert(key, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_select_the_embedded_engine() {
        let c = Config::parse("", Path::new("c.toml")).unwrap();
        assert!(c.engine_is_default());
        assert_eq!(c.limits(), SandboxLimits::default());
        assert_eq!(
            c.model_profile("openai", "gpt", 8_192)
                .unwrap()
                .context_window_tokens,
            256_000
        );
    }

    #[test]
    fn the_default_reserve_follows_the_output_limit_within_a_quarter_of_the_window() {
        let text = "[models.small]\ncontext_window_tokens = 32000\n\
                    [models.mid]\ncontext_window_tokens = 200000\n\
                    [models.big]\ncontext_window_tokens = 256000\n\
                    [models.pinned]\ncontext_window_tokens = 32000\nreserve_tokens = 12000\n";
        let c = Config::parse(text, Path::new("c.toml")).unwrap();
        let reserve = |model: &str, max_tokens: u32| {
            let m = c.model_profile("anthropic", model, max_tokens).unwrap();
            (m.context_window_tokens, m.reserve_tokens)
        };
        // 32k: the output limit plus the margin would be 10,240; a quarter
        // of the window (8,000) is the most the reserve may take.
        assert_eq!(reserve("small", 8_192), (32_000, 8_000));
        assert_eq!(reserve("small", 4_096), (32_000, 4_096 + 2_048));
        // 200k and 256k: the output limit plus the margin.
        assert_eq!(reserve("mid", 8_192), (200_000, 10_240));
        assert_eq!(reserve("big", 8_192), (256_000, 10_240));
        assert_eq!(reserve("big", 64_000), (256_000, 64_000));
        assert_eq!(reserve("big", 100_000), (256_000, 64_000));
        // A configured reserve is kept as configured.
        assert_eq!(reserve("pinned", 8_192), (32_000, 12_000));
        // [agents] max_concurrent defaults to 4 and refuses 0.
        assert_eq!(c.agents.max_concurrent, 4);
        let c = Config::parse("[agents]\nmax_concurrent = 2\n", Path::new("c.toml")).unwrap();
        assert_eq!(c.agents.max_concurrent, 2);
        let err = Config::parse("[agents]\nmax_concurrent = 0\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("at least 1") && err.contains("c.toml"),
            "{err}"
        );
        // [agents] on_interrupt keeps children by default.
        assert_eq!(c.agents.on_interrupt, ChildrenOnInterrupt::Keep);
        let c =
            Config::parse("[agents]\non_interrupt = \"cancel\"\n", Path::new("c.toml")).unwrap();
        assert_eq!(c.agents.on_interrupt, ChildrenOnInterrupt::Cancel);
        let err = Config::parse("[agents]\non_interrupt = \"stop\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("stop") && err.contains("keep"), "{err}");
        // [agent] max_steps is off by default and configurable.
        assert_eq!(c.agent.max_steps, None);
        let c = Config::parse("[agent]\nmax_steps = 7\n", Path::new("c.toml")).unwrap();
        assert_eq!(c.agent.max_steps, Some(7));
    }

    #[test]
    fn unknown_keys_are_refused_with_name_and_line() {
        let text = "[engine]\ncomponent = \"builtin:continuity\"\ndeadline = 3\n";
        let err = Config::parse(text, Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("deadline"), "{err}");
        assert!(err.contains("line 3"), "{err}");
        let err = Config::parse("[engine.limits]\nmemory_mb = 3\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("memory_mb") && err.contains("line 2"), "{err}");
    }

    #[test]
    fn full_config_parses() {
        let text = r#"
[engine]
component = "engines/x.wasm"
[engine.config]
recent_tokens = 1000
[engine.limits]
deadline_ms = 100
memory_mib = 64
[engine.child_policy]
component = "builtin:same"
[models.small]
context_window_tokens = 8000
estimator = "cjk-optimized"
"#;
        let c = Config::parse(text, Path::new("c.toml")).unwrap();
        assert_eq!(
            c.engine_source(Path::new("/w")),
            EngineSource::Path("/w/engines/x.wasm".into())
        );
        assert_eq!(
            c.engine_config_json().unwrap().unwrap(),
            r#"{"recent_tokens":1000}"#
        );
        assert_eq!(c.limits().deadline_ms, 100);
        let m = c.model_profile("openai", "small", 8_192).unwrap();
        assert_eq!(m.context_window_tokens, 8000);
        assert_eq!(m.estimator, EstimatorProfile::CjkOptimized);
    }

    #[test]
    fn workspace_file_overrides_user_file() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::write(
            user.join("config.toml"),
            "[engine.limits]\ndeadline_ms = 1\nmemory_mib = 9\n",
        )
        .unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".latch")).unwrap();
        std::fs::write(
            ws.join(".latch/config.toml"),
            "[engine.limits]\ndeadline_ms = 2\n",
        )
        .unwrap();
        // SAFETY: single-threaded use of this variable within this test binary.
        unsafe { std::env::set_var("LATCH_CONFIG_DIR", &user) };
        let loaded = Config::load(&ws, None).unwrap();
        unsafe { std::env::remove_var("LATCH_CONFIG_DIR") };
        assert_eq!(loaded.config.engine.limits.deadline_ms, 2);
        assert_eq!(loaded.config.engine.limits.memory_mib, 9);
        assert_eq!(loaded.sources.len(), 2);
    }
}
