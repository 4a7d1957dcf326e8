//! Resuming a session as it ran: the provider, base URL, model and the
//! approval and sandbox modes come from the session's durable profile
//! (see [`latch_kernel::profile`]); a flag overrides any of them. The
//! configuration never loosens a resumed session: a configured approval or
//! sandbox mode stricter than the recorded one applies, a looser one is
//! only reported (the flag applies it). Whatever differs from the recorded
//! profile is recorded as a new profile listing the changes, which every
//! surface shows in the transcript. The API key is never stored: it comes
//! from the configuration or the environment of the provider resumed, and
//! it goes only to an endpoint a trusted source names: the flags, the
//! user's config, a trusted workspace config, the provider's environment
//! variable or default, or one the user used before or accepted (see
//! [`UnnamedEndpoint`]); a store shipped in a repository cannot send it
//! elsewhere. A
//! member that joined an agent group from this host keeps its group (the
//! store's password, never recorded, comes from `--store`, `[group] store`
//! or `PGPASSWORD`).

use super::GlobalArgs;
use super::setup::{Env, ProviderChoice, default_model};
use crate::supervisor::profile::{self, Settings};
use anyhow::bail;
use latch_kernel::{JoinedGroup, SessionProfile, SessionRecord};
use latch_provider::{ProviderConfig, ProviderKind};
use latch_sandbox::{ApprovalMode, SandboxMode};
use std::collections::HashMap;

/// A resumed session's recorded endpoint that no trusted source names:
/// asked about where someone can answer, refused elsewhere.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "session {session} was recorded talking to the {provider} provider at {url}, which nothing \
     you trust names (--base-url, your config, a trusted workspace config, ${env}, an endpoint \
     you used before); resuming would send your API key there. If it is yours, pass \
     --base-url {url} (asked once, then remembered); otherwise pass --base-url with your own \
     endpoint, or --provider"
)]
pub struct UnnamedEndpoint {
    /// The session.
    pub session: String,
    /// The provider recorded.
    pub provider: String,
    /// The recorded base URL.
    pub url: String,
    /// The provider's base-URL variable.
    pub env: &'static str,
}

impl UnnamedEndpoint {
    /// The question a terminal asks.
    pub fn question(&self) -> String {
        format!(
            "session {} was recorded talking to the {} provider at\n  {}\nwhich nothing you \
             trust names (your flags, your config, a trusted workspace config, ${}). Resuming \
             sends your API key there. A session store shipped in a repository can record any \
             address.",
            self.session, self.provider, self.url, self.env
        )
    }
}

/// Whether `url` is named by a trusted source for `kind`: the user's
/// (trusted) configuration, the provider's environment variable or default,
/// or an endpoint the user used or accepted before.
fn named_by_trusted_source(kind: ProviderKind, url: &str, config: &crate::config::Config) -> bool {
    use crate::config::trust::store::endpoint_key;
    let key = endpoint_key(url);
    let env = std::env::var(kind.base_url_env()).ok();
    let named = [
        config.provider.base_url.as_deref(),
        env.as_deref(),
        kind.default_base_url(),
    ];
    if named.iter().flatten().any(|n| endpoint_key(n) == key) {
        return true;
    }
    crate::config::trust::TrustStore::user()
        .and_then(|s| s.knows_endpoint(url))
        .unwrap_or(false)
}

/// A session opened for resume: what it runs with now.
pub struct Resumed {
    /// The session, its model profile the one it runs with now.
    pub record: SessionRecord,
    /// The provider to talk to.
    pub provider: ProviderChoice,
    /// The settings recorded for this run.
    pub settings: Settings,
    /// Where each setting that did not come from the recorded profile came
    /// from (`--model x`, the configuration), for the changes' `by`.
    sources: HashMap<&'static str, String>,
    /// Said to the user before the session opens (e.g. a looser configured
    /// mode that was not applied).
    pub notes: Vec<String>,
}

impl Resumed {
    /// Record the settings as the session's profile when they differ from
    /// the recorded one (or none was recorded); the profile recorded.
    pub fn record_profile(&self, env: &Env) -> anyhow::Result<Option<SessionProfile>> {
        let by = |setting: &str| {
            self.sources
                .get(setting)
                .cloned()
                .unwrap_or_else(|| "this resume".to_string())
        };
        Ok(profile::record(
            &env.store,
            &self.record.id,
            &self.settings,
            by,
        )?)
    }
}

