//! The ACP agent loop over one connection: `initialize`, `authenticate`,
//! `session/new`, `session/load` (the conversation replayed from the
//! store), `session/prompt` (each turn on a thread of its own, so the
//! connection keeps reading while it runs), `session/cancel`, and the
//! `session/request_permission` requests Latch's approval policy sends to
//! the editor.
//!
//! What a session is lives behind [`Sessions`], which the `latch` binary
//! implements with the same agent, store and leases every other surface
//! uses.

use crate::channel::Channel;
use crate::prompt::{UserPrompt, user_prompt};
use crate::updates;
use crate::wire::*;
use latch_kernel::{EventKind, PermissionRequest};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// Why a session command failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No such session in that workspace.
    #[error("{0}")]
    NotFound(String),
    /// Another driver holds the session (the message names it).
    #[error("{0}")]
    InUse(String),
    /// The request cannot be served as asked (the message says why).
    #[error("{0}")]
    BadRequest(String),
    /// The agent, engine, provider or store failed.
    #[error("{0}")]
    Failed(String),
}

impl SessionError {
    fn rpc(&self) -> RpcError {
        let code = match self {
            SessionError::NotFound(_) => RESOURCE_NOT_FOUND,
            SessionError::BadRequest(_) => INVALID_PARAMS,
            SessionError::InUse(_) | SessionError::Failed(_) => INTERNAL_ERROR,
        };
        RpcError::new(code, self.to_string())
    }
}

/// How a turn ended, when it ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnEnd {
    /// The model finished.
    Finished,
    /// The configured most model requests were reached.
    StepLimit,
    /// The model's answers were cut at the output limit.
    Truncated,
    /// The editor cancelled it (`session/cancel`).
    Cancelled,
}

/// What a running turn reports.
#[derive(Debug)]
pub enum Live<'a> {
    /// Streamed answer text.
    Text(&'a str),
    /// A durable event was committed.
    Committed(&'a EventKind),
}

/// The user's answer to a permission request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Run this call.
    Once,
    /// Run this call and every like it in the session.
    Always,
    /// Do not run it; the reason is for the model.
    Deny(Option<String>),
    /// Approve the plan and act under the approval mode named (`edits`,
    /// `on-request`, `untrusted`).
    Approve(String),
}

/// The answers a plan offers: approve into one of three approval modes,
/// or keep planning.
pub const PLAN_OPTIONS: [(&str, &str); 3] = [
    ("plan_edits", "Yes, and edit freely (commands ask)"),
    ("plan_on-request", "Yes, and run without asking (auto)"),
    (
        "plan_untrusted",
        "Yes, and ask before each edit and command",
    ),
];

/// The options a plan request offers.
fn plan_options() -> Vec<PermissionOption> {
    let mut options: Vec<PermissionOption> = PLAN_OPTIONS
        .iter()
        .map(|(id, name)| PermissionOption {
            option_id: (*id).into(),
            name: (*name).into(),
            kind: if *id == "plan_untrusted" {
                PermissionOptionKind::AllowOnce
            } else {
                PermissionOptionKind::AllowAlways
            },
        })
        .collect();
    options.push(PermissionOption {
        option_id: "reject_once".into(),
        name: "No, keep planning".into(),
        kind: PermissionOptionKind::RejectOnce,
    });
    options
}

/// Asks the editor's user about one session's tool calls.
#[derive(Clone)]
pub struct Asker {
    channel: Channel,
    /// The session's id; for a new session, set as soon as it exists
    /// (nothing is asked before its first prompt).
    session: Arc<OnceLock<String>>,
}

/// The options every permission request offers.
fn options() -> Vec<PermissionOption> {
    [
        ("allow_once", "Allow", PermissionOptionKind::AllowOnce),
        (
            "allow_always",
            "Allow for this session",
            PermissionOptionKind::AllowAlways,
        ),
        ("reject_once", "Deny", PermissionOptionKind::RejectOnce),
    ]
    .into_iter()
    .map(|(id, name, kind)| PermissionOption {
        option_id: id.into(),
        name: name.into(),
        kind,
    })
    .collect()
}

