//! Shared set-up of the commands that work on sessions: workspace, store,
//! configuration, provider, the session's lease (one driver per session),
//! its profile (what a resume continues with) and the session's agent.

use super::GlobalArgs;
use super::approve::TerminalApprover;
use super::integrations::ConfiguredTools;
use crate::agent::{Agent, AgentOptions, DecisionPort, Permissions};
use crate::config::trust::{TrustGrant, WorkspaceTrust};
use crate::config::{Config, LoadedConfig};
use crate::supervisor::Supervisor;
use crate::supervisor::children::{
    self, ChildObserver, ChildRuntime, ChildSettings, ParentAgents, SessionTools, UserResumedChild,
};
use crate::supervisor::profile::{self, Settings};
use anyhow::{Context, bail};
use latch_kernel::{SessionLease, SessionRecord, Store};
use latch_provider::{Provider, ProviderConfig, ProviderKind};
use latch_sandbox::{ApprovalMode, SandboxMode};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Workspace, store and configuration of one invocation.
pub struct Env {
    /// The canonical workspace path.
    pub workspace: PathBuf,
    /// The event store.
    pub store: Arc<Store>,
    /// The loaded configuration.
    pub config: LoadedConfig,
    /// Most model requests per turn (`--max-steps`, else `[agent]
    /// max_steps`); none by default.
    pub max_steps: Option<usize>,
    /// `--approval`, over `[permissions] approval`.
    pub approval: Option<latch_sandbox::ApprovalMode>,
    /// `--sandbox`, over `[sandbox] mode`.
    pub sandbox: Option<latch_sandbox::SandboxMode>,
}

impl Env {
    /// Open the workspace's store (creating it if needed) and configuration:
    /// for the commands that start sessions.
    pub fn open(global: &GlobalArgs, workspace: &Path) -> anyhow::Result<Env> {
        Env::open_with(global, workspace, true)
    }

    /// Open the workspace's existing store and configuration: for the
    /// commands that read or continue recorded sessions. A missing store is
    /// an error naming its path; nothing is created.
    pub fn open_existing(global: &GlobalArgs, workspace: &Path) -> anyhow::Result<Env> {
        Env::open_with(global, workspace, false)
    }

    fn open_with(global: &GlobalArgs, workspace: &Path, create: bool) -> anyhow::Result<Env> {
        let workspace = std::fs::canonicalize(workspace)
            .with_context(|| format!("the workspace {} does not exist", workspace.display()))?;
        let mut config = load_config(global, &workspace)?;
        // `--store postgres://…` names the shared group store (over
        // `[group] store`); the local event store stays the workspace's.
        let (global, shared) = &super::group_cmd::split_store(global);
        if let Some(url) = shared {
            config.config.group.store = Some(url.clone());
        }
        let store_path = match &global.store {
            Some(p) => p.clone(),
            None => latch_kernel::default_store_path(&workspace),
        };
        let store = if create {
            if global.store.is_none() {
                // The workspace's own `.latch/`, with its `.gitignore`.
                super::latch_dir::ensure(&workspace.join(".latch"))?;
            } else if let Some(dir) = store_path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).with_context(|| {
                    format!("cannot create the store directory {}", dir.display())
                })?;
            }
            Store::open(&store_path)?
        } else {
            Store::open_existing(&store_path)?
        };
        let max_steps = global
            .max_steps
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
            .or(config.config.agent.max_steps);
        Ok(Env {
            workspace,
            store: Arc::new(store),
            config,
            max_steps,
            approval: global.approval,
            sandbox: global.sandbox,
        })
    }

    /// The workspace as stored with sessions.
    pub fn workspace_key(&self) -> String {
        self.workspace.display().to_string()
    }
}

