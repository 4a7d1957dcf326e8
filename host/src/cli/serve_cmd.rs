//! `latch serve`: the web surface of one workspace's sessions.
//!
//! Wires [`latch_web`] to the same agent API the CLI uses: each session's
//! [`Agent`] is built once per process (resuming it settles what an earlier
//! process left) and runs turns on the server's blocking threads, so a page
//! that closes never cancels a run. The page interrupts a turn through the
//! agent's [`TurnControl`] and answers its permission requests through a
//! [`DecisionPort`] ([`WebApprover`]) that waits on the server's
//! [`Approvals`].
//!
//! One driver per session: the server takes a session's lease only while
//! it writes to the session (a turn, `/compact`, `/resume`, a rewind, the
//! repair of a resume when its agent is built) and gives it back when the
//! session is idle, so an open page never locks the terminal out. A
//! session another process (the terminal, a parent agent) drives is
//! refused for writing (409, naming the holder); reading it (`/context`,
//! recall, the page itself) takes no lease. An agent built before another
//! process drove the session resumes (repairing what that one left) the
//! next time this server drives it. A lease lost during a turn (the
//! server was stopped past its expiry and the session taken over) stops
//! the turn at once, and the turn writes nothing more. Images the page uploads with a message are checked as
//! `--image` files are and become `MediaRef` artifacts of the user's
//! message; a rewind from the page runs the agent's `/rewind`. A resumed
//! session runs as its durable profile says, the server's flags
//! overriding it (see [`super::resume`]).

use super::GlobalArgs;
use super::setup::{self, Env, ProviderChoice};
use crate::agent::images::check_image_bytes;
use crate::agent::{Agent, AgentError, AgentEvent, Decision, DecisionPort, TurnControl};
use anyhow::Context;
use clap::Args;
use latch_engine_sdk::types::{ContextReport, Event};
use latch_kernel::{LeaseError, RewindError, RewindPlan, SessionLease};
use latch_kernel::{PermissionRequest, SessionRecord, Store};
use latch_surface::Delta;
use latch_web::backend::{Sink, Upload};
use latch_web::{Answer, Approvals, Backend, BackendError, Signal, WebConfig};
use std::collections::HashMap;
use std::io::Write;
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// `latch serve` options.
#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// The address to listen on; a non-loopback one needs --allow-remote.
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    pub bind: IpAddr,
    /// The port (0 picks a free one).
    #[arg(long, default_value_t = 7420, value_name = "N")]
    pub port: u16,
    /// Accept a non-loopback --bind (TLS termination is then yours).
    #[arg(long)]
    pub allow_remote: bool,
    /// Also accept this name in the `Host` header (repeatable): the name of
    /// a TLS proxy in front of a remote bind. `localhost` and IP addresses
    /// need no flag; other names are refused against DNS rebinding.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
    /// A reconnecting page more than N events behind gets one snapshot.
    #[arg(long, default_value_t = 1_000, value_name = "N")]
    pub snapshot_after: usize,
    /// Replace this workspace's kept token (every tab's credential stops
    /// working; open tabs must then open the newly printed link). By
    /// default the token is kept in the user's config directory, so an
    /// open tab reconnects after a restart.
    #[arg(long)]
    pub new_token: bool,
}

/// A session's agent built by this server, and the session's latest
/// event when this server last wrote to it: the agent resumes (repairing
/// what another driver left) when the session changed since.
struct Built {
    agent: Arc<Mutex<Agent>>,
    seen_seq: u64,
}

/// The agents of one workspace behind the web surface.
pub struct AgentBackend {
    env: Env,
    global: GlobalArgs,
    /// The provider of new sessions, or why none is configured.
    provider: Result<ProviderChoice, String>,
    workspace: String,
    agents: Mutex<HashMap<String, Built>>,
    /// The sessions whose lease this server holds now (while it writes).
    holding: Mutex<std::collections::HashSet<String>>,
    /// Each built agent's turn control, reachable while its turn runs
    /// (the agent itself is locked by the turn).
    controls: Mutex<HashMap<String, TurnControl>>,
    approvals: Arc<Approvals>,
}

