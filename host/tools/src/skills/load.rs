//! `load_skill {name, path?}`: a skill's instructions (its `SKILL.md` body,
//! read when called) or one file under its directory, as a bounded tool
//! result, so what the model read is durable, recallable and replayed
//! exactly on resume. Paths are confined to the skill's directory: absolute
//! paths, `..` and symbolic links are refused, and files are opened beneath
//! the directory by the kernel in one step (see [`latch_kernel::beneath`]), so a
//! link swapped in while a file is loaded cannot lead outside either.

use super::Skill;
use super::frontmatter;
use crate::spec::ToolSpec;
use latch_kernel::beneath::{self, BeneathError, Opened};
use serde_json::{Value, json};
use std::io::Read;
use std::path::{Component, Path};

/// The tool's name.
pub const LOAD_SKILL: &str = "load_skill";
/// Most bytes of a file `load_skill` returns.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Most files of a skill listed after its instructions.
const LISTED_FILES: usize = 30;

/// The tool's schema.
pub fn load_skill_spec() -> ToolSpec {
    ToolSpec {
        name: LOAD_SKILL.to_string(),
        description: "Load a skill from the session's skill list: without path, its instructions \
                      (SKILL.md) and a list of its files; with path, one file inside the skill's \
                      directory (e.g. scripts/run.py, references/api.md). Files outside the \
                      skill's directory are refused."
            .to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The skill's name, as listed."},
                "path": {"type": "string", "description": "A file inside the skill's directory, relative to it (optional)."}
            },
            "required": ["name"],
            "additionalProperties": false,
        }),
    }
}

/// Answer a `load_skill` call against `skills`: the text, or an error
/// message that says what was wrong.
pub fn load_skill(skills: &[Skill], arguments_json: &str) -> Result<String, String> {
    let args: Value = serde_json::from_str(arguments_json).map_err(|e| {
        format!("invalid arguments for `load_skill`: {e}. Expected load_skill(name: string, path?: string)")
    })?;
    let name = args.get("name").and_then(Value::as_str).ok_or(
        "invalid arguments for `load_skill`: `name` (a string) is required. Expected load_skill(name: string, path?: string)",
    )?;
    let path = match args.get("path") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => Some(p.as_str()),
        Some(_) => {
            return Err("invalid arguments for `load_skill`: `path` must be a string".into());
        }
    };
    let Some(skill) = skills.iter().find(|s| s.name == name) else {
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        return Err(format!(
            "no skill `{name}`; the skills are: {}",
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        ));
    };
    match path {
        None | Some("") | Some("SKILL.md") | Some("./SKILL.md") => instructions(skill),
        Some(p) => file(skill, p),
    }
}

fn instructions(skill: &Skill) -> Result<String, String> {
    let cannot = |why: String| {
        format!(
            "skill `{}`: cannot read {}: {why}",
            skill.name,
            skill.file.display()
        )
    };
    let root = beneath::open_dir(&skill.dir).map_err(|e| cannot(e.to_string()))?;
    let text = match beneath::open_beneath(&root, Path::new("SKILL.md")) {
        Ok(Opened::File(f)) => {
            let mut text = String::new();
            f.take(MAX_FILE_BYTES)
                .read_to_string(&mut text)
                .map_err(|e| cannot(e.to_string()))?;
            text
        }
        Ok(Opened::Dir(_)) => return Err(cannot("it is a directory".into())),
        Err(e) => {
            return Err(cannot(format!(
                "it {e}; load_skill follows no symbolic link"
            )));
        }
    };
    let parsed = frontmatter::parse(&text).map_err(|e| {
        format!(
            "skill `{}`: {} is no longer valid: {e}",
            skill.name,
            skill.file.display()
        )
    })?;
    let mut out = format!(
        "# Skill `{}`\nDirectory: {}\n\n{}",
        skill.name,
        skill.dir.display(),
        parsed.body.trim_end()
    );
    let files = files_of(&root);
    if !files.is_empty() {
        out.push_str("\n\n## Files of this skill (load one with `path`)\n");
        out.push_str(&files.join("\n"));
    }
    Ok(out)
}

/// At most [`LISTED_FILES`] names, then `…` when there were more.
fn capped(mut files: Vec<String>) -> Vec<String> {
    if files.len() > LISTED_FILES {
        files.truncate(LISTED_FILES);
        files.push("…".into());
    }
    files
}

/// Files of the skill other than `SKILL.md`, for messages.
fn files_of(root: &std::os::fd::OwnedFd) -> Vec<String> {
    capped(
        beneath::list(root, usize::MAX)
            .into_iter()
            .filter(|f| f != "SKILL.md")
            .collect(),
    )
}

/// One file (or directory listing) beneath the skill's directory, opened
/// race-free (see [`beneath`]): no check-then-open, so a symbolic link
/// swapped in at any moment cannot make this read outside the skill.
fn file(skill: &Skill, raw: &str) -> Result<String, String> {
    let refuse = |why: String| {
        Err(format!(
            "denied: `{raw}` {why}; load_skill reads only files inside the skill's directory {}",
            skill.dir.display()
        ))
    };
    let rel = Path::new(raw);
    if rel.is_absolute() {
        return refuse("is an absolute path".into());
    }
    if rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return refuse("climbs out with `..`".into());
    }
    let root = beneath::open_dir(&skill.dir).map_err(|e| {
        format!(
            "skill `{}`: its directory {} {e}",
            skill.name,
            skill.dir.display()
        )
    })?;
    let opened = match beneath::open_beneath(&root, rel) {
        Ok(o) => o,
        Err(BeneathError::NotFound) => {
            let files = files_of(&root);
            return Err(format!(
                "skill `{}` has no file `{raw}`; its files are: {}",
                skill.name,
                if files.is_empty() {
                    "none besides SKILL.md".into()
                } else {
                    files.join(", ")
                }
            ));
        }
        Err(BeneathError::Symlink) => {
            return refuse(
                "is or passes through a symbolic link (load_skill follows none, so nothing outside the skill is read)"
                    .into(),
            );
        }
        Err(BeneathError::Outside) => return refuse("is not a path inside the skill".into()),
        Err(e) => return Err(format!("cannot read `{raw}`: {e}")),
    };
    let f = match opened {
        Opened::Dir(fd) => {
            let files = beneath::list(&fd, LISTED_FILES);
            return Ok(format!(
                "# {}/{raw} (a directory)\n{}",
                skill.name,
                files.join("\n")
            ));
        }
        Opened::File(f) => f,
    };
    let mut bytes = Vec::new();
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    f.take(MAX_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read `{raw}`: {e}"))?;
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return Ok(format!(
            "# {}/{raw}\n[a binary file of {size} bytes; not shown]",
            skill.name
        ));
    }
    let mut out = format!(
        "# {}/{raw}\n{}",
        skill.name,
        String::from_utf8_lossy(&bytes)
    );
    if size > MAX_FILE_BYTES {
        out.push_str(&format!(
            "\n[only the first {MAX_FILE_BYTES} of {size} bytes are shown]"
        ));
    }
    Ok(out)
}