/// The configuration of `workspace` (canonical) as `global` asks for it:
/// `--config` instead of the user and workspace files, and the workspace's
/// config trusted for this run with `--trust-workspace`.
pub fn load_config(global: &GlobalArgs, workspace: &Path) -> anyhow::Result<LoadedConfig> {
    let grant = if global.trust_workspace {
        TrustGrant::ThisRun
    } else {
        TrustGrant::Recorded
    };
    Ok(Config::load_with(
        workspace,
        global.config.as_deref(),
        grant,
    )?)
}

/// What a command does when the workspace's config sets keys that need
/// trust and the user has not trusted it (see [`crate::config::trust`]).
pub enum TrustPolicy<'a> {
    /// Ask the user (true: trust); a yes is recorded and the keys apply.
    Ask(&'a dyn Fn(&WorkspaceTrust) -> bool),
    /// Refuse to start: nobody can be asked (`latch run`, `latch serve`).
    Refuse,
    /// Go on without those keys, saying so on stderr, one line per key.
    Warn,
}

/// Settle the workspace trust of `env` before a session starts, as
/// `policy` says; afterwards `env.config` is what the session runs with.
pub fn settle_trust(env: &mut Env, global: &GlobalArgs, policy: TrustPolicy) -> anyhow::Result<()> {
    let trust = env.config.trust.clone();
    if trust.held_back().is_empty() {
        return Ok(());
    }
    let ask = match policy {
        TrustPolicy::Refuse => {
            // Printed here, line by line: the error printer shows one line.
            for line in trust.refusal().lines() {
                eprintln!("{}", super::render::terminal_safe(line, 2_000));
            }
            bail!(
                "refused to start: {} is not trusted (see above)",
                trust.file.display()
            )
        }
        TrustPolicy::Warn => {
            warn_untrusted(&trust);
            return Ok(());
        }
        TrustPolicy::Ask(ask) => ask,
    };
    if !ask(&trust) {
        warn_untrusted(&trust);
        return Ok(());
    }
    let grant = match trust.record() {
        Ok(file) => {
            eprintln!(
                "trusted {} (recorded in {}; `latch trust --revoke` forgets it)",
                trust.file.display(),
                file.display()
            );
            TrustGrant::Recorded
        }
        Err(e) => {
            eprintln!("warning: {e}; trusted for this run only");
            TrustGrant::ThisRun
        }
    };
    let reloaded = Config::load_with(&env.workspace, global.config.as_deref(), grant)?;
    if reloaded.trust.config_sha256 != trust.config_sha256 {
        bail!(
            "{} changed while you were asked; start again to review the new version",
            trust.file.display()
        );
    }
    env.config = reloaded;
    Ok(())
}

/// The lines that say which keys of the workspace's config are ignored.
pub fn warn_untrusted(trust: &WorkspaceTrust) {
    for line in trust.ignored_lines() {
        eprintln!("warning: {}", super::render::terminal_safe(&line, 2_000));
    }
}

/// The provider to talk to, from flags, config and environment.
pub struct ProviderChoice {
    /// Which API.
    pub kind: ProviderKind,
    /// The model name.
    pub model: String,
    /// Connection settings.
    pub config: ProviderConfig,
    /// Most output tokens per response.
    pub max_tokens: u32,
    /// What an OpenAI-compatible server reported about itself (its models
    /// and window); empty for the hosted providers.
    pub server: latch_provider::ServerInfo,
}

impl ProviderChoice {
    /// The window the server reported, when `[models.X]` configures none.
    pub fn discovered_window(&self, config: &Config) -> Option<u64> {
        let configured = config
            .models
            .get(&self.model)
            .and_then(|m| m.context_window_tokens);
        configured.is_none().then_some(self.server.window?.0)
    }