/// The web page as a session's decision port: a request waits until the
/// page answers it (`POST /api/sessions/{id}/permissions/{call_id}`) or
/// the turn is interrupted, which denies it.
pub struct WebApprover {
    approvals: Arc<Approvals>,
    session: String,
    control: TurnControl,
}

/// What the model reads when the user interrupted the turn while a
/// request waited.
pub const INTERRUPTED_WAIT: &str = "the user interrupted the turn before answering";

impl DecisionPort for WebApprover {
    fn decide(&self, request: &PermissionRequest) -> Decision {
        let stop = || self.control.is_interrupted();
        match self.approvals.wait(&self.session, &request.call_id, stop) {
            Some(Answer::Allow) => Decision::Once,
            Some(Answer::Always) => Decision::Session,
            Some(Answer::Deny(reason)) => Decision::Deny(reason),
            Some(Answer::Approve(mode)) => match mode.parse::<latch_sandbox::ApprovalMode>() {
                Ok(mode) => Decision::Approve(mode),
                // The page sends the names it offers; anything else keeps
                // planning, with the reason for the model.
                Err(e) => Decision::Deny(Some(format!("the plan was not approved: {e}"))),
            },
            None => Decision::Deny(Some(INTERRUPTED_WAIT.into())),
        }
    }
}

impl AgentBackend {
    /// The backend of `workspace` with the provider chosen by `global`.
    pub fn open(global: &GlobalArgs, workspace: &Path) -> anyhow::Result<AgentBackend> {
        let mut env = Env::open(global, workspace)?;
        // The page cannot be asked before the server starts: a config
        // that needs trust is refused with the flag and command that trust it.
        setup::settle_trust(&mut env, global, setup::TrustPolicy::Refuse)?;
        // Recorded sessions run with their own provider; only a new one
        // needs one configured.
        let provider =
            setup::choose_provider(global, &env.config.config).map_err(|e| format!("{e:#}"));
        let workspace = env.workspace_key();
        Ok(AgentBackend {
            env,
            global: global.clone(),
            provider,
            workspace,
            agents: Mutex::new(HashMap::new()),
            holding: Mutex::new(std::collections::HashSet::new()),
            controls: Mutex::new(HashMap::new()),
            approvals: Arc::new(Approvals::new()),
        })
    }

    fn record(&self, id: &str) -> Result<SessionRecord, BackendError> {
        match self.env.store.session(id) {
            Ok(s) if s.workspace == self.workspace => Ok(s),
            Ok(_) | Err(latch_kernel::StoreError::UnknownSession(_)) => {
                Err(BackendError::NotFound(id.to_string()))
            }
            Err(e) => Err(BackendError::Failed(e.to_string())),
        }
    }

