//! `latch group [<session>]` and `/group`: a session's agent group —
//! members with their state (and, on a shared store, host and lease),
//! tasks with holder, status and dependencies, pending message counts and
//! last activity — reduced from the group's events by the kernel's one
//! presentation reducer ([`latch_kernel::group::present`]) over the store
//! the session's group lives in, so what a live session shows, what a
//! resumed one shows and what another host shows agree. Also `latch group
//! join` (a member from this host) and the lead's escape hatch, `latch
//! group release` and `latch group evict`.

use super::GlobalArgs;
use super::setup::{self, Env};
use crate::supervisor::groups;
use latch_kernel::group::{GroupError, GroupEvent, GroupPort, present};
use std::path::Path;
use std::sync::Arc;

/// The `/group` text of `root`'s group on `port`, each active member with
/// its lease when the store keeps them.
pub fn group_text(port: &dyn GroupPort, root: &str) -> Result<String, GroupError> {
    let state = port.replay(root)?;
    let leases = port.leases(root)?.unwrap_or_default();
    Ok(present::text(&present::view_with_leases(&state, &leases)))
}

/// The sidebar GROUP block of `root`'s group on `port` (`None` without a
/// group, or when the store cannot be read).
pub fn group_block(port: &dyn GroupPort, root: &str) -> Option<latch_surface::GroupView> {
    let state = port.replay(root).ok()?;
    let leases = port.leases(root).ok().flatten().unwrap_or_default();
    latch_surface::GroupView::from_present(&present::view_with_leases(&state, &leases))
}

/// The text made safe for a terminal line by line (titles, results and
/// messages are the models' words).
pub fn printable(text: &str) -> String {
    text.lines()
        .map(|l| super::render::terminal_safe(l, 4 * super::render::MAX_PRINTED_CHARS) + "\n")
        .collect()
}

/// `--store` for the group commands: a `postgres://` (or
/// `postgresql://`) URL is the shared group store, and the local event store
/// stays the workspace's; anything else is the local store's path as for
/// every command. Returns the options to open the local store with and the
/// shared store's URL, if one was given.
pub fn split_store(global: &GlobalArgs) -> (GlobalArgs, Option<String>) {
    let shared = global
        .store
        .as_deref()
        .and_then(|p| p.to_str())
        .filter(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
        .map(str::to_string);
    let mut local = global.clone();
    if shared.is_some() {
        local.store = None;
    }
    (local, shared)
}

/// The shared group store: `--store`, else `[group] store` (a workspace
/// config's only once trusted).
fn shared_store(env: &Env, flag: Option<&str>) -> Option<String> {
    flag.map(str::to_string)
        .or_else(|| env.config.config.group.store.clone())
}

/// The shared store at `url` with this configuration's lease TTL.
fn open_shared(env: &Env, url: &str) -> anyhow::Result<Arc<latch_group_pg::PgGroup>> {
    Ok(groups::open_pg(
        url,
        env.store.clone(),
        env.config.config.group.lease_ttl(),
    )?)
}

/// The group `root` on the shared store at `url`, with each member's host.
fn shared_text(env: &Env, url: &str, root: &str) -> anyhow::Result<String> {
    let pg = open_shared(env, url)?;
    if !pg.projection(root)?.created {
        anyhow::bail!(
            "the group store {} has no group {root}; give the lead's session id (its `latch \
             group` shows it)",
            pg.url()
        );
    }
    let mut text = group_text(&*pg, root)?;
    text.push_str("hosts:\n");
    for m in pg.members(root)? {
        let away = if m.active { "" } else { " (left)" };
        text.push_str(&format!("  {} ({}) on {}{away}\n", m.id, m.role, m.host));
    }
    Ok(text)
}

/// `latch group [<session>] [--store URL]`. With `--store`, or `[group]
/// store` and a `<session>` that is not a session here, `<session>` is the
/// group's id on that shared store (default: the latest local session's
/// group). Otherwise the session's group wherever it lives: the store it
/// joined from this host, `[group] store`, or the local store.
pub fn group_shared(
    global: &GlobalArgs,
    workspace: &Path,
    selector: Option<&str>,
    store: Option<&str>,
) -> anyhow::Result<i32> {
    let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let configured = setup::load_config(global, &ws)?.config.group.store;
    if store.is_none() && configured.is_none() {
        let env = Env::open_existing(global, workspace)?;
        let record = setup::select_session(&env, selector)?;
        let g = setup::session_group(&env, &record)?;
        print!("{}", printable(&group_text(&*g.port, &g.root)?));
        return Ok(0);
    }
    let env = Env::open(global, workspace)?;
    let local = selector.and_then(|s| setup::select_session(&env, Some(s)).ok());
    if store.is_none()
        && let Some(record) = &local
    {
        let g = setup::session_group(&env, record)?;
        print!("{}", printable(&group_text(&*g.port, &g.root)?));
        return Ok(0);
    }
    let url = store.map(str::to_string).or(configured).unwrap_or_default();
    let root = match (selector, local) {
        (_, Some(record)) => groups::root_of(&record).to_string(),
        (Some(id), None) => id.to_string(),
        (None, None) => {
            let record = setup::select_session(&env, None)?;
            groups::root_of(&record).to_string()
        }
    };
    print!("{}", printable(&shared_text(&env, &url, &root)?));
    Ok(0)
}

/// What the operator forces on a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Force {
    /// Release this task whoever holds it.
    Release(u64),
    /// Remove this member (its claims released).
    Evict(String),
}

