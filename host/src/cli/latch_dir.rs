//! The workspace's `.latch/` directory: created beside the store, with its
//! own `.gitignore` so Latch's local state (the session store, its journal
//! files, logs) never shows in `git status`, while the files a user writes
//! there to share with a team (`config.toml`, `instructions.md`, `skills/`,
//! `commands/`) stay visible to git.

use anyhow::Context;
use std::path::Path;

/// What `.latch/.gitignore` holds: everything is local state except the
/// files a user writes to be committed. The `.gitignore` itself is ignored
/// too, so a workspace Latch has only run in stays clean.
pub const GITIGNORE: &str = "\
# Written by Latch. Its session store and logs are local state, not for git.
# The files you write here to share (config.toml, instructions.md, skills/,
# commands/) are not ignored.
*
!/config.toml
!/instructions.md
!/skills/
!/skills/**
!/commands/
!/commands/**
";

/// Create `dir` (a workspace's `.latch/`) if needed and write its
/// `.gitignore` unless one is there (a user's own is never replaced).
pub fn ensure(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the directory {}", dir.display()))?;
    let ignore = dir.join(".gitignore");
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&ignore)
    {
        Ok(mut file) => {
            use std::io::Write;
            file.write_all(GITIGNORE.as_bytes())
                .with_context(|| format!("cannot write {}", ignore.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot write {}", ignore.display())),
    }
}
