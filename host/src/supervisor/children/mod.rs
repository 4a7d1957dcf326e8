//! Child agents at run time: [`ChildRuntime`] runs each child session on
//! its own worker thread (at most `[agents] max_concurrent` at once), with
//! an engine built through the supervisor's single factory, and commits the
//! host-built [`AgentReport`] in the child's session when its run ends.
//! [`ParentAgents`] is the parent's [`Delegation`]: the agent tools and the
//! delivery of reports at the parent's safe boundaries. [`ChildLink`] is the
//! child's: the parent's messages at the child's safe boundaries, and
//! cancellation. [`UserResumedChild`] is a child the user opens directly.
//! [`SessionTools`] gives every session of the tree the same tools (skills
//! and MCP servers included), and [`ChildSettings::hooks`] the same
//! `[hooks]`, so a child is the same child however it is opened.
//!
//! Everything that must survive a restart is an event (see
//! [`latch_kernel::agents`]); the in-memory part is only which children
//! this process runs and a flag that says a report may be waiting. A child
//! this process runs is held by it: its worker holds the child session's
//! lease ([`latch_kernel::SessionLease`]) while it runs, so nobody else
//! drives it meanwhile.

pub mod models;
mod parent;
pub mod schemas;
mod tools;
mod user;
mod worker;

pub use models::{ChildModel, ChildModels};
pub use parent::ParentAgents;
pub use tools::{SessionTools, StandardOnly};
pub use user::UserResumedChild;
pub use worker::{
    ChildLink, ResumeError, child_engine_from_profile, delegation_brief, resume as resume_child,
};

use super::Supervisor;
use crate::agent::hooks::HookCommands;
use crate::agent::{AgentOptions, TurnControl};
use crate::config::agents::AgentCatalog;
use crate::config::{ChildrenOnInterrupt, Config};
use latch_kernel::group::GroupPort;
use latch_kernel::{EventKind, Store};
use latch_provider::Provider;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often a wait for children looks at the parent's interrupt.
const INTERRUPT_POLL: Duration = Duration::from_millis(20);

/// A child this process runs.
#[derive(Clone, Debug)]
struct Live {
    /// Set by `cancel_agent`; the child stops at once (its turn is
    /// interrupted) or, not started yet, at its first safe boundary.
    cancel: Arc<AtomicBool>,
    /// Set when a message is queued for it.
    mail: Arc<AtomicBool>,
    /// True once it holds a worker slot.
    running: bool,
    /// The running child agent's turn control, once it is built.
    control: Arc<Mutex<Option<TurnControl>>>,
}

impl Live {
    fn cancel(&self) {
        self.cancel.store(true, Ordering::SeqCst);
        if let Some(control) = self
            .control
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            control.cancel("the parent cancelled this child");
        }
    }
}

/// How a wait for children ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waited {
    /// What it waited for holds.
    Done,
    /// The deadline passed first.
    TimedOut,
    /// The waiting agent's turn was interrupted.
    Interrupted,
}

#[derive(Default)]
struct Shared {
    live: HashMap<String, Live>,
    slots_used: usize,
    /// Counts the children's ends, so a waiter misses none.
    ends: u64,
}

/// Sees every event a child commits, with the child's id and role (for
/// surfaces such as `latch demo team`; never durable by itself).
pub type ChildObserver = Arc<dyn Fn(&str, &str, &EventKind) + Send + Sync>;

/// How the children of one root run.
#[derive(Clone)]
pub struct ChildSettings {
    /// Most children running at once (`[agents] max_concurrent`; at least
    /// one).
    pub max_concurrent: usize,
    /// The model profiles `spawn_agent {model}` may choose.
    pub models: ChildModels,
    /// Sees the children's committed events.
    pub observer: Option<ChildObserver>,
    /// Builds each child's tools; `None`: the standard tools only.
    pub tools: Option<Arc<dyn SessionTools>>,
    /// What the user's interrupt of the parent's turn does to running
    /// children (`[agents] on_interrupt`).
    pub on_interrupt: ChildrenOnInterrupt,
    /// The hooks each child runs (`[hooks]`, as its root runs them), in
    /// its own sandbox and recorded in its own session.
    pub hooks: HookCommands,
    /// Where the root's agent group lives (`[group] store`); `None`: the
    /// local store.
    pub group: Option<Arc<dyn GroupPort>>,
    /// The agents users defined, which `spawn_agent {agent}` runs.
    pub agents: AgentCatalog,
    /// True when the workspace is trusted, so a workspace agent may
    /// loosen its child's sandbox or approval, or name an engine.
    pub workspace_trusted: bool,
}

