//! Starting and resuming a child: its session and durable profile, its
//! engine through the supervisor's factory (rebuilt from the recorded
//! engine and configuration on resume), its tools from the tree's one
//! [`super::SessionTools`], its hooks (the tree's `[hooks]`, run in its
//! own sandbox and recorded in its own log), its lease (the parent's
//! process holds the child while it runs), its worker thread, and the
//! report committed when its run ends.

use super::{ChildRuntime, Live};
use crate::agent::{Agent, AgentError, AgentEvent, AgentOptions, Delegation};
use crate::config::agents::{AgentDef, AgentScope};
use crate::engine::ContextEngine;
use crate::engine::policy::Brief;
use crate::supervisor::profile::{self, Settings};
use crate::supervisor::{RecordedEngine, Supervisor};
use latch_engine_sdk::types::ToolCall;
use latch_kernel::agents::{ChildEntry, ReportOutcome, build_report};
use latch_kernel::{EventKind, LeaseError, SessionLease, SessionRecord, Store};
use latch_provider::ToolSchema;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The child's first input: a compact, actionable delegation brief, never
/// the parent's history.
pub fn delegation_brief(parent: &str, role: &str, task: &str, context: Option<&str>) -> String {
    let mut brief = format!(
        "[Latch] You are a child agent of session {parent}, working as `{role}`. \
         This is your task; start on it now:\n\n{task}\n"
    );
    if let Some(context) = context {
        brief.push_str(&format!("\nWhat the parent handed over:\n{context}\n"));
    }
    brief.push_str(
        "\nYou share the workspace with the parent and other agents, so files may change \
         under you. When you are done, end your turn with a short summary of what you did and \
         found; Latch reports it to the parent.",
    );
    brief
}

/// The input of a resumed child's run.
const RESUME_INPUT: &str = "[Latch] Your run was interrupted. Continue your delegated task where \
     it stopped, then end your turn with a summary.";

/// What the lease of a child run by a parent says holds it.
fn child_surface(parent: &str) -> String {
    format!("the parent session {parent}, which runs it as a child agent")
}

/// The engine of a child, through the supervisor's single factory.
fn child_engine(
    supervisor: &Supervisor,
    child: &str,
    parent: &SessionRecord,
    role: &str,
    task: &str,
    model: &latch_engine_sdk::types::ModelProfile,
) -> Result<Box<dyn ContextEngine>, String> {
    let brief = Brief {
        parent_session: parent.id.clone(),
        role: role.to_string(),
        task: task.to_string(),
        child_model: model.clone(),
    };
    supervisor
        .child_engine_for(child, &parent.model, &brief)
        .map_err(|e| e.to_string())
}

/// The engine a defined agent names (`builtin:NAME` or a component path),
/// loaded through the supervisor as a recorded engine is.
fn agent_engine(
    supervisor: &Supervisor,
    child: &str,
    parent: &SessionRecord,
    role: &str,
    task: &str,
    model: &latch_engine_sdk::types::ModelProfile,
    engine: &str,
) -> Result<Box<dyn ContextEngine>, String> {
    let brief = Brief {
        parent_session: parent.id.clone(),
        role: role.to_string(),
        task: task.to_string(),
        child_model: model.clone(),
    };
    let recorded = RecordedEngine {
        engine: engine.to_string(),
        config: String::new(),
    };
    supervisor
        .rebuild_child_engine(child, &parent.model, &brief, &recorded)
        .map_err(|e| format!("spawn_agent: the agent's engine `{engine}` could not start: {e}"))
}

/// The engine of the child session `record`, rebuilt through the
/// supervisor from its durable profile: its model from its session, its
/// engine and engine configuration as its spawn (in its parent's log)
/// recorded them. Every resume (by the parent, by the user with `latch
/// resume <child-id>`, or `latch context`/`recall` on a child) builds it
/// this way.
pub fn child_engine_from_profile(
    supervisor: &Supervisor,
    store: &Store,
    record: &SessionRecord,
) -> Result<Box<dyn ContextEngine>, String> {
    let parent_id = record
        .parent
        .as_deref()
        .ok_or_else(|| format!("session {} is not a child agent", record.id))?;
    let parent = store.session(parent_id).map_err(|e| e.to_string())?;
    let tree = store.agent_tree(parent_id).map_err(|e| e.to_string())?;
    let entry = tree.child(&record.id);
    let (role, task) = entry
        .map(|c| (c.role.clone(), c.task.clone()))
        .unwrap_or_else(|| ("child".into(), String::new()));
    let recorded = RecordedEngine {
        engine: entry.map(|c| c.engine.clone()).unwrap_or_default(),
        config: entry.map(|c| c.engine_config.clone()).unwrap_or_default(),
    };
    let brief = Brief {
        parent_session: parent.id.clone(),
        role,
        task,
        child_model: record.model.clone(),
    };
    supervisor
        .rebuild_child_engine(&record.id, &parent.model, &brief, &recorded)
        .map_err(|e| e.to_string())
}

