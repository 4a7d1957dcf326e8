//! Where custom slash commands come from: every `*.md` file under the
//! workspace's `.latch/commands/` and `.claude/commands/` and the user's
//! `<config dir>/latch/commands/` (a file in a subdirectory `dir/` is
//! `/dir:name`). On a name found in more than one place the workspace's
//! `.latch` one wins, then `.claude`, then the user's. Parsing and
//! `$ARGUMENTS` are [`latch_surface::commands`]'.

use latch_surface::{CustomCommand, CustomCommands};
use std::path::{Path, PathBuf};

/// The directories searched, first wins.
pub fn command_dirs(workspace: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![
        workspace.join(".latch").join("commands"),
        workspace.join(".claude").join("commands"),
    ];
    if let Some(user) = crate::config::user_config_dir() {
        dirs.push(user.join("commands"));
    }
    dirs
}

/// The commands of `workspace`, and one warning per file not taken (each
/// names the file and the fix).
pub fn load(workspace: &Path) -> (CustomCommands, Vec<String>) {
    let mut commands = CustomCommands::new();
    let mut warnings = Vec::new();
    for dir in command_dirs(workspace) {
        let mut files = Vec::new();
        collect(&dir, "", &mut files, 0);
        files.sort();
        for (name, path) in files {
            match std::fs::read_to_string(&path) {
                Ok(text) => match CustomCommand::parse(&name, &text, path) {
                    Ok(c) => {
                        commands.add(c);
                    }
                    Err(e) => warnings.push(e.to_string()),
                },
                Err(e) => warnings.push(format!(
                    "{}: cannot read the command file: {e}",
                    path.display()
                )),
            }
        }
    }
    (commands, warnings)
}

/// `(name, path)` of every `.md` file under `dir`, namespaced by subdirectory.
fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.is_dir() {
            if depth < 4 {
                collect(&path, &format!("{prefix}{stem}:"), out, depth + 1);
            }
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push((format!("{prefix}{stem}"), path));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_commands_win_and_bad_files_warn() {
        let ws = tempfile::tempdir().unwrap();
        let latch = ws.path().join(".latch/commands");
        let claude = ws.path().join(".claude/commands/web");
        std::fs::create_dir_all(&latch).unwrap();
        std::fs::create_dir_all(&claude).unwrap();
        std::fs::write(latch.join("review.md"), "Latch review $ARGUMENTS").unwrap();
        std::fs::write(
            ws.path().join(".claude/commands/review.md"),
            "Claude review",
        )
        .unwrap();
        std::fs::write(claude.join("test.md"), "Test the page").unwrap();
        std::fs::write(latch.join("help.md"), "mine").unwrap();
        std::fs::write(latch.join("notes.txt"), "not a command").unwrap();
        let (commands, warnings) = load(ws.path());
        assert_eq!(
            commands.expand_line("/review a.rs"),
            Some("Latch review a.rs".into())
        );
        assert_eq!(
            commands.expand_line("/web:test"),
            Some("Test the page".into())
        );
        assert_eq!(commands.iter().count(), 2);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("help.md"), "{warnings:?}");
    }
}
