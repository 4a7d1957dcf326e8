//! The kernel's write-side operations, as the agent loop's tools use them.
//!
//! * A tool that may mutate the workspace calls [`commit_mutation`] **before**
//!   it executes, so the generation has advanced even if the process dies
//!   mid-write.
//! * A command that may write (`shell`, `validate`, an MCP tool) runs through
//!   [`run_possible_mutation`]: in a git work tree the workspace is
//!   fingerprinted before and after, and the mutation it commits advances the
//!   generation only when the workspace really changed.
//! * A guarded file edit calls [`check_guarded_write`] with the hash of the
//!   file's current bytes just before writing; on a mismatch the change is
//!   recorded and the edit rejected, so the model must re-read. After writing,
//!   the tool appends [`EventKind::file_observed`] of the new contents with its
//!   result.
//! * `validate` reads [`Store::generation_of`] before running its command and
//!   records the set with [`record_validation`]; `complete` calls
//!   [`attempt_certification`].

use crate::bounds::bound_tool_output;
use crate::checkpoint::record_command_checkpoints;
use crate::event::{CertificationOutcome, EventKind, Outcome};
use crate::fingerprint::Fingerprint;
use crate::git::Git;
use crate::snapshot::Snapshot;
use crate::state::{Certification, GuardVerdict};
use crate::store::{Result, Store, StoreError};
use std::path::{Path, PathBuf};

/// What [`commit_mutation`] committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MutationReceipt {
    /// Sequence number of the mutation event.
    pub seq: u64,
    /// The workspace generation after it.
    pub generation: u64,
}

/// Run `run`, a command of `source` that may write the workspace at
/// `workspace`, and record its possible mutation.
///
/// In the session's git work tree (the one recorded when the session
/// started, see [`Store::session_repository`]) the workspace is
/// fingerprinted (see [`crate::fingerprint`]) and snapshotted (see
/// [`crate::snapshot`]) by Latch's own git ([`crate::git`]) before the
/// command, and an [`EventKind::MutationPending`] naming the snapshot is
/// committed **before** it runs, so a process killed mid-command leaves the
/// record (a resume settles it with a generation-advancing mutation, see
/// [`settle_pending_mutations`]). After the command, each file the
/// fingerprint found changed, added or removed is checkpointed from the
/// snapshot, and the mutation is committed, marked `unchanged` when no file
/// git tracks or would track changed, so the generation advances only for a
/// real change. Elsewhere the mutation is committed before the command and
/// always advances.
pub fn run_possible_mutation<T>(
    store: &Store,
    session: &str,
    source: &str,
    command: Option<String>,
    workspace: &std::path::Path,
    run: impl FnOnce() -> T,
) -> Result<(T, MutationReceipt)> {
    let git = session_git(store, session, workspace);
    let Some((git, mut before)) = git.and_then(|g| Fingerprint::take(&g).ok().map(|f| (g, f)))
    else {
        let receipt = commit_mutation(store, session, source, Vec::new(), command)?;
        return Ok((run(), receipt));
    };
    let snapshot = Snapshot::take(&git, &store_files(store)).ok();
    store.append(
        session,
        EventKind::MutationPending {
            source: source.to_string(),
            command: command.clone(),
            snapshot: snapshot.as_ref().map(|s| s.tree.clone()),
        },
    )?;
    let out = run();
    let changed = Fingerprint::take(&git)
        .ok()
        .map(|mut after| before.changed_paths(&mut after));
    if let (Some(snapshot), Some(changed)) = (&snapshot, &changed) {
        record_command_checkpoints(store, session, workspace, snapshot, changed, &|p| {
            before.contains(p)
        })?;
    }
    let unchanged = changed.is_some_and(|c| c.is_empty());
    let seq = store.append(
        session,
        EventKind::Mutation {
            source: source.to_string(),
            paths: Vec::new(),
            command,
            unchanged,
        },
    )?;
    let generation = store.generation_of(session)?;
    Ok((out, MutationReceipt { seq, generation }))
}

/// Latch's own git for `session` in `workspace`: `None` outside the
/// session's repository, or when it cannot run confined.
fn session_git(store: &Store, session: &str, workspace: &Path) -> Option<Git> {
    let repo = store.session_repository(session).ok()??;
    Git::open(&repo, workspace, &store_dir(store)).ok()
}

/// The directory of `store`'s database (where its snapshots live).
fn store_dir(store: &Store) -> PathBuf {
    store
        .path()
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The store's own files, never snapshotted.
fn store_files(store: &Store) -> Vec<PathBuf> {
    let db = store.path();
    let mut files = vec![db.to_path_buf()];
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        files.push(PathBuf::from(name));
    }
    files
}

