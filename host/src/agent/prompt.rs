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

/// The session context's mode: the interaction mode (`interactive`, `run`,
/// ...), and in plan mode what that means for the model.
pub fn mode_text(interaction: &str, mode: latch_kernel::SessionMode) -> String {
    if mode.is_plan() {
        format!(
            "{interaction}, plan mode (nothing may change the workspace: write_file and edit_file \
             are refused and commands run read-only; explore, then present your plan with \
             propose_plan for the user to approve)"
        )
    } else {
        interaction.to_string()
    }
}

/// The session context: workspace and mode; the repository instructions
/// come from the session's [`super::instructions::InstructionSource`]
/// (see [`super::Agent::with_instructions`]).
pub fn session_context(workspace: &Path, mode: &str) -> SessionContext {
    SessionContext {
        workspace: workspace.display().to_string(),
        repository_instructions: String::new(),
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
}