/// Who runs this command, as the group log records the operator:
/// `alice on host-a`.
fn operator(host: &str) -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| "the operator".to_string());
    format!("{user} on {host}")
}

/// `latch group release <task>` / `latch group evict <member>`: the lead's
/// escape hatch, recorded in the group log with who did it and why. The
/// group is `--group` (default: the latest local session's group); the
/// store is `--store`, `[group] store`, or the local store.
pub fn force(
    global: &GlobalArgs,
    workspace: &Path,
    what: Force,
    group: Option<&str>,
    store: Option<&str>,
    reason: &str,
) -> anyhow::Result<i32> {
    let env = Env::open(global, workspace)?;
    if reason.trim().is_empty() {
        anyhow::bail!("--reason needs text: it is recorded with the change");
    }
    let (port, root, host): (Arc<dyn GroupPort>, String, String) = match shared_store(&env, store) {
        Some(url) => {
            let pg = open_shared(&env, &url)?;
            let root = match group {
                Some(g) => g.to_string(),
                None => groups::root_of(&setup::select_session(&env, None)?).to_string(),
            };
            let host = pg.host().to_string();
            (pg, root, host)
        }
        None => {
            let record = match group {
                Some(g) => setup::select_session(&env, Some(g))?,
                None => setup::select_session(&env, None)?,
            };
            let g = setup::session_group(&env, &record)?;
            (g.port, g.root, latch_group_pg::host_name())
        }
    };
    if !port.replay(&root)?.exists() {
        anyhow::bail!(
            "there is no agent group {root}; give the lead's session id with --group (`latch \
             group` shows it)"
        );
    }
    let who = operator(&host);
    let event = match &what {
        Force::Release(task) => GroupEvent::TaskReleased {
            task: *task,
            by: String::new(),
            reason: reason.to_string(),
            forced_by: Some(who.clone()),
        },
        Force::Evict(member) => GroupEvent::MemberLeft {
            member: member.clone(),
            reason: reason.to_string(),
            forced_by: Some(who.clone()),
        },
    };
    port.commit(&root, event)?;
    let state = port.replay(&root)?;
    match what {
        Force::Release(task) => {
            let holder = state
                .task(task)
                .map(|_| {
                    port.group_log(&root, 0)
                        .ok()
                        .and_then(|log| {
                            log.iter().rev().find_map(|e| match &e.kind {
                                latch_kernel::EventKind::Group(GroupEvent::TaskReleased {
                                    task: t,
                                    by,
                                    forced_by: Some(_),
                                    ..
                                }) if *t == task => Some(by.clone()),
                                _ => None,
                            })
                        })
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            println!(
                "released task #{task} (held by {holder}); it is open again. Recorded in group \
                 {root} as released by {who}: {reason}"
            );
        }
        Force::Evict(member) => println!(
            "evicted {member} from group {root}; its claims are open again and its requests \
             are refused from now on. Recorded as evicted by {who}: {reason}"
        ),
    }
    Ok(0)
}

/// What a member that joined from another host is asked to do: work the
/// group's task list until nothing is ready for it, then tell the lead.
pub fn member_brief(group: &str, role: &str, host: &str, task: Option<&str>) -> String {
    let mut brief = format!(
        "You joined the agent group {group} as `{role}` from host {host}; its lead is session \
         {group} and the other members may run on other machines. Work the group's task list: \
         task_list shows the tasks and which are ready; claim a ready one with task_claim, do it \
         in this workspace and finish it with task_complete (task_release if you cannot). \
         Repeat until no open task is ready for you, tell the lead what you did with \
         group_message, then reply with a short summary."
    );
    if let Some(task) = task.map(str::trim).filter(|t| !t.is_empty()) {
        brief.push_str("\n\nAlso: ");
        brief.push_str(task);
    }
    brief
}

/// `latch group join <group-id> --store URL [--role R] [--task T]`: a new
/// session on this host joins the group as a member (with a lease its
/// process renews) and works its task list through the agent loop (claims,
/// completions and messages through the shared store; its own events in
/// this host's store). When its turn ends — or SIGINT/SIGTERM stops it —
/// it leaves the group, releasing any claim it still holds. Its profile
/// records the group, its role and the store (without password): `latch
/// resume <member>` runs it as that member again. Exits non-zero when the
/// turn fails (128 + the signal's number when a signal stopped it).
pub fn join(
    global: &GlobalArgs,
    workspace: &Path,
    group_id: &str,
    store: Option<&str>,
    role: &str,
    task: Option<&str>,
) -> anyhow::Result<i32> {
    let mut env = Env::open(global, workspace)?;
    setup::settle_trust(&mut env, global, setup::TrustPolicy::Refuse)?;
    let Some(url) = shared_store(&env, store) else {
        anyhow::bail!(
            "`latch group join` needs a shared group store: pass --store postgres://… or set \
             [group] store in the config"
        );
    };
    if role.trim().is_empty() {
        anyhow::bail!("--role needs a name, e.g. --role reviewer");
    }
    let pg = open_shared(&env, &url)?;
    if !pg.projection(group_id)?.created {
        anyhow::bail!(
            "the group store {} has no group {group_id}; give the lead's session id (its `latch \
             group` shows it)",
            pg.url()
        );
    }
    let provider = setup::choose_provider(global, &env.config.config)?;
    // Its profile records the group, so `latch resume` rejoins it.
    let record = setup::new_session_in(
        &env,
        &provider,
        Some(latch_kernel::JoinedGroup {
            group: group_id.to_string(),
            role: role.to_string(),
            store: latch_group_pg::without_password(&url),
        }),
    )?;
    // Nobody else drives it while it runs (`latch resume` is refused).
    let _lease = setup::take_lease(&env, &record.id, "`latch group join`")?;
    let member = record.id.clone();
    let brief = member_brief(group_id, role, pg.host(), task);
    let mut agent = setup::build_joined_agent(
        &env,
        record,
        &provider,
        "run",
        setup::Joined {
            port: pg.clone(),
            group: group_id,
            role,
        },
    )?;
    let signals = super::signals::Stop::watch(agent.control())?;
    // Joined now, so the store answers before the turn starts; its lease
    // is taken at its first safe boundary, before its first request.
    pg.commit(
        group_id,
        GroupEvent::MemberJoined {
            member: member.clone(),
            role: role.to_string(),
        },
    )?;
    println!(
        "joined group {group_id} as {member} ({role}) from host {}; group store {}",
        pg.host(),
        pg.url()
    );
    let mut out = super::session_cmd::printer(false);
    let outcome = agent.run_turn(&brief, &mut out);
    // It no longer runs: it leaves, and what it still holds is released.
    let reason = match (&outcome, signals.exit_code()) {
        (_, Some(_)) => "stopped by a signal",
        (Ok(_), None) => "completed",
        (Err(_), None) => "failed",
    };
    if let Err(e) = groups::leave(&*pg, group_id, &member, reason) {
        eprintln!(
            "warning: {member} could not leave group {group_id} ({}); its lease expires instead",
            printable(&e.to_string()).trim_end()
        );
    }
    drop(agent);
    match (outcome, signals.exit_code()) {
        (_, Some(code)) => Ok(code),
        (Ok(_), None) => Ok(0),
        (Err(e), None) => {
            eprintln!("error: {}", printable(&e.to_string()).trim_end());
            Ok(1)
        }
    }
}
