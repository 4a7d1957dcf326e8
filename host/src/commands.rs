//! Where custom slash commands come from: every `*.md` file under the
//! workspace's `.latch/commands/` and `.claude/commands/` and the user's
//! `<config dir>/latch/commands/` (a file in a subdirectory `dir/` is
//! `/dir:name`). On a name found in more than one place the workspace's
//! `.latch` one wins, then `.claude`, then the user's. Parsing and
//! `$ARGUMENTS` are [`latch_surface::commands`]'.
//!
//! A command file becomes a prompt sent to the provider, so the workspace's
//! are read beneath the workspace ([`latch_kernel::beneath::read_within`]):
//! a link that stays inside is followed, one that leads out (a command file
//! or a commands directory linked to `~/.ssh`) is refused with a warning
//! and never read. The user's own commands directory is the user's.

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
    let real_workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.into());
    for dir in command_dirs(workspace) {
        let inside = dir.strip_prefix(workspace).ok().map(Path::to_path_buf);
        if let Some(rel) = &inside
            && let Ok(real) = std::fs::canonicalize(&dir)
            && !real.starts_with(&real_workspace)
        {
            warnings.push(format!(
                "{}: the commands directory is a link out of the workspace ({}); Latch reads \
                 no command from it",
                rel.display(),
                real.display()
            ));
            continue;
        }
        let mut files = Vec::new();
        collect(&dir, "", &mut files, 0);
        files.sort();
        for (name, path) in files {
            let read = match path.strip_prefix(workspace) {
                Ok(rel) if inside.is_some() => {
                    latch_kernel::beneath::read_within(workspace, rel, MAX_COMMAND_BYTES)
                        .map_err(|e| match e {
                            latch_kernel::beneath::BeneathError::Symlink => format!(
                                "is a link out of the workspace; Latch never reads it nor \
                                 sends it to the provider ({e})"
                            ),
                            e => e.to_string(),
                        })
                        .and_then(|b| b.ok_or_else(|| "does not exist".to_string()))
                }
                _ => std::fs::read(&path).map_err(|e| e.to_string()),
            };
            match read.and_then(|b| String::from_utf8(b).map_err(|_| "is not UTF-8".into())) {
                Ok(text) => match CustomCommand::parse(&name, &text, path) {
                    Ok(c) => {
                        commands.add(c);
                    }
                    Err(e) => warnings.push(e.to_string()),
                },
                Err(e) => warnings.push(format!(
                    "{}: cannot read the command file: it {e}",
                    path.display()
                )),
            }
        }
    }
    (commands, warnings)
}

/// Largest command file read (a prompt, not a document).
const MAX_COMMAND_BYTES: u64 = 256 * 1024;

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

    #[test]
    fn command_files_linked_out_of_the_workspace_are_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
        let latch = ws.join(".latch/commands");
        std::fs::create_dir_all(&latch).unwrap();
        let key = dir.path().join("id_rsa");
        std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----").unwrap();
        std::os::unix::fs::symlink(&key, latch.join("key.md")).unwrap();
        std::fs::write(ws.join("shared.md"), "Shared $ARGUMENTS").unwrap();
        std::os::unix::fs::symlink("../../shared.md", latch.join("shared.md")).unwrap();
        // A whole commands directory linked out.
        let ssh = dir.path().join("ssh");
        std::fs::create_dir_all(&ssh).unwrap();
        std::fs::write(ssh.join("id.md"), "SECRET").unwrap();
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        std::os::unix::fs::symlink(&ssh, ws.join(".claude/commands")).unwrap();
        let (commands, warnings) = load(&ws);
        assert_eq!(commands.expand_line("/key"), None);
        assert_eq!(commands.expand_line("/id"), None);
        assert_eq!(commands.expand_line("/shared x"), Some("Shared x".into()));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("key.md") && w.contains("link out")),
            "{warnings:?}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(".claude/commands") && w.contains("link out")),
            "{warnings:?}"
        );
    }
}
