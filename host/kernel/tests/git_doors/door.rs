//! The bookkeeping calls the attacks drive, through the kernel's public
//! API: a snapshot tree of the workspace (what `run_possible_mutation`
//! records before a command), whether the session uses a repository, and
//! a rewind.

use latch_kernel::git::Git;
use latch_kernel::snapshot::Snapshot;
use latch_kernel::{RewindPlan, Store, apply_rewind, plan_rewind};
use std::path::Path;

/// A snapshot of `ws` as the session's git takes it, by tree id.
pub fn snapshot_tree(store: &Store, session: &str, ws: &Path, store_dir: &Path) -> Option<String> {
    let repo = store.session_repository(session).unwrap()?;
    let git = Git::open(&repo, ws, store_dir).ok()?;
    Snapshot::take(&git, &[]).ok().map(|s| s.tree)
}

/// Whether Latch's git works on a repository for `session` in `ws`.
pub fn repository_in_use(store: &Store, session: &str, _ws: &Path) -> bool {
    store.session_repository(session).unwrap().is_some()
}

/// Rewind `session`'s files to before `to_seq`.
pub fn rewind(store: &Store, session: &str, ws: &Path, to_seq: u64) -> RewindPlan {
    let mut plan = plan_rewind(store, session, ws, to_seq).unwrap();
    apply_rewind(store, session, ws, &mut plan).unwrap();
    plan
}