/// What a child runs with in this process: its parent's provider, the
/// safety modes of `options`, its own model.
fn settings(options: &AgentOptions, rt: &ChildRuntime, record: &SessionRecord) -> Settings {
    let perms = options.permissions.as_ref();
    Settings {
        provider: rt.provider.kind().name().to_string(),
        base_url: rt.provider.config().base_url.clone(),
        model: record.model.model.clone(),
        approval: perms.map(|p| p.approval).unwrap_or_default(),
        sandbox: perms.map(|p| p.sandbox.mode).unwrap_or_default(),
        group: None,
        mode: latch_kernel::SessionMode::Act,
    }
}

/// What `spawn_agent` asked for.
pub(super) struct Spawn<'a> {
    /// The child's role.
    pub role: &'a str,
    /// Its task.
    pub task: &'a str,
    /// What the parent handed over.
    pub context: Option<&'a str>,
    /// The model the call named.
    pub model: Option<&'a str>,
    /// The defined agent it runs as.
    pub agent: Option<&'a str>,
}

/// The defined agent `name`, or the error the model reads (naming those
/// there are).
fn defined_agent<'a>(rt: &'a ChildRuntime, name: &str) -> Result<&'a AgentDef, String> {
    rt.agents.get(name).ok_or_else(|| {
        let names: Vec<&str> = rt.agents.agents().map(|a| a.name.as_str()).collect();
        format!(
            "spawn_agent: no agent `{name}` is defined ({}); call spawn_agent with one of \
             those, or with a `role` and no `agent`",
            if names.is_empty() {
                "none is: the user defines them in .latch/agents/NAME.md".to_string()
            } else {
                format!("defined: {}", names.join(", "))
            }
        )
    })
}

/// The options a child running as `agent` gets from its parent's: the
/// agent's tools within the parent's, its sandbox and approval. A workspace
/// agent that loosens the sandbox or approval, or names an engine, needs a
/// trusted workspace.
fn agent_options(rt: &ChildRuntime, agent: &AgentDef) -> Result<AgentOptions, String> {
    let mut options = rt.options.clone();
    options.tools = options.tools.narrowed(agent.tools.as_deref(), &agent.deny);
    let untrusted = agent.scope == AgentScope::Workspace && !rt.workspace_trusted;
    let needs_trust = |what: String| {
        format!(
            "spawn_agent: agent `{}` ({}) {what}; a workspace agent may do that only in a \
             trusted workspace. Tell the user: `latch trust` (or --trust-workspace) allows it, \
             or spawn it without that key",
            agent.name,
            agent.path.display()
        )
    };
    if untrusted && let Some(engine) = &agent.engine {
        return Err(needs_trust(format!("names the engine `{engine}`")));
    }
    if let Some(p) = options.permissions.as_mut() {
        if let Some(sandbox) = agent.sandbox {
            if untrusted && sandbox.is_looser_than(p.sandbox.mode) {
                return Err(needs_trust(format!(
                    "asks for the sandbox `{}`, looser than this session's `{}`",
                    sandbox.name(),
                    p.sandbox.mode.name()
                )));
            }
            p.sandbox.mode = sandbox;
        }
        if let Some(approval) = agent.approval {
            if untrusted && approval.is_looser_than(p.approval) {
                return Err(needs_trust(format!(
                    "asks for the approval mode `{}`, looser than this session's `{}`",
                    approval.name(),
                    p.approval.name()
                )));
            }
            p.approval = approval;
        }
    }
    Ok(options)
}

