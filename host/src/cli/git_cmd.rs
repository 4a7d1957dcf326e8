//! `latch git [SESSION] [--adopt]`: which git repository Latch's own git
//! (the workspace fingerprint, snapshots and command checkpoints, see
//! [`latch_kernel::git`]) uses for a session — the one that held its
//! workspace when the session started — and, with `--adopt`, the user's
//! word that the repository there now is to be used instead (one a command
//! created with `git init`, say, which Latch never uses on its own).

use super::GlobalArgs;
use super::render::terminal_safe;
use super::setup::{self, Env};
use latch_kernel::git::Repository;
use std::path::Path;

/// `latch git` arguments.
#[derive(Debug, clap::Args)]
pub struct GitArgs {
    /// Session id or prefix (default: the latest).
    pub session: Option<String>,
    /// Use the repository that holds the workspace now, for this session
    /// and its children.
    #[arg(long)]
    pub adopt: bool,
}

/// What a session's choice reads as.
fn described(repo: &Option<Repository>) -> String {
    match repo {
        Some(r) => format!(
            "the git repository {} (work tree {})",
            r.git_dir.display(),
            r.work_tree.display()
        ),
        None => "no git repository: every command that may write counts as a change, and \
                 commands are not checkpointed"
            .to_string(),
    }
}

/// Run `latch git`.
pub fn run(global: &GlobalArgs, workspace: &Path, args: &GitArgs) -> anyhow::Result<i32> {
    let env = Env::open_existing(global, workspace)?;
    let record = setup::select_session(&env, args.session.as_deref())?;
    if args.adopt {
        let repo = env.store.adopt_repository(&record.id)?;
        println!(
            "session {} now uses {}",
            record.id,
            terminal_safe(&described(&repo), 2_000)
        );
        return Ok(0);
    }
    let used = env.store.session_repository(&record.id)?;
    println!(
        "session {}: Latch's own git uses {}",
        record.id,
        terminal_safe(&described(&used), 2_000)
    );
    if let Some(drift) = env.store.repository_drift(&record.id)? {
        println!("{}", terminal_safe(&drift.notice(&record.id), 2_000));
    }
    Ok(0)
}
