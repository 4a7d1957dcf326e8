//! Instructions where they live: which `AGENTS.md` files a session reads,
//! in what order, and what each holds.
//!
//! * the user's global file, `AGENTS.md` in Latch's config directory
//!   (`$LATCH_CONFIG_DIR`, else `$XDG_CONFIG_HOME/latch`, else
//!   `~/.config/latch`);
//! * one file per directory from the repository's root (the nearest
//!   ancestor holding `.git`; the workspace when there is none) down to
//!   the workspace: its `AGENTS.md`, or its `CLAUDE.md` where it has none;
//! * the workspace's `.latch/instructions.md`;
//! * later, a directory below the workspace: its file joins the session
//!   when the model first reads or edits a file there ([`nested_for`]).
//!
//! A line's `@path` imports another file (relative to the importing file,
//! up to [`MAX_IMPORT_DEPTH`] deep, [`MAX_IMPORTS`] in all), never from
//! outside the directory tree it was found in: an import that leaves it is
//! refused with a note in its place. Every file is opened beneath its tree
//! with no symbolic link followed (`openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`), and cut at [`MAX_FILE_BYTES`] with a note that
//! says which file and where.

use crate::agent::instructions::{InstructionSource, NestedInstructions};
use latch_kernel::beneath::{BeneathError, Opened, open_beneath, open_dir};
use serde::Serialize;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// The instructions file of a directory.
pub const AGENTS_FILE: &str = "AGENTS.md";
/// Read where a directory has no [`AGENTS_FILE`].
pub const CLAUDE_FILE: &str = "CLAUDE.md";
/// Latch's own instructions file in the workspace.
pub const LATCH_FILE: &str = ".latch/instructions.md";
/// Most bytes kept of each file (imports count on their own).
pub const MAX_FILE_BYTES: usize = 32 * 1024;
/// How deep imports nest.
pub const MAX_IMPORT_DEPTH: usize = 4;
/// Most imports of one file and everything it imports.
pub const MAX_IMPORTS: usize = 16;

/// Where an instructions file was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The user's global file.
    Global,
    /// A directory from the repository's root down to the workspace.
    Repository,
    /// The workspace's `.latch/instructions.md`.
    Latch,
    /// A directory below the workspace, read when the model first worked
    /// there.
    Nested,
    /// Imported (`@path`) by another file.
    Import,
}

/// One file read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InstructionFile {
    /// Where it was found.
    pub scope: Scope,
    /// Its path as shown: relative to the workspace (`../AGENTS.md` above
    /// it), or absolute for the global file.
    pub label: String,
    /// The absolute path.
    pub path: PathBuf,
    /// The text kept.
    pub text: String,
    /// The file's size in bytes.
    pub bytes: usize,
    /// True when it was cut at [`MAX_FILE_BYTES`].
    pub cut: bool,
    /// Imports refused or unreadable, with why.
    pub refused: Vec<String>,
}

impl InstructionFile {
    /// The section the session context holds for this file: a heading
    /// with its path, the text, and the note when it was cut.
    pub fn section(&self) -> String {
        let mut out = format!("## {}\n{}", self.label, self.text.trim());
        if self.cut {
            out.push_str(&format!(
                "\n[{} cut at {MAX_FILE_BYTES} of its {} bytes: Latch reads at most {} KiB of each \
                 instructions file]",
                self.label,
                self.bytes,
                MAX_FILE_BYTES / 1024
            ));
        }
        for r in &self.refused {
            out.push_str(&format!("\n[{r}]"));
        }
        out
    }
}

/// The files a session starts with, in order, and its repository's root.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Instructions {
    /// The repository's root (the workspace when it is in none).
    pub root: PathBuf,
    /// The files, in the order the session context holds them; imports
    /// follow the file that imports them.
    pub files: Vec<InstructionFile>,
}