/// The child's first input when it runs as `agent`: the agent's prompt
/// ahead of the delegation brief.
fn agent_brief(agent: &AgentDef, brief: String) -> String {
    if agent.prompt.trim().is_empty() {
        return brief;
    }
    format!(
        "[Latch] You run as the agent `{}` ({}). Its instructions:\n\n{}\n\n---\n\n{brief}",
        agent.name,
        agent.path.display(),
        agent.prompt
    )
}

/// Spawn a child of `parent`: its session, its engine, its profile event
/// (in the parent's session), its own session profile, its lease and its
/// worker. Returns the child's id.
pub(super) fn spawn(
    rt: &Arc<ChildRuntime>,
    parent: &SessionRecord,
    call: Spawn<'_>,
) -> Result<String, String> {
    let Spawn {
        role,
        task,
        context,
        model,
        agent,
    } = call;
    let agent = agent.map(|name| defined_agent(rt, name)).transpose()?;
    let options = match agent {
        Some(a) => agent_options(rt, a)?,
        None => rt.options.clone(),
    };
    let chosen = match (model, agent) {
        (None, Some(a)) => match a.model_for(&|m| rt.models.is_configured(m)) {
            // The user named it in the file: no `[models.<name>]` needed.
            Some(name) => rt
                .models
                .resolve_defined(&parent.model, name, rt.options.max_tokens)?,
            None => rt
                .models
                .resolve(&parent.model, None, rt.options.max_tokens)?,
        },
        (model, _) => rt
            .models
            .resolve(&parent.model, model, rt.options.max_tokens)?,
    };
    let profile = chosen.profile;
    let record = rt
        .store
        .create_session(&parent.workspace, Some(&parent.id), &profile)
        .map_err(|e| e.to_string())?;
    let built = match agent.and_then(|a| a.engine.as_deref()) {
        Some(engine) => agent_engine(
            &rt.supervisor,
            &record.id,
            parent,
            role,
            task,
            &profile,
            engine,
        ),
        None => child_engine(&rt.supervisor, &record.id, parent, role, task, &profile),
    };
    let mut engine = match built {
        Ok(engine) => engine,
        Err(e) => {
            // The session never ran: hide it from history; its record stays.
            let _ = rt.store.delete_session(&record.id);
            return Err(e);
        }
    };
    let lease = SessionLease::acquire(&rt.store, &record.id, &child_surface(&parent.id))
        .map_err(|e| e.to_string())?;
    let engine_config = engine.config().unwrap_or_else(|_| "{}".into());
    rt.store
        .append(
            &parent.id,
            EventKind::ChildSpawned {
                child: record.id.clone(),
                role: role.to_string(),
                task: task.to_string(),
                model: profile.model.clone(),
                engine: engine.name().to_string(),
                engine_config,
            },
        )
        .map_err(|e| e.to_string())?;
    profile::record(
        &rt.store,
        &record.id,
        &settings(&options, rt, &record),
        |_| match agent {
            Some(a) => format!("its parent's run, as the agent {}", a.name),
            None => "its parent's run".into(),
        },
    )
    .map_err(|e| e.to_string())?;
    let brief = delegation_brief(&parent.id, role, task, context);
    let input = match agent {
        Some(a) => agent_brief(a, brief),
        None => brief,
    };
    let id = record.id.clone();
    start(
        rt,
        Started {
            record,
            role: role.to_string(),
            engine,
            input,
            max_tokens: chosen.max_tokens,
            resumed: false,
            lease,
            options,
        },
    )?;
    Ok(id)
}

/// Why a child could not be resumed.
#[derive(Debug)]
pub enum ResumeError {
    /// Another process (or holder) drives the child: its description.
    InUse(String),
    /// Anything else, as the model reads it.
    Failed(String),
}

impl From<String> for ResumeError {
    fn from(e: String) -> ResumeError {
        ResumeError::Failed(e)
    }
}

impl std::fmt::Display for ResumeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResumeError::InUse(holder) => write!(f, "the child is driven by {holder}"),
            ResumeError::Failed(e) => f.write_str(e),
        }
    }
}

