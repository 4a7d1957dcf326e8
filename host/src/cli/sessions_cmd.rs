//! `latch sessions`: the sessions of the workspace (or, with `--store`, of
//! every workspace in that store), children under their parent with their
//! role and state, as text or as JSON with each session's cost.

use super::GlobalArgs;
use super::render;
use super::setup;
use anyhow::Context;
use latch_kernel::{SessionRecord, Store};
use latch_surface::{PriceTable, SessionCost, Usage};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::Path;

/// One listed session with what the listing shows of it.
struct Row<'a> {
    record: &'a SessionRecord,
    depth: usize,
    events: u64,
    model: String,
    /// Role and state, for a child.
    child: Option<(String, &'static str)>,
    /// Who drives it now: surface, pid, host.
    driver: Option<(String, u32, String)>,
    /// What its own requests cost.
    cost: SessionCost,
    /// Why its last run stopped before it finished, when it did (a provider
    /// error, an interrupt, a crash).
    interrupted: Option<String>,
}

/// Why `session`'s last run did not finish: the reason its
/// `run_interrupted` recorded, or a run left open by a process that is gone
/// (no driver holds the session). `None` for a finished or running run.
fn last_run_interrupted(
    store: &Store,
    session: &str,
    driven: bool,
) -> anyhow::Result<Option<String>> {
    use latch_kernel::EventKind;
    let newest = store.events_before(session, u64::MAX, 500)?;
    Ok(newest
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::RunInterrupted { reason } => Some(Some(reason.clone())),
            EventKind::RunFinished { .. } => Some(None),
            EventKind::RunStarted { .. } if !driven => {
                Some(Some("the process running it stopped".to_string()))
            }
            EventKind::RunStarted { .. } => Some(None),
            _ => None,
        })
        .flatten())
}

/// What `session`'s own requests cost under `prices`, from the provider
/// usage it recorded.
pub fn session_cost(
    store: &Store,
    session: &str,
    prices: &PriceTable,
) -> anyhow::Result<SessionCost> {
    let mut usage = Usage::default();
    let mut from = 0;
    loop {
        let page = store.events(session, from, u64::MAX, 10_000)?;
        let Some(last) = page.last().map(|e| e.seq) else {
            break;
        };
        for e in &page {
            usage.apply(e.seq, &e.kind);
        }
        from = last + 1;
    }
    Ok(SessionCost::of(&usage, prices))
}

/// The cost block of `/context`.
pub fn cost_table(cost: &SessionCost) -> String {
    let row = |k: &str, v: String| format!("  {k:<34} {v}\n");
    let mut s = String::from("cost\n");
    s.push_str(&row("session cost", cost.text()));
    if cost.priced > 0 {
        s.push_str(&row(
            "input · output",
            format!(
                "{} · {}",
                latch_surface::pricing::cost::usd(cost.input_usd),
                latch_surface::pricing::cost::usd(cost.output_usd)
            ),
        ));
        s.push_str(&row("cache", cost.cache_text()));
    }
    s
}

/// `latch sessions [--json]`. Without `--store`, the workspace's sessions;
/// a workspace with no store has none (not an error). With `--store`, every
/// session in that store, with the workspace each belongs to.
pub fn sessions(global: &GlobalArgs, workspace: &Path, json: bool) -> anyhow::Result<i32> {
    let workspace = std::fs::canonicalize(workspace)
        .with_context(|| format!("the workspace {} does not exist", workspace.display()))?;
    // A broken config is refused here too, naming the key and line.
    let prices = setup::load_config(global, &workspace)?.config.price_table();
    let (store, list) = match &global.store {
        Some(path) => {
            let store = Store::open_existing(path)?;
            let list = store.list_all_sessions()?;
            (Some(store), list)
        }
        None => {
            let path = latch_kernel::default_store_path(&workspace);
            if path.is_file() {
                let store = Store::open_existing(&path)?;
                let list = store.list_sessions(&workspace.display().to_string())?;
                (Some(store), list)
            } else {
                (None, Vec::new())
            }
        }
    };
    let rows = match &store {
        Some(store) => rows(store, &list, &prices)?,
        None => Vec::new(),
    };
    if json {
        let out: Vec<Value> = rows.iter().map(row_json).collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    if rows.is_empty() {
        match &global.store {
            Some(path) => println!("no sessions in the store {}", path.display()),
            None => println!("no sessions in {}", workspace.display()),
        }
        return Ok(0);
    }
    if global.store.is_some() {
        // Grouped by workspace, the one with the newest session first.
        let mut order: Vec<&str> = Vec::new();
        for r in &rows {
            if !order.contains(&r.record.workspace.as_str()) {
                order.push(&r.record.workspace);
            }
        }
        for (i, ws) in order.iter().enumerate() {
            if i > 0 {
                println!();
            }
            let n = rows.iter().filter(|r| r.record.workspace == *ws).count();
            println!(
                "workspace {} ({n} session{})",
                render::terminal_safe(ws, 1_000),
                if n == 1 { "" } else { "s" }
            );
            for r in rows.iter().filter(|r| r.record.workspace == *ws) {
                println!("  {}", row_text(r));
            }
        }
    } else {
        for r in &rows {
            println!("{}", row_text(r));
        }
    }
    Ok(0)
}

/// The listing's rows: roots newest first, each followed by its children
/// (oldest first) with their role and state.
fn rows<'a>(
    store: &Store,
    list: &'a [SessionRecord],
    prices: &PriceTable,
) -> anyhow::Result<Vec<Row<'a>>> {
    let ids: HashSet<&str> = list.iter().map(|s| s.id.as_str()).collect();
    let mut out = Vec::new();
    for s in list
        .iter()
        .filter(|s| s.parent.as_deref().is_none_or(|p| !ids.contains(p)))
    {
        push_tree(store, list, prices, s, 0, None, &mut out)?;
    }
    Ok(out)
}

