//! `latch acp`: Latch as an Agent Client Protocol agent on stdio.
//!
//! Implements [`latch_acp::Sessions`] with the agent API every surface
//! uses: a session is created with the configured provider (or loaded and
//! resumed with its durable profile, as `latch resume` does), its lease is
//! taken for the `acp` surface (one driver per session: a session the
//! terminal or the web page drives is refused with who holds it), and its
//! permission requests go to the editor through the connection's
//! [`Asker`].
//!
//! The editor gives each session a working directory: each one is a
//! workspace with its own store and configuration. Nobody can be asked
//! about workspace trust before the protocol starts, so a workspace config
//! that needs trust runs without those keys and says so on stderr (the
//! editor's log); `latch trust` in that folder trusts it.

use super::GlobalArgs;
use super::setup::{self, Env};
use crate::agent::{Agent, AgentError, AgentEvent, Decision, DecisionPort, TurnControl};
use latch_acp::wire::{McpServer, NameValue, SessionMode, SessionModeState};
use latch_acp::{
    ACP_SURFACE, AgentInfo, Answer, Asker, Live, SessionError, Sessions, TurnEnd, UserPrompt,
};
use latch_kernel::{EventKind, LeaseError, PermissionRequest, SessionLease};
use latch_mcp::ServerConfig;
use latch_sandbox::ApprovalMode;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The agent mode ACP sessions run in (the editor decides permissions).
pub const EDITOR_MODE: &str = "editor";

/// A session this process drives: its agent and its lease.
struct Driven {
    agent: Arc<Mutex<Agent>>,
    env: Arc<Env>,
    _lease: SessionLease,
}

/// The sessions an editor drives through one `latch acp` process.
pub struct EditorSessions {
    global: GlobalArgs,
    /// Each workspace's store and configuration, opened on first use.
    envs: Mutex<HashMap<PathBuf, Arc<Env>>>,
    driven: Mutex<HashMap<String, Driven>>,
    /// Each driven session's turn control, reachable while its turn runs
    /// (the agent itself is locked by the turn).
    controls: Mutex<HashMap<String, TurnControl>>,
}

/// The editor as a session's decision port.
struct EditorApprover {
    asker: Asker,
    control: TurnControl,
}

impl DecisionPort for EditorApprover {
    fn decide(&self, request: &PermissionRequest) -> Decision {
        match self.asker.ask(request, &|| self.control.is_interrupted()) {
            Answer::Once => Decision::Once,
            Answer::Always => Decision::Session,
            Answer::Deny(reason) => Decision::Deny(reason),
            Answer::Approve(mode) => match mode.parse::<ApprovalMode>() {
                Ok(mode) => Decision::Approve(mode),
                Err(e) => Decision::Deny(Some(format!(
                    "the editor answered with an approval mode Latch does not know ({e})"
                ))),
            },
        }
    }
}

fn failed(e: impl std::fmt::Display) -> SessionError {
    SessionError::Failed(e.to_string())
}

fn anyhow_failed(e: anyhow::Error) -> SessionError {
    SessionError::Failed(format!("{e:#}"))
}

impl EditorSessions {
    /// Sessions opened with `global`'s flags (provider, model, modes,
    /// store, config) over each workspace's configuration.
    pub fn new(global: &GlobalArgs) -> EditorSessions {
        EditorSessions {
            global: global.clone(),
            envs: Mutex::new(HashMap::new()),
            driven: Mutex::new(HashMap::new()),
            controls: Mutex::new(HashMap::new()),
        }
    }

    fn env(&self, cwd: &Path) -> Result<Arc<Env>, SessionError> {
        let mut envs = self.envs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(env) = envs.get(cwd) {
            return Ok(env.clone());
        }
        let mut env = Env::open(&self.global, cwd).map_err(|e| {
            SessionError::BadRequest(format!(
                "cannot open the workspace {}: {e:#}",
                cwd.display()
            ))
        })?;
        setup::settle_trust(&mut env, &self.global, setup::TrustPolicy::Warn)
            .map_err(anyhow_failed)?;
        let env = Arc::new(env);
        envs.insert(cwd.to_path_buf(), env.clone());
        Ok(env)
    }

    /// Drive `agent` from now on: the editor decides its requests.
    fn drive(&self, env: Arc<Env>, mut agent: Agent, lease: SessionLease, asker: Asker) -> String {
        let id = agent.session().id.clone();
        let control = agent.control();
        agent.stop_when_lost(&lease);
        agent.set_decision_port(Arc::new(EditorApprover {
            asker,
            control: control.clone(),
        }));
        self.controls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), control);
        self.driven
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                id.clone(),
                Driven {
                    agent: Arc::new(Mutex::new(agent)),
                    env,
                    _lease: lease,
                },
            );
        id
    }
}

