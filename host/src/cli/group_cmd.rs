//! `latch group [<session>]` and `/group`: a session's agent group —
//! members with their state, tasks with holder, status and dependencies,
//! pending message counts and last activity — reduced from the root
//! session's group events by the kernel's one presentation reducer
//! ([`latch_kernel::group::present`]), so what a live session shows and
//! what a resumed one shows agree.

use super::GlobalArgs;
use super::setup::{self, Env};
use latch_kernel::group::{GroupError, GroupPort, present};
use latch_kernel::{SessionRecord, Store};
use std::path::Path;

/// The `/group` text of the group `session` belongs to (as root or child).
pub fn group_text(store: &Store, session: &SessionRecord) -> Result<String, GroupError> {
    let root = crate::supervisor::groups::root_of(session);
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
    let pg = latch_group_pg::PgGroup::connect(url, env.store.clone())?;
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
            crate::supervisor::groups::root_of(&record).to_string()
        }
    };
    print!("{}", printable(&shared_text(&env, &url, &root)?));
    Ok(0)
}

/// `latch group join <group-id> --store URL [--role R]`: a new session on
/// this host joins the group as a member; prints its id and host.
pub fn join(
    global: &GlobalArgs,
    workspace: &Path,
    group_id: &str,
    store: Option<&str>,
    role: &str,
) -> anyhow::Result<i32> {
    let env = Env::open(global, workspace)?;
    let Some(url) = shared_store(&env, store) else {
        anyhow::bail!(
            "`latch group join` needs a shared group store: pass --store postgres://… or set \
             [group] store in the config"
        );
    };
    if role.trim().is_empty() {
        anyhow::bail!("--role needs a name, e.g. --role reviewer");
    }
    let pg = latch_group_pg::PgGroup::connect(&url, env.store.clone())?;
    if !pg.projection(group_id)?.created {
        anyhow::bail!(
            "the group store {} has no group {group_id}; give the lead's session id (its `latch \
             group` shows it)",
            pg.url()
        );
    }
    let provider = setup::choose_provider(global, &env.config.config)?;
    let record = setup::new_session(&env, &provider)?;
    pg.commit(
        group_id,
        latch_kernel::group::GroupEvent::MemberJoined {
            member: record.id.clone(),
            role: role.to_string(),
        },
    )?;
    println!(
        "joined group {group_id} as {} ({role}) from host {}; group store {}",
        record.id,
        pg.host(),
        pg.url()
    );
    Ok(0)
}