/// Resume an interrupted child from its durable profile: its lease, a
/// fresh engine rebuilt from the recorded one, the log repaired, then a
/// run that continues it. (The parent's `message_agent` does this for an
/// interrupted child.) Refused while another process drives the child.
pub fn resume(
    rt: &Arc<ChildRuntime>,
    parent: &SessionRecord,
    entry: &ChildEntry,
) -> Result<(), ResumeError> {
    let lease = match SessionLease::acquire(&rt.store, &entry.id, &child_surface(&parent.id)) {
        Ok(lease) => lease,
        Err(LeaseError::Held { holder, .. }) => return Err(ResumeError::InUse(holder.to_string())),
        Err(e) => return Err(ResumeError::Failed(e.to_string())),
    };
    let record = rt.store.session(&entry.id).map_err(|e| e.to_string())?;
    let engine = child_engine_from_profile(&rt.supervisor, &rt.store, &record)?;
    // The output limit its model is configured with now, as a resumed root
    // takes its provider's.
    let max_tokens = rt
        .models
        .max_tokens(&record.model.model, rt.options.max_tokens);
    rt.store
        .append(
            &parent.id,
            EventKind::AgentResumed {
                child: entry.id.clone(),
            },
        )
        .map_err(|e| e.to_string())?;
    // It runs with its parent's provider and safety modes now: a change
    // from what it ran with is recorded (and shown).
    profile::record(
        &rt.store,
        &record.id,
        &settings(&rt.options, rt, &record),
        |_| format!("its parent's run (session {})", parent.id),
    )
    .map_err(|e| e.to_string())?;
    start(
        rt,
        Started {
            record,
            role: entry.role.clone(),
            engine,
            input: RESUME_INPUT.into(),
            max_tokens,
            resumed: true,
            lease,
            options: rt.options.clone(),
        },
    )?;
    Ok(())
}

/// A child about to run.
struct Started {
    record: SessionRecord,
    role: String,
    engine: Box<dyn ContextEngine>,
    input: String,
    max_tokens: u32,
    resumed: bool,
    /// Held until its report is committed.
    lease: SessionLease,
    /// What it runs with (its parent's, narrowed by a defined agent).
    options: AgentOptions,
}

fn start(rt: &Arc<ChildRuntime>, started: Started) -> Result<(), String> {
    let live = rt.register(&started.record.id);
    let rt2 = rt.clone();
    let id = started.record.id.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("latch-child-{id}"))
        .spawn(move || {
            let Started {
                record,
                role,
                engine,
                input,
                max_tokens,
                resumed,
                lease,
                options,
            } = started;
            let id = record.id.clone();
            let run_with = Run {
                role: &role,
                input: &input,
                max_tokens,
                resumed,
                options: &options,
            };
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(&rt2, record, engine, live, &run_with)
            }));
            let (outcome, summary) = match outcome {
                Ok(Some(r)) => r,
                Ok(None) => (
                    ReportOutcome::Cancelled,
                    "cancelled before it started".into(),
                ),
                Err(_) => (ReportOutcome::Failed, "the child's worker panicked".into()),
            };
            let events = rt2.store.all_events(&id).unwrap_or_default();
            let report = EventKind::AgentReport(build_report(&role, &events, outcome, &summary));
            match rt2.store.append(&id, report.clone()) {
                Ok(_) => rt2.observe(&id, &role, &report),
                Err(e) => tracing::error!("could not commit the report of child {id}: {e}"),
            }
            // It no longer runs: it leaves its group, its claims released.
            if let Err(e) =
                crate::supervisor::groups::member_ended(&rt2.store, &*rt2.group, &id, outcome)
            {
                tracing::error!("child {id} could not leave its group: {e}");
            }
            drop(lease);
            rt2.release(&id);
        });
    match spawned {
        Ok(_) => Ok(()),
        Err(e) => {
            rt.release(&id);
            Err(format!("could not start a worker thread: {e}"))
        }
    }
}

/// What one run of a child is given.
struct Run<'a> {
    role: &'a str,
    input: &'a str,
    max_tokens: u32,
    resumed: bool,
    options: &'a AgentOptions,
}

