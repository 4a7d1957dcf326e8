//! The session profile: what a session runs with — the provider, its base
//! URL, the model, and the approval and sandbox modes — recorded as a
//! durable [`crate::EventKind::SessionProfile`] event when the session is
//! created and again whenever a later run (a resume) changes any of it.
//!
//! Resume reads the latest profile back ([`crate::Store::session_profile`])
//! so a session continues as it ran. Each change names the setting, the
//! old and new value, what changed it (a flag, the configuration) and
//! whether it loosened the session's safety, so every surface shows it in
//! the transcript. The API key is never part of a profile, and a base URL
//! is stored without any user name or password it carried. A session that
//! joined an agent group from this host records the group, its role and
//! the group store's URL (without its password) so a resume rejoins it.

use serde::{Deserialize, Serialize};

/// The provider, model and safety modes a session runs with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionProfile {
    /// The provider (`anthropic`, `openai`, `openai-compatible`).
    pub provider: String,
    /// The provider's base URL, when one was set (a flag, the
    /// configuration or the environment); `None`: the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The model name.
    pub model: String,
    /// The approval mode (`never`, `on-request`, `untrusted`, `edits`).
    pub approval: String,
    /// The sandbox mode (`read-only`, `workspace-write`, `full-access`).
    pub sandbox: String,
    /// What differs from the profile recorded before; empty for the first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ProfileChange>,
    /// The agent group this session joined as a member from this host
    /// (`latch group join`), which a resume joins again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<JoinedGroup>,
    /// The session's mode beside its approval mode: `plan` while nothing
    /// may change the workspace (absent: the session acts).
    #[serde(default, skip_serializing_if = "SessionMode::is_act")]
    pub mode: SessionMode,
}

/// What a session may do to the workspace, beside when it asks
/// ([`SessionProfile::approval`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionMode {
    /// The session acts as its approval and sandbox modes allow.
    #[default]
    Act,
    /// Plan mode: nothing may change the workspace (file writes, edits and
    /// rewind are refused, every command runs in the read-only sandbox)
    /// until the user approves a plan the model proposed.
    Plan,
}

impl SessionMode {
    /// The name used in profiles, flags and surfaces (`act`, `plan`).
    pub fn name(self) -> &'static str {
        match self {
            SessionMode::Act => "act",
            SessionMode::Plan => "plan",
        }
    }

    /// True for [`SessionMode::Act`] (the default, left out of a profile).
    pub fn is_act(&self) -> bool {
        *self == SessionMode::Act
    }

    /// True for [`SessionMode::Plan`].
    pub fn is_plan(self) -> bool {
        self == SessionMode::Plan
    }
}

impl std::fmt::Display for SessionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The agent group a session joined from this host: a resume rebuilds it
/// as that member (same member id) on the same shared store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinedGroup {
    /// The group's id (its lead's session).
    pub group: String,
    /// The member's role.
    pub role: String,
    /// The shared group store's URL without its password (the password
    /// comes from the configuration, `--store` or the environment).
    pub store: String,
}

/// One setting that changed from the previously recorded profile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileChange {
    /// Which setting: `provider`, `base_url`, `model`, `approval`,
    /// `sandbox` or `mode`.
    pub setting: String,
    /// The value recorded before (empty when there was none).
    pub from: String,
    /// The value now.
    pub to: String,
    /// What changed it, e.g. `--approval never` or `[permissions] approval
    /// in the configuration`.
    pub by: String,
    /// True when the change gives the agent more rights than the session
    /// had (a looser approval or sandbox mode).
    #[serde(default)]
    pub looser: bool,
}

impl ProfileChange {
    /// One line for a transcript: `approval untrusted → never (looser; by
    /// --approval never)`.
    pub fn line(&self) -> String {
        let from = if self.from.is_empty() {
            "(none)"
        } else {
            &self.from
        };
        let to = if self.to.is_empty() {
            "(none)"
        } else {
            &self.to
        };
        format!(
            "{} {from} → {to} ({}by {})",
            self.setting.replace('_', " "),
            if self.looser { "LOOSER; " } else { "" },
            self.by
        )
    }
}

impl SessionProfile {
    /// The transcript text of a profile that changed something; `None`
    /// for a profile without changes (nothing to show).
    pub fn change_text(&self) -> Option<String> {
        if self.changes.is_empty() {
            return None;
        }
        let lines: Vec<String> = self.changes.iter().map(ProfileChange::line).collect();
        Some(format!(
            "this run changes the session's settings: {}",
            lines.join("; ")
        ))
    }

    /// True when any change loosens the session's safety.
    pub fn loosens(&self) -> bool {
        self.changes.iter().any(|c| c.looser)
    }
}

/// `url` without the user name and password it may carry
/// (`https://user:secret@host/v1` → `https://host/v1`), so a credential
/// never reaches the store.
pub fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://{host}{tail}"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_reach_the_store() {
        assert_eq!(
            without_credentials("https://me:s3cret@example.com:8443/v1?x=1"),
            "https://example.com:8443/v1?x=1"
        );
        assert_eq!(
            without_credentials("http://127.0.0.1:9/v1"),
            "http://127.0.0.1:9/v1"
        );
        assert_eq!(without_credentials("not a url"), "not a url");
        // An `@` in the path is not a credential.
        assert_eq!(
            without_credentials("http://host/v1/@models"),
            "http://host/v1/@models"
        );
    }

    #[test]
    fn a_change_reads_as_one_line() {
        let p = SessionProfile {
            provider: "openai-compatible".into(),
            base_url: None,
            model: "m".into(),
            approval: "never".into(),
            sandbox: "read-only".into(),
            changes: vec![ProfileChange {
                setting: "approval".into(),
                from: "untrusted".into(),
                to: "never".into(),
                by: "--approval never".into(),
                looser: true,
            }],
            group: None,
            mode: SessionMode::Act,
        };
        assert!(p.loosens());
        assert_eq!(
            p.change_text().unwrap(),
            "this run changes the session's settings: approval untrusted → never (LOOSER; by --approval never)"
        );
        let same = SessionProfile {
            changes: vec![],
            ..p
        };
        assert_eq!(same.change_text(), None);
    }
}