/// `env` with the editor's MCP servers beside the configured ones (a
/// configured server of the same name wins, with a note on stderr). The
/// editor is the user's own program, so its servers are trusted as the
/// command line is.
fn with_editor_servers(env: Arc<Env>, servers: &[McpServer]) -> Result<Arc<Env>, SessionError> {
    if servers.is_empty() {
        return Ok(env);
    }
    let mut config = env.config.clone();
    for server in servers {
        if config.config.mcp.servers.contains_key(&server.name) {
            eprintln!(
                "latch acp: the editor's MCP server `{}` is not started: the configuration \
                 has a server of that name",
                server.name
            );
            continue;
        }
        let pairs = |list: &[NameValue]| {
            list.iter()
                .map(|p| (p.name.clone(), p.value.clone()))
                .collect()
        };
        let entry = ServerConfig {
            command: server.command.clone().filter(|_| server.url.is_none()),
            args: server.args.clone(),
            env: pairs(&server.env),
            url: server.url.clone(),
            headers: pairs(&server.headers),
            enabled: true,
            ..ServerConfig::default()
        };
        config.config.mcp.servers.insert(server.name.clone(), entry);
    }
    config
        .config
        .mcp
        .check()
        .map_err(|e| SessionError::BadRequest(format!("the editor's MCP servers: {e}")))?;
    Ok(Arc::new(Env {
        workspace: env.workspace.clone(),
        store: env.store.clone(),
        config,
        max_steps: env.max_steps,
        approval: env.approval,
        sandbox: env.sandbox,
        plan: env.plan,
        trust_workspace: env.trust_workspace,
    }))
}

fn in_use(e: LeaseError) -> SessionError {
    match e {
        LeaseError::Held { .. } => SessionError::InUse(format!(
            "{e}; close it there first, or open another session"
        )),
        LeaseError::Store(e) => failed(e),
    }
}

impl EditorSessions {
    fn driven_env(&self, id: &str) -> Option<Arc<Env>> {
        self.driven
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .map(|d| d.env.clone())
    }
}

/// What the editor shows for an approval mode.
fn mode_name(mode: ApprovalMode) -> &'static str {
    match mode {
        ApprovalMode::Untrusted => "Ask for edits and commands",
        ApprovalMode::Edits => "Edit freely, ask for commands",
        ApprovalMode::OnRequest => "Ask only to leave the sandbox",
        ApprovalMode::Never => "Never ask",
    }
}

/// What an approval mode means, in the editor's mode picker.
fn mode_description(mode: ApprovalMode) -> &'static str {
    match mode {
        ApprovalMode::Untrusted => {
            "untrusted: every edit and every command off the read-only allowlist is asked about"
        }
        ApprovalMode::Edits => {
            "edits: edits run; commands off the read-only allowlist are asked about"
        }
        ApprovalMode::OnRequest => {
            "on-request: everything the sandbox allows runs; the model may ask to leave the sandbox"
        }
        ApprovalMode::Never => {
            "never: everything the sandbox allows runs; what would need asking is denied"
        }
    }
}

impl Sessions for EditorSessions {
    fn create(
        &self,
        cwd: &Path,
        servers: &[McpServer],
        asker: Asker,
    ) -> Result<String, SessionError> {
        let env = with_editor_servers(self.env(cwd)?, servers)?;
        let provider = setup::choose_provider(&self.global, &env.config.config)
            .map_err(|e| SessionError::BadRequest(format!("{e:#}")))?;
        let record = setup::new_session(&env, &provider).map_err(anyhow_failed)?;
        let lease = SessionLease::acquire(&env.store, &record.id, ACP_SURFACE).map_err(in_use)?;
        let agent =
            setup::build_agent(&env, record, &provider, EDITOR_MODE).map_err(anyhow_failed)?;
        Ok(self.drive(env, agent, lease, asker))
    }

    fn load(
        &self,
        id: &str,
        cwd: &Path,
        servers: &[McpServer],
        asker: Asker,
    ) -> Result<Vec<EventKind>, SessionError> {
        let env = with_editor_servers(self.env(cwd)?, servers)?;
        let not_found = || {
            SessionError::NotFound(format!(
                "no session `{id}` in the workspace {} (`latch sessions` there lists them)",
                env.workspace.display()
            ))
        };
        let record = env.store.resolve_session(id).map_err(|_| not_found())?;
        if record.id != id || record.workspace != env.workspace_key() {
            return Err(not_found());
        }
        if self
            .driven
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(id)
        {
            return Err(SessionError::InUse(format!(
                "session `{id}` is already open in this editor"
            )));
        }
        let lease = SessionLease::acquire(&env.store, id, ACP_SURFACE).map_err(in_use)?;
        let resumed = super::resume::resolve(&env, &self.global, record).map_err(anyhow_failed)?;
        for note in &resumed.notes {
            eprintln!("note: {note}");
        }
        resumed.record_profile(&env).map_err(anyhow_failed)?;
        let mut agent = setup::build_agent(&env, resumed.record, &resumed.provider, EDITOR_MODE)
            .map_err(anyhow_failed)?;
        // Settle what an earlier process left (a turn cut short, a request
        // that never got its answer) before the editor sees the history.
        agent.resume(&mut |_| {}).map_err(failed)?;
        let events = env
            .store
            .events(id, 0, u64::MAX, u32::MAX)
            .map_err(failed)?
            .into_iter()
            .map(|e| e.kind)
            .collect();
        self.drive(env, agent, lease, asker);
        Ok(events)
    }