impl Instructions {
    /// The session context's repository instructions: every file's section.
    pub fn text(&self) -> String {
        self.files
            .iter()
            .map(InstructionFile::section)
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// The repository root of `workspace`: the nearest directory at or above
/// it holding `.git`, else the workspace itself.
pub fn repository_root(workspace: &Path) -> PathBuf {
    workspace
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(workspace)
        .to_path_buf()
}

/// What a session in `workspace` (canonical) reads at its start, with the
/// user's config directory `config_dir`.
pub fn discover(workspace: &Path, config_dir: Option<&Path>) -> Instructions {
    let root = repository_root(workspace);
    let mut files = Vec::new();
    if let Some(dir) = config_dir {
        read_level(dir, Path::new(""), Scope::Global, workspace, &mut files);
    }
    let below: PathBuf = workspace
        .strip_prefix(&root)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut level = PathBuf::new();
    read_level(&root, &level, Scope::Repository, workspace, &mut files);
    for part in below.components() {
        level.push(part);
        read_level(&root, &level, Scope::Repository, workspace, &mut files);
    }
    read_file(
        &root,
        &below.join(LATCH_FILE),
        Scope::Latch,
        workspace,
        &mut files,
    );
    Instructions { root, files }
}

/// The nested files a read or an edit of `file` (relative to the
/// workspace) brings in: each directory below the workspace down to the
/// file's own that has one and is not in `loaded` (directories relative
/// to the workspace).
pub fn nested_for(
    workspace: &Path,
    file: &str,
    loaded: &dyn Fn(&str) -> bool,
) -> Vec<(String, Vec<InstructionFile>)> {
    let rel = Path::new(file);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut dir = PathBuf::new();
    let parts: Vec<_> = rel
        .parent()
        .into_iter()
        .flat_map(|p| p.components())
        .collect();
    for part in parts {
        dir.push(part);
        let key = dir.to_string_lossy().into_owned();
        if key == ".latch" || key.starts_with(".latch/") || key == ".git" || loaded(&key) {
            continue;
        }
        let mut files = Vec::new();
        read_level(workspace, &dir, Scope::Nested, workspace, &mut files);
        if !files.is_empty() {
            out.push((key, files));
        }
    }
    out
}

/// The file of one directory (`level`, relative to `tree`): `AGENTS.md`,
/// else `CLAUDE.md`.
fn read_level(
    tree: &Path,
    level: &Path,
    scope: Scope,
    workspace: &Path,
    out: &mut Vec<InstructionFile>,
) {
    if !read_file(tree, &level.join(AGENTS_FILE), scope, workspace, out) {
        read_file(tree, &level.join(CLAUDE_FILE), scope, workspace, out);
    }
}

/// Read `rel` beneath `tree` (and what it imports) into `out`; false when
/// there is no such file.
fn read_file(
    tree: &Path,
    rel: &Path,
    scope: Scope,
    workspace: &Path,
    out: &mut Vec<InstructionFile>,
) -> bool {
    let Ok(root) = open_dir(tree) else {
        return false;
    };
    let Some((text, bytes, cut)) = read_capped(tree, &root, rel) else {
        return false;
    };
    let mut budget = MAX_IMPORTS;
    let mut file = InstructionFile {
        scope,
        label: label(&tree.join(rel), tree, workspace),
        path: tree.join(rel),
        text,
        bytes,
        cut,
        refused: Vec::new(),
    };
    let mut imported = Vec::new();
    imports(
        tree,
        rel,
        &file.text,
        1,
        &mut budget,
        workspace,
        &mut file.refused,
        &mut imported,
    );
    out.push(file);
    out.extend(imported);
    true
}

/// Follow the `@path` imports of `text` (the file `rel` beneath `tree`).
#[allow(clippy::too_many_arguments)]
fn imports(
    tree: &Path,
    rel: &Path,
    text: &str,
    depth: usize,
    budget: &mut usize,
    workspace: &Path,
    refused: &mut Vec<String>,
    out: &mut Vec<InstructionFile>,
) {
    let base = rel.parent().unwrap_or(Path::new(""));
    for target in import_targets(text) {
        let shown = format!("@{target}");
        let Some(resolved) = beneath(base, &target) else {
            refused.push(format!(
                "{shown} not imported: it leaves {} (imports stay inside it)",
                tree.display()
            ));
            continue;
        };
        if depth > MAX_IMPORT_DEPTH {
            refused.push(format!(
                "{shown} not imported: imports nest at most {MAX_IMPORT_DEPTH} deep"
            ));
            continue;
        }
        if *budget == 0 {
            refused.push(format!(
                "{shown} not imported: at most {MAX_IMPORTS} imports are read"
            ));
            continue;
        }
        if out.iter().any(|f| f.path == tree.join(&resolved)) {
            continue;
        }
        *budget -= 1;
        let Ok(root) = open_dir(tree) else { continue };
        match open_beneath(&root, &resolved) {
            Err(BeneathError::Symlink) => {
                refused.push(format!(
                    "{shown} not imported: it is or passes through a symbolic link"
                ));
                continue;
            }
            Err(e) => {
                refused.push(format!("{shown} not imported: it {e}"));
                continue;
            }
            Ok(_) => {}
        }
        let Some((body, bytes, cut)) = read_capped(tree, &root, &resolved) else {
            refused.push(format!("{shown} not imported: it is not a readable file"));
            continue;
        };
        let mut file = InstructionFile {
            scope: Scope::Import,
            label: label(&tree.join(&resolved), tree, workspace),
            path: tree.join(&resolved),
            text: body,
            bytes,
            cut,
            refused: Vec::new(),
        };
        let mut nested = Vec::new();
        let body = file.text.clone();
        imports(
            tree,
            &resolved,
            &body,
            depth + 1,
            budget,
            workspace,
            &mut file.refused,
            &mut nested,
        );
        out.push(file);
        out.extend(nested);
    }
}

/// `target` relative to `base`, both inside the tree, with `.` and `..`
/// resolved by name; `None` when it leaves the tree or is absolute.
fn beneath(base: &Path, target: &str) -> Option<PathBuf> {
    let target = Path::new(target);
    if target.is_absolute() || target.starts_with("~") {
        return None;
    }
    let mut out = PathBuf::new();
    for c in base.join(target).components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            _ => return None,
        }
    }
    Some(out)
}