    /// The session's lease, taken to write to it: refused while another
    /// driver holds it. Given back when the returned guard drops.
    fn take_lease(&self, id: &str) -> Result<Holding<'_>, BackendError> {
        self.record(id)?;
        let lease =
            SessionLease::acquire(&self.env.store, id, latch_web::WEB_SURFACE).map_err(in_use)?;
        self.holding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string());
        Ok(Holding {
            backend: self,
            session: id.to_string(),
            lease: Some(lease),
        })
    }

    /// The session's agent for a writer holding its lease: built (and
    /// resumed, which repairs what an earlier process left) on first use,
    /// and resumed again when the session changed since this server last
    /// wrote to it (another process drove it meanwhile).
    fn agent(&self, id: &str, on: Sink<'_>) -> Result<Arc<Mutex<Agent>>, BackendError> {
        let mut agents = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        let latest = self.env.store.latest_seq(id).map_err(failed)?;
        if let Some(b) = agents.get_mut(id) {
            if b.seen_seq != latest {
                b.agent
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .resume(&mut observer(on))
                    .map_err(failed)?;
                b.seen_seq = self.env.store.latest_seq(id).map_err(failed)?;
            }
            return Ok(b.agent.clone());
        }
        let record = self.record(id)?;
        let resumed = super::resume::resolve(&self.env, &self.global, record)
            .map_err(|e| BackendError::Failed(format!("{e:#}")))?;
        resumed
            .record_profile(&self.env)
            .map_err(|e| BackendError::Failed(format!("{e:#}")))?;
        let mut agent = setup::build_agent(&self.env, resumed.record, &resumed.provider, "web")
            .map_err(|e| BackendError::Failed(format!("{e:#}")))?;
        agent.resume(&mut observer(on)).map_err(failed)?;
        let control = agent.control();
        agent.set_decision_port(Arc::new(WebApprover {
            approvals: self.approvals.clone(),
            session: id.to_string(),
            control: control.clone(),
        }));
        self.controls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), control);
        let agent = Arc::new(Mutex::new(agent));
        agents.insert(
            id.to_string(),
            Built {
                agent: agent.clone(),
                seen_seq: latest,
            },
        );
        Ok(agent)
    }

    /// Run a read-only command on the session, taking no lease: on the
    /// agent this server built when it is idle, else on a viewer's agent
    /// that holds no lease and repairs nothing.
    fn read<T>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Agent) -> Result<T, BackendError>,
    ) -> Result<T, BackendError> {
        let built = self
            .agents
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .map(|b| b.agent.clone());
        if let Some(agent) = built
            && let Ok(mut agent) = agent.try_lock()
        {
            return f(&mut agent);
        }
        let record = self.record(id)?;
        let resumed = super::resume::resolve(&self.env, &self.global, record)
            .map_err(|e| BackendError::Failed(format!("{e:#}")))?;
        let mut viewer = setup::build_agent(&self.env, resumed.record, &resumed.provider, "web")
            .map_err(|e| BackendError::Failed(format!("{e:#}")))?;
        f(&mut viewer)
    }

    /// Write to the session: its lease taken for as long as `f` runs (a
    /// lost lease interrupts `f`'s turn at once), given back after.
    fn with_agent<T>(
        &self,
        id: &str,
        on: Sink<'_>,
        f: impl FnOnce(&mut Agent, Sink<'_>) -> Result<T, BackendError>,
    ) -> Result<T, BackendError> {
        let holding = self.take_lease(id)?;
        let agent = self.agent(id, on)?;
        let mut agent = agent.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(lease) = &holding.lease {
            agent.stop_when_lost(lease);
        }
        let result = f(&mut agent, on);
        if let Some(b) = self
            .agents
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(id)
            && let Ok(latest) = self.env.store.latest_seq(id)
        {
            b.seen_seq = latest;
        }
        drop(agent);
        drop(holding);
        result
    }
}

/// A session's lease this server holds while it writes; given back (and
/// forgotten) when dropped.
struct Holding<'a> {
    backend: &'a AgentBackend,
    session: String,
    lease: Option<SessionLease>,
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        drop(self.lease.take());
        self.backend
            .holding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.session);
    }
}

fn failed(e: impl std::fmt::Display) -> BackendError {
    BackendError::Failed(e.to_string())
}

/// A lease another driver holds: refused with who holds it (the page can
/// still view the session).
fn in_use(e: LeaseError) -> BackendError {
    match e {
        LeaseError::Held { .. } => BackendError::InUse(e.to_string()),
        LeaseError::Store(e) => failed(e),
    }
}

/// A rewind that could not run: a wrong sequence number, or a session in
/// plan mode, is the request's fault, anything else the store's or the disk's.
fn rewind_error(e: RewindError) -> BackendError {
    match e {
        RewindError::NotAUserMessage(_) | RewindError::PlanMode => {
            BackendError::BadRequest(e.to_string())
        }
        e => failed(e),
    }
}

/// Run one turn of `agent` on `text` with `images` attached to it.
fn turn(
    agent: &mut Agent,
    text: &str,
    images: &[Upload],
    on: Sink<'_>,
) -> Result<(), BackendError> {
    for image in images {
        agent
            .attach_image_bytes(&image.bytes, Path::new(&image.name))
            .map_err(failed)?;
    }
    match agent.run_turn(text, &mut observer(on)) {
        Ok(_) => Ok(()),
        Err(e @ AgentError::Interrupted) => Err(BackendError::Interrupted(e.to_string())),
        Err(e) => Err(failed(e)),
    }
}

/// The agent's observer, reporting to the web surface's sink.
fn observer<'a>(on: Sink<'a>) -> impl FnMut(AgentEvent) + Send + 'a {
    move |event| match event {
        AgentEvent::TextDelta(t) => on(Signal::Delta(Delta::Text(t.to_string()))),
        AgentEvent::Reasoning => on(Signal::Delta(Delta::Reasoning)),
        AgentEvent::Retrying { attempt, reason } => on(Signal::Delta(Delta::Retrying {
            attempt,
            reason: reason.to_string(),
        })),
        AgentEvent::Committed { seq, .. } => on(Signal::Committed(seq)),
    }
}

