//! The session commands: interactive chat, `run`, `resume`, `sessions`,
//! `history delete`, `context`, `compact` and `recall`.

use super::GlobalArgs;
use super::render;
use super::setup::{self, Env};
use crate::agent::{Agent, AgentEvent};
use std::io::Write;
use std::path::Path;

/// Observer that prints the streaming transcript (and, with `json`, every
/// committed durable event as one JSON line on stdout instead).
pub fn printer(json: bool) -> impl FnMut(AgentEvent) + Send {
    let mut streaming = false;
    let mut streamed_text = false;
    move |event| {
        // A retry is said once, on stderr, in both formats (the provider's
        // log line of it is kept for the log file).
        if let AgentEvent::Retrying { attempt, reason } = &event {
            eprintln!("  … retrying (attempt {attempt}): {reason}");
            return;
        }
        if json {
            if let AgentEvent::Committed { seq, event } = event {
                let line = serde_json::json!({"seq": seq, "event": event});
                println!("{line}");
            }
            return;
        }
        match event {
            AgentEvent::TextDelta(t) => {
                if !streaming {
                    print!("● ");
                    streaming = true;
                    streamed_text = true;
                }
                print!("{t}");
                let _ = std::io::stdout().flush();
            }
            AgentEvent::Reasoning => {}
            AgentEvent::Retrying { .. } => {}
            AgentEvent::Committed { event, .. } => {
                if streaming {
                    println!();
                    streaming = false;
                }
                // Text the user already saw streamed is not printed again.
                let line = match event {
                    latch_kernel::EventKind::AssistantMessage { parts } if streamed_text => {
                        render::tool_calls_line(parts)
                    }
                    _ => render::event_line(event),
                };
                if matches!(event, latch_kernel::EventKind::AssistantMessage { .. }) {
                    streamed_text = false;
                }
                if let Some(line) = line {
                    println!("{line}");
                }
            }
        }
    }
}

/// `latch run "<task>"`.
pub fn run(
    global: &GlobalArgs,
    workspace: &Path,
    task: &str,
    json: bool,
    images: &[std::path::PathBuf],
) -> anyhow::Result<i32> {
    let mut env = Env::open(global, workspace)?;
    setup::settle_trust(&mut env, global, setup::TrustPolicy::Refuse)?;
    let provider = setup::choose_provider(global, &env.config.config)?;
    let session = setup::new_session(&env, &provider)?;
    if !json {
        eprintln!(
            "session {} · {} · engine {}",
            session.id, provider.model, env.config.config.engine.component
        );
    }
    if let Some(note) = provider.window_note(&env.config.config) {
        eprintln!("note: {note}");
    }
    // Nobody else drives it while it runs (`latch resume` is refused).
    let lease = setup::take_lease(&env, &session.id, "`latch run`")?;
    let mut agent = setup::build_agent(&env, session, &provider, "run")?;
    agent.stop_when_lost(&lease);
    for image in images {
        // Relative to where `latch` runs, as a shell user expects.
        let path = std::path::absolute(image)?;
        agent.attach_image(&path)?;
    }
    // SIGINT/SIGTERM stop the turn; the agent's group is left as it goes.
    let signals = super::signals::Stop::watch(agent.control())?;
    let mut print = printer(json);
    // With --json the plan (the task state's actions as a checklist) is a
    // line of its own whenever it may have changed.
    let store = env.store.clone();
    let id = agent.session().id.clone();
    let mut out = move |e: AgentEvent| {
        let plan = json
            && matches!(&e, AgentEvent::Committed { event, .. } if latch_kernel::Checklist::may_change(event));
        print(e);
        if plan && let Ok(events) = store.all_events(&id) {
            let list = latch_kernel::Checklist::replay(events.iter().map(|e| &e.kind));
            println!("{}", serde_json::json!({ "plan": list.steps() }));
        }
    };
    let outcome = agent.run_turn(task, &mut out);
    drop(agent);
    match (outcome, signals.exit_code()) {
        (_, Some(code)) => Ok(code),
        (Ok(_), None) => Ok(0),
        (Err(e), None) => {
            eprintln!("error: {}", safe(&e.to_string()));
            Ok(1)
        }
    }
}

