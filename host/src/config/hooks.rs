//! `[hooks]`: commands Latch runs at points of a session (see
//! [`crate::agent::hooks`]). Each point is a list of `sh -c` command lines,
//! run in order in the session's sandbox. A workspace's hooks start
//! programs, so they take effect only once the workspace is trusted.

use crate::agent::hooks::{DEFAULT_HOOK_TIMEOUT, HookCommands};
use serde::Deserialize;
use std::time::Duration;

/// `[hooks]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// When this process runs its first turn of a session.
    #[serde(default)]
    pub session_start: Vec<String>,
    /// After each user message is recorded (`LATCH_PROMPT`).
    #[serde(default)]
    pub user_message: Vec<String>,
    /// Before each tool call (`LATCH_TOOL`, `LATCH_TOOL_INPUT`); a non-zero
    /// exit denies the call with the hook's output as the reason.
    #[serde(default)]
    pub pre_tool: Vec<String>,
    /// After each tool call (`LATCH_TOOL_OUTPUT`, `LATCH_TOOL_ERROR` too).
    #[serde(default)]
    pub post_tool: Vec<String>,
    /// When the model ends a turn (`LATCH_FINAL_TEXT`).
    #[serde(default)]
    pub turn_end: Vec<String>,
    /// Milliseconds one hook may run before it is killed (default 60000).
    #[serde(default, deserialize_with = "positive_timeout")]
    pub timeout_ms: Option<u64>,
}

fn positive_timeout<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let ms = u64::deserialize(d)?;
    if ms == 0 {
        return Err(serde::de::Error::custom(
            "[hooks] timeout_ms must be at least 1 (milliseconds one hook may run)",
        ));
    }
    Ok(Some(ms))
}

impl HooksConfig {
    /// The commands the agent runs.
    pub fn commands(&self) -> HookCommands {
        HookCommands {
            session_start: self.session_start.clone(),
            user_message: self.user_message.clone(),
            pre_tool: self.pre_tool.clone(),
            post_tool: self.post_tool.clone(),
            turn_end: self.turn_end.clone(),
            timeout: self
                .timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_HOOK_TIMEOUT),
        }
    }
}