impl Default for ChildSettings {
    fn default() -> Self {
        ChildSettings {
            max_concurrent: crate::config::AgentsConfig::default().max_concurrent,
            models: ChildModels::default(),
            observer: None,
            tools: None,
            on_interrupt: ChildrenOnInterrupt::default(),
            hooks: HookCommands::default(),
            group: None,
            agents: AgentCatalog::default(),
            workspace_trusted: false,
        }
    }
}

impl ChildSettings {
    /// The settings `config` gives: `[agents]`, `[models.<name>]` and
    /// `[hooks]`.
    pub fn from_config(config: &Config) -> ChildSettings {
        ChildSettings {
            max_concurrent: config.agents.max_concurrent,
            models: ChildModels::from_config(config),
            on_interrupt: config.agents.on_interrupt,
            hooks: config.hooks.commands(),
            ..ChildSettings::default()
        }
    }
}

/// What every child of one root shares: the store, the workspace, the
/// supervisor (its single factory), the provider and the worker bound.
pub struct ChildRuntime {
    store: Arc<Store>,
    workspace: PathBuf,
    supervisor: Arc<Supervisor>,
    provider: Provider,
    options: AgentOptions,
    max_concurrent: usize,
    models: ChildModels,
    observer: Option<ChildObserver>,
    tools: Arc<dyn SessionTools>,
    on_interrupt: ChildrenOnInterrupt,
    hooks: HookCommands,
    group: Arc<dyn GroupPort>,
    agents: AgentCatalog,
    workspace_trusted: bool,
    shared: Mutex<Shared>,
    changed: Condvar,
    /// Set when a child finished: a report may wait for delivery.
    finished: AtomicBool,
}

impl ChildRuntime {
    /// A runtime whose children run with `options` (their mode becomes
    /// `child`), at most `max_concurrent` at once (at least one).
    pub fn new(
        store: Arc<Store>,
        workspace: PathBuf,
        supervisor: Arc<Supervisor>,
        provider: Provider,
        options: AgentOptions,
        max_concurrent: usize,
    ) -> Arc<ChildRuntime> {
        let settings = ChildSettings {
            max_concurrent,
            ..ChildSettings::default()
        };
        ChildRuntime::with_settings(store, workspace, supervisor, provider, options, settings)
    }