/// `latch` / `latch chat` / `latch resume`: the interactive loop.
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
    let ask = super::trust_cmd::ask_on_terminal;
    setup::settle_trust(&mut env, global, setup::TrustPolicy::Ask(&ask))?;
    let prices = env.config.config.price_table();
    let opened = setup::open_session_asking(
        &env,
        global,
        resume.as_ref().map(|s| s.as_deref()),
        "`latch` (line interface)",
        &super::trust_cmd::ask_endpoint_on_terminal,
    )?;
    let lease = opened.lease;
    if let Some(line) = opened
        .changed
        .map(latch_kernel::EventKind::SessionProfile)
        .as_ref()
        .and_then(render::event_line)
    {
        eprintln!("{line}");
    }
    let provider = opened.provider;
    let mut agent = setup::build_agent(&env, opened.session, &provider, "interactive")?;
    agent.stop_when_lost(&lease);
    let group = setup::session_group(&env, agent.session())?;
    let mut out = printer(false);
    if resume.is_some() {
        let repaired = agent.resume(&mut out)?;
        eprintln!(
            "resumed session {}{}",
            agent.session().id,
            if repaired > 0 {
                " (its last run was interrupted)"
            } else {
                ""
            }
        );
    } else {
        eprintln!(
            "session {} · {} · engine {}",
            agent.session().id,
            provider.model,
            agent.engine_name()
        );
    }
    let (commands, warnings) = crate::commands::load(&env.workspace);
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    eprintln!(
        "type a task (@file.png attaches an image), or /help /context /compact /recall <query> \
         /image <path> /rewind [seq] /export [path] /group /plan /init /exit"
    );
    let mut input = super::repl_input::LineInput::new(commands.clone());
    while let Some(line) = input.read()? {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let task = match slash(&mut agent, line, &commands, &prices, &group, &mut out) {
            Slash::Exit => break,
            Slash::Handled => continue,
            Slash::Task => line.to_string(),
            Slash::Custom(prompt) => prompt,
        };
        if let Err(e) = agent.run_turn(&task, &mut out) {
            eprintln!("error: {}", safe(&e.to_string()));
        }
    }
    Ok(0)
}

enum Slash {
    Exit,
    Handled,
    Task,
    /// A custom command: the prompt it expands to.
    Custom(String),
}