    fn prompt(
        &self,
        id: &str,
        prompt: &UserPrompt,
        on: &mut (dyn FnMut(Live<'_>) + Send),
    ) -> Result<TurnEnd, SessionError> {
        let agent = self
            .driven
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .map(|d| d.agent.clone())
            .ok_or_else(|| SessionError::NotFound(format!("session `{id}` is not open")))?;
        let mut agent = agent.lock().unwrap_or_else(|p| p.into_inner());
        // Images become artifacts of this message; a bad one refuses the
        // prompt before anything is recorded.
        let what = |i: usize| PathBuf::from(format!("the prompt's image {}", i + 1));
        for (i, bytes) in prompt.images.iter().enumerate() {
            crate::agent::images::check_image_bytes(bytes, &what(i))
                .map_err(|e| SessionError::BadRequest(e.to_string()))?;
        }
        for (i, bytes) in prompt.images.iter().enumerate() {
            agent
                .attach_image_bytes(bytes, &what(i))
                .map_err(|e| SessionError::BadRequest(e.to_string()))?;
        }
        let text = prompt.text.as_str();
        let mut observer = |event: AgentEvent| match event {
            AgentEvent::TextDelta(t) => on(Live::Text(t)),
            AgentEvent::Committed { event, .. } => on(Live::Committed(event)),
            AgentEvent::Reasoning | AgentEvent::Retrying { .. } => {}
        };
        match agent.run_turn(text, &mut observer) {
            Ok(_) => Ok(TurnEnd::Finished),
            Err(AgentError::Interrupted) => Ok(TurnEnd::Cancelled),
            Err(AgentError::StepLimit(_)) => Ok(TurnEnd::StepLimit),
            Err(AgentError::Truncated { .. }) => Ok(TurnEnd::Truncated),
            Err(e) => Err(failed(e)),
        }
    }

    fn modes(&self, id: &str) -> Option<SessionModeState> {
        let env = self.driven_env(id)?;
        let (approval, _) = setup::session_modes(&env, id).ok()?;
        let planning = env
            .store
            .session_profile(id)
            .ok()
            .flatten()
            .is_some_and(|p| p.mode.is_plan());
        let mut available: Vec<SessionMode> = ApprovalMode::ALL
            .into_iter()
            .map(|mode| SessionMode {
                id: mode.name().to_string(),
                name: mode_name(mode).to_string(),
                description: mode_description(mode).to_string(),
            })
            .collect();
        available.push(SessionMode {
            id: "plan".into(),
            name: "Plan".into(),
            description: "plan: nothing may change the workspace until you approve the plan the \
                          model proposes"
                .into(),
        });
        Some(SessionModeState {
            current_mode_id: if planning {
                "plan".to_string()
            } else {
                approval.name().to_string()
            },
            available_modes: available,
        })
    }

    fn plan(&self, id: &str) -> Option<Vec<latch_acp::wire::PlanEntry>> {
        let env = self.driven_env(id)?;
        let events = env.store.all_events(id).ok()?;
        let list = latch_kernel::Checklist::replay(events.iter().map(|e| &e.kind));
        Some(latch_acp::updates::plan_entries(&list))
    }

    fn set_mode(&self, id: &str, mode: &str) -> Result<(), SessionError> {
        let choice = crate::agent::ModeChoice::parse(mode).map_err(|e| {
            SessionError::BadRequest(format!("{e} (the modes session/new offered)"))
        })?;
        let agent = {
            let driven = self.driven.lock().unwrap_or_else(|p| p.into_inner());
            let d = driven
                .get(id)
                .ok_or_else(|| SessionError::NotFound(format!("session `{id}` is not open")))?;
            d.agent.clone()
        };
        let mut agent = agent.lock().unwrap_or_else(|p| p.into_inner());
        // Durable first: the transcript shows the change and a resume runs
        // with it.
        agent
            .switch_mode(choice, "the editor (session/set_mode)", &mut |_| {})
            .map_err(failed)?;
        Ok(())
    }

    fn cancel(&self, id: &str) {
        if let Some(control) = self
            .controls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
        {
            control.interrupt();
        }
    }
}

/// `latch acp`: serve the editor on stdin and stdout until it closes the
/// connection. Logs and notes go to stderr (the editor's log).
pub fn run(global: &GlobalArgs) -> anyhow::Result<i32> {
    let sessions = Arc::new(EditorSessions::new(global));
    let info = AgentInfo {
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    latch_acp::serve(
        sessions.clone(),
        info,
        std::io::stdin().lock(),
        Box::new(std::io::stdout()),
    )?;
    // Every turn has ended: drop the agents (their tools stop what they
    // started) and release the leases.
    sessions
        .driven
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clear();
    Ok(0)
}
