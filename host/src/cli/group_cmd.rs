//! `latch group [<session>]` and `/group`: a session's agent group —
//! members with their state, tasks with holder, status and dependencies,
//! pending message counts and last activity — reduced from the root
//! session's group events by the kernel's one presentation reducer
//! ([`latch_kernel::group::present`]), so what a live session shows and
//! what a resumed one shows agree.

use super::GlobalArgs;
use super::setup::{self, Env};
use crate::supervisor::groups;
use latch_kernel::group::{GroupError, GroupEvent, GroupPort, present};
use latch_kernel::{SessionRecord, Store};
use std::path::Path;

/// The `/group` text of the group `session` belongs to (as root or child).
pub fn group_text(store: &Store, session: &SessionRecord) -> Result<String, GroupError> {
    let root = groups::root_of(session);
    Ok(present::render(&store.replay(root)?))
}

/// The text made safe for a terminal line by line (titles, results and
/// messages are the models' words).
pub fn printable(text: &str) -> String {
    text.lines()
        .map(|l| super::render::terminal_safe(l, 4 * super::render::MAX_PRINTED_CHARS) + "\n")
        .collect()
}

/// `latch group [<session>]` (default: the latest root session).
pub fn group(global: &GlobalArgs, workspace: &Path, selector: Option<&str>) -> anyhow::Result<i32> {
    let env = Env::open_existing(global, workspace)?;
    let record = setup::select_session(&env, selector)?;
    print!("{}", printable(&group_text(&env.store, &record)?));
    Ok(0)
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

/// The group `root` on the shared store at `url`, with each member's host.
fn shared_text(env: &Env, url: &str, root: &str) -> anyhow::Result<String> {
    let pg = groups::open_pg(url, env.store.clone())?;
    let state = pg.replay(root)?;
    if !state.exists() {
        anyhow::bail!(
            "the group store {} has no group {root}; give the lead's session id (its `latch \
             group` shows it)",
            pg.url()
        );
    }
    let mut text = present::render(&state);
    text.push_str("hosts:\n");
    for m in pg.members(root)? {
        let away = if m.active { "" } else { " (left)" };
        text.push_str(&format!("  {} ({}) on {}{away}\n", m.id, m.role, m.host));
    }
    Ok(text)
}

/// `latch group [<session>] [--store URL]`: with a shared store, the group
/// whose lead is `<session>` (default: the latest local session's group)
/// with the host of every member.
pub fn group_shared(
    global: &GlobalArgs,
    workspace: &Path,
    selector: Option<&str>,
    store: Option<&str>,
) -> anyhow::Result<i32> {
    let configured = match store {
        Some(url) => Some(url.to_string()),
        None => {
            let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
            setup::load_config(global, &ws)?.config.group.store
        }
    };
    let Some(url) = configured else {
        return group(global, workspace, selector);
    };
    let env = Env::open(global, workspace)?;
    let root = match selector {
        Some(id) => id.to_string(),
        None => {
            let record = setup::select_session(&env, None)?;
            groups::root_of(&record).to_string()
        }
    };
    print!("{}", printable(&shared_text(&env, &url, &root)?));
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
/// session on this host joins the group as a member and works its task
/// list through the agent loop (claims, completions and messages through
/// the shared store; its own events in this host's store). When its turn
/// ends it leaves the group, releasing any claim it still holds. Its
/// profile records the group, its role and the store (without password):
/// `latch resume <member>` runs it as that member again. Exits non-zero
/// when the turn fails.
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
    let pg = groups::open_pg(&url, env.store.clone())?;
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
    let mut out = super::session_cmd::printer(false);
    let outcome = agent.run_turn(&brief, &mut out);
    // It no longer runs: it leaves, and what it still holds is released
    // (before the agent goes, whose own leave says less).
    let reason = if outcome.is_ok() {
        "completed"
    } else {
        "failed"
    };
    if let Err(e) = groups::leave(&*pg, group_id, &member, reason) {
        eprintln!("warning: {member} could not leave group {group_id}: {e}");
    }
    drop(agent);
    match outcome {
        Ok(_) => Ok(0),
        Err(e) => {
            eprintln!("error: {}", printable(&e.to_string()).trim_end());
            Ok(1)
        }
    }
}
