//! File state: what the session last knew about each file it observed or
//! changed, and the guard that a write checks against it.

use crate::FILE_HASH_MAX_BYTES;
use latch_engine_sdk::types::FileState;
use std::collections::BTreeMap;

/// What the session knows about one file's contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileKnowledge {
    /// Observed with a whole-file hash (files within [`FILE_HASH_MAX_BYTES`]).
    Hashed {
        /// Lower-case hex SHA-256.
        sha256: String,
        /// Size in bytes.
        size: u64,
    },
    /// Observed without a hash (larger files).
    Unhashed {
        /// Size in bytes.
        size: u64,
    },
    /// The session committed a mutation of the file and has not observed the
    /// result yet.
    Written {
        /// The last known size.
        size: u64,
    },
    /// A guarded write found the file changed outside the session; it must be
    /// re-read before it can be edited.
    ChangedExternally {
        /// The hash found on disk (none when the file was gone).
        actual_sha256: Option<String>,
        /// The last known size.
        size: u64,
    },
}

impl FileKnowledge {
    fn size(&self) -> u64 {
        match self {
            FileKnowledge::Hashed { size, .. }
            | FileKnowledge::Unhashed { size }
            | FileKnowledge::Written { size }
            | FileKnowledge::ChangedExternally { size, .. } => *size,
        }
    }
}

/// What a guarded write should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuardVerdict {
    /// The write may proceed.
    Allow,
    /// The write must be rejected; the model has to re-read the file.
    Reject {
        /// The hash the session last knew (none if it knew none).
        expected_sha256: Option<String>,
        /// True when this is a change the log does not record yet (append an
        /// external-change event); false when it was already recorded.
        record: bool,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FileRecord {
    pub(crate) path: String,
    pub(crate) knowledge: FileKnowledge,
    pub(crate) seq: u64,
}

/// Latest knowledge per path, in order of first appearance.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct FileTable {
    items: Vec<FileRecord>,
    index: BTreeMap<String, usize>,
}

impl FileTable {
    fn set(&mut self, path: &str, knowledge: FileKnowledge, seq: u64) -> bool {
        match self.index.get(path) {
            Some(&i) => {
                let rec = &mut self.items[i];
                if rec.knowledge == knowledge {
                    return false;
                }
                rec.knowledge = knowledge;
                rec.seq = seq;
                true
            }
            None => {
                self.index.insert(path.to_string(), self.items.len());
                self.items.push(FileRecord {
                    path: path.to_string(),
                    knowledge,
                    seq,
                });
                true
            }
        }
    }

    fn size_of(&self, path: &str) -> u64 {
        self.index
            .get(path)
            .map(|&i| self.items[i].knowledge.size())
            .unwrap_or(0)
    }

    /// An observation; hashes of files above the bound are ignored.
    pub(crate) fn observed(
        &mut self,
        path: &str,
        sha256: Option<&str>,
        size: u64,
        seq: u64,
    ) -> bool {
        let knowledge = match sha256 {
            Some(h) if size <= FILE_HASH_MAX_BYTES as u64 => FileKnowledge::Hashed {
                sha256: h.to_string(),
                size,
            },
            _ => FileKnowledge::Unhashed { size },
        };
        self.set(path, knowledge, seq)
    }

    /// The session committed a mutation of these paths.
    pub(crate) fn written(&mut self, paths: &[String], seq: u64) -> bool {
        let mut changed = false;
        for p in paths {
            let size = self.size_of(p);
            changed |= self.set(p, FileKnowledge::Written { size }, seq);
        }
        changed
    }

    /// A guarded write found the file changed.
    pub(crate) fn changed_externally(
        &mut self,
        path: &str,
        actual: Option<&str>,
        seq: u64,
    ) -> bool {
        let size = self.size_of(path);
        self.set(
            path,
            FileKnowledge::ChangedExternally {
                actual_sha256: actual.map(str::to_string),
                size,
            },
            seq,
        )
    }

    /// What the session knows about `path`.
    pub(crate) fn knowledge(&self, path: &str) -> Option<&FileKnowledge> {
        self.index.get(path).map(|&i| &self.items[i].knowledge)
    }

    /// The guard: may the session write `path`, whose current on-disk hash is
    /// `current` (none when the file does not exist)?
    pub(crate) fn guard(&self, path: &str, current: Option<&str>) -> GuardVerdict {
        match self.knowledge(path) {
            None | Some(FileKnowledge::Unhashed { .. }) | Some(FileKnowledge::Written { .. }) => {
                GuardVerdict::Allow
            }
            Some(FileKnowledge::Hashed { sha256, .. }) => {
                if current == Some(sha256.as_str()) {
                    GuardVerdict::Allow
                } else {
                    GuardVerdict::Reject {
                        expected_sha256: Some(sha256.clone()),
                        record: true,
                    }
                }
            }
            Some(FileKnowledge::ChangedExternally { actual_sha256, .. }) => GuardVerdict::Reject {
                expected_sha256: actual_sha256.clone(),
                record: current != actual_sha256.as_deref(),
            },
        }
    }

    /// The contract's rendering.
    pub(crate) fn render(&self) -> Vec<FileState> {
        self.items
            .iter()
            .map(|r| FileState {
                path: r.path.clone(),
                sha256: match &r.knowledge {
                    FileKnowledge::Hashed { sha256, .. } => Some(sha256.clone()),
                    _ => None,
                },
                size: r.knowledge.size(),
                seq: r.seq,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_rejects_a_changed_hash_until_reread() {
        let mut t = FileTable::default();
        assert_eq!(
            t.guard("a", None),
            GuardVerdict::Allow,
            "new files may be written"
        );
        t.observed("a", Some("h1"), 3, 1);
        assert_eq!(t.guard("a", Some("h1")), GuardVerdict::Allow);
        assert_eq!(
            t.guard("a", Some("h2")),
            GuardVerdict::Reject {
                expected_sha256: Some("h1".into()),
                record: true
            }
        );
        t.changed_externally("a", Some("h2"), 2);
        assert_eq!(
            t.guard("a", Some("h2")),
            GuardVerdict::Reject {
                expected_sha256: Some("h2".into()),
                record: false
            },
            "still rejected, but already recorded"
        );
        t.observed("a", Some("h2"), 4, 3);
        assert_eq!(t.guard("a", Some("h2")), GuardVerdict::Allow);
    }

    #[test]
    fn large_observations_carry_no_hash() {
        let mut t = FileTable::default();
        t.observed("big", Some("h"), FILE_HASH_MAX_BYTES as u64 + 1, 1);
        assert_eq!(t.render()[0].sha256, None);
        assert!(!t.observed("big", None, FILE_HASH_MAX_BYTES as u64 + 1, 2));
    }
}
