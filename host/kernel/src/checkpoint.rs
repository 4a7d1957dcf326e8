//! Checkpoints and rewind: every Latch write first records what it replaced
//! ([`EventKind::Checkpoint`], the old bytes as an artifact), and a rewind
//! plans and applies the return of the files to their state before one of
//! the user's messages.
//!
//! A command that may write (`shell`, `validate`, an MCP tool) in a git work
//! tree is checkpointed too: its workspace was snapshotted just before it
//! ran ([`crate::snapshot`]), and for each file the fingerprint found
//! changed, added or removed, [`record_command_checkpoints`] records the
//! bytes from the snapshot (or that the file did not exist) and what the
//! command left there.
//!
//! A rewind is a new durable event, never a deletion: it commits a
//! [`EventKind::Mutation`] (the workspace generation advances, so evidence
//! recorded earlier goes stale), records a checkpoint of each file it
//! overwrites (so the rewind itself loses nothing), writes the files, observes
//! them, and ends with [`EventKind::Rewound`]. A file whose bytes on disk are
//! not what Latch last knew (changed outside Latch) is a conflict: it is
//! reported and left alone.

use crate::event::{EventKind, LeftBehind, sha256_hex};
use crate::ops::commit_mutation;
use crate::snapshot::Snapshot;
use crate::store::{Store, StoreError};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Why a checkpoint or a rewind failed.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The sequence number is not one of the session's user messages.
    #[error(
        "{0} is not the sequence number of a user message of this session; \
         run `latch rewind <session>` to list them"
    )]
    NotAUserMessage(u64),
    /// A checkpoint names an artifact the store does not hold.
    #[error("the checkpoint of `{path}` names artifact {sha256}, which the store does not hold")]
    MissingArtifact {
        /// The file.
        path: String,
        /// The artifact.
        sha256: String,
    },
    /// The session is in plan mode, where nothing may change the workspace.
    #[error(
        "the session is in plan mode, where nothing may change the workspace: leave it first \
         (Shift+Tab or /plan, or approve the plan), then rewind"
    )]
    PlanMode,
    /// A recorded path would leave the workspace.
    #[error("the checkpoint path `{0}` is not inside the workspace")]
    BadPath(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Record what a write of `path` is about to replace: `before` is the file's
/// current bytes (`None` when it does not exist). Returns the event's
/// sequence number.
pub fn record_checkpoint(
    store: &Store,
    session: &str,
    path: &str,
    before: Option<&[u8]>,
) -> Result<u64, StoreError> {
    let before = match before {
        Some(bytes) => Some(
            store
                .put_artifact(bytes, Some("application/octet-stream"))?
                .sha256,
        ),
        None => None,
    };
    store.append(
        session,
        EventKind::Checkpoint {
            path: path.to_string(),
            before,
            after: None,
        },
    )
}

/// Most files one command's checkpoints cover; past it, the rest (in path
/// order) cannot be rewound.
pub const COMMAND_CHECKPOINT_MAX_FILES: usize = 1_000;

/// Largest file a command's checkpoint keeps (its bytes before the
/// command); a larger one cannot be rewound.
pub const COMMAND_CHECKPOINT_MAX_BYTES: u64 = 32 * 1024 * 1024;

/// Checkpoint what a command changed: for each of `changed` (workspace
/// paths, sorted), its bytes in `snapshot` (taken just before the command),
/// or that it did not exist, and what the command left. A path the snapshot
/// does not hold counts as new only when `existed` says it was not there
/// before (otherwise it was something the snapshot skips: a symbolic link,
/// an unreadable file). Returns how many checkpoints were recorded.
pub fn record_command_checkpoints(
    store: &Store,
    session: &str,
    workspace: &Path,
    snapshot: &Snapshot,
    changed: &[String],
    existed: &dyn Fn(&str) -> bool,
) -> Result<usize, StoreError> {
    let changed: Vec<String> = changed
        .iter()
        .filter(|p| !p.ends_with('/') && resolve(workspace, p).is_ok())
        .take(COMMAND_CHECKPOINT_MAX_FILES)
        .cloned()
        .collect();
    let entries = snapshot.entries(&changed);
    let mut events = Vec::new();
    for path in changed {
        let before = match entries.get(&path) {
            Some(e) if e.size > COMMAND_CHECKPOINT_MAX_BYTES => continue,
            Some(e) => match snapshot.blob(&e.oid, &path) {
                Some(bytes) => Some(
                    store
                        .put_artifact(&bytes, Some("application/octet-stream"))?
                        .sha256,
                ),
                None => continue,
            },
            None if existed(&path) => continue,
            None => None,
        };
        let abs = workspace.join(&path);
        let after = match std::fs::symlink_metadata(&abs) {
            Ok(m) if m.is_file() => match std::fs::read(&abs) {
                Ok(bytes) => LeftBehind::Written(sha256_hex(&bytes)),
                Err(_) => continue,
            },
            // Something Latch would not write back over (a link, a directory).
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => LeftBehind::Removed,
            Err(_) => continue,
        };
        // A file rewritten with the bytes it had is no change.
        if let (Some(b), LeftBehind::Written(a)) = (&before, &after)
            && a == b
        {
            continue;
        }
        events.push(EventKind::Checkpoint {
            path,
            before,
            after: Some(after),
        });
    }
    let n = events.len();
    if n > 0 {
        store.append_batch(session, events)?;
    }
    Ok(n)
}

/// One of the user's messages, a point a rewind can go back before.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RewindPoint {
    /// Sequence number of the user message.
    pub seq: u64,
    /// Its text (first line, as typed).
    pub text: String,
    /// Files Latch changed from this message on (what a rewind to it restores).
    pub files: Vec<String>,
}