/// One mode of a resumed session: the flag, else the recorded mode unless
/// the configuration is stricter. Returns the mode, where it came from
/// (when not from the record) and a note for a looser configured mode.
fn resolve_mode<M: Copy + PartialEq + std::fmt::Display>(
    flag: Option<M>,
    recorded: Option<M>,
    configured: M,
    looser: impl Fn(M, M) -> bool,
    flag_name: &str,
    config_key: &str,
) -> (M, Option<String>, Option<String>) {
    match (flag, recorded) {
        (Some(f), _) => (f, Some(format!("--{flag_name} {f}")), None),
        (None, Some(r)) if looser(r, configured) => (
            configured,
            Some(format!(
                "{config_key} = \"{configured}\" in the configuration"
            )),
            None,
        ),
        (None, Some(r)) if looser(configured, r) => (
            r,
            None,
            Some(format!(
                "the session ran with {flag_name} mode `{r}`; the configured {config_key} = \
                 \"{configured}\" is looser and is not applied on resume (pass --{flag_name} \
                 {configured} to apply it)"
            )),
        ),
        (None, Some(r)) => (r, None, None),
        (None, None) => (
            configured,
            Some(format!("{config_key} in the configuration")),
            None,
        ),
    }
}

/// How `record` resumes under `global`'s flags and `env`'s configuration
/// (nothing is written); a recorded endpoint no trusted source names is
/// refused ([`UnnamedEndpoint`]).
pub fn resolve(env: &Env, global: &GlobalArgs, record: SessionRecord) -> anyhow::Result<Resumed> {
    resolve_asking(env, global, record, &|_| false)
}