/// One run of a child on its worker; `None` when it was cancelled before
/// it got a worker slot.
fn run(
    rt: &Arc<ChildRuntime>,
    record: SessionRecord,
    engine: Box<dyn ContextEngine>,
    live: Live,
    run: &Run<'_>,
) -> Option<(ReportOutcome, String)> {
    if !rt.acquire(&record.id, &live.cancel) {
        return None;
    }
    // The same tools a child the user resumes gets (skills, MCP servers),
    // its commands in its parent's sandbox.
    let sandbox = run
        .options
        .permissions
        .as_ref()
        .map(|p| p.sandbox.mode)
        .unwrap_or_default();
    let (tools, extensions) = match rt.tools.build(&record, sandbox) {
        Ok(built) => built,
        Err(e) => return Some((ReportOutcome::Failed, e)),
    };
    let link = ChildLink {
        rt: rt.clone(),
        cancel: live.cancel.clone(),
        mail: live.mail.clone(),
    };
    // A client of its own: a pooled connection lives on the runtime of the
    // agent that opened it, and each agent's runtime ends with the agent.
    let provider = match latch_provider::Provider::new(rt.provider.config().clone()) {
        Ok(p) => p,
        Err(e) => return Some((ReportOutcome::Failed, e.to_string())),
    };
    let root = record.parent.clone().unwrap_or_else(|| record.id.clone());
    let agent = Agent::new(
        rt.store.clone(),
        record,
        rt.workspace.clone(),
        engine,
        provider,
        tools,
        AgentOptions {
            max_tokens: run.max_tokens,
            ..run.options.clone()
        },
    );
    let mut agent = match agent {
        // Its group membership wraps its link to the parent.
        Ok(a) => a
            .with_extensions(extensions)
            .with_hooks(rt.hooks.clone())
            .with_instructions(Box::new(
                crate::config::instructions::WorkspaceInstructions::new(&rt.workspace),
            ))
            .with_delegation(Box::new(
                crate::supervisor::groups::GroupMember::for_child(
                    Box::new(link),
                    rt.store.clone(),
                    &root,
                )
                .with_port(rt.group.clone()),
            )),
        Err(e) => return Some((ReportOutcome::Failed, e.to_string())),
    };
    // A cancellation from now on interrupts its turn at once.
    *live.control.lock().unwrap_or_else(|p| p.into_inner()) = Some(agent.control());
    if live.cancel.load(Ordering::SeqCst) {
        agent.control().cancel("the parent cancelled this child");
    }
    let id = agent.session().id.clone();
    let mut observer = |e: AgentEvent| {
        if let AgentEvent::Committed { event, .. } = e {
            rt.observe(&id, run.role, event);
        }
    };
    if run.resumed
        && let Err(e) = agent.resume(&mut observer)
    {
        return Some((ReportOutcome::Failed, e.to_string()));
    }
    Some(match agent.run_turn(run.input, &mut observer) {
        Ok(outcome) => (ReportOutcome::Completed, outcome.final_text),
        Err(AgentError::Cancelled(why)) => (ReportOutcome::Cancelled, why),
        Err(AgentError::Interrupted) if live.cancel.load(Ordering::SeqCst) => (
            ReportOutcome::Cancelled,
            "the parent cancelled this child".into(),
        ),
        Err(e) => (ReportOutcome::Failed, e.to_string()),
    })
}

/// A child's [`Delegation`]: the parent's queued messages at the child's
/// safe boundaries, and cancellation. A child has no agent tools of its
/// own.
pub struct ChildLink {
    rt: Arc<ChildRuntime>,
    cancel: Arc<AtomicBool>,
    mail: Arc<AtomicBool>,
}

impl Delegation for ChildLink {
    fn schemas(&self) -> Vec<ToolSchema> {
        Vec::new()
    }

    fn execute(&mut self, _: &SessionRecord, _: &ToolCall) -> Option<Vec<EventKind>> {
        None
    }

    fn at_safe_boundary(&mut self, session: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
        if self.cancel.load(Ordering::SeqCst) {
            return Err(AgentError::Cancelled(
                "the parent cancelled this child".into(),
            ));
        }
        if !self.mail.swap(false, Ordering::SeqCst) {
            return Ok(Vec::new());
        }
        parent_messages(&self.rt.store, session)
    }
}

/// The deliveries of the messages the parent queued for the child
/// `session` and it has not received, FIFO.
pub(super) fn parent_messages(
    store: &Store,
    session: &SessionRecord,
) -> Result<Vec<EventKind>, AgentError> {
    let Some(parent) = &session.parent else {
        return Ok(Vec::new());
    };
    let tree = store.agent_tree(parent)?;
    Ok(tree
        .pending_messages(&session.id)
        .into_iter()
        .map(|m| EventKind::AgentMessageDelivered {
            message_seq: m.seq,
            text: format!("[Latch] Message from the parent agent:\n{}", m.text),
        })
        .collect())
}