fn slash(
    agent: &mut Agent,
    line: &str,
    commands: &latch_surface::CustomCommands,
    prices: &latch_surface::PriceTable,
    group: &setup::SessionGroup,
    out: &mut (dyn FnMut(AgentEvent) + Send),
) -> Slash {
    let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
    let result = match cmd {
        "/help" => {
            // `/sessions` is the TUI's (here: `latch sessions`).
            for (usage, help) in commands.help_lines() {
                if usage == "/sessions" {
                    continue;
                }
                println!("{usage:<14} {help}");
            }
            return Slash::Handled;
        }
        _ if let Some(prompt) = commands.expand_line(line) => return Slash::Custom(prompt),
        "/exit" | "/quit" => return Slash::Exit,
        "/context" => agent.context_report().and_then(|r| {
            let figures = agent.provider_figures()?;
            let cost =
                match super::sessions_cmd::session_cost(agent.store(), &agent.session().id, prices)
                {
                    Ok(cost) => super::sessions_cmd::cost_table(&cost),
                    Err(e) => format!("cost\n  unknown: {e:#}\n"),
                };
            print!(
                "{}{}{}{}",
                render::report_table(&r),
                render::provider_table(&figures),
                cost,
                super::mcp_cmd::tool_tokens_table(
                    agent.tool_schemas(),
                    agent.session().model.estimator
                )
            );
            Ok(())
        }),
        "/compact" => agent.compact(out).map(|n| {
            println!("working memory reset ({n} kernel-context entries start the new epoch)")
        }),
        "/recall" => agent
            .recall(rest.trim(), 10)
            .map(|events| print!("{}", render::recalled(&events))),
        "/image" => agent
            .attach_image(Path::new(rest.trim()))
            .map(|m| println!("{}", attached_line(&m)))
            .map_err(Into::into),
        "/rewind" => match rest.trim() {
            "" => agent
                .rewind_points()
                .map(|p| print!("{}", super::rewind_cmd::points_text(&p))),
            seq => match seq.parse::<u64>() {
                Ok(seq) => agent
                    .rewind(seq, out)
                    .map(|plan| print!("{}", super::rewind_cmd::plan_text(&plan)))
                    .map_err(Into::into),
                Err(_) => {
                    eprintln!("usage: /rewind [SEQ] (a sequence number from the /rewind list)");
                    return Slash::Handled;
                }
            },
        },
        "/export" => {
            let path = Some(rest.trim()).filter(|p| !p.is_empty());
            match super::export_cmd::to_file(agent.store(), agent.session(), path) {
                Ok(line) => println!("{}", safe(&line)),
                Err(e) => eprintln!("error: {}", safe(&format!("/export: {e}"))),
            }
            return Slash::Handled;
        }
        "/group" => {
            match super::group_cmd::group_text(&*group.port, &group.root) {
                Ok(text) => print!("{}", super::group_cmd::printable(&text)),
                Err(e) => eprintln!("error: {}", safe(&e.to_string())),
            }
            return Slash::Handled;
        }
        "/init" => return Slash::Custom(latch_surface::slash::INIT_PROMPT.to_string()),
        "/agents" => {
            let catalog = crate::config::agents::AgentCatalog::discover(
                agent.workspace(),
                crate::config::user_config_dir().as_deref(),
            );
            for line in catalog.listing() {
                println!("{}", safe(&line));
            }
            return Slash::Handled;
        }
        "/plan" => {
            // Plan mode on, or off again into the approval mode it held.
            let choice = if agent.session_mode().is_plan() {
                crate::agent::ModeChoice::Act(agent.approval_mode())
            } else {
                crate::agent::ModeChoice::Plan
            };
            agent.switch_mode(choice, "/plan", out).map(|_| {
                println!(
                    "mode: {}",
                    crate::agent::plan::mode_label(agent.session_mode(), agent.approval_mode())
                )
            })
        }
        c if c.starts_with('/') => {
            eprintln!(
                "unknown command {c}: try /help, /context, /compact, /recall <query>, /image <path>, /rewind [seq], /export [path], /group, /plan, /agents, /init, /exit"
            );
            return Slash::Handled;
        }
        _ => return Slash::Task,
    };
    if let Err(e) = result {
        eprintln!("error: {}", safe(&e.to_string()));
    }
    Slash::Handled
}

/// The line shown when an image is attached to the next message.
pub fn attached_line(m: &latch_engine_sdk::types::MediaRef) -> String {
    format!(
        "attached {} {}×{} ({} bytes, ≈{} tokens) to the next message",
        m.mime_type,
        m.width.unwrap_or(0),
        m.height.unwrap_or(0),
        m.byte_len,
        latch_engine_sdk::estimate::image_tokens(m.width, m.height)
    )
}

/// `latch history delete <session>`.
pub fn history_delete(
    global: &GlobalArgs,
    workspace: &Path,
    selector: &str,
) -> anyhow::Result<i32> {
    let env = Env::open_existing(global, workspace)?;
    let record = env.store.resolve_session(selector)?;
    env.store.delete_session(&record.id)?;
    println!(
        "session {} is deleted from history; its events, child sessions, artifacts and mutation evidence remain in the store",
        record.id
    );
    Ok(0)
}

/// The agent of the selected session, for a command that only reads it
/// (`context`, `recall`): no lease, nothing repaired, so it works while
/// another process drives the session.
fn agent_for(
    global: &GlobalArgs,
    workspace: &Path,
    selector: Option<&str>,
) -> anyhow::Result<Agent> {
    let mut env = Env::open_existing(global, workspace)?;
    setup::settle_trust(&mut env, global, setup::TrustPolicy::Warn)?;
    let record = setup::select_session(&env, selector)?;
    provider_free_agent(global, &env, record)
}

