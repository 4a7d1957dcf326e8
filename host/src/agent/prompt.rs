//! The system prompt, compiled from modular instruction files in
//! `host/prompts/` (in file-name order). It is session-independent, so the
//! provider's system field and the tool schemas stay one cacheable prefix
//! across sessions; everything session-specific goes in [`session_context`].

use latch_engine_sdk::types::SessionContext;
use std::path::Path;

/// The instruction modules, in order.
const MODULES: &[&str] = &[
    include_str!("../../prompts/10-identity.md"),
    include_str!("../../prompts/20-context.md"),
    include_str!("../../prompts/30-tools.md"),
    include_str!("../../prompts/40-completion.md"),
];

/// The compiled, session-independent system prompt.
pub fn system_prompt() -> String {
    MODULES
        .iter()
        .map(|m| m.trim())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Files whose contents are the repository's instructions, in order.
pub const INSTRUCTION_FILES: &[&str] = &["AGENTS.md", ".latch/instructions.md"];

/// Most bytes of repository instructions included.
pub const MAX_INSTRUCTION_BYTES: usize = 32 * 1024;

/// The repository instructions of `workspace` ([`INSTRUCTION_FILES`], in
/// order, at most [`MAX_INSTRUCTION_BYTES`]) and one warning per file not
/// read. Each file is read beneath the workspace: a link is followed only
/// when it stays inside (`AGENTS.md` → `docs/AGENTS.md`); one that leads
/// out (to `~/.ssh/id_rsa`, say) is refused, its file never read nor sent
/// to the provider, and the model reads that it was left out.
pub fn repository_instructions(workspace: &Path) -> (String, Vec<String>) {
    let mut instructions = String::new();
    let mut warnings = Vec::new();
    for name in INSTRUCTION_FILES {
        let text = match latch_kernel::beneath::read_within(
            workspace,
            Path::new(name),
            MAX_INSTRUCTION_BYTES as u64 + 1,
        ) {
            Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(None) => continue,
            Err(e) => {
                warnings.push(format!(
                    "{name} {e}: Latch reads repository instructions only from files inside the \
                     workspace ({}), so it was not read and nothing of it was sent to the \
                     provider; make it a regular file to use it",
                    workspace.display()
                ));
                format!("[{name} was not read: it is a link out of the workspace or not a file]")
            }
        };
        if !instructions.is_empty() {
            instructions.push_str("\n\n");
        }
        instructions.push_str(&format!("## {name}\n{}", text.trim()));
    }
    if instructions.len() > MAX_INSTRUCTION_BYTES {
        let mut cut = MAX_INSTRUCTION_BYTES;
        while !instructions.is_char_boundary(cut) {
            cut -= 1;
        }
        instructions.truncate(cut);
        instructions.push_str("\n[repository instructions truncated]");
    }
    (instructions, warnings)
}

/// The session context: workspace, repository instructions (see
/// [`repository_instructions`]), mode.
pub fn session_context(workspace: &Path, mode: &str) -> SessionContext {
    SessionContext {
        workspace: workspace.display().to_string(),
        repository_instructions: repository_instructions(workspace).0,
        mode: mode.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_prompt_is_stable_and_session_independent() {
        assert_eq!(system_prompt(), system_prompt());
        assert!(!system_prompt().contains("/tmp"));
        assert!(system_prompt().contains("validate"));
    }

    #[test]
    fn repository_instructions_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "Use tabs.").unwrap();
        let ctx = session_context(dir.path(), "run");
        assert!(ctx.repository_instructions.contains("Use tabs."));
        assert_eq!(ctx.mode, "run");
    }

    #[test]
    fn instructions_linked_out_of_the_workspace_are_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".latch")).unwrap();
        std::fs::create_dir_all(ws.join("docs")).unwrap();
        let key = dir.path().join("id_rsa");
        std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----").unwrap();
        std::os::unix::fs::symlink(&key, ws.join("AGENTS.md")).unwrap();
        std::fs::write(ws.join("docs/instructions.md"), "Run make check.").unwrap();
        std::os::unix::fs::symlink("../docs/instructions.md", ws.join(".latch/instructions.md"))
            .unwrap();
        let ctx = session_context(&ws, "run");
        assert!(!ctx.repository_instructions.contains("PRIVATE KEY"));
        assert!(
            ctx.repository_instructions
                .contains("[AGENTS.md was not read")
        );
        // A link that stays inside the workspace is followed.
        assert!(ctx.repository_instructions.contains("Run make check."));
        let (_, warnings) = repository_instructions(&ws);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("AGENTS.md is or passes through a symbolic link"));
        assert!(warnings[0].contains("nothing of it was sent"));
        // `.latch` itself swapped for a link out.
        std::fs::remove_file(ws.join("AGENTS.md")).unwrap();
        std::fs::rename(ws.join(".latch"), dir.path().join("latch-elsewhere")).unwrap();
        std::fs::create_dir_all(dir.path().join("evil")).unwrap();
        std::fs::write(dir.path().join("evil/instructions.md"), "SECRET").unwrap();
        std::os::unix::fs::symlink(dir.path().join("evil"), ws.join(".latch")).unwrap();
        let ctx = session_context(&ws, "run");
        assert!(!ctx.repository_instructions.contains("SECRET"));
    }
}