    /// What to tell the user about the window of a local model: the one the
    /// server reported, or the default Latch assumed and how to set it.
    /// `None` where the window is configured or the provider is hosted.
    pub fn window_note(&self, config: &Config) -> Option<String> {
        if self.kind != ProviderKind::OpenAiCompatible {
            return None;
        }
        let m = super::render::terminal_safe(&self.model, 200);
        if config
            .models
            .get(&self.model)
            .is_some_and(|o| o.context_window_tokens.is_some())
        {
            return None;
        }
        Some(match self.server.window {
            Some((n, latch_provider::WindowSource::Server)) => format!(
                "model `{m}`: the server runs a context window of {n} tokens; Latch uses it \
                 ([models.\"{m}\"] context_window_tokens overrides it)"
            ),
            Some((n, latch_provider::WindowSource::Training)) => format!(
                "model `{m}`: the server reports only the model's training window, {n} tokens; \
                 Latch uses it. If the server runs a smaller one, set [models.\"{m}\"] \
                 context_window_tokens to it"
            ),
            None => format!(
                "model `{m}`: no context window is configured and the server reports none, so \
                 Latch assumes {} tokens; if the server runs a smaller one (llama.cpp: --ctx-size \
                 / --n_ctx; Ollama: num_ctx), set [models.\"{m}\"] context_window_tokens to it",
                latch_engine_sdk::DEFAULT_CONTEXT_WINDOW_TOKENS
            ),
        })
    }
}

/// What the OpenAI-compatible server at `config` says about itself, asked
/// on a thread of its own (callers may be inside an async runtime).
fn discover(config: &ProviderConfig, model: Option<&str>) -> latch_provider::ServerInfo {
    let Ok(provider) = Provider::new(config.clone()) else {
        return latch_provider::ServerInfo::default();
    };
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .ok()?;
                Some(rt.block_on(provider.discover(model)))
            })
            .join()
            .ok()
            .flatten()
            .unwrap_or_default()
    })
}

/// Default model per provider when none is configured.
pub fn default_model(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::OpenAi => "gpt-4.1",
        ProviderKind::OpenAiCompatible => "qwen2.5-coder",
    }
}

/// Choose the provider. With no key and no local server configured, say
/// exactly what is missing and how to set it.
pub fn choose_provider(global: &GlobalArgs, config: &Config) -> anyhow::Result<ProviderChoice> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let named = global
        .provider
        .clone()
        .or_else(|| config.provider.kind.clone());
    let base_url = global
        .base_url
        .clone()
        .or_else(|| config.provider.base_url.clone());
    let kind = match named.as_deref() {
        Some(name) => name
            .parse::<ProviderKind>()
            .map_err(|e| anyhow::anyhow!("{e}"))?,
        None if env("ANTHROPIC_API_KEY").is_some() => ProviderKind::Anthropic,
        None if env("OPENAI_API_KEY").is_some() => ProviderKind::OpenAi,
        None if base_url.is_some() || env("OPENAI_BASE_URL").is_some() => {
            ProviderKind::OpenAiCompatible
        }
        None => bail!(
            "no model provider is configured.\n  \
             For Anthropic: export ANTHROPIC_API_KEY=... (or set [provider] api_key in .latch/config.toml)\n  \
             For OpenAI:    export OPENAI_API_KEY=...\n  \
             For a local OpenAI-compatible server (Ollama, vLLM, llama.cpp): \
             latch --provider openai-compatible --base-url http://localhost:11434/v1 --model <name> ...\n  \
             To try Latch offline: latch demo"
        ),
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
            "the {} provider needs an API key: export {}=... or set [provider] api_key in .latch/config.toml",
            kind.name(),
            kind.api_key_env()
        );
    }
    if kind == ProviderKind::OpenAiCompatible && provider_config.base_url.is_none() {
        bail!(
            "the openai-compatible provider needs a base URL: pass --base-url http://host:port/v1, export OPENAI_BASE_URL, or set [provider] base_url"
        );
    }
    let named_model = global
        .model
        .clone()
        .or_else(|| config.provider.model.clone());
    // A local server is asked what it serves and the window it runs with.
    let server = if kind == ProviderKind::OpenAiCompatible {
        discover(&provider_config, named_model.as_deref())
    } else {
        latch_provider::ServerInfo::default()
    };
    let model = named_model
        .or_else(|| server.models.first().cloned())
        .unwrap_or_else(|| default_model(kind).to_string());
    let max_tokens = config
        .models
        .get(&model)
        .and_then(|m| m.max_tokens)
        .or(config.provider.max_tokens)
        .unwrap_or(8_192);
    Ok(ProviderChoice {
        kind,
        model,
        config: provider_config,
        max_tokens,
        server,
    })
}