    /// A runtime whose children run with `options` (their mode becomes
    /// `child`; their output limit follows their model) under `settings`.
    pub fn with_settings(
        store: Arc<Store>,
        workspace: PathBuf,
        supervisor: Arc<Supervisor>,
        provider: Provider,
        options: AgentOptions,
        settings: ChildSettings,
    ) -> Arc<ChildRuntime> {
        let tools = settings
            .tools
            .unwrap_or_else(|| Arc::new(StandardOnly::new(store.clone(), workspace.clone())));
        let group = settings.group.unwrap_or_else(|| store.clone());
        Arc::new(ChildRuntime {
            store,
            workspace,
            supervisor,
            provider,
            options: AgentOptions {
                mode: "child".into(),
                ..options
            },
            max_concurrent: settings.max_concurrent.max(1),
            models: settings.models,
            observer: settings.observer,
            tools,
            on_interrupt: settings.on_interrupt,
            hooks: settings.hooks,
            group,
            agents: settings.agents,
            workspace_trusted: settings.workspace_trusted,
            shared: Mutex::new(Shared::default()),
            changed: Condvar::new(),
            finished: AtomicBool::new(true),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The agents users defined.
    pub fn agents(&self) -> &AgentCatalog {
        &self.agents
    }

    /// Where the root's agent group lives.
    pub fn group(&self) -> &Arc<dyn GroupPort> {
        &self.group
    }

    /// Tell the observer (if any) about a child's committed event.
    fn observe(&self, child: &str, role: &str, event: &EventKind) {
        if let Some(observer) = &self.observer {
            observer(child, role, event);
        }
    }

    /// True while this process runs (or queues) the child.
    pub fn is_live(&self, child: &str) -> bool {
        self.lock().live.contains_key(child)
    }

    /// True when the child holds a worker slot.
    fn is_running(&self, child: &str) -> bool {
        self.lock().live.get(child).is_some_and(|l| l.running)
    }

    /// How many children this process runs or queues.
    pub fn live_count(&self) -> usize {
        self.lock().live.len()
    }

    fn register(&self, child: &str) -> Live {
        let live = Live {
            cancel: Arc::new(AtomicBool::new(false)),
            mail: Arc::new(AtomicBool::new(true)),
            running: false,
            control: Arc::new(Mutex::new(None)),
        };
        self.lock().live.insert(child.to_string(), live.clone());
        live
    }

    /// Wait for a worker slot; false when the child was cancelled first.
    fn acquire(&self, child: &str, cancel: &AtomicBool) -> bool {
        let mut shared = self.lock();
        loop {
            if cancel.load(Ordering::SeqCst) {
                return false;
            }
            if shared.slots_used < self.max_concurrent {
                shared.slots_used += 1;
                if let Some(l) = shared.live.get_mut(child) {
                    l.running = true;
                }
                return true;
            }
            shared = self
                .changed
                .wait_timeout(shared, Duration::from_millis(200))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The child's run ended (its report is committed, or it never got a
    /// slot): free its slot and wake whoever waits.
    fn release(&self, child: &str) {
        let mut shared = self.lock();
        if let Some(l) = shared.live.remove(child)
            && l.running
        {
            shared.slots_used -= 1;
        }
        shared.ends += 1;
        self.finished.store(true, Ordering::SeqCst);
        drop(shared);
        self.changed.notify_all();
    }

    fn cancel(&self, child: &str) -> bool {
        match self.lock().live.get(child) {
            Some(l) => {
                l.cancel();
                true
            }
            None => false,
        }
    }

    fn notify_mail(&self, child: &str) {
        if let Some(l) = self.lock().live.get(child) {
            l.mail.store(true, Ordering::SeqCst);
        }
    }

    /// Take the "a child finished" flag.
    fn take_finished(&self) -> bool {
        self.finished.swap(false, Ordering::SeqCst)
    }

    /// Block until `done` holds (checked after every child's end), the
    /// deadline passes or `stop` holds (checked every few milliseconds:
    /// the waiting turn was interrupted).
    fn wait_until(
        &self,
        deadline: Instant,
        stop: &dyn Fn() -> bool,
        mut done: impl FnMut() -> bool,
    ) -> Waited {
        loop {
            let ends = self.lock().ends;
            if done() {
                return Waited::Done;
            }
            let mut shared = self.lock();
            while shared.ends == ends {
                if stop() {
                    return Waited::Interrupted;
                }
                let now = Instant::now();
                if now >= deadline {
                    return Waited::TimedOut;
                }
                shared = self
                    .changed
                    .wait_timeout(shared, (deadline - now).min(INTERRUPT_POLL))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
    }

    /// Wait (at most `timeout`) until this process runs no child; true when
    /// none is left. For shutdown and tests.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        self.wait_until(Instant::now() + timeout, &|| false, || {
            self.live_count() == 0
        }) == Waited::Done
    }

    /// Cancel every child this process runs: a running one stops at once
    /// (its turn is interrupted, every call answered), a queued one before
    /// it starts; each commits its report.
    pub fn cancel_all(&self) {
        for l in self.lock().live.values() {
            l.cancel();
        }
    }

    /// True when the parent's interrupt cancels its children
    /// (`[agents] on_interrupt = "cancel"`).
    fn cancels_on_interrupt(&self) -> bool {
        self.on_interrupt == ChildrenOnInterrupt::Cancel
    }
}
