//! The terminal UI's wiring: the agent runs on a thread of its own and
//! reports every committed event (caught up from the store in sequence
//! order, with the workspace-wide events of other sessions and the
//! children's reports) and every streamed delta to the screen; the screen's
//! interrupts and steering go straight to the agent's [`TurnControl`], its
//! permission answers straight to the [`TuiApprover`] the agent asks, its
//! other commands to the agent thread.
//!
//! `latch` on a terminal, `latch resume` on a terminal and `latch demo
//! --tui` come here; `--plain` and any non-terminal keep the line REPL.

use super::GlobalArgs;
use super::render;
use super::setup::{self, Env};
use super::tui_approve::TuiApprover;
use crate::agent::{Agent, AgentError, AgentEvent, ModeChoice, TurnControl};
use latch_kernel::{SessionRecord, Store, StoredEvent};
use latch_surface::{Delta, GroupView, Surface};
use latch_tui::{Command, Input, UiState};
use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};

/// True when both stdin and stdout are terminals (the TUI can run).
pub fn on_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// What a surface of `session` has not seen after `after` (the shared
/// catch-up of every surface).
pub fn catch_up(
    store: &Store,
    session: &str,
    workspace: &str,
    after: u64,
) -> anyhow::Result<Vec<StoredEvent>> {
    Ok(latch_surface::catch_up(store, session, workspace, after)?)
}

/// The session's surface as the log says it now (nothing shown live).
pub fn surface_of(store: &Store, session: &str, workspace: &str) -> anyhow::Result<Surface> {
    Ok(latch_surface::surface_of(store, session, workspace, None)?)
}

/// `latch` / `latch resume` on a terminal.
pub fn chat(
    global: &GlobalArgs,
    workspace: &Path,
    resume: Option<Option<String>>,
) -> anyhow::Result<i32> {
    let mut env = if resume.is_some() {
        Env::open_existing(global, workspace)?
    } else {
        Env::open(global, workspace)?
    };
    // A workspace config that needs trust is asked about in a modal
    // before the session starts.
    setup::settle_trust(&mut env, global, setup::TrustPolicy::Ask(&ask_trust))?;
    // The lease is held until the screen closes: nobody else drives the
    // session meanwhile.
    let opened = setup::open_session_asking(
        &env,
        global,
        resume.as_ref().map(|s| s.as_deref()),
        "`latch` (terminal UI)",
        &super::trust_cmd::ask_endpoint_on_terminal,
    )?;
    let lease = opened.lease;
    let provider = opened.provider;
    let mut agent = setup::build_agent(&env, opened.session, &provider, "interactive")?;
    agent.stop_when_lost(&lease);
    if resume.is_some() {
        agent.resume(&mut |_: AgentEvent| {})?;
    }
    let title = format!(
        "{} · {} · {}",
        agent.session().id,
        provider.model,
        agent.engine_name()
    );
    let prices = env.config.config.price_table();
    let group = setup::session_group(&env, agent.session())?;
    open(
        agent,
        env.workspace_key(),
        title,
        None,
        false,
        prices,
        group,
    )
}

/// The trust modal (see [`latch_tui::ask_trust`]); a terminal that fails
/// answers no.
fn ask_trust(trust: &crate::config::trust::WorkspaceTrust) -> bool {
    let question = latch_tui::TrustQuestion {
        file: trust.file.display().to_string(),
        keys: trust
            .keys
            .iter()
            .map(|k| {
                (
                    render::terminal_safe(&k.shown(), 400),
                    k.effect.label().to_string(),
                )
            })
            .collect(),
        note: "`latch trust --revoke` forgets a yes; `latch trust` prints what it trusts".into(),
    };
    latch_tui::ask_trust(&question).unwrap_or(false)
}

/// The GROUP block of `agent`'s session: read from `group`'s store for a
/// shared group or a child (whose group is its root's), `None` for a root
/// on the local store (its surface reduces the block from its own events).
fn group_slot(group: &setup::SessionGroup, session: &SessionRecord) -> Option<GroupView> {
    if !group.shared && session.parent.is_none() {
        return None;
    }
    super::group_cmd::group_block(&*group.port, &group.root)
}

