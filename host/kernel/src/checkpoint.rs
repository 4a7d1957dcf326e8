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
//! reported and left alone. So is a symbolic link (or a directory, or any
//! other non-file) where the file was: every read and write of a rewind
//! and of a checkpoint goes through [`crate::beneath`], which never follows
//! a link nor leaves the workspace, and the bytes a rewind compares are
//! read through the descriptor it then writes.

use crate::beneath::{self, BeneathError, Target};
use crate::event::{EventKind, LeftBehind, sha256_hex};
use crate::ops::commit_mutation;
use crate::snapshot::Snapshot;
use crate::store::{Store, StoreError};
use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

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
    /// A recorded path would leave the workspace.
    #[error("the checkpoint path `{0}` is not inside the workspace")]
    BadPath(String),
    /// The workspace itself cannot be opened.
    #[error("the workspace {path} cannot be opened: {source}")]
    Workspace {
        /// The workspace.
        path: String,
        /// Why.
        source: BeneathError,
    },
    /// Reading or writing a file failed.
    #[error("{path} {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: BeneathError,
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
    let Ok(root) = beneath::open_dir(workspace) else {
        return Ok(0);
    };
    let changed: Vec<String> = changed
        .iter()
        .filter(|p| !p.ends_with('/') && relative(p).is_ok())
        .take(COMMAND_CHECKPOINT_MAX_FILES)
        .cloned()
        .collect();
    let entries = snapshot.entries(&changed);
    // A filter driver's output is not the file as it was: never written back.
    let held: Vec<String> = changed
        .iter()
        .filter(|p| entries.contains_key(*p))
        .cloned()
        .collect();
    let Ok(conversions) = snapshot.conversions(&held) else {
        return Ok(0);
    };
    // What each path held before: `Some(None)` for nothing, `Some(Some(oid))`
    // for a file; paths that cannot be checkpointed are left out.
    let mut before_of: BTreeMap<String, Option<String>> = BTreeMap::new();
    for path in &changed {
        match entries.get(path) {
            // A link or a submodule, a large file, a filtered one.
            Some(e) if !e.regular || e.size > COMMAND_CHECKPOINT_MAX_BYTES => {}
            Some(_) if conversions.filtered.contains(path) => {}
            Some(e) => {
                before_of.insert(path.clone(), Some(e.oid.clone()));
            }
            None if existed(path) => {}
            None => {
                before_of.insert(path.clone(), None);
            }
        }
    }
    let blobs: Vec<(String, String)> = before_of
        .iter()
        .filter_map(|(p, oid)| oid.clone().map(|o| (o, p.clone())))
        .collect();
    let mut artifacts: HashMap<String, String> = HashMap::new();
    snapshot.read_blobs(&blobs, &conversions, &mut |path, bytes| {
        let sha = store
            .put_artifact(&bytes, Some("application/octet-stream"))?
            .sha256;
        artifacts.insert(path.to_string(), sha);
        Ok(())
    })?;
    let mut events = Vec::new();
    for (path, oid) in before_of {
        let before = match oid {
            Some(_) => match artifacts.get(&path) {
                Some(sha) => Some(sha.clone()),
                None => continue, // unreadable
            },
            None => None,
        };
        let after = match beneath::read(&root, Path::new(&path)) {
            Ok(Some(bytes)) => LeftBehind::Written(sha256_hex(&bytes)),
            Ok(None) => LeftBehind::Removed,
            // Something Latch never reads through nor writes back over (a
            // link to `~/.bashrc`, a directory swapped for a link) where a
            // file was: kept, so a rewind names it instead of forgetting
            // the file. A link made where nothing was is not checkpointed.
            Err(BeneathError::Symlink | BeneathError::NotAFile) if before.is_some() => {
                LeftBehind::NotAFile
            }
            // A file it cannot read.
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
    /// Those of the conflicts where a symbolic link, a directory or another
    /// non-file now stands (or a link lies on the way): Latch never writes
    /// or removes through it.
    pub links: Vec<String>,
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
                match after {
                    LeftBehind::Written(h) => known.insert(path.clone(), Some(Some(h.clone()))),
                    LeftBehind::Removed => known.insert(path.clone(), None),
                    // Not a file Latch knows the bytes of: whatever file
                    // stands there later was put there outside Latch.
                    LeftBehind::NotAFile => known.remove(path),
                };
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
    let root = open_workspace(root)?;
    let mut plan = RewindPlan {
        to_seq,
        actions: Vec::new(),
        conflicts: Vec::new(),
        links: Vec::new(),
    };
    for (path, before) in first {
        let current = match read_current(&root, &path) {
            Ok(current) => current,
            Err(Unreadable::Link) => {
                plan.conflicts.push(path.clone());
                plan.links.push(path);
                continue;
            }
            Err(Unreadable::Failed(e)) => return Err(e),
        };
        let current_hash = current.as_deref().map(sha256_hex);
        if current_hash == before {
            continue; // Already as it was.
        }
        if !unchanged(&current, known.get(&path)) {
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

/// Whether `current` (the file's bytes, `None`: no file) is what Latch last
/// knew of it.
fn unchanged(current: &Option<Vec<u8>>, known: Option<&Option<Option<String>>>) -> bool {
    match (current, known.cloned().flatten()) {
        (None, None) => true,
        (Some(bytes), Some(Some(h))) => sha256_hex(bytes) == h,
        // Too large to hash when seen: nothing to compare against.
        (Some(_), Some(None)) => true,
        _ => false,
    }
}

/// Apply `plan` to the workspace at `root` as durable events of `session`;
/// returns the [`EventKind::Rewound`] event's sequence number. Each file is
/// opened once beneath the workspace, never through a link; a file that
/// changed since the plan was made (or where a link now stands) is moved
/// from the plan's actions to its conflicts and left alone.
pub fn apply_rewind(
    store: &Store,
    session: &str,
    root: &Path,
    plan: &mut RewindPlan,
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
    let dir = open_workspace(root)?;
    if !paths.is_empty() {
        commit_mutation(store, session, "rewind", paths, None)?;
    }
    let known = known_files(&store.all_events(session)?);
    let (mut restored, mut removed) = (Vec::new(), Vec::new());
    let mut left = Vec::new();
    for (path, action) in &plan.actions {
        let rel = relative(path)?;
        let io = |source| RewindError::Io {
            path: path.clone(),
            source,
        };
        let mut target = match beneath::open_target(&dir, rel) {
            Ok(t) => t,
            Err(BeneathError::Symlink | BeneathError::NotAFile) => {
                left.push((path.clone(), true));
                continue;
            }
            Err(e) => return Err(io(e)),
        };
        let current = target.bytes().map_err(io)?;
        if current.is_none() && matches!(action, FileAction::Remove) {
            removed.push(path.clone()); // Gone already.
            continue;
        }
        if !unchanged(&current, known.get(path)) {
            left.push((path.clone(), false));
            continue;
        }
        record_checkpoint(store, session, path, current.as_deref())?;
        match action {
            FileAction::Restore(_) => {
                let bytes = &bytes_of[path];
                match beneath::write(&dir, rel, target, bytes, true) {
                    Ok(()) => {}
                    Err(
                        BeneathError::Symlink | BeneathError::NotAFile | BeneathError::Appeared,
                    ) => {
                        left.push((path.clone(), true));
                        continue;
                    }
                    Err(e) => return Err(io(e)),
                }
                store.append(session, EventKind::file_observed(path.clone(), bytes))?;
                restored.push(path.clone());
            }
            FileAction::Remove => {
                if let Target::Existing(_) = target {
                    match beneath::remove_file(&dir, rel) {
                        Ok(()) | Err(BeneathError::NotFound) => {}
                        Err(BeneathError::Symlink | BeneathError::NotAFile) => {
                            left.push((path.clone(), true));
                            continue;
                        }
                        Err(e) => return Err(io(e)),
                    }
                }
                removed.push(path.clone());
            }
        }
    }
    for (path, link) in left {
        plan.actions.retain(|(p, _)| *p != path);
        if link {
            plan.links.push(path.clone());
        }
        plan.conflicts.push(path);
    }
    plan.conflicts.sort();
    plan.links.sort();
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

/// `rel` as a path inside the workspace, or [`RewindError::BadPath`].
fn relative(rel: &str) -> Result<&Path, RewindError> {
    let p = Path::new(rel);
    if rel.is_empty()
        || p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(RewindError::BadPath(rel.to_string()));
    }
    Ok(p)
}

fn open_workspace(root: &Path) -> Result<OwnedFd, RewindError> {
    beneath::open_dir(root).map_err(|source| RewindError::Workspace {
        path: root.display().to_string(),
        source,
    })
}

/// Why a file's current bytes could not be read.
enum Unreadable {
    /// A link (or a non-file) is where the file was, or on the way to it.
    Link,
    /// Anything else.
    Failed(RewindError),
}

/// The bytes at `rel` beneath the workspace `root` (`None`: no file), read
/// without following a link.
fn read_current(root: &OwnedFd, rel: &str) -> Result<Option<Vec<u8>>, Unreadable> {
    let p = relative(rel).map_err(Unreadable::Failed)?;
    match beneath::read(root, p) {
        Ok(bytes) => Ok(bytes),
        Err(BeneathError::Symlink | BeneathError::NotAFile) => Err(Unreadable::Link),
        Err(source) => Err(Unreadable::Failed(RewindError::Io {
            path: rel.to_string(),
            source,
        })),
    }
}