/// Settle the possible mutations of `session` whose command never finished
/// (the process died while it ran): each gets a generation-advancing
/// [`EventKind::Mutation`], since what the command changed is unknown, so
/// evidence recorded before goes stale. Where the command's snapshot is
/// known and the workspace is a git work tree, the files that differ from
/// it now are checkpointed first, so a rewind can restore them. Returns the
/// sequence numbers appended.
pub fn settle_pending_mutations(
    store: &Store,
    session: &str,
    workspace: &Path,
) -> Result<Vec<u64>> {
    let pending = store.with_kernel(session, |k| k.unfinished().pending_mutations.clone())?;
    let mut seqs = Vec::new();
    let git = if pending.is_empty() {
        None
    } else {
        session_git(store, session, workspace)
    };
    for p in pending {
        let earlier = git
            .as_ref()
            .zip(p.snapshot.as_deref())
            .map(|(git, tree)| Snapshot::open(git, tree));
        if let (Some(git), Some(earlier)) = (&git, earlier)
            && let Ok(now) = Snapshot::take(git, &store_files(store))
        {
            let changed = earlier.changed_since(&now);
            // A path the tree holds as something else than a regular file
            // (a link) existed; one it does not hold was new.
            let held = earlier.entries(&changed);
            record_command_checkpoints(store, session, workspace, &earlier, &changed, &|p| {
                held.contains_key(p)
            })?;
        }
        seqs.push(store.append(
            session,
            EventKind::Mutation {
                source: p.source,
                paths: Vec::new(),
                command: p.command,
                unchanged: false,
            },
        )?);
    }
    Ok(seqs)
}

/// Why a guarded write was refused.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// The file changed since the session last observed it. The change is
    /// recorded (once) as an [`EventKind::ExternalChange`].
    #[error(
        "{path} changed since this session last read it (expected {}, found {}); \
         re-read it before editing",
        expected_sha256.as_deref().unwrap_or("no hash"),
        actual_sha256.as_deref().unwrap_or("no file")
    )]
    ExternalChange {
        /// Workspace-relative path.
        path: String,
        /// The hash the session knew.
        expected_sha256: Option<String>,
        /// The hash on disk.
        actual_sha256: Option<String>,
        /// The external-change event appended now, if this call recorded one.
        seq: Option<u64>,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Commit a possible workspace mutation before executing it.
pub fn commit_mutation(
    store: &Store,
    session: &str,
    source: &str,
    paths: Vec<String>,
    command: Option<String>,
) -> Result<MutationReceipt> {
    let seq = store.append(
        session,
        EventKind::Mutation {
            source: source.to_string(),
            paths,
            command,
            unchanged: false,
        },
    )?;
    let generation = store.generation_of(session)?;
    Ok(MutationReceipt { seq, generation })
}

/// The write guard: may `session` write `path`, whose current bytes hash to
/// `current_sha256` (`None` when the file does not exist)?
///
/// Allowed when the session never observed the file, observed it without a
/// hash (larger than [`crate::FILE_HASH_MAX_BYTES`]), or its last-known hash
/// matches. Otherwise an external-change event is appended (unless this exact
/// change is already recorded) and the write is refused.
pub fn check_guarded_write(
    store: &Store,
    session: &str,
    path: &str,
    current_sha256: Option<&str>,
) -> Result<(), GuardError> {
    match store.with_kernel(session, |k| k.guard(path, current_sha256))? {
        GuardVerdict::Allow => Ok(()),
        GuardVerdict::Reject {
            expected_sha256,
            record,
        } => {
            let actual_sha256 = current_sha256.map(str::to_string);
            let seq = if record {
                Some(store.append(
                    session,
                    EventKind::ExternalChange {
                        path: path.to_string(),
                        expected_sha256: expected_sha256.clone(),
                        actual_sha256: actual_sha256.clone(),
                    },
                )?)
            } else {
                None
            };
            Err(GuardError::ExternalChange {
                path: path.to_string(),
                expected_sha256,
                actual_sha256,
                seq,
            })
        }
    }
}

/// Record a validation set: one observation per exact requirement, proven by
/// `command` at `generation` (read before the command ran). Passed when the
/// command exited with 0. The output is bounded before it is stored.
pub fn record_validation(
    store: &Store,
    session: &str,
    requirements: Vec<String>,
    command: &str,
    exit_code: Option<i32>,
    output: &str,
    generation: u64,
) -> Result<u64> {
    let profile = store.session(session)?.model.estimator;
    let outcome = if exit_code == Some(0) {
        Outcome::Passed
    } else {
        Outcome::Failed
    };
    store.append(
        session,
        EventKind::Validation {
            requirements,
            command: command.to_string(),
            outcome,
            exit_code,
            output: bound_tool_output(output, profile),
            generation,
        },
    )
}

/// Decide certification now and record the attempt. A refusal with the same
/// blockers as the previous attempt extends a failure lineage.
pub fn attempt_certification(store: &Store, session: &str) -> Result<Certification> {
    let cert = store.certification(session)?;
    store.append(
        session,
        EventKind::CertificationAttempt {
            outcome: cert.outcome,
            blockers: cert.blockers.clone(),
            generation: cert.generation,
        },
    )?;
    debug_assert!(cert.outcome == CertificationOutcome::Certified || !cert.blockers.is_empty());
    Ok(cert)
}

impl Store {
    /// The workspace generation as `session` sees it (its workspace's).
    pub fn generation_of(&self, session: &str) -> Result<u64> {
        self.with_kernel(session, |k| k.generation())
    }

    /// Whether `session` may complete now (without recording an attempt).
    pub fn certification(&self, session: &str) -> Result<Certification> {
        self.with_kernel(session, |k| k.certification())
    }

    /// The canonical task state of `session`.
    pub fn canonical_state(
        &self,
        session: &str,
    ) -> Result<latch_engine_sdk::types::CanonicalState> {
        self.with_kernel(session, |k| k.canonical())
    }
}