/// Build the agent of `session` (new or resumed) with the configured engine.
pub fn build_agent(
    env: &Env,
    session: SessionRecord,
    provider: &ProviderChoice,
    mode: &str,
) -> anyhow::Result<Agent> {
    build_agent_observed(env, session, provider, mode, None)
}

/// [`build_agent`], with `observer` seeing what the root's children commit.
///
/// The approval and sandbox modes are the session's recorded profile's
/// (see [`session_modes`]). The session's tools come from the one
/// [`ConfiguredTools`] its whole tree shares, so a child has the same tools
/// whether its parent spawned it or the user resumed it.
pub fn build_agent_observed(
    env: &Env,
    session: SessionRecord,
    provider: &ProviderChoice,
    mode: &str,
    observer: Option<ChildObserver>,
) -> anyhow::Result<Agent> {
    checked(build_with(env, session, provider, mode, observer, None))
}

/// The agent, once `[tools]` is checked against every tool it has.
fn checked(agent: anyhow::Result<Agent>) -> anyhow::Result<Agent> {
    let agent = agent?;
    agent.check_tool_filter()?;
    Ok(agent)
}

/// A group a session of this host joined (`latch group join`): the shared
/// store, the group's id (its lead's session) and the member's role.
pub struct Joined<'a> {
    /// The shared group store.
    pub port: Arc<dyn latch_kernel::group::GroupPort>,
    /// The group's id.
    pub group: &'a str,
    /// The member's role.
    pub role: &'a str,
}

/// The agent of `session`, a new root session of this host that joined a
/// group whose lead runs elsewhere: the group tools over `joined.port`, no
/// children of its own.
pub fn build_joined_agent(
    env: &Env,
    session: SessionRecord,
    provider: &ProviderChoice,
    mode: &str,
    joined: Joined<'_>,
) -> anyhow::Result<Agent> {
    checked(build_with(env, session, provider, mode, None, Some(joined)))
}