fn push_tree<'a>(
    store: &Store,
    list: &'a [SessionRecord],
    prices: &PriceTable,
    s: &'a SessionRecord,
    depth: usize,
    child: Option<(String, &'static str)>,
    out: &mut Vec<Row<'a>>,
) -> anyhow::Result<()> {
    let driver = store
        .lease_holder(&s.id)?
        .map(|h| (h.surface, h.pid, h.host));
    let interrupted = last_run_interrupted(store, &s.id, driver.is_some())?;
    out.push(Row {
        interrupted,
        record: s,
        depth,
        events: store.event_count(&s.id)?,
        // The model it runs with now (a resume may have changed it).
        model: store
            .session_profile(&s.id)?
            .map(|p| p.model)
            .unwrap_or_else(|| s.model.model.clone()),
        child,
        driver,
        cost: session_cost(store, &s.id, prices)?,
    });
    let tree = store.agent_tree(&s.id)?;
    let mut children: Vec<&SessionRecord> = list
        .iter()
        .filter(|c| c.parent.as_deref() == Some(s.id.as_str()))
        .collect();
    children.sort_by_key(|c| (c.created_ms, c.id.clone()));
    for c in children {
        let label = tree.child(&c.id).map(|entry| {
            (
                entry.role.clone(),
                match entry.state {
                    latch_kernel::ChildState::Finished => "finished",
                    latch_kernel::ChildState::Failed => "failed",
                    latch_kernel::ChildState::Unfinished => "interrupted",
                },
            )
        });
        push_tree(store, list, prices, c, depth + 1, label, out)?;
    }
    Ok(())
}

fn row_text(r: &Row) -> String {
    let label = match &r.child {
        Some((role, state)) => format!("  {}  {state}", render::terminal_safe(role, 200)),
        None => String::new(),
    };
    let driver = match &r.driver {
        Some((surface, pid, host)) => format!("  (in use by {surface} pid {pid} on {host})"),
        None => String::new(),
    };
    // A child's state already says it; a root says why it stopped.
    let interrupted = match (&r.interrupted, &r.child) {
        (Some(reason), None) => format!(
            "  interrupted: {}",
            render::terminal_safe(reason.lines().next().unwrap_or(""), 120)
        ),
        _ => String::new(),
    };
    format!(
        "{}{}  {}  {:>6} events  {}{label}{interrupted}{driver}",
        "    ".repeat(r.depth),
        r.record.id,
        render::time(r.record.created_ms),
        r.events,
        render::terminal_safe(&r.model, 200),
    )
}

fn row_json(r: &Row) -> Value {
    json!({
        "id": r.record.id,
        "parent": r.record.parent,
        "workspace": r.record.workspace,
        "created_ms": r.record.created_ms,
        "model": r.model,
        "events": r.events,
        "role": r.child.as_ref().map(|c| &c.0),
        "state": r.child.as_ref().map(|c| c.1),
        "cost": r.cost.json(),
        "interrupted": r.interrupted,
        "in_use_by": r.driver.as_ref().map(|(surface, pid, host)| json!({
            "surface": surface, "pid": pid, "host": host,
        })),
    })
}