/// What the model reads when the turn was cancelled before the editor's
/// user answered.
pub const CANCELLED_WAIT: &str = "the user cancelled the turn before answering";

impl Asker {
    /// Ask about `request` (already durable and already reported as a tool
    /// call) and wait for the answer, or until `stop` says the turn was
    /// cancelled.
    pub fn ask(&self, request: &PermissionRequest, stop: &dyn Fn() -> bool) -> Answer {
        let title = match (&request.command, &request.path, &request.plan) {
            (Some(command), _, _) => format!("Run `{command}`: {}", request.reason),
            (None, Some(path), _) => format!("Edit {path}: {}", request.reason),
            (None, None, Some(plan)) => format!("Approve the plan: {}\n\n{plan}", request.reason),
            _ => format!("{}: {}", request.tool, request.reason),
        };
        let is_plan = request.plan.is_some();
        let params = RequestPermissionRequest {
            session_id: self.session.get().cloned().unwrap_or_default(),
            tool_call: ToolCallUpdate {
                tool_call_id: request.call_id.clone(),
                title: Some(title),
                status: Some(ToolCallStatus::Pending),
                ..ToolCallUpdate::default()
            },
            options: if is_plan { plan_options() } else { options() },
        };
        let (id, answers) = self.channel.request("session/request_permission", params);
        loop {
            match answers.recv_timeout(Duration::from_millis(50)) {
                Ok(Ok(result)) => return answer_of(result),
                Ok(Err(error)) => {
                    return Answer::Deny(Some(format!(
                        "the editor could not ask the user: {}",
                        error.message
                    )));
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Answer::Deny(Some("the editor disconnected before answering".into()));
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if stop() => {
                    self.channel.forget(id);
                    return Answer::Deny(Some(CANCELLED_WAIT.into()));
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

fn answer_of(result: Value) -> Answer {
    match serde_json::from_value::<RequestPermissionResponse>(result) {
        Ok(RequestPermissionResponse {
            outcome: PermissionOutcome::Selected { option_id },
        }) => match option_id.as_str() {
            plan if plan.starts_with("plan_") => Answer::Approve(plan["plan_".len()..].to_string()),
            "allow_once" => Answer::Once,
            "allow_always" => Answer::Always,
            "reject_once" | "reject_always" => Answer::Deny(None),
            other => Answer::Deny(Some(format!(
                "the editor answered with an option Latch did not offer (`{other}`), so the call did not run"
            ))),
        },
        Ok(RequestPermissionResponse {
            outcome: PermissionOutcome::Cancelled,
        }) => Answer::Deny(Some(CANCELLED_WAIT.into())),
        Err(e) => Answer::Deny(Some(format!(
            "the editor's answer was malformed ({e}), so the call did not run"
        ))),
    }
}

/// What the `latch` binary supplies: sessions of any workspace the editor
/// opens, driven by this process.
pub trait Sessions: Send + Sync + 'static {
    /// Create a session in workspace `cwd`, driven by this process with
    /// `asker` deciding its permission requests and the editor's MCP
    /// `servers` beside the configured ones; its id.
    fn create(
        &self,
        cwd: &Path,
        servers: &[McpServer],
        asker: Asker,
    ) -> Result<String, SessionError>;
    /// Take session `id` of workspace `cwd` to drive it (refused while
    /// another driver holds it) with `asker` deciding and the editor's MCP
    /// `servers` beside the configured ones, and return its
    /// committed conversation events, oldest first, for the replay.
    fn load(
        &self,
        id: &str,
        cwd: &Path,
        servers: &[McpServer],
        asker: Asker,
    ) -> Result<Vec<EventKind>, SessionError>;
    /// Run one turn of session `id` with the user's message (its text and
    /// images; blocking).
    fn prompt(
        &self,
        id: &str,
        prompt: &UserPrompt,
        on: &mut (dyn FnMut(Live<'_>) + Send),
    ) -> Result<TurnEnd, SessionError>;
    /// Stop session `id`'s running turn at once (not blocking).
    fn cancel(&self, id: &str);
    /// Session `id`'s plan: the task state's actions as a checklist (none:
    /// no plan to show).
    fn plan(&self, _id: &str) -> Option<Vec<crate::wire::PlanEntry>> {
        None
    }
    /// The modes session `id` offers and the one it runs in (none: the
    /// session has no modes).
    fn modes(&self, _id: &str) -> Option<SessionModeState> {
        None
    }
    /// Run session `id` in `mode` from its next tool call on (called only
    /// between turns).
    fn set_mode(&self, _id: &str, mode: &str) -> Result<(), SessionError> {
        Err(SessionError::BadRequest(format!(
            "this session has no modes (asked for `{mode}`)"
        )))
    }
}

/// Who Latch says it is in `initialize`.
#[derive(Clone, Debug)]
pub struct AgentInfo {
    /// The program's version.
    pub version: String,
}

struct Open {
    cwd: PathBuf,
    running: bool,
}

struct Server {
    sessions: Arc<dyn Sessions>,
    channel: Channel,
    info: AgentInfo,
    open: Arc<Mutex<HashMap<String, Open>>>,
    turns: Vec<JoinHandle<()>>,
}

/// Serve one ACP connection: read JSON-RPC lines from `input` until it
/// ends, write to `output`. At the end of input every running turn is
/// cancelled and waited for, so everything it did is committed.
pub fn serve(
    sessions: Arc<dyn Sessions>,
    info: AgentInfo,
    input: impl BufRead,
    output: Box<dyn std::io::Write + Send>,
) -> std::io::Result<()> {
    let mut server = Server {
        sessions,
        channel: Channel::new(output),
        info,
        open: Arc::new(Mutex::new(HashMap::new())),
        turns: Vec::new(),
    };
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match Incoming::parse(&line) {
            Ok(Incoming::Request { id, method, params }) => server.request(id, &method, params),
            Ok(Incoming::Notification { method, params }) => server.notification(&method, params),
            Ok(Incoming::Response { id, result }) => {
                if !server.channel.answer(&id, result) {
                    tracing::debug!("an ACP response to no request of Latch's (id {id})");
                }
            }
            Err(error) => server.channel.respond(&Value::Null, Err(error)),
        }
        server.turns.retain(|t| !t.is_finished());
    }
    server.channel.close();
    let running: Vec<String> = server
        .open
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|(_, o)| o.running)
        .map(|(id, _)| id.clone())
        .collect();
    for id in running {
        server.sessions.cancel(&id);
    }
    for turn in server.turns {
        let _ = turn.join();
    }
    Ok(())
}

fn params<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(|e| RpcError::new(INVALID_PARAMS, e.to_string()))
}

fn absolute(cwd: &Path) -> Result<(), RpcError> {
    if cwd.is_absolute() {
        Ok(())
    } else {
        Err(RpcError::new(
            INVALID_PARAMS,
            format!("cwd must be an absolute path, got `{}`", cwd.display()),
        ))
    }
}

/// The editor's MCP servers, checked: stdio and streamable HTTP are
/// taken, anything else is refused with the reason.
fn check_mcp_servers(servers: &[McpServer]) -> Result<(), RpcError> {
    for server in servers {
        match (server.transport.as_deref(), &server.command, &server.url) {
            (None | Some("stdio"), Some(_), _) | (Some("http"), _, Some(_)) => {}
            (Some(other), _, _) if other != "http" && other != "stdio" => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!(
                        "MCP server `{}` uses the `{other}` transport; Latch connects to stdio \
                         and streamable-HTTP servers (its `initialize` answer says \
                         mcpCapabilities.sse = false)",
                        server.name
                    ),
                ));
            }
            _ => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!(
                        "MCP server `{}` needs a `command` (stdio) or a `url` (type http)",
                        server.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

impl Server {
    fn request(&mut self, id: Value, method: &str, raw: Value) {
        let result = match method {
            "initialize" => self.initialize(raw),
            "authenticate" => Ok(json!({})),
            "session/new" => self.new_session(raw),
            "session/load" => self.load_session(raw),
            "session/set_mode" => self.set_mode(raw),
            "session/set_config_option" => self.set_config_option(raw),
            "session/prompt" => match self.prompt(id.clone(), raw) {
                // Answered by the turn's thread when it ends.
                Ok(()) => return,
                Err(e) => Err(e),
            },
            other => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("Latch does not implement `{other}`"),
            )),
        };
        self.channel.respond(&id, result);
    }

    fn notification(&mut self, method: &str, raw: Value) {
        if method != "session/cancel" {
            return;
        }
        let id = match params::<CancelNotification>(raw) {
            Ok(c) => c.session_id,
            Err(e) => return tracing::warn!("a malformed session/cancel: {e}"),
        };
        // A turn clears an interrupt when it starts, and the prompt's
        // thread may not have started it yet: repeat the interrupt until
        // the turn has ended.
        let running = |open: &Mutex<HashMap<String, Open>>, id: &str| {
            open.lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(id)
                .is_some_and(|o| o.running)
        };
        if !running(&self.open, &id) {
            return;
        }
        let sessions = self.sessions.clone();
        let open = self.open.clone();
        self.turns.push(std::thread::spawn(move || {
            while running(&open, &id) {
                sessions.cancel(&id);
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
    }

    fn initialize(&self, raw: Value) -> Result<Value, RpcError> {
        let _: InitializeRequest = params(raw)?;
        Ok(json!({
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": true, "sse": false},
            },
            "authMethods": [],
            "agentInfo": {"name": "latch", "title": "Latch", "version": self.info.version},
        }))
    }

    fn asker(&self, session: Option<&str>) -> Asker {
        let id = OnceLock::new();
        if let Some(session) = session {
            let _ = id.set(session.to_string());
        }
        Asker {
            channel: self.channel.clone(),
            session: Arc::new(id),
        }
    }

    fn new_session(&mut self, raw: Value) -> Result<Value, RpcError> {
        let req: NewSessionRequest = params(raw)?;
        absolute(&req.cwd)?;
        check_mcp_servers(&req.mcp_servers)?;
        // The session's id is only known once it exists: the asker is
        // bound to it right after.
        let asker = self.asker(None);
        let id = self
            .sessions
            .create(&req.cwd, &req.mcp_servers, asker.clone())
            .map_err(|e| e.rpc())?;
        let _ = asker.session.set(id.clone());
        let modes = self.sessions.modes(&id);
        self.open.lock().unwrap_or_else(|p| p.into_inner()).insert(
            id.clone(),
            Open {
                cwd: req.cwd,
                running: false,
            },
        );
        let mut answer = json!({"sessionId": id});
        if let Some(modes) = modes {
            answer["configOptions"] = json!(modes.config_options());
            answer["modes"] = json!(modes);
        }
        Ok(answer)
    }

    fn load_session(&mut self, raw: Value) -> Result<Value, RpcError> {
        let req: LoadSessionRequest = params(raw)?;
        absolute(&req.cwd)?;
        check_mcp_servers(&req.mcp_servers)?;
        let events = self
            .sessions
            .load(
                &req.session_id,
                &req.cwd,
                &req.mcp_servers,
                self.asker(Some(&req.session_id)),
            )
            .map_err(|e| e.rpc())?;
        for update in updates::replay(&events, &req.cwd) {
            self.channel.notify(
                "session/update",
                SessionNotification {
                    session_id: req.session_id.clone(),
                    update,
                },
            );
        }
        let modes = self.sessions.modes(&req.session_id);
        self.open.lock().unwrap_or_else(|p| p.into_inner()).insert(
            req.session_id,
            Open {
                cwd: req.cwd,
                running: false,
            },
        );
        Ok(match modes {
            Some(modes) => json!({ "modes": modes, "configOptions": modes.config_options() }),
            None => json!({}),
        })
    }

    /// `session/set_config_option`: the `mode` option is the session's
    /// mode, set as `session/set_mode` sets it; answers every option.
    fn set_config_option(&mut self, raw: Value) -> Result<Value, RpcError> {
        let req: SetSessionConfigOptionRequest = params(raw)?;
        if req.config_id != MODE_CONFIG_ID {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "session `{}` has no config option `{}`; its only option is `{MODE_CONFIG_ID}`",
                    req.session_id, req.config_id
                ),
            ));
        }
        self.switch_mode(&req.session_id, &req.value)?;
        let options = self
            .sessions
            .modes(&req.session_id)
            .map(|m| m.config_options())
            .unwrap_or_default();
        Ok(json!({ "configOptions": options }))
    }

    fn set_mode(&mut self, raw: Value) -> Result<Value, RpcError> {
        let req: SetSessionModeRequest = params(raw)?;
        self.switch_mode(&req.session_id, &req.mode_id)?;
        Ok(json!({}))
    }

    /// Switch the mode of the open session `session` (not while it runs a
    /// turn).
    fn switch_mode(&mut self, session: &str, mode: &str) -> Result<(), RpcError> {
        let req = SetSessionModeRequest {
            session_id: session.to_string(),
            mode_id: mode.to_string(),
        };
        match self
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&req.session_id)
        {
            None => {
                return Err(RpcError::new(
                    RESOURCE_NOT_FOUND,
                    format!("no open session `{}`", req.session_id),
                ));
            }
            Some(o) if o.running => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!(
                        "session `{}` is running a turn: change its mode when the turn has ended",
                        req.session_id
                    ),
                ));
            }
            Some(_) => {}
        }
        self.sessions
            .set_mode(&req.session_id, &req.mode_id)
            .map_err(|e| e.rpc())
    }

    fn prompt(&mut self, id: Value, raw: Value) -> Result<(), RpcError> {
        let req: PromptRequest = params(raw)?;
        let cwd = {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            let Some(session) = open.get_mut(&req.session_id) else {
                return Err(RpcError::new(
                    RESOURCE_NOT_FOUND,
                    format!(
                        "no open session `{}`: create one with session/new or open it with \
                         session/load first",
                        req.session_id
                    ),
                ));
            };
            if session.running {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!(
                        "session `{}` is already running a turn: wait for it or send \
                         session/cancel",
                        req.session_id
                    ),
                ));
            }
            let prompt = user_prompt(&req.prompt, &session.cwd)?;
            session.running = true;
            (session.cwd.clone(), prompt)
        };
        let (cwd, prompt) = cwd;
        let sessions = self.sessions.clone();
        let channel = self.channel.clone();
        let open = self.open.clone();
        let session = req.session_id;
        self.turns.push(std::thread::spawn(move || {
            let mut streamed = false;
            let mut on = |signal: Live<'_>| {
                let sent = match signal {
                    Live::Text(t) => {
                        streamed = true;
                        vec![SessionUpdate::AgentMessageChunk {
                            content: ContentBlock::text(t),
                        }]
                    }
                    Live::Committed(event) => {
                        let mut u = updates::live(event, streamed, &cwd);
                        if matches!(event, EventKind::AssistantMessage { .. }) {
                            streamed = false;
                        }
                        if latch_kernel::Checklist::may_change(event)
                            && let Some(entries) = sessions.plan(&session)
                        {
                            u.push(SessionUpdate::Plan { entries });
                        }
                        // A mode change (an approved plan) is a config
                        // option change too.
                        if u.iter()
                            .any(|x| matches!(x, SessionUpdate::CurrentModeUpdate { .. }))
                            && let Some(modes) = sessions.modes(&session)
                        {
                            u.push(SessionUpdate::ConfigOptionUpdate {
                                config_options: modes.config_options(),
                            });
                        }
                        u
                    }
                };
                for update in sent {
                    channel.notify(
                        "session/update",
                        SessionNotification {
                            session_id: session.clone(),
                            update,
                        },
                    );
                }
            };
            let result = sessions.prompt(&session, &prompt, &mut on);
            if let Some(s) = open
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_mut(&session)
            {
                s.running = false;
            }
            let stop = |reason: StopReason| Ok(json!({ "stopReason": reason }));
            channel.respond(
                &id,
                match result {
                    Ok(TurnEnd::Finished) => stop(StopReason::EndTurn),
                    Ok(TurnEnd::StepLimit) => stop(StopReason::MaxTurnRequests),
                    Ok(TurnEnd::Truncated) => stop(StopReason::MaxTokens),
                    Ok(TurnEnd::Cancelled) => stop(StopReason::Cancelled),
                    Err(e) => Err(e.rpc()),
                },
            );
        }));
        Ok(())
    }
}