/// The `@path` imports of `text`: a word starting with `@` outside code
/// spans and fenced blocks, holding a `/` or a `.`.
pub fn import_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut in_code = false;
        for (i, word) in line.split('`').enumerate() {
            in_code = i % 2 == 1;
            if in_code {
                continue;
            }
            for token in word.split_whitespace() {
                let Some(path) = token.strip_prefix('@') else {
                    continue;
                };
                let path = path.trim_end_matches([',', ';', ')', ':', '.']);
                if !path.is_empty() && (path.contains('/') || path.contains('.')) {
                    out.push(path.to_string());
                }
            }
        }
        let _ = in_code;
    }
    out
}

/// The text of `rel` beneath `root`, cut at [`MAX_FILE_BYTES`] on a
/// character boundary, its size and whether it was cut; `None` when it is
/// missing, a directory, a link or unreadable.
fn read_capped(
    tree: &Path,
    root: &std::os::fd::OwnedFd,
    rel: &Path,
) -> Option<(String, usize, bool)> {
    let (bytes, buf) = match open_beneath(root, rel) {
        Ok(Opened::File(file)) => {
            let bytes = file.metadata().ok()?.len() as usize;
            let mut buf = Vec::new();
            file.take(MAX_FILE_BYTES as u64 + 4)
                .read_to_end(&mut buf)
                .ok()?;
            (bytes, buf)
        }
        // A link is followed only when it stays inside the tree
        // (`AGENTS.md` → `docs/AGENTS.md`); one that leads out is not read.
        Err(BeneathError::Symlink) => {
            let buf =
                latch_kernel::beneath::read_within(tree, rel, MAX_FILE_BYTES as u64 + 4).ok()??;
            let bytes = std::fs::metadata(tree.join(rel))
                .map(|m| m.len() as usize)
                .unwrap_or(buf.len());
            (bytes, buf)
        }
        _ => return None,
    };
    let cut = bytes > MAX_FILE_BYTES || buf.len() > MAX_FILE_BYTES;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let text = if cut {
        let mut end = MAX_FILE_BYTES.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].to_string()
    } else {
        text
    };
    Some((text, bytes, cut))
}

/// `path` (found in `tree`) as the user reads it: relative to the
/// workspace when inside it, or inside the repository above it
/// (`../AGENTS.md`); else absolute (the global file).
fn label(path: &Path, tree: &Path, workspace: &Path) -> String {
    if let Ok(rel) = path.strip_prefix(workspace) {
        return rel.display().to_string();
    }
    if workspace.starts_with(tree) {
        for (ups, dir) in workspace.ancestors().enumerate().skip(1) {
            if let Ok(rel) = path.strip_prefix(dir) {
                return format!("{}{}", "../".repeat(ups), rel.display());
            }
            if dir == tree {
                break;
            }
        }
    }
    path.display().to_string()
}

/// A workspace's instructions, read as [`discover`] and [`nested_for`]
/// say: the session's [`InstructionSource`].
pub struct WorkspaceInstructions {
    /// The workspace (canonical).
    pub workspace: PathBuf,
    /// The user's config directory.
    pub config_dir: Option<PathBuf>,
}

impl WorkspaceInstructions {
    /// The instructions of `workspace` with the user's config directory.
    pub fn new(workspace: &Path) -> WorkspaceInstructions {
        WorkspaceInstructions {
            workspace: workspace.to_path_buf(),
            config_dir: super::user_config_dir(),
        }
    }
}

impl InstructionSource for WorkspaceInstructions {
    fn start(&self) -> String {
        discover(&self.workspace, self.config_dir.as_deref()).text()
    }

    fn nested(&self, file: &str, loaded: &dyn Fn(&str) -> bool) -> Vec<NestedInstructions> {
        nested_for(&self.workspace, file, loaded)
            .into_iter()
            .map(|(dir, files)| NestedInstructions {
                dir,
                files: files.iter().map(|f| f.label.clone()).collect(),
                text: files
                    .iter()
                    .map(InstructionFile::section)
                    .collect::<Vec<_>>()
                    .join("\n\n"),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_outside_code_are_found() {
        let text = "See @docs/style.md and @../x.md.\n`@not/this.md`\n```\n@nor/this.md\n```\nmail me@ ok @a\n";
        assert_eq!(import_targets(text), ["docs/style.md", "../x.md"]);
    }

    #[test]
    fn a_path_that_leaves_the_tree_is_refused_by_name() {
        assert_eq!(
            beneath(Path::new("a/b"), "../c.md"),
            Some(PathBuf::from("a/c.md"))
        );
        assert_eq!(beneath(Path::new(""), "../../etc/passwd"), None);
        assert_eq!(beneath(Path::new("a"), "/etc/passwd"), None);
    }
}