fn build_with(
    env: &Env,
    session: SessionRecord,
    provider: &ProviderChoice,
    mode: &str,
    observer: Option<ChildObserver>,
    joined: Option<Joined<'_>>,
) -> anyhow::Result<Agent> {
    let supervisor = Arc::new(Supervisor::from_config(&env.config.config, &env.workspace)?);
    let engine = if session.parent.is_some() {
        // A child's engine comes from its durable profile, as when its
        // parent resumes it.
        children::child_engine_from_profile(&supervisor, &env.store, &session)
            .map_err(anyhow::Error::msg)?
    } else {
        supervisor.root_engine(&session.id, &session.model)?
    };
    let is_root = session.parent.is_none();
    // A session that joined a group from this host (`latch group join`)
    // runs as that member again, on the store it joined.
    let rejoined = match (&joined, is_root) {
        (None, true) => rejoin(env, &session)?,
        _ => None,
    };
    let joined = joined.or_else(|| {
        rejoined.as_ref().map(|(port, g)| Joined {
            port: port.clone(),
            group: &g.group,
            role: &g.role,
        })
    });
    // Where the session's agent group lives: the local store, or the
    // shared store `[group] store` names (unreachable: an error naming it).
    let group = match &joined {
        Some(j) => j.port.clone(),
        None => crate::supervisor::groups::open_port(
            env.config.config.group.store.as_deref(),
            env.store.clone(),
        )?,
    };
    let provider_client = Provider::new(provider.config.clone())?;
    let (approval, sandbox) = session_modes(env, &session.id)?;
    // What the session's files say that Latch does not use: instructions
    // linked out of the workspace, a git repository that appeared since.
    for w in crate::agent::prompt::repository_instructions(&env.workspace).1 {
        eprintln!("warning: {}", super::render::terminal_safe(&w, 2_000));
    }
    if is_root && let Some(drift) = env.store.repository_drift(&session.id)? {
        eprintln!(
            "note: {}",
            super::render::terminal_safe(&drift.notice(&session.id), 2_000)
        );
    }
    let options = AgentOptions {
        mode: mode.to_string(),
        max_tokens: provider.max_tokens,
        recent_tokens: env.config.config.context.recent_tokens,
        max_steps: env.max_steps,
        permissions: Some(permissions_with(env, mode, approval, sandbox)),
        tools: env.config.config.tools.filter(),
    };
    let (tools, extensions) = ConfiguredTools::new(env, true)
        .build(&session, sandbox)
        .map_err(anyhow::Error::msg)?;
    let agent = Agent::new(
        env.store.clone(),
        session,
        env.workspace.clone(),
        engine,
        provider_client.clone(),
        tools,
        options.clone(),
    )?
    .with_extensions(extensions)
    .with_hooks(env.config.config.hooks.commands());
    if let Some(j) = joined {
        let delegation = crate::supervisor::groups::GroupMember::for_joined(
            env.store.clone(),
            j.port,
            j.group,
            j.role,
        );
        return Ok(agent.with_delegation(Box::new(delegation)));
    }
    if !is_root {
        // A child the user drives: its parent hears of the run and gets
        // its report, and it stays a member of its group with the same
        // tools it had (its cached tool prefix holds).
        let root = crate::supervisor::groups::root_of(agent.session()).to_string();
        let delegation = crate::supervisor::groups::GroupMember::for_child(
            Box::new(UserResumedChild::new(env.store.clone())),
            env.store.clone(),
            &root,
        )
        .with_port(group);
        return Ok(agent.with_delegation(Box::new(delegation)));
    }
    // Children run in the same sandbox and never ask the terminal: what
    // would need approval is denied with a reason their model sees.
    let mut options = options;
    if let Some(p) = options.permissions.as_mut() {
        p.port = None;
    }
    // A root agent delegates: its children run on workers of their own,
    // with the tools every session of the tree gets (their warnings go to
    // the log: a screen may own the terminal by then).
    let children = ChildRuntime::with_settings(
        env.store.clone(),
        env.workspace.clone(),
        supervisor,
        provider_client,
        options,
        ChildSettings {
            observer,
            tools: Some(Arc::new(ConfiguredTools::new(env, false))),
            group: Some(group.clone()),
            ..ChildSettings::from_config(&env.config.config)
        },
    );
    // The root leads its agent group: the group tools join the agent tools.
    let root = agent.session().id.clone();
    let delegation = crate::supervisor::groups::GroupMember::for_root(
        Box::new(ParentAgents::new(children.clone())),
        env.store.clone(),
        &root,
        children,
    )
    .with_port(group);
    Ok(agent.with_delegation(Box::new(delegation)))
}

/// The group store and group `session` joined from this host, as its latest
/// profile records them, opened again: `None` for a session that joined
/// none. The recorded URL has no password: the configured store (`--store
/// postgres://…` or `[group] store`) gives it when it names the same store.
fn rejoin(
    env: &Env,
    session: &SessionRecord,
) -> anyhow::Result<
    Option<(
        Arc<dyn latch_kernel::group::GroupPort>,
        latch_kernel::JoinedGroup,
    )>,