/// What a rewind does to one file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum FileAction {
    /// Write these bytes back (artifact SHA-256).
    Restore(String),
    /// Remove the file: it did not exist then.
    Remove,
}

/// The plan of a rewind: per file, what to do and whether it conflicts.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RewindPlan {
    /// The user message the files go back before.
    pub to_seq: u64,
    /// Files that go back, in path order.
    pub actions: Vec<(String, FileAction)>,
    /// Files changed outside Latch since it last wrote or saw them: left alone.
    pub conflicts: Vec<String>,
}

/// The session's user messages, oldest first, each with the files a rewind
/// to it would restore.
pub fn rewind_points(store: &Store, session: &str) -> Result<Vec<RewindPoint>, StoreError> {
    let events = store.all_events(session)?;
    let mut points: Vec<RewindPoint> = Vec::new();
    for e in &events {
        match &e.kind {
            EventKind::UserMessage { parts } => {
                let text = parts
                    .iter()
                    .find_map(|p| match p {
                        latch_engine_sdk::types::Part::Text(t) => Some(t.as_str()),
                        _ => None,
                    })
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                points.push(RewindPoint {
                    seq: e.seq,
                    text,
                    files: Vec::new(),
                });
            }
            EventKind::Checkpoint { path, .. } => {
                for p in &mut points {
                    if !p.files.contains(path) {
                        p.files.push(path.clone());
                    }
                }
            }
            _ => {}
        }
    }
    for p in &mut points {
        p.files.sort();
    }
    Ok(points)
}

/// What Latch last knew of each file: `Some(hash)` after it wrote or read it
/// (`Some(None)` for a file too large to hash), `None` after it removed it.
type Known = BTreeMap<String, Option<Option<String>>>;

fn known_files(events: &[crate::event::StoredEvent]) -> Known {
    let mut known = Known::new();
    for e in events {
        match &e.kind {
            EventKind::FileObserved { path, sha256, .. } => {
                known.insert(path.clone(), Some(sha256.clone()));
            }
            EventKind::Checkpoint {
                path,
                after: Some(after),
                ..
            } => {
                let state = match after {
                    LeftBehind::Written(h) => Some(Some(h.clone())),
                    LeftBehind::Removed => None,
                };
                known.insert(path.clone(), state);
            }
            EventKind::Rewound { removed, .. } => {
                for p in removed {
                    known.insert(p.clone(), None);
                }
            }
            _ => {}
        }
    }
    known
}

