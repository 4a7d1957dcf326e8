//! Agent Skills: folders with a `SKILL.md` (YAML frontmatter, then
//! instructions) and optional `scripts/`, `references/` and `assets/`.
//!
//! * [`discover`] — where skills are found and which one wins, with
//!   warnings for malformed files.
//! * [`frontmatter`] — parsing and checking `SKILL.md`.
//! * [`catalog`] — the capped name-and-description list that goes into the
//!   session context.
//! * [`load`] — the `load_skill` tool: instructions or one file, confined
//!   to the skill's directory, as a durable tool result.
//!
//! Files are opened beneath the skill's directory without following a link
//! ([`latch_kernel::beneath`], the helper every read and write Latch does on
//! the user's behalf goes through).
//!
//! Progressive disclosure: the list is always in context; a skill's body
//! and files enter only through `load_skill` results in the event log.

pub mod catalog;
pub mod discover;
pub mod frontmatter;
pub mod load;

pub use catalog::{CATALOG_SOURCE, Catalog, DEFAULT_CATALOG_PERCENT, cap_tokens, catalog};
pub use discover::{Discovery, SKILL_DIRS, SkillWarning, discover, skill_roots};
pub use load::{LOAD_SKILL, load_skill, load_skill_spec};

use std::collections::BTreeMap;
use std::path::PathBuf;

/// A discovered skill (its metadata; the body is read by `load_skill`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    /// `name`, equal to its directory's name.
    pub name: String,
    /// `description`.
    pub description: String,
    /// `license`.
    pub license: Option<String>,
    /// `compatibility`.
    pub compatibility: Option<String>,
    /// `metadata`.
    pub metadata: BTreeMap<String, String>,
    /// `allowed-tools`, as written (informational: Latch's own policy
    /// decides what a tool may do).
    pub allowed_tools: Option<String>,
    /// The skill's directory, canonical.
    pub dir: PathBuf,
    /// Its `SKILL.md`.
    pub file: PathBuf,
}
