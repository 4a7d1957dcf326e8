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