> {
    let Some(g) = env
        .store
        .session_profile(&session.id)?
        .and_then(|p| p.group)
    else {
        return Ok(None);
    };
    let how = "give the store with --store postgres://user:password@host/database (or [group] \
               store in the config; a password alone can come from PGPASSWORD)";
    let configured = env.config.config.group.store.as_deref();
    let Some(url) = crate::supervisor::groups::joined_store(configured, &g.store) else {
        bail!(
            "session {} is member `{}` of group {} but its record has no usable group store URL \
             ({:?}); {how}",
            session.id,
            g.role,
            g.group,
            g.store
        );
    };
    let port = crate::supervisor::groups::open_pg(&url, env.store.clone()).map_err(|e| {
        anyhow::anyhow!(
            "{e}. Session {} is member `{}` of group {} on that store, and Latch records the \
             store without its password: {how}",
            session.id,
            g.role,
            g.group
        )
    })?;
    Ok(Some((port as Arc<dyn latch_kernel::group::GroupPort>, g)))
}

/// The approval and sandbox modes `session` runs with: its latest recorded
/// profile's; for a session that has none (created before profiles were
/// recorded) the flags over the configuration.
pub fn session_modes(env: &Env, session: &str) -> anyhow::Result<(ApprovalMode, SandboxMode)> {
    let config = &env.config.config;
    let flags = (
        env.approval.unwrap_or(config.permissions.approval),
        env.sandbox.unwrap_or(config.sandbox.mode),
    );
    Ok(match env.store.session_profile(session)? {
        Some(p) => (
            p.approval.parse().unwrap_or(flags.0),
            p.sandbox.parse().unwrap_or(flags.1),
        ),
        None => flags,
    })
}

/// The approval mode and sandbox (flags over config) and who decides:
/// the terminal in an interactive session, nobody otherwise.
pub fn permissions(env: &Env, mode: &str) -> Permissions {
    let config = &env.config.config;
    permissions_with(
        env,
        mode,
        env.approval.unwrap_or(config.permissions.approval),
        env.sandbox.unwrap_or(config.sandbox.mode),
    )
}

/// Permissions with these modes (the rest of the sandbox policy from the
/// configuration) and who decides: the terminal in an interactive
/// session, nobody otherwise.
pub fn permissions_with(
    env: &Env,
    mode: &str,
    approval: ApprovalMode,
    sandbox: SandboxMode,
) -> Permissions {
    Permissions {
        approval,
        sandbox: env
            .config
            .config
            .sandbox
            .policy(&env.workspace, Some(sandbox)),
        port: (mode == "interactive")
            .then(|| Arc::new(TerminalApprover::default()) as Arc<dyn DecisionPort>),
    }
}

/// What a new session started with `provider` runs with: the provider's
/// settings and the approval and sandbox modes of the flags over the
/// configuration.
pub fn new_settings(env: &Env, provider: &ProviderChoice) -> Settings {
    let config = &env.config.config;
    Settings {
        provider: provider.kind.name().to_string(),
        base_url: provider.config.base_url.clone(),
        model: provider.model.clone(),
        approval: env.approval.unwrap_or(config.permissions.approval),
        sandbox: env.sandbox.unwrap_or(config.sandbox.mode),
        group: None,
    }
}

/// Create a new root session for the chosen provider and model, with its
/// first profile recorded.
pub fn new_session(env: &Env, provider: &ProviderChoice) -> anyhow::Result<SessionRecord> {
    new_session_in(env, provider, None)
}

/// [`new_session`] for a session that joins `group` from this host: its
/// first profile records the group (the store without its password), so a
/// resume rejoins it.
pub fn new_session_in(
    env: &Env,
    provider: &ProviderChoice,
    group: Option<latch_kernel::JoinedGroup>,
) -> anyhow::Result<SessionRecord> {
    let model = env.config.config.model_profile_with(
        provider.kind.name(),
        &provider.model,
        provider.max_tokens,
        provider.discovered_window(&env.config.config),
    )?;
    let record = env
        .store
        .create_session(&env.workspace_key(), None, &model)?;
    let settings = Settings {
        group,
        ..new_settings(env, provider)
    };
    profile::record(&env.store, &record.id, &settings, |_| {
        "the session's start".into()
    })?;
    // The endpoint came from the flags, the environment or a trusted
    // config: a later resume of this session may send the key there again
    // without asking (see `resume::UnnamedEndpoint`).
    if let Some(url) = &settings.base_url
        && let Ok(store) = crate::config::trust::TrustStore::user()
        && let Err(e) = store.know_endpoint(url)
    {
        tracing::warn!("could not remember the endpoint {url}: {e}");
    }
    Ok(record)
}

