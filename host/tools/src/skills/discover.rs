//! Finding skills: `.latch/skills/`, `.agents/skills/` and `.claude/skills/`
//! of the workspace and of every directory above it up to the repository
//! root (the nearest directory holding `.git`; without one, the workspace
//! alone), then the user's `skills/` directory. Nearer directories win, and
//! within one directory `.latch` before `.agents` before `.claude`; a name
//! found again later is shadowed. A malformed `SKILL.md` is skipped with a
//! warning naming the file and the field, never an error.
//!
//! A skill's name and description go to the provider, so the repository's
//! skills are read beneath the repository root (the workspace without one)
//! with [`latch_kernel::beneath::read_within`]: a skill directory or a
//! `SKILL.md` linked out of it (to `~/.ssh`, say) is skipped with a warning
//! and never read. The user's own skills directory is the user's.

use super::Skill;
use super::frontmatter::{self, FrontmatterError};
use std::path::{Path, PathBuf};

/// The skill directories looked at in every directory from the workspace
/// up to the repository root, in precedence order.
pub const SKILL_DIRS: &[&str] = &[".latch/skills", ".agents/skills", ".claude/skills"];

/// A `SKILL.md` that was skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillWarning {
    /// The file.
    pub file: PathBuf,
    /// The field at fault, when one is.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for SkillWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "skill {} skipped: ", self.file.display())?;
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        write!(f, "{}", self.message)
    }
}

/// What discovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovery {
    /// The skills, in name order.
    pub skills: Vec<Skill>,
    /// Skills hidden by one of the same name found earlier: (the hidden
    /// one's `SKILL.md`, the name).
    pub shadowed: Vec<(PathBuf, String)>,
    /// Skipped files.
    pub warnings: Vec<SkillWarning>,
}

/// The directories searched, in precedence order: the workspace's skill
/// directories, then each parent's up to the repository root, then
/// `user_dir/skills`.
pub fn skill_roots(workspace: &Path, user_dir: Option<&Path>) -> Vec<PathBuf> {
    let top = repository_top(workspace);
    let mut roots = Vec::new();
    for dir in workspace.ancestors() {
        for sub in SKILL_DIRS {
            roots.push(dir.join(sub));
        }
        if dir == top {
            break;
        }
    }
    if let Some(user) = user_dir {
        roots.push(user.join("skills"));
    }
    roots
}

/// The repository root of `workspace` (the nearest directory holding
/// `.git`), or the workspace itself.
fn repository_top(workspace: &Path) -> &Path {
    workspace
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(workspace)
}

/// Discover the skills of `workspace` (and of `user_dir`, the user's Latch
/// config directory).
pub fn discover(workspace: &Path, user_dir: Option<&Path>) -> Discovery {
    let mut found = Discovery::default();
    let top = repository_top(workspace);
    for root in skill_roots(workspace, user_dir) {
        // The repository's skills are read beneath its root.
        let within = root.starts_with(top).then_some(top);
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs {
            let file = dir.join("SKILL.md");
            if !dir.is_dir() || !file.is_file() {
                continue;
            }
            match load(&dir, &file, within) {
                Ok(skill) => {
                    if found.skills.iter().any(|s| s.name == skill.name) {
                        found.shadowed.push((file, skill.name));
                    } else {
                        found.skills.push(skill);
                    }
                }
                Err(e) => found.warnings.push(SkillWarning {
                    file,
                    field: e.field,
                    message: e.message,
                }),
            }
        }
    }
    found.skills.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// Largest `SKILL.md` read.
const MAX_SKILL_BYTES: u64 = 1024 * 1024;

fn load(dir: &Path, file: &Path, within: Option<&Path>) -> Result<Skill, FrontmatterError> {
    let io = |e: std::io::Error| FrontmatterError {
        field: None,
        message: format!("cannot be read: {e}"),
    };
    let text = match within {
        Some(base) => {
            let rel = file.strip_prefix(base).unwrap_or(file);
            let bytes = latch_kernel::beneath::read_within(base, rel, MAX_SKILL_BYTES)
                .map_err(|e| FrontmatterError {
                    field: None,
                    message: format!(
                        "{e}: Latch reads the repository's skills only from inside it \
                         ({}), so it was neither read nor sent to the provider",
                        base.display()
                    ),
                })?
                .ok_or_else(|| io(std::io::ErrorKind::NotFound.into()))?;
            String::from_utf8(bytes).map_err(|_| FrontmatterError {
                field: None,
                message: "is not UTF-8 text".into(),
            })?
        }
        None => std::fs::read_to_string(file).map_err(io)?,
    };
    let parsed = frontmatter::parse(&text)?;
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if parsed.name != dir_name {
        return Err(FrontmatterError {
            field: Some("name".into()),
            message: format!(
                "`{}` must equal the skill's directory name `{dir_name}`; rename one of them",
                parsed.name
            ),
        });
    }
    let canonical = std::fs::canonicalize(dir).map_err(io)?;
    Ok(Skill {
        name: parsed.name,
        description: parsed.description,
        license: parsed.license,
        compatibility: parsed.compatibility,
        metadata: parsed.metadata,
        allowed_tools: parsed.allowed_tools,
        dir: canonical,
        file: file.to_path_buf(),
    })
}
