//! Which git repository Latch's own git ([`crate::git`]) uses for a
//! session: the one that held its workspace when the session was created
//! (a child's: its parent's), stored with the session. A repository that
//! appears later — a command's `git init`, a `.git` planted in a
//! subdirectory, a `gitdir:` file or `commondir` rewritten — is not used
//! until the user says so ([`Store::adopt_repository`], `latch git
//! --adopt`): until then the session counts as outside a git work tree, so
//! every command that may write counts as a change.

use super::{Result, Store, StoreError};
use crate::git::Repository;
use rusqlite::OptionalExtension;
use std::path::Path;

/// How a session's choice is stored: `null` (no repository) or the
/// repository, as JSON; SQL `NULL` for a session created before Latch
/// recorded it.
fn encode(repo: Option<&Repository>) -> Result<String> {
    serde_json::to_string(&repo).map_err(|source| StoreError::Json {
        what: "git repository",
        source,
    })
}

fn decode(text: &str) -> Result<Option<Repository>> {
    serde_json::from_str(text).map_err(|source| StoreError::Json {
        what: "git repository",
        source,
    })
}

/// A session's repository and the one that holds its workspace now, when
/// they differ (see [`Store::repository_drift`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepositoryDrift {
    /// The one Latch's own git uses for the session (`None`: none).
    pub used: Option<Repository>,
    /// The one found now (`None`: none).
    pub found: Option<Repository>,
}

impl RepositoryDrift {
    /// What the user reads: what changed, what Latch does, how to adopt it.
    pub fn notice(&self, session: &str) -> String {
        let name = |r: &Option<Repository>| match r {
            Some(r) => format!("the git repository {}", r.git_dir.display()),
            None => "no git repository".to_string(),
        };
        format!(
            "the workspace is now in {} but this session started in {}; Latch's own git \
             keeps to the session's{} until you say otherwise: `latch git {session} --adopt` \
             uses the one there now",
            name(&self.found),
            name(&self.used),
            if self.used.is_none() {
                " (every command that may write counts as a change, and commands are not \
                 checkpointed)"
            } else {
                ""
            }
        )
    }
}

impl Store {
    /// The stored choice of a session being created in `workspace` under
    /// `parent`: the parent's, else the repository that holds the workspace
    /// now.
    pub(super) fn repository_for_new_session(
        &self,
        workspace: &str,
        parent: Option<&str>,
    ) -> Result<String> {
        match parent {
            Some(p) => encode(self.session_repository(p)?.as_ref()),
            None => encode(Repository::discover(Path::new(workspace)).as_ref()),
        }
    }

    /// The repository Latch's own git uses for `session`: the one found
    /// when the session was created (or last adopted), `None` when its
    /// workspace was in no git work tree then. A session stored before
    /// Latch recorded it gets the one found now, recorded from then on.
    pub fn session_repository(&self, session: &str) -> Result<Option<Repository>> {
        let row: Option<(Option<String>, String, Option<String>)> = self
            .conn()
            .query_row(
                "SELECT git_repository, workspace, parent FROM sessions WHERE id = ?1",
                [session],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((stored, workspace, parent)) = row else {
            return Err(StoreError::UnknownSession(session.to_string()));
        };
        if let Some(text) = stored {
            return decode(&text);
        }
        let text = self.repository_for_new_session(&workspace, parent.as_deref())?;
        self.conn().execute(
            "UPDATE sessions SET git_repository = ?2 WHERE id = ?1 AND git_repository IS NULL",
            rusqlite::params![session, text],
        )?;
        self.session_repository(session)
    }

    /// The repository that holds `session`'s workspace now, when it is not
    /// the one the session uses (`None` when they agree): a repository
    /// that appeared, moved or went away since the session started.
    pub fn repository_drift(&self, session: &str) -> Result<Option<RepositoryDrift>> {
        let used = self.session_repository(session)?;
        let workspace = self.session(session)?.workspace;
        let found = Repository::discover(Path::new(&workspace));
        Ok((used != found).then_some(RepositoryDrift { used, found }))
    }

    /// Use, for `session` and the sessions below it, the repository that
    /// holds its workspace now (`None`: it is in none), as the user asked;
    /// returns it.
    pub fn adopt_repository(&self, session: &str) -> Result<Option<Repository>> {
        let workspace = self.session(session)?.workspace;
        let repo = Repository::discover(Path::new(&workspace));
        self.conn().execute(
            "WITH RECURSIVE tree(id) AS (
                 SELECT ?1 UNION SELECT s.id FROM sessions s JOIN tree t ON s.parent = t.id
             )
             UPDATE sessions SET git_repository = ?2 WHERE id IN tree",
            rusqlite::params![session, encode(repo.as_ref())?],
        )?;
        Ok(repo)
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;
    use latch_engine_sdk::types::ModelProfile;
    use std::process::Command;

    #[test]
    fn a_repository_that_appears_after_the_session_started_is_not_used_until_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let store = Store::open(dir.path().join("s.db")).unwrap();
        let model = ModelProfile::with_defaults("openai", "m");
        let root = store
            .create_session(ws.to_str().unwrap(), None, &model)
            .unwrap()
            .id;
        assert_eq!(store.session_repository(&root).unwrap(), None);
        // A command's `git init`.
        assert!(
            Command::new("git")
                .args(["init", "-q"])
                .current_dir(&ws)
                .status()
                .unwrap()
                .success()
        );
        assert_eq!(store.session_repository(&root).unwrap(), None);
        let drift = store.repository_drift(&root).unwrap().unwrap();
        assert_eq!(drift.used, None);
        assert!(
            drift.notice(&root).contains("--adopt"),
            "{}",
            drift.notice(&root)
        );
        let child = store
            .create_session(ws.to_str().unwrap(), Some(&root), &model)
            .unwrap()
            .id;
        assert_eq!(
            store.session_repository(&child).unwrap(),
            None,
            "a child takes its parent's choice"
        );
        // The user adopts it: the session and its children use it.
        let adopted = store.adopt_repository(&root).unwrap().unwrap();
        assert_eq!(adopted.git_dir, ws.join(".git"));
        assert_eq!(
            store.session_repository(&root).unwrap(),
            Some(adopted.clone())
        );
        assert_eq!(store.session_repository(&child).unwrap(), Some(adopted));
        assert_eq!(store.repository_drift(&root).unwrap(), None);
        // A new session finds it.
        let later = store
            .create_session(ws.to_str().unwrap(), None, &model)
            .unwrap()
            .id;
        assert!(store.session_repository(&later).unwrap().is_some());
    }
}