/// Take the lease of `session` for `surface` (one driver per session); a
/// session another process drives is refused with who holds it.
pub fn take_lease(env: &Env, session: &str, surface: &str) -> anyhow::Result<SessionLease> {
    Ok(SessionLease::acquire(&env.store, session, surface)?)
}

/// A session opened by an interactive command.
pub struct Opened {
    /// The session, with the model profile it runs with now.
    pub session: SessionRecord,
    /// The provider it talks to.
    pub provider: ProviderChoice,
    /// Its lease, held while the command drives it.
    pub lease: SessionLease,
    /// True when an existing session was resumed.
    pub resumed: bool,
    /// The profile recorded by this resume when it changed something.
    pub changed: Option<latch_kernel::SessionProfile>,
}

/// Open a new session, or with `resume` the selected one (the latest with
/// `None`), for `surface`: its lease taken first (refused while another
/// process drives it, before anything is written), then, for a resume,
/// what it runs with resolved from its durable profile and the flags, and
/// a change recorded. Notes go to stderr.
pub fn open_session(
    env: &Env,
    global: &super::GlobalArgs,
    resume: Option<Option<&str>>,
    surface: &str,
) -> anyhow::Result<Opened> {
    open_session_asking(env, global, resume, surface, &|_| false)
}

/// [`open_session`], asking `ask` about a resumed session's recorded
/// endpoint that nothing trusted names (see
/// [`super::resume::UnnamedEndpoint`]).
pub fn open_session_asking(
    env: &Env,
    global: &super::GlobalArgs,
    resume: Option<Option<&str>>,
    surface: &str,
    ask: &dyn Fn(&super::resume::UnnamedEndpoint) -> bool,
) -> anyhow::Result<Opened> {
    let Some(selector) = resume else {
        let provider = choose_provider(global, &env.config.config)?;
        let session = new_session(env, &provider)?;
        let lease = take_lease(env, &session.id, surface)?;
        // Before any screen owns the terminal.
        if let Some(note) = provider.window_note(&env.config.config) {
            eprintln!("note: {note}");
        }
        return Ok(Opened {
            session,
            provider,
            lease,
            resumed: false,
            changed: None,
        });
    };
    let record = select_session(env, selector)?;
    let lease = take_lease(env, &record.id, surface)?;
    let resumed = super::resume::resolve_asking(env, global, record, ask)?;
    for note in &resumed.notes {
        eprintln!("note: {note}");
    }
    let changed = resumed
        .record_profile(env)?
        .filter(|p| !p.changes.is_empty());
    Ok(Opened {
        session: resumed.record,
        provider: resumed.provider,
        lease,
        resumed: true,
        changed,
    })
}

/// Resolve a session selector: an id (or unique prefix), or the latest root
/// session of the workspace.
pub fn select_session(env: &Env, selector: Option<&str>) -> anyhow::Result<SessionRecord> {
    match selector {
        Some(id) => {
            let record = env.store.resolve_session(id)?;
            if env.store.is_hidden(&record.id)? {
                bail!(
                    "session {} was deleted from history (`latch history delete`) and cannot be resumed",
                    record.id
                );
            }
            Ok(record)
        }
        // The newest root: children are created after their parent and are
        // resumed through it (or by id), never by `--last`.
        None => env
            .store
            .latest_root_session(&env.workspace_key())?
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "there is no session in {} yet; start one with `latch` or `latch run`",
                    env.workspace.display()
                )
            }),
    }
}