impl Backend for AgentBackend {
    fn store(&self) -> &Arc<Store> {
        &self.env.store
    }

    fn workspace(&self) -> &str {
        &self.workspace
    }

    /// The shared store `[group] store` names (or the one a member joined
    /// from this host); the local store when neither, or when the shared
    /// one cannot be opened (with a warning in the log).
    fn group_home(&self, session: &SessionRecord) -> latch_web::backend::GroupHome {
        match setup::session_group(&self.env, session) {
            Ok(g) => latch_web::backend::GroupHome {
                port: g.port,
                root: g.root,
                shared: g.shared,
            },
            Err(e) => {
                tracing::warn!("group of {}: {e:#}", session.id);
                latch_web::backend::GroupHome::local(self.env.store.clone(), session)
            }
        }
    }

    fn prices(&self) -> latch_surface::PriceTable {
        self.env.config.config.price_table()
    }

    fn create_session(&self) -> Result<SessionRecord, BackendError> {
        let provider = self.provider.as_ref().map_err(|e| {
            BackendError::BadRequest(format!(
                "a new session needs a model provider, and `latch serve` was started without \
                 one: {e}"
            ))
        })?;
        setup::new_session(&self.env, provider).map_err(|e| failed(format!("{e:#}")))
    }

    fn drive(&self, session: &str) -> Result<(), BackendError> {
        // A turn of this server holds it: the message is queued for that
        // turn. Otherwise the lease must be free now (taken and given back).
        if self
            .holding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(session)
        {
            return Ok(());
        }
        self.take_lease(session).map(drop)
    }

    fn commands(&self) -> Vec<(String, String)> {
        let (commands, _) = crate::commands::load(&self.env.workspace);
        commands
            .iter()
            .map(|c| (c.usage(), c.description.clone()))
            .collect()
    }

    fn run_turn(&self, session: &str, text: &str, on: Sink<'_>) -> Result<(), BackendError> {
        // `/name args` of a custom command runs the prompt it expands to.
        let (commands, _) = crate::commands::load(&self.env.workspace);
        let text = commands
            .expand_line(text)
            .unwrap_or_else(|| text.to_string());
        self.with_agent(session, on, |agent, on| turn(agent, &text, &[], on))
    }

    fn check_image(&self, image: &Upload) -> Result<(), BackendError> {
        check_image_bytes(&image.bytes, Path::new(&image.name))
            .map_err(|e| BackendError::BadRequest(e.to_string()))
    }

    fn run_turn_with_images(
        &self,
        session: &str,
        text: &str,
        images: &[Upload],
        on: Sink<'_>,
    ) -> Result<(), BackendError> {
        if images.is_empty() {
            return self.run_turn(session, text, on);
        }
        // All checked before one is attached: a bad one leaves none
        // waiting for a later message.
        images.iter().try_for_each(|i| self.check_image(i))?;
        let (commands, _) = crate::commands::load(&self.env.workspace);
        let text = commands
            .expand_line(text)
            .unwrap_or_else(|| text.to_string());
        self.with_agent(session, on, |agent, on| turn(agent, &text, images, on))
    }

    fn rewind_plan(&self, session: &str, to_seq: u64) -> Result<RewindPlan, BackendError> {
        self.record(session)?;
        latch_kernel::plan_rewind(&self.env.store, session, &self.env.workspace, to_seq)
            .map_err(rewind_error)
    }

    fn rewind(&self, session: &str, to_seq: u64, on: Sink<'_>) -> Result<RewindPlan, BackendError> {
        self.with_agent(session, on, |agent, on| {
            agent
                .rewind(to_seq, &mut observer(on))
                .map_err(rewind_error)
        })
    }