/// The agent of the selected session, with its lease, for a command that
/// writes to it (`compact`); refused while another process drives it.
fn agent_for_writing(
    global: &GlobalArgs,
    workspace: &Path,
    selector: Option<&str>,
    surface: &str,
) -> anyhow::Result<(Agent, latch_kernel::SessionLease)> {
    let env = Env::open_existing(global, workspace)?;
    let record = setup::select_session(&env, selector)?;
    let lease = setup::take_lease(&env, &record.id, surface)?;
    Ok((provider_free_agent(global, &env, record)?, lease))
}

/// An agent that never calls its provider (the provider-free commands).
/// For a session on an OpenAI-compatible server it carries the server's
/// base URL (`--base-url`, else the one the session last recorded), which
/// keys that server's calibration; nothing is ever sent to it.
fn provider_free_agent(
    global: &GlobalArgs,
    env: &Env,
    record: latch_kernel::SessionRecord,
) -> anyhow::Result<Agent> {
    let kind = record
        .model
        .provider
        .parse()
        .unwrap_or(latch_provider::ProviderKind::OpenAiCompatible);
    let server = match kind {
        latch_provider::ProviderKind::OpenAiCompatible => global.base_url.clone().or(env
            .store
            .session_profile(&record.id)?
            .and_then(|p| p.base_url)),
        _ => None,
    };
    let provider = setup::ProviderChoice {
        kind,
        model: record.model.model.clone(),
        config: latch_provider::ProviderConfig {
            base_url: Some(server.unwrap_or_else(|| "http://127.0.0.1:9".into())),
            ..latch_provider::ProviderConfig::new(latch_provider::ProviderKind::OpenAiCompatible)
        },
        max_tokens: 8_192,
        server: Default::default(),
    };
    setup::build_agent(env, record, &provider, "interactive")
}

/// `latch context [<session>]`: the report for the next request, without
/// calling the provider.
pub fn context(
    global: &GlobalArgs,
    workspace: &Path,
    selector: Option<&str>,
    json: bool,
) -> anyhow::Result<i32> {
    let mut agent = agent_for(global, workspace, selector)?;
    let prices = setup::load_config(global, &std::fs::canonicalize(workspace)?)?
        .config
        .price_table();
    let report = agent.context_report()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "session {} · engine {}",
            agent.session().id,
            agent.engine_name()
        );
        print!("{}", render::report_table(&report));
        print!("{}", render::provider_table(&agent.provider_figures()?));
        let cost = super::sessions_cmd::session_cost(agent.store(), &agent.session().id, &prices)?;
        print!("{}", super::sessions_cmd::cost_table(&cost));
        print!(
            "{}",
            super::mcp_cmd::tool_tokens_table(
                agent.tool_schemas(),
                agent.session().model.estimator
            )
        );
    }
    Ok(0)
}

/// `latch compact [<session>]`.
pub fn compact(
    global: &GlobalArgs,
    workspace: &Path,
    selector: Option<&str>,
) -> anyhow::Result<i32> {
    let (mut agent, _lease) = agent_for_writing(global, workspace, selector, "`latch compact`")?;
    let mut out = printer(false);
    let n = agent.compact(&mut out)?;
    println!(
        "session {}: working memory reset; {n} kernel-context entries start the new epoch",
        agent.session().id
    );
    Ok(0)
}

/// `latch recall <session> "<query>"`.
pub fn recall(
    global: &GlobalArgs,
    workspace: &Path,
    selector: &str,
    query: &str,
    limit: u32,
) -> anyhow::Result<i32> {
    let mut agent = agent_for(global, workspace, Some(selector))?;
    let events = agent.recall(query, limit)?;
    print!("{}", render::recalled(&events));
    Ok(0)
}

/// An error that may carry an engine's words, ready for the terminal.
fn safe(text: &str) -> String {
    super::render::terminal_safe(text, 4 * super::render::MAX_PRINTED_CHARS)
}