/// [`resolve`], asking `ask` about a recorded endpoint no trusted source
/// names: a yes is remembered (in the user's trust file) and resumes with
/// it, a no refuses.
pub fn resolve_asking(
    env: &Env,
    global: &GlobalArgs,
    record: SessionRecord,
    ask: &dyn Fn(&UnnamedEndpoint) -> bool,
) -> anyhow::Result<Resumed> {
    let config = &env.config.config;
    let recorded = env.store.session_profile(&record.id)?;
    let mut sources: HashMap<&'static str, String> = HashMap::new();
    let mut notes = Vec::new();

    // The provider, its base URL and the model: the flags, else the record.
    let was_provider = recorded
        .as_ref()
        .map(|p| p.provider.clone())
        .unwrap_or_else(|| record.model.provider.clone());
    let kind_name = match &global.provider {
        Some(p) => {
            sources.insert("provider", format!("--provider {p}"));
            p.clone()
        }
        None => was_provider.clone(),
    };
    let kind: ProviderKind = kind_name.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    let same_provider = kind.name() == was_provider;
    let base_url = match (&global.base_url, &recorded) {
        (Some(url), _) => {
            sources.insert("base_url", format!("--base-url {url}"));
            Some(url.clone())
        }
        // The recorded one, or the provider's default when none was set;
        // the key goes to a recorded one only when something the user
        // trusts names it, or the user says so now.
        (None, Some(p)) if same_provider => {
            if let Some(url) = &p.base_url
                && !named_by_trusted_source(kind, url, config)
            {
                let unnamed = UnnamedEndpoint {
                    session: record.id.clone(),
                    provider: kind.name().to_string(),
                    url: url.clone(),
                    env: kind.base_url_env(),
                };
                if !ask(&unnamed) {
                    return Err(unnamed.into());
                }
                if let Ok(store) = crate::config::trust::TrustStore::user() {
                    let _ = store.know_endpoint(url);
                }
            }
            p.base_url.clone()
        }
        // No record of it (an older session) or another provider: as a new
        // session would choose it.
        (None, _) => {
            sources.insert("base_url", "the configuration or environment".into());
            config.provider.base_url.clone()
        }
    };
    let model = match &global.model {
        Some(m) => {
            sources.insert("model", format!("--model {m}"));
            m.clone()
        }
        None if same_provider => recorded
            .as_ref()
            .map(|p| p.model.clone())
            .unwrap_or_else(|| record.model.model.clone()),
        None => {
            sources.insert("model", "the configuration".into());
            config
                .provider
                .model
                .clone()
                .unwrap_or_else(|| default_model(kind).to_string())
        }
    };
    let mut provider_config = ProviderConfig::from_env(
        kind,
        config.provider.api_key.as_deref(),
        base_url.as_deref(),
    );
    if let Some(wire) = &config.provider.wire {
        provider_config.openai_wire = wire.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    provider_config.reasoning = config.reasoning();
    if kind.requires_api_key() && provider_config.api_key.is_none() {
        bail!(
            "session {} runs on the {} provider (model {model}), and Latch never stores API \
             keys: export {}=... or set [provider] api_key in .latch/config.toml; or continue it \
             with another provider (--provider, --base-url, --model)",
            record.id,
            kind.name(),
            kind.api_key_env()
        );
    }
    if kind == ProviderKind::OpenAiCompatible && provider_config.base_url.is_none() {
        bail!(
            "session {} runs on the openai-compatible provider but no base URL is recorded for \
             it: pass --base-url http://host:port/v1",
            record.id
        );
    }
    let max_tokens = config
        .models
        .get(&model)
        .and_then(|m| m.max_tokens)
        .or(config.provider.max_tokens)
        .unwrap_or(8_192);

    // The safety modes: the flag, else the recorded one unless the
    // configuration is stricter.
    fn parse<M: std::str::FromStr>(s: Option<&String>) -> Option<M> {
        s.and_then(|s| s.parse().ok())
    }
    let (approval, from, note) = resolve_mode(
        global.approval,
        parse(recorded.as_ref().map(|p| &p.approval)),
        config.permissions.approval,
        |a: ApprovalMode, b| a.is_looser_than(b),
        "approval",
        "[permissions] approval",
    );
    sources.extend(from.map(|f| ("approval", f)));
    notes.extend(note);
    let (sandbox, from, note) = resolve_mode(
        global.sandbox,
        parse(recorded.as_ref().map(|p| &p.sandbox)),
        config.sandbox.mode,
        |a: SandboxMode, b| a.is_looser_than(b),
        "sandbox",
        "[sandbox] mode",
    );
    sources.extend(from.map(|f| ("sandbox", f)));
    notes.extend(note);

    // The model profile the session runs with: its own while provider and
    // model are the ones it was created with.
    let mut record = record;
    if record.model.provider != kind.name() || record.model.model != model {
        record.model = config.model_profile(kind.name(), &model, max_tokens)?;
    } else if let Some(window) = config
        .models
        .get(&model)
        .and_then(|m| m.context_window_tokens)
        .filter(|w| *w != record.model.context_window_tokens)
    {
        // A window set (or lowered, after a server refused a request as
        // too long) since the session started applies from now on; its
        // reserve follows unless that is configured too.
        let configured = config.model_profile(kind.name(), &model, max_tokens)?;
        notes.push(format!(
            "model `{model}` now has a context window of {window} tokens (was {}; [models.\"{model}\"] context_window_tokens)",
            record.model.context_window_tokens
        ));
        record.model.context_window_tokens = configured.context_window_tokens;
        record.model.reserve_tokens = configured.reserve_tokens;
    }
    // The group a member joined from this host stays joined; `--store
    // postgres://…` moves it to that store (e.g. the database moved).
    let (_, shared) = super::group_cmd::split_store(global);
    let group = recorded
        .as_ref()
        .and_then(|p| p.group.clone())
        .map(|g| match shared {
            Some(url) if latch_group_pg::without_password(&url) != g.store => {
                sources.insert(
                    "group_store",
                    format!("--store {}", latch_group_pg::redact(&url)),
                );
                JoinedGroup { store: url, ..g }
            }
            _ => g,
        });
    let settings = Settings {
        provider: kind.name().to_string(),
        base_url: provider_config.base_url.clone(),
        model: model.clone(),
        approval,
        sandbox,
        group,
    };
    Ok(Resumed {
        record,
        provider: ProviderChoice {
            kind,
            model,
            config: provider_config,
            max_tokens,
            server: Default::default(),
        },
        settings,
        sources,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_wins_the_record_stays_and_the_configuration_only_tightens() {
        use ApprovalMode::*;
        let looser = |a: ApprovalMode, b| a.is_looser_than(b);
        let r = |flag, rec, conf| resolve_mode(flag, rec, conf, looser, "approval", "key");
        // The flag, even looser than the record.
        assert_eq!(r(Some(Never), Some(Untrusted), OnRequest).0, Never);
        // The record over a looser configuration, with a note.
        let (mode, from, note) = r(None, Some(Untrusted), OnRequest);
        assert_eq!((mode, from), (Untrusted, None));
        assert!(note.unwrap().contains("--approval on-request"));
        // A stricter configuration applies.
        let (mode, from, note) = r(None, Some(OnRequest), Untrusted);
        assert_eq!(mode, Untrusted);
        assert!(from.unwrap().contains("in the configuration"));
        assert_eq!(note, None);
        // Equally loose: the record.
        assert_eq!(r(None, Some(Never), OnRequest).0, Never);
        // No record (an older session): the configuration.
        assert_eq!(r(None, None, Edits).0, Edits);
    }
}