    fn switch_mode(&self, session: &str, mode: &str, on: Sink<'_>) -> Result<String, BackendError> {
        let choice = crate::agent::ModeChoice::parse(mode)
            .map_err(|e| BackendError::BadRequest(format!("mode `{mode}`: {e}")))?;
        self.with_agent(session, on, |agent, on| {
            agent
                .switch_mode(choice, "the page", &mut observer(on))
                .map_err(failed)?;
            Ok(
                crate::agent::plan::mode_label(agent.session_mode(), agent.approval_mode())
                    .to_string(),
            )
        })
    }

    fn agents(&self) -> Vec<String> {
        self.env.agents().listing()
    }

    fn resume(&self, session: &str, on: Sink<'_>) -> Result<usize, BackendError> {
        self.with_agent(session, on, |agent, on| {
            agent.resume(&mut observer(on)).map_err(failed)
        })
    }

    fn compact(&self, session: &str, on: Sink<'_>) -> Result<usize, BackendError> {
        self.with_agent(session, on, |agent, on| {
            agent.compact(&mut observer(on)).map_err(failed)
        })
    }

    fn context_report(&self, session: &str) -> Result<ContextReport, BackendError> {
        self.read(session, |agent| agent.context_report().map_err(failed))
    }

    fn recall(&self, session: &str, query: &str, limit: u32) -> Result<Vec<Event>, BackendError> {
        self.read(session, |agent| agent.recall(query, limit).map_err(failed))
    }

    fn interrupt(&self, session: &str) -> Result<(), BackendError> {
        // No agent yet: its turn has not started, and the server repeats
        // the interrupt until the turn ends.
        if let Some(control) = self
            .controls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(session)
        {
            control.interrupt();
        }
        Ok(())
    }

    fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    fn steer(&self, session: &str, text: &str) -> bool {
        match self
            .controls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(session)
        {
            Some(control) => {
                control.steer(text);
                true
            }
            None => false,
        }
    }

    fn unsent(&self, session: &str) -> Vec<String> {
        self.controls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(session)
            .map(TurnControl::take_steering)
            .unwrap_or_default()
    }

    fn provider(&self) -> Result<String, String> {
        match &self.provider {
            Ok(p) => Ok(format!("{} · {}", p.kind, p.model)),
            Err(why) => Err(format!(
                "no new session can start: {why}\nRecorded sessions stay browsable; restart \
                 `latch serve` with a provider configured to start new ones."
            )),
        }
    }
}

/// A fresh random token.
pub fn token() -> String {
    super::serve_token::fresh()
}

/// `latch serve`.
pub fn run(global: &GlobalArgs, workspace: &Path, args: &ServeArgs) -> anyhow::Result<i32> {
    latch_web::check_bind(args.bind, args.allow_remote)?;
    let backend = AgentBackend::open(global, workspace)?;
    let shown = backend.env.workspace.display().to_string();
    let token = super::serve_token::load_or_create(
        crate::config::user_config_dir().as_deref(),
        &backend.workspace,
        args.new_token,
    )?;
    let mut config = WebConfig::new(token);
    config.snapshot_after = args.snapshot_after;
    config.allowed_hosts = args.allow_hosts.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the server's runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind((args.bind, args.port))
            .await
            .with_context(|| {
                format!(
                    "cannot listen on {}:{} (is the port taken? try --port 0)",
                    args.bind, args.port
                )
            })?;
        let addr = listener.local_addr()?;
        let host = match addr.ip() {
            IpAddr::V6(ip) => format!("[{ip}]"),
            IpAddr::V4(ip) => ip.to_string(),
        };
        // A link's code rides in the fragment, which the browser never
        // sends to a server; the page exchanges it once for the tab's own
        // credential, so the link in the browser's history opens nothing.
        // Each time one is used, the next is printed.
        let base = format!("http://{host}:{}", addr.port());
        println!("{base}/#token={}", config.links.mint());
        std::io::stdout().flush()?;
        config.links.on_use(move |code| {
            println!("latch serve: a tab opened; for another tab: {base}/#token={code}");
            let _ = std::io::stdout().flush();
        });
        eprintln!("latch serve: sessions of {shown}; Ctrl-C stops the server (runs stop with it)");
        if let Err(why) = &backend.provider {
            eprintln!("latch serve: history is browsable, but no new session can start: {why}");
        }
        latch_web::serve(listener, Arc::new(backend), config)
            .await
            .context("the server stopped")?;
        Ok(0)
    })
}
