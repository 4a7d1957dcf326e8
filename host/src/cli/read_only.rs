//! The store as the commands that only read recorded sessions open it
//! (`latch export`, `latch engine replay`): read-only, never created,
//! never migrated, so nothing they do can change a recorded session.

use super::GlobalArgs;
use anyhow::Context;
use latch_kernel::Store;
use std::path::{Path, PathBuf};

/// The workspace's store (`--store`, else `.latch/latch.db`), opened
/// read-only, with the workspace key sessions are stored under.
pub fn open(global: &GlobalArgs, workspace: &Path) -> anyhow::Result<(Store, String)> {
    let workspace: PathBuf = std::fs::canonicalize(workspace)
        .with_context(|| format!("the workspace {} does not exist", workspace.display()))?;
    let path = match &global.store {
        Some(p) => p.clone(),
        None => latch_kernel::default_store_path(&workspace),
    };
    Ok((
        Store::open_read_only(&path)?,
        workspace.display().to_string(),
    ))
}