/// Plan the rewind of `session`'s files to their state before the user
/// message `to_seq`, reading the workspace at `root` for conflicts.
pub fn plan_rewind(
    store: &Store,
    session: &str,
    root: &Path,
    to_seq: u64,
) -> Result<RewindPlan, RewindError> {
    if store
        .session_profile(session)?
        .is_some_and(|p| p.mode.is_plan())
    {
        return Err(RewindError::PlanMode);
    }
    let events = store.all_events(session)?;
    if !events
        .iter()
        .any(|e| e.seq == to_seq && matches!(e.kind, EventKind::UserMessage { .. }))
    {
        return Err(RewindError::NotAUserMessage(to_seq));
    }
    // The first checkpoint of a file after the message holds its bytes then.
    let mut first: BTreeMap<String, Option<String>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.seq > to_seq) {
        if let EventKind::Checkpoint { path, before, .. } = &e.kind {
            first.entry(path.clone()).or_insert_with(|| before.clone());
        }
    }
    let known = known_files(&events);
    let mut plan = RewindPlan {
        to_seq,
        actions: Vec::new(),
        conflicts: Vec::new(),
    };
    for (path, before) in first {
        let abs = resolve(root, &path)?;
        let current = read_current(&abs, &path)?;
        let expected = known.get(&path).cloned().flatten();
        let unchanged = match (&current, &expected) {
            (None, None) => true,
            (Some(bytes), Some(Some(h))) => &sha256_hex(bytes) == h,
            // Too large to hash when seen: nothing to compare against.
            (Some(_), Some(None)) => true,
            _ => false,
        };
        let current_hash = current.as_deref().map(sha256_hex);
        if current_hash == before {
            continue; // Already as it was.
        }
        if !unchanged {
            plan.conflicts.push(path);
            continue;
        }
        plan.actions.push((
            path,
            match before {
                Some(h) => FileAction::Restore(h),
                None => FileAction::Remove,
            },
        ));
    }
    Ok(plan)
}

/// Apply `plan` to the workspace at `root` as durable events of `session`;
/// returns the [`EventKind::Rewound`] event's sequence number.
pub fn apply_rewind(
    store: &Store,
    session: &str,
    root: &Path,
    plan: &RewindPlan,
) -> Result<u64, RewindError> {
    let paths: Vec<String> = plan.actions.iter().map(|(p, _)| p.clone()).collect();
    // Every artifact must be there before anything is touched.
    let mut bytes_of = BTreeMap::new();
    for (path, action) in &plan.actions {
        if let FileAction::Restore(h) = action {
            let bytes = store
                .artifact_bytes(h)?
                .ok_or_else(|| RewindError::MissingArtifact {
                    path: path.clone(),
                    sha256: h.clone(),
                })?;
            bytes_of.insert(path.clone(), bytes);
        }
    }
    if !paths.is_empty() {
        commit_mutation(store, session, "rewind", paths, None)?;
    }
    let (mut restored, mut removed) = (Vec::new(), Vec::new());
    for (path, action) in &plan.actions {
        let abs = resolve(root, path)?;
        let current = read_current(&abs, path)?;
        record_checkpoint(store, session, path, current.as_deref())?;
        let io = |source| RewindError::Io {
            path: path.clone(),
            source,
        };
        match action {
            FileAction::Restore(_) => {
                let bytes = &bytes_of[path];
                if let Some(parent) = abs.parent() {
                    std::fs::create_dir_all(parent).map_err(io)?;
                }
                std::fs::write(&abs, bytes).map_err(io)?;
                store.append(session, EventKind::file_observed(path.clone(), bytes))?;
                restored.push(path.clone());
            }
            FileAction::Remove => {
                if current.is_some() {
                    std::fs::remove_file(&abs).map_err(io)?;
                }
                removed.push(path.clone());
            }
        }
    }
    Ok(store.append(
        session,
        EventKind::Rewound {
            to_seq: plan.to_seq,
            restored,
            removed,
            conflicts: plan.conflicts.clone(),
        },
    )?)
}

/// The one-line account of an [`EventKind::Rewound`] event (what engines,
/// transcripts and the page show); `None` for any other event.
pub fn rewound_summary(event: &EventKind) -> Option<String> {
    let EventKind::Rewound {
        to_seq,
        restored,
        removed,
        conflicts,
    } = event
    else {
        return None;
    };
    let mut summary = format!(
        "the user rewound the files to their state before message {to_seq}: \
         {} restored, {} removed",
        restored.len(),
        removed.len()
    );
    if !conflicts.is_empty() {
        summary.push_str(&format!(
            "; left alone (changed outside Latch): {}",
            conflicts.join(", ")
        ));
    }
    Some(summary)
}

fn resolve(root: &Path, rel: &str) -> Result<PathBuf, RewindError> {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(RewindError::BadPath(rel.to_string()));
    }
    Ok(root.join(p))
}

fn read_current(abs: &Path, rel: &str) -> Result<Option<Vec<u8>>, RewindError> {
    match std::fs::read(abs) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(RewindError::Io {
            path: rel.to_string(),
            source,
        }),
    }
}