/// While the screen is up: on a shared store, send the GROUP block again
/// whenever the group's log moves (woken by the store's notifications),
/// until `stop` is set or the screen is gone.
fn watch_group(
    group: setup::SessionGroup,
    out: Sender<Input>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Option<std::thread::JoinHandle<()>> {
    if !group.shared {
        return None;
    }
    std::thread::Builder::new()
        .name("latch-group-watch".into())
        .spawn(move || {
            let stopped = || stop.load(std::sync::atomic::Ordering::SeqCst);
            let mut seen = 0;
            while !stopped() {
                // Leases move with time: the block is refreshed every few
                // seconds, and at once when the log moves.
                let _ = group.port.wait_for_log(
                    &group.root,
                    seen,
                    std::time::Duration::from_secs(5),
                    &stopped,
                );
                if stopped() {
                    return;
                }
                let Ok(log) = group.port.group_log(&group.root, seen) else {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                    continue;
                };
                if let Some(last) = log.last() {
                    seen = last.seq;
                }
                let block = super::group_cmd::group_block(&*group.port, &group.root);
                if out.send(Input::Group(block)).is_err() {
                    return;
                }
            }
        })
        .ok()
}

/// Open the screen on `agent`'s session; `first` is submitted at once;
/// costs are computed with `prices`; the GROUP block comes from `group`.
/// Returns when the user leaves, after the agent stopped.
pub fn open(
    mut agent: Agent,
    workspace: String,
    title: String,
    first: Option<String>,
    quit_on_q: bool,
    prices: latch_surface::PriceTable,
    group: setup::SessionGroup,
) -> anyhow::Result<i32> {
    let store = agent.store().clone();
    let session = agent.session().id.clone();
    let mut surface = surface_of(&store, &session, &workspace)?;
    surface.set_group(group_slot(&group, agent.session()));
    surface.go_live();
    let mut state = UiState::new(surface, title).with_prices(prices);
    state.quit_on_q = quit_on_q;
    let (commands, warnings) = crate::commands::load(std::path::Path::new(&workspace));
    state.commands = commands;
    state.notice = warnings.first().cloned();
    // The demo's model is scripted: typing after it ends is answered.
    state.scripted = quit_on_q;
    state.welcome = welcome(&agent, &workspace);
    // Log lines go to the workspace's log and the status line while the
    // screen is up, never across it.
    let _log = latch_tui::log_sink::capture(&Path::new(&workspace).join(".latch/latch.log"));
    let control = agent.control();
    // Approvals are answered in the modal (never on the raw-mode terminal).
    let (approver, answers) = TuiApprover::new(control.clone());
    agent.set_decision_port(Arc::new(approver));
    let (in_tx, in_rx) = mpsc::channel();
    let (op_tx, op_rx) = mpsc::channel();
    let seen = state.surface.durable().watermark;
    if let Some(task) = first {
        state.running = true;
        let _ = op_tx.send(Command::Submit(task));
    }
    let bye = goodbye(&session, &workspace);
    let stop_watch = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = watch_group(group.clone(), in_tx.clone(), stop_watch.clone());
    let worker = std::thread::Builder::new()
        .name("latch-agent".into())
        .spawn(move || {
            AgentThread {
                agent,
                store,
                workspace,
                out: in_tx,
                seen,
                group,
            }
            .serve(op_rx)
        })?;
    let ui_control = control.clone();
    let ops = op_tx.clone();
    let result = latch_tui::run(state, in_rx, move |command| match command {
        Command::Interrupt => ui_control.interrupt(),
        Command::Steer(text) => ui_control.steer(text),
        Command::Permission { call_id, answer } => {
            let _ = answers.send((call_id, answer));
        }
        other => {
            let _ = ops.send(other);
        }
    });
    // Leaving stops a running turn; its interruption is committed before
    // the process ends.
    control.interrupt();
    drop(op_tx);
    let _ = worker.join();
    stop_watch.store(true, std::sync::atomic::Ordering::SeqCst);
    if let Some(w) = watcher {
        let _ = w.join();
    }
    result?;
    if !quit_on_q {
        println!("{bye}");
    }
    Ok(0)
}

/// What the first screen says: where you are and how to start.
fn welcome(agent: &Agent, workspace: &str) -> Vec<String> {
    let model = &agent.session().model;
    vec![
        "Latch".to_string(),
        format!("workspace  {workspace}"),
        format!("provider   {}", model.provider),
        format!("model      {}", model.model),
        format!("engine     {}", agent.engine_name()),
        String::new(),
        "Type a task and press Enter. /help lists commands and keys; Ctrl-C twice leaves."
            .to_string(),
    ]
}

/// What leaving prints: the session and how to come back to it.
pub fn goodbye(session: &str, workspace: &str) -> String {
    format!(
        "Session {session} saved.\nResume it with: latch -C {} resume {session}",
        render::terminal_safe(workspace, 1_000)
    )
}

/// The agent's side: runs turns and commands, reports to the screen.
struct AgentThread {
    agent: Agent,
    store: Arc<Store>,
    workspace: String,
    out: Sender<Input>,
    /// The last sequence number sent to the screen.
    seen: u64,
    /// Where the session's group lives.
    group: setup::SessionGroup,
}

impl AgentThread {
    fn serve(mut self, ops: Receiver<Command>) {
        while let Ok(op) = ops.recv() {
            match op {
                Command::Submit(text) => self.turn(text),
                Command::Context => match self.agent.context_report() {
                    Ok(report) => {
                        let lines = render::report_table(&report)
                            .lines()
                            .map(str::to_string)
                            .collect();
                        self.send(Input::Report(report));
                        self.send(Input::Popup {
                            title: "/context".into(),
                            lines,
                        });
                    }
                    Err(e) => self.notice(format!("/context failed: {e}")),
                },
                Command::Compact => {
                    let result = self.agent.compact(&mut |_: AgentEvent| {});
                    self.flush();
                    match result {
                        Ok(n) => self.notice(format!(
                            "working memory reset; {n} kernel-context entries start the new epoch"
                        )),
                        Err(e) => self.notice(format!("/compact failed: {e}")),
                    }
                }
                Command::Recall(query) => match self.agent.recall(&query, 10) {
                    Ok(events) => {
                        let lines = render::recalled(&events)
                            .lines()
                            .map(str::to_string)
                            .collect();
                        self.send(Input::Popup {
                            title: format!("/recall {query}"),
                            lines,
                        });
                    }
                    Err(e) => self.notice(format!("/recall failed: {e}")),
                },
                Command::Sessions => self.sessions(),
                Command::Agents => {
                    let catalog = crate::config::agents::AgentCatalog::discover(
                        self.agent.workspace(),
                        crate::config::user_config_dir().as_deref(),
                    );
                    self.send(Input::Popup {
                        title: "/agents (spawn_agent {agent: NAME} runs one; `latch agents` lists them too)".into(),
                        lines: catalog.listing(),
                    });
                }
                Command::CycleMode | Command::TogglePlan => {
                    let mode = self.agent.session_mode();
                    let approval = self.agent.approval_mode();
                    let (choice, by) = if matches!(op, Command::CycleMode) {
                        (ModeChoice::cycle(mode, approval), "Shift+Tab")
                    } else if mode.is_plan() {
                        (ModeChoice::Act(approval), "/plan")
                    } else {
                        (ModeChoice::Plan, "/plan")
                    };
                    let result = self.agent.switch_mode(choice, by, &mut |_: AgentEvent| {});
                    self.flush();
                    match result {
                        Ok(_) => self.notice(format!(
                            "mode: {}",
                            crate::agent::plan::mode_label(
                                self.agent.session_mode(),
                                self.agent.approval_mode()
                            )
                        )),
                        Err(e) => self.notice(format!("the mode did not change: {e}")),
                    }
                }
                Command::Export(path) => {
                    match super::export_cmd::to_file(
                        &self.store,
                        self.agent.session(),
                        path.as_deref(),
                    ) {
                        Ok(line) => self.notice(line),
                        Err(e) => self.notice(format!("/export failed: {e}")),
                    }
                }
                Command::Group => {
                    let lines =
                        match super::group_cmd::group_text(&*self.group.port, &self.group.root) {
                            Ok(text) => super::group_cmd::printable(&text)
                                .lines()
                                .map(str::to_string)
                                .collect(),
                            Err(e) => vec![format!("cannot read the group: {e}")],
                        };
                    self.send(Input::Popup {
                        title: "/group".into(),
                        lines,
                    });
                }
                Command::Rewind(None) => {
                    let lines = match self.agent.rewind_points() {
                        Ok(points) => super::rewind_cmd::points_text(&points)
                            .lines()
                            .map(str::to_string)
                            .collect(),
                        Err(e) => vec![format!("cannot list the messages: {e}")],
                    };
                    self.send(Input::Popup {
                        title: "/rewind".into(),
                        lines,
                    });
                }
                Command::Rewind(Some(seq)) => {
                    let lines = match self.agent.rewind(seq, &mut |_| {}) {
                        Ok(plan) => super::rewind_cmd::plan_text(&plan)
                            .lines()
                            .map(str::to_string)
                            .collect(),
                        Err(e) => vec![format!("/rewind failed: {e}")],
                    };
                    self.flush();
                    self.send(Input::Popup {
                        title: format!("/rewind {seq}"),
                        lines,
                    });
                }
                Command::Image(path) => {
                    match self.agent.attach_image(std::path::Path::new(&path)) {
                        Ok(m) => {
                            self.attachments();
                            self.notice(super::session_cmd::attached_line(&m))
                        }
                        Err(e) => self.notice(format!("/image failed: {e}")),
                    }
                }
                Command::PasteImage => self.paste_image(),
                Command::Exit => break,
                // Handled on the screen's thread through the turn control
                // and the approver.
                Command::Interrupt | Command::Steer(_) | Command::Permission { .. } => {}
            }
        }
    }

    fn turn(&mut self, mut text: String) {
        let control: TurnControl = self.agent.control();
        loop {
            let store = self.store.clone();
            let (session, workspace) = (self.agent.session().id.clone(), self.workspace.clone());
            let out = self.out.clone();
            let mut seen = self.seen;
            let mut observer = |event: AgentEvent| match event {
                AgentEvent::TextDelta(t) => {
                    let _ = out.send(Input::Delta(Delta::Text(t.to_string())));
                }
                AgentEvent::Reasoning => {
                    let _ = out.send(Input::Delta(Delta::Reasoning));
                }
                AgentEvent::Retrying { attempt, reason } => {
                    let _ = out.send(Input::Delta(Delta::Retrying {
                        attempt,
                        reason: reason.to_string(),
                    }));
                }
                AgentEvent::Committed { .. } => {
                    if let Ok(events) = catch_up(&store, &session, &workspace, seen)
                        && let Some(last) = events.last()
                    {
                        seen = last.seq;
                        let _ = out.send(Input::Events(events));
                    }
                }
            };
            let result = self.agent.run_turn(&text, &mut observer);
            self.seen = seen;
            self.flush();
            // Sent with the message, or still waiting when it was refused.
            self.attachments();
            let interrupted = matches!(result, Err(AgentError::Interrupted));
            match result {
                Ok(outcome) => {
                    if let Some(report) = outcome.report {
                        self.send(Input::Report(report));
                    }
                    self.send(Input::TurnEnded { error: None });
                }
                // An interruption is shown by the transcript's marker.
                Err(AgentError::Interrupted) => self.send(Input::TurnEnded { error: None }),
                // Shown in full, line by line (each line made safe).
                Err(e) => self.send(Input::TurnEnded {
                    error: Some(
                        e.to_string()
                            .lines()
                            .map(|l| render::terminal_safe(l, 4_000))
                            .collect::<Vec<_>>()
                            .join("\n"),
                    ),
                }),
            }
            let queued = control.take_steering();
            if interrupted || queued.is_empty() {
                if !queued.is_empty() {
                    self.send(Input::Unsent(queued));
                }
                return;
            }
            // Typed while the turn ran, after its last safe boundary: the
            // next turn starts with it.
            text = queued.join("\n");
            self.send(Input::TurnStarted);
        }
    }

    /// Send what was committed since the last batch.
    fn flush(&mut self) {
        let session = self.agent.session().id.clone();
        if let Ok(events) = catch_up(&self.store, &session, &self.workspace, self.seen)
            && let Some(last) = events.last()
        {
            self.seen = last.seq;
            self.send(Input::Events(events));
        }
        if self.group.shared || self.agent.session().parent.is_some() {
            self.send(Input::Group(group_slot(&self.group, self.agent.session())));
        }
    }

    fn sessions(&mut self) {
        let lines = match self.store.list_sessions(&self.workspace) {
            Ok(list) => list
                .iter()
                .map(|s| {
                    let child = if s.parent.is_some() { "  (child)" } else { "" };
                    format!(
                        "{}  {}  {}{child}",
                        s.id,
                        render::time(s.created_ms),
                        s.model.model
                    )
                })
                .collect(),
            Err(e) => vec![format!("cannot list sessions: {e}")],
        };
        self.send(Input::Popup {
            title: "/sessions (resume one with `latch resume <id>`)".into(),
            lines,
        });
    }

    /// Ctrl-V: the clipboard's image, checked like any attached image,
    /// for the next message; a notice says what was tried when there is
    /// none.
    fn paste_image(&mut self) {
        let env = super::clipboard::ClipboardEnv::current();
        let bytes = match super::clipboard::read_image(&env) {
            Ok(bytes) => bytes,
            Err(e) => return self.notice(e.to_string()),
        };
        match self
            .agent
            .attach_image_bytes(&bytes, Path::new("the clipboard's image"))
        {
            Ok(m) => {
                self.attachments();
                self.notice(super::session_cmd::attached_line(&m));
            }
            Err(e) => self.notice(format!("paste failed: {e}")),
        }
    }

    /// Show the images attached to the next message as chips.
    fn attachments(&self) {
        let chips = self
            .agent
            .pending_images()
            .iter()
            .enumerate()
            .map(|(i, m)| image_chip(i + 1, m))
            .collect();
        self.send(Input::Attachments(chips));
    }

    fn notice(&self, text: String) {
        self.send(Input::Notice(render::terminal_safe(&text, 400)));
    }

    fn send(&self, input: Input) {
        let _ = self.out.send(input);
    }
}

/// The input box's chip of the `n`th attached image:
/// `[image 1: 800×600 png]`.
pub fn image_chip(n: usize, m: &latch_engine_sdk::types::MediaRef) -> String {
    let kind = m.mime_type.strip_prefix("image/").unwrap_or(&m.mime_type);
    match (m.width, m.height) {
        (Some(w), Some(h)) => format!("[image {n}: {w}×{h} {kind}]"),
        _ => format!("[image {n}: {kind}]"),
    }
}
