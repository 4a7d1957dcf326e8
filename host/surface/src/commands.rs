//! Custom slash commands: a Markdown file `NAME.md` becomes `/NAME args`,
//! whose prompt is the file's body with `$ARGUMENTS` replaced by `args`.
//! This module parses one file and expands it; finding the files (the
//! workspace's `.latch/commands/` and `.claude/commands/`, the user's config
//! directory) is the host's job.
//!
//! A file may start with a front-matter block (`---` lines around
//! `key: value` lines) as Claude Code's commands do: `description` is shown
//! in `/help`, `argument-hint` after the name; other keys are ignored.

use crate::slash::SLASH_COMMANDS;
use std::path::PathBuf;

/// The placeholder replaced by the command's arguments.
pub const ARGUMENTS: &str = "$ARGUMENTS";

/// One custom command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomCommand {
    /// Its name without the slash, e.g. `review` or `frontend:test`.
    pub name: String,
    /// One line for `/help`.
    pub description: String,
    /// What the arguments should be, e.g. `<file>` (from `argument-hint`).
    pub argument_hint: String,
    /// The prompt template.
    pub body: String,
    /// The file it came from.
    pub source: PathBuf,
}

/// Why a command file was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandFileError {
    /// The name has characters a slash command cannot have.
    #[error(
        "{path}: `{name}` is not a command name (use letters, digits, `-`, `_`; rename the file)"
    )]
    BadName {
        /// The file.
        path: String,
        /// The name it would have had.
        name: String,
    },
    /// The name is one of Latch's own commands.
    #[error("{path}: /{name} is a built-in command; rename the file to use it")]
    Builtin {
        /// The file.
        path: String,
        /// The name.
        name: String,
    },
    /// The body is empty.
    #[error("{path}: the command has no prompt text; write the prompt below the front matter")]
    Empty {
        /// The file.
        path: String,
    },
}

impl CustomCommand {
    /// Parse the text of the file `source` as the command `name`.
    pub fn parse(
        name: &str,
        text: &str,
        source: PathBuf,
    ) -> Result<CustomCommand, CommandFileError> {
        let path = source.display().to_string();
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'));
        if !valid {
            return Err(CommandFileError::BadName {
                path,
                name: name.to_string(),
            });
        }
        let slash = format!("/{name}");
        if SLASH_COMMANDS.iter().any(|(n, _)| *n == slash) || name == "quit" {
            return Err(CommandFileError::Builtin {
                path,
                name: name.to_string(),
            });
        }
        let (front, body) = split_front_matter(text);
        let field = |key: &str| {
            front.iter().find_map(|(k, v)| {
                k.eq_ignore_ascii_case(key)
                    .then(|| v.trim_matches(|c| c == '"' || c == '\'').to_string())
            })
        };
        let body = body.trim().to_string();
        if body.is_empty() {
            return Err(CommandFileError::Empty { path });
        }
        let description = field("description").unwrap_or_else(|| {
            let first = body.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let first = first.trim().trim_start_matches('#').trim();
            let mut line: String = first.chars().take(60).collect();
            if first.chars().count() > 60 {
                line.push('…');
            }
            line
        });
        Ok(CustomCommand {
            name: name.to_string(),
            description,
            argument_hint: field("argument-hint").unwrap_or_default(),
            body,
            source,
        })
    }

    /// The prompt for `/name args`: every `$ARGUMENTS` replaced by `args`;
    /// a body without the placeholder gets non-empty `args` appended.
    pub fn expand(&self, args: &str) -> String {
        let args = args.trim();
        if self.body.contains(ARGUMENTS) {
            self.body.replace(ARGUMENTS, args)
        } else if args.is_empty() {
            self.body.clone()
        } else {
            format!("{}\n\n{args}", self.body)
        }
    }

    /// The `/help` line's left part: `/name <hint>`.
    pub fn usage(&self) -> String {
        if self.argument_hint.is_empty() {
            format!("/{}", self.name)
        } else {
            format!("/{} {}", self.name, self.argument_hint)
        }
    }
}

/// `key: value` lines of a leading `---` block, and the text after it.
fn split_front_matter(text: &str) -> (Vec<(String, String)>, &str) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (Vec::new(), text);
    };
    let mut fields = Vec::new();
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        let l = line.trim();
        if l == "---" {
            return (fields, &rest[offset..]);
        }
        if let Some((k, v)) = l.split_once(':') {
            fields.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    // No closing line: not front matter.
    (Vec::new(), text)
}

/// The custom commands a surface offers, by name; the first one taken of a
/// name wins (the host adds the workspace's before the user's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CustomCommands {
    commands: Vec<CustomCommand>,
}

