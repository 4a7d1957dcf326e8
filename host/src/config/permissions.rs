//! `[permissions]` and `[sandbox]`: when the user is asked and what
//! commands may touch. Unknown keys and unknown mode names are refused with
//! the key, its line and the valid choices.

use latch_sandbox::{ApprovalMode, SandboxMode, SandboxPolicy};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// `[permissions]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PermissionsConfig {
    /// `never`, `on-request` (the default), `untrusted` or `edits`;
    /// `--approval` overrides it.
    #[serde(default)]
    pub approval: ApprovalMode,
}

/// `[sandbox]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// `read-only`, `workspace-write` (the default) or `full-access`;
    /// `--sandbox` overrides it.
    #[serde(default)]
    pub mode: SandboxMode,
    /// Keep the network for sandboxed commands (default false: off).
    #[serde(default)]
    pub network: bool,
    /// More directories commands may write in `workspace-write` (relative
    /// ones are resolved against the workspace, `~/` against the home
    /// directory).
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
}

impl SandboxConfig {
    /// The policy for `workspace`, with `mode` (from `--sandbox`) in place
    /// of the configured one when given.
    pub fn policy(&self, workspace: &Path, mode: Option<SandboxMode>) -> SandboxPolicy {
        SandboxPolicy {
            mode: mode.unwrap_or(self.mode),
            network: self.network,
            writable_roots: self
                .writable_roots
                .iter()
                .map(|p| match p.strip_prefix("~") {
                    Ok(rest) => dirs::home_dir().unwrap_or_default().join(rest),
                    Err(_) => workspace.join(p),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use latch_sandbox::{ApprovalMode, SandboxMode};
    use std::path::Path;

    #[test]
    fn defaults_and_overrides() {
        let c = Config::parse("", Path::new("c.toml")).unwrap();
        assert_eq!(c.permissions.approval, ApprovalMode::OnRequest);
        let p = c.sandbox.policy(Path::new("/w"), None);
        assert_eq!((p.mode, p.network), (SandboxMode::WorkspaceWrite, false));
        let c = Config::parse(
            "[permissions]\napproval = \"untrusted\"\n[sandbox]\nmode = \"read-only\"\nnetwork = true\nwritable_roots = [\"cache\", \"/opt/x\"]\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(c.permissions.approval, ApprovalMode::Untrusted);
        let p = c
            .sandbox
            .policy(Path::new("/w"), Some(SandboxMode::FullAccess));
        assert_eq!(p.mode, SandboxMode::FullAccess);
        assert!(p.network);
        assert_eq!(
            p.writable_roots,
            vec![Path::new("/w/cache"), Path::new("/opt/x")]
        );
    }

    #[test]
    fn unknown_modes_and_keys_are_refused_with_the_choices_and_the_line() {
        let err = Config::parse("[sandbox]\nmode = \"danger\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("danger") && err.contains("workspace-write") && err.contains("line 2"),
            "{err}"
        );
        let err = Config::parse("[permissions]\napprove = \"never\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("approve") && err.contains("line 2"), "{err}");
    }
}
