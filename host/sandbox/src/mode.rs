//! The names users choose: [`SandboxMode`] (what a command may touch) and
//! [`ApprovalMode`] (when the user is asked), parsed from config and flags
//! with errors that list the choices.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What a command the agent runs may touch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// No writes anywhere (except `/dev/null` and friends).
    ReadOnly,
    /// Writes only under the workspace, a per-session temp dir and the
    /// configured writable roots; the workspace's `.git` hooks and config
    /// and Latch's own `.latch` directory stay read-only.
    #[default]
    WorkspaceWrite,
    /// No sandbox: the command runs with the user's full rights.
    FullAccess,
}

impl SandboxMode {
    /// Every mode, in order of increasing rights.
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::FullAccess,
    ];

    /// The name used in config, flags and events.
    pub fn name(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::FullAccess => "full-access",
        }
    }
}

impl SandboxMode {
    /// True when `self` lets commands touch more than `other` does
    /// (`read-only` < `workspace-write` < `full-access`).
    pub fn is_looser_than(self, other: SandboxMode) -> bool {
        let rank = |m: SandboxMode| SandboxMode::ALL.iter().position(|x| *x == m);
        rank(self) > rank(other)
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SandboxMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SandboxMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownMode {
                what: "sandbox mode",
                given: s.to_string(),
                choices: "read-only, workspace-write, full-access",
            })
    }
}

/// When the user is asked before the agent acts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Never ask: run what the sandbox allows, deny the rest (including
    /// every request to run outside the sandbox).
    Never,
    /// Run inside the sandbox without asking; the model may ask to run a
    /// command outside it, with a reason, and the user decides.
    #[default]
    OnRequest,
    /// Ask before every command off the read-only allowlist and every edit.
    Untrusted,
    /// Edits run; commands off the read-only allowlist ask.
    Edits,
}

impl ApprovalMode {
    /// Every mode.
    pub const ALL: [ApprovalMode; 4] = [
        ApprovalMode::Never,
        ApprovalMode::OnRequest,
        ApprovalMode::Untrusted,
        ApprovalMode::Edits,
    ];

    /// The name used in config, flags and events.
    pub fn name(self) -> &'static str {
        match self {
            ApprovalMode::Never => "never",
            ApprovalMode::OnRequest => "on-request",
            ApprovalMode::Untrusted => "untrusted",
            ApprovalMode::Edits => "edits",
        }
    }
}

impl ApprovalMode {
    /// How much runs without the user being asked: `untrusted` (only the
    /// read-only allowlist) < `edits` (edits too) < `on-request` and
    /// `never` (everything the sandbox allows; neither runs anything
    /// outside it unasked).
    fn unasked_rights(self) -> u8 {
        match self {
            ApprovalMode::Untrusted => 0,
            ApprovalMode::Edits => 1,
            ApprovalMode::OnRequest | ApprovalMode::Never => 2,
        }
    }

    /// True when more runs unasked under `self` than under `other`.
    pub fn is_looser_than(self, other: ApprovalMode) -> bool {
        self.unasked_rights() > other.unasked_rights()
    }
}

impl fmt::Display for ApprovalMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ApprovalMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ApprovalMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownMode {
                what: "approval mode",
                given: s.to_string(),
                choices: "never, on-request, untrusted, edits",
            })
    }
}

/// A mode name that is not one of the choices.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{given}` is not a {what}; choose one of {choices}")]
pub struct UnknownMode {
    /// `sandbox mode` or `approval mode`.
    pub what: &'static str,
    /// What was given.
    pub given: String,
    /// The valid names.
    pub choices: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looser_means_more_runs_unasked() {
        use ApprovalMode::*;
        assert!(Never.is_looser_than(Untrusted));
        assert!(OnRequest.is_looser_than(Edits));
        assert!(Edits.is_looser_than(Untrusted));
        assert!(!Untrusted.is_looser_than(Never));
        assert!(!Never.is_looser_than(OnRequest) && !OnRequest.is_looser_than(Never));
        use SandboxMode::*;
        assert!(FullAccess.is_looser_than(WorkspaceWrite));
        assert!(WorkspaceWrite.is_looser_than(ReadOnly));
        assert!(!ReadOnly.is_looser_than(ReadOnly));
        assert!(!ReadOnly.is_looser_than(FullAccess));
    }

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for m in SandboxMode::ALL {
            assert_eq!(m.name().parse::<SandboxMode>().unwrap(), m);
        }
        for m in ApprovalMode::ALL {
            assert_eq!(m.name().parse::<ApprovalMode>().unwrap(), m);
        }
        let e = "danger".parse::<SandboxMode>().unwrap_err().to_string();
        assert!(
            e.contains("`danger`") && e.contains("workspace-write"),
            "{e}"
        );
        let e = "always".parse::<ApprovalMode>().unwrap_err().to_string();
        assert!(
            e.contains("untrusted") && e.contains("approval mode"),
            "{e}"
        );
        assert_eq!(SandboxMode::default(), SandboxMode::WorkspaceWrite);
    }
}