impl CustomCommands {
    /// No commands.
    pub fn new() -> CustomCommands {
        CustomCommands::default()
    }

    /// Add `command` unless one of its name is there; true when added.
    pub fn add(&mut self, command: CustomCommand) -> bool {
        if self.get(&command.name).is_some() {
            return false;
        }
        self.commands.push(command);
        self.commands.sort_by(|a, b| a.name.cmp(&b.name));
        true
    }

    /// The command `name` (without the slash).
    pub fn get(&self, name: &str) -> Option<&CustomCommand> {
        self.commands.iter().find(|c| c.name == name)
    }

    /// Every command, by name.
    pub fn iter(&self) -> impl Iterator<Item = &CustomCommand> {
        self.commands.iter()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// The prompt `line` stands for when it is `/name args` of one of these
    /// commands; `None` otherwise.
    pub fn expand_line(&self, line: &str) -> Option<String> {
        let line = line.trim();
        let rest = line.strip_prefix('/')?;
        let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        self.get(name).map(|c| c.expand(args))
    }

    /// Every `/help` line: Latch's commands, then these, as (usage, help).
    pub fn help_lines(&self) -> Vec<(String, String)> {
        let mut lines: Vec<(String, String)> = SLASH_COMMANDS
            .iter()
            .map(|(n, h)| (n.to_string(), h.to_string()))
            .collect();
        lines.extend(
            self.commands
                .iter()
                .map(|c| (c.usage(), format!("{} (custom)", c.description))),
        );
        lines
    }

    /// The commands, built-in then custom, that complete `prefix` (which
    /// starts with `/` and has no space yet).
    pub fn complete(&self, prefix: &str) -> Vec<String> {
        if !prefix.starts_with('/') || prefix.contains(char::is_whitespace) {
            return Vec::new();
        }
        let mut out: Vec<String> = crate::slash::complete(prefix)
            .into_iter()
            .map(str::to_string)
            .collect();
        out.extend(
            self.commands
                .iter()
                .map(|c| format!("/{}", c.name))
                .filter(|n| n.starts_with(prefix)),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(name: &str, text: &str) -> Result<CustomCommand, CommandFileError> {
        CustomCommand::parse(name, text, PathBuf::from(format!("{name}.md")))
    }

    #[test]
    fn arguments_are_substituted_or_appended() {
        let c = cmd(
            "review",
            "Review $ARGUMENTS carefully; list $ARGUMENTS's bugs.",
        )
        .unwrap();
        assert_eq!(
            c.expand(" src/a.rs "),
            "Review src/a.rs carefully; list src/a.rs's bugs."
        );
        assert_eq!(
            c.description,
            "Review $ARGUMENTS carefully; list $ARGUMENTS's bugs."
        );
        let plain = cmd("tidy", "# Tidy up\nFormat the code.").unwrap();
        assert_eq!(plain.description, "Tidy up");
        assert_eq!(plain.expand(""), "# Tidy up\nFormat the code.");
        assert_eq!(plain.expand("x"), "# Tidy up\nFormat the code.\n\nx");
    }

    #[test]
    fn front_matter_gives_description_and_hint() {
        let c = cmd(
            "fix",
            "---\ndescription: \"Fix an issue\"\nargument-hint: <issue>\nmodel: x\n---\nFix issue $ARGUMENTS.\n",
        )
        .unwrap();
        assert_eq!(c.description, "Fix an issue");
        assert_eq!(c.usage(), "/fix <issue>");
        assert_eq!(c.body, "Fix issue $ARGUMENTS.");
        let mut all = CustomCommands::new();
        assert!(all.add(c.clone()));
        assert!(!all.add(c));
        assert_eq!(all.expand_line("/fix  42 "), Some("Fix issue 42.".into()));
        assert_eq!(all.expand_line("/fixes 42"), None);
        assert_eq!(all.complete("/f"), vec!["/fix".to_string()]);
        assert_eq!(all.complete("/c"), vec!["/context", "/compact"]);
        assert!(
            all.help_lines()
                .iter()
                .any(|(u, h)| u == "/fix <issue>" && h.contains("Fix an issue"))
        );
    }

    #[test]
    fn bad_files_name_the_fix() {
        let e = cmd("context", "x").unwrap_err().to_string();
        assert!(e.contains("built-in") && e.contains("rename"), "{e}");
        let e = cmd("my cmd", "x").unwrap_err().to_string();
        assert!(e.contains("not a command name"), "{e}");
        let e = cmd("empty", "---\ndescription: d\n---\n  \n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no prompt text"), "{e}");
    }
}
