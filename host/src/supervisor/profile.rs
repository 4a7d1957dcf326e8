//! Recording what a session runs with: the [`Settings`] a process opens a
//! session (root or child) with become a durable
//! [`SessionProfile`] event when the session has none yet, and a new one
//! that lists the changes whenever a later run differs from the recorded
//! profile (a resume with `--model`, a parent resumed with a looser
//! approval mode running its child, ...). Each change says whether it
//! loosened the session's approval or sandbox, per the orderings the
//! sandbox crate defines.

use latch_kernel::profile::without_credentials;
use latch_kernel::{
    EventKind, JoinedGroup, ProfileChange, SessionMode, SessionProfile, Store, StoreError,
};
use latch_sandbox::{ApprovalMode, SandboxMode};

/// What a session runs with in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The provider's name (`anthropic`, `openai`, `openai-compatible`).
    pub provider: String,
    /// The provider's base URL, when one is set.
    pub base_url: Option<String>,
    /// The model name.
    pub model: String,
    /// The approval mode.
    pub approval: ApprovalMode,
    /// The sandbox mode.
    pub sandbox: SandboxMode,
    /// The agent group the session joined from this host, if any.
    pub group: Option<JoinedGroup>,
    /// Plan mode or not.
    pub mode: SessionMode,
}

impl Settings {
    /// These settings as a profile without changes (the base URL without
    /// credentials, the group store without its password).
    pub fn profile(&self) -> SessionProfile {
        SessionProfile {
            provider: self.provider.clone(),
            base_url: self.base_url.as_deref().map(without_credentials),
            model: self.model.clone(),
            approval: self.approval.name().to_string(),
            sandbox: self.sandbox.name().to_string(),
            changes: Vec::new(),
            group: self.group.clone().map(|g| JoinedGroup {
                store: latch_group_pg::without_password(&g.store),
                ..g
            }),
            mode: self.mode,
        }
    }
}

/// The profile to record when a session that last recorded `previous`
/// runs with `now`: `None` when nothing changed. A session without a
/// recorded profile gets its first (no changes listed). `by(setting)`
/// names what set each setting, e.g. `--model gpt-5`.
pub fn profile_to_record(
    previous: Option<&SessionProfile>,
    now: &Settings,
    by: impl Fn(&str) -> String,
) -> Option<SessionProfile> {
    let mut next = now.profile();
    let Some(prev) = previous else {
        return Some(next);
    };
    let looser_approval = |from: &str| {
        from.parse::<ApprovalMode>()
            .is_ok_and(|old| now.approval.is_looser_than(old))
    };
    let looser_sandbox = |from: &str| {
        from.parse::<SandboxMode>()
            .is_ok_and(|old| now.sandbox.is_looser_than(old))
    };
    let pairs = [
        ("provider", &prev.provider, next.provider.clone(), false),
        (
            "base_url",
            &prev.base_url.clone().unwrap_or_default(),
            next.base_url.clone().unwrap_or_default(),
            false,
        ),
        ("model", &prev.model, next.model.clone(), false),
        (
            "approval",
            &prev.approval,
            next.approval.clone(),
            looser_approval(&prev.approval),
        ),
        (
            "sandbox",
            &prev.sandbox,
            next.sandbox.clone(),
            looser_sandbox(&prev.sandbox),
        ),
        ("group_store", &group_store(prev), group_store(&next), false),
        (
            "mode",
            &prev.mode.name().to_string(),
            next.mode.name().to_string(),
            prev.mode.is_plan() && !now.mode.is_plan(),
        ),
    ];
    for (setting, from, to, looser) in pairs {
        if *from != to {
            next.changes.push(ProfileChange {
                setting: setting.to_string(),
                from: from.clone(),
                to,
                by: by(setting),
                looser,
            });
        }
    }
    (!next.changes.is_empty()).then_some(next)
}

/// The store of the group a profile joined, empty for none.
fn group_store(p: &SessionProfile) -> String {
    p.group
        .as_ref()
        .map(|g| g.store.clone())
        .unwrap_or_default()
}

/// Record `now` as `session`'s profile when it is the first or differs
/// from the last one; the profile recorded, if any.
pub fn record(
    store: &Store,
    session: &str,
    now: &Settings,
    by: impl Fn(&str) -> String,
) -> Result<Option<SessionProfile>, StoreError> {
    let previous = store.session_profile(session)?;
    let Some(profile) = profile_to_record(previous.as_ref(), now, by) else {
        return Ok(None);
    };
    store.append(session, EventKind::SessionProfile(profile.clone()))?;
    Ok(Some(profile))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(approval: ApprovalMode, sandbox: SandboxMode) -> Settings {
        Settings {
            provider: "openai-compatible".into(),
            base_url: Some("http://u:p@127.0.0.1:9/v1".into()),
            model: "local".into(),
            approval,
            sandbox,
            group: None,
            mode: SessionMode::Act,
        }
    }

    #[test]
    fn a_joined_group_keeps_no_password_and_a_new_store_is_a_change() {
        let joined = |store: &str| Settings {
            group: Some(JoinedGroup {
                group: "01lead".into(),
                role: "fixer".into(),
                store: store.into(),
            }),
            ..settings(ApprovalMode::Untrusted, SandboxMode::ReadOnly)
        };
        let first = profile_to_record(
            None,
            &joined("postgres://me:s3cret@db/g"),
            |_| unreachable!(),
        )
        .unwrap();
        assert_eq!(first.group.as_ref().unwrap().store, "postgres://me@db/g");
        let moved = profile_to_record(Some(&first), &joined("postgres://me:x@db2/g"), |_| {
            "--store".into()
        })
        .unwrap();
        assert_eq!(moved.changes.len(), 1);
        assert_eq!(
            moved.changes[0].line(),
            "group store postgres://me@db/g → postgres://me@db2/g (by --store)"
        );
    }

    #[test]
    fn the_first_profile_has_no_changes_and_no_credentials() {
        let first = profile_to_record(
            None,
            &settings(ApprovalMode::Untrusted, SandboxMode::ReadOnly),
            |_| unreachable!(),
        )
        .unwrap();
        assert!(first.changes.is_empty());
        assert_eq!(first.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(
            (first.approval.as_str(), first.sandbox.as_str()),
            ("untrusted", "read-only")
        );
    }

    #[test]
    fn unchanged_settings_record_nothing_and_changes_say_which_loosen() {
        let old = settings(ApprovalMode::Untrusted, SandboxMode::WorkspaceWrite).profile();
        assert_eq!(
            profile_to_record(
                Some(&old),
                &settings(ApprovalMode::Untrusted, SandboxMode::WorkspaceWrite),
                |_| unreachable!()
            ),
            None
        );
        let next = profile_to_record(
            Some(&old),
            &Settings {
                model: "bigger".into(),
                ..settings(ApprovalMode::Never, SandboxMode::ReadOnly)
            },
            |s| format!("--{s}"),
        )
        .unwrap();
        let got: Vec<(&str, &str, &str, bool)> = next
            .changes
            .iter()
            .map(|c| (c.setting.as_str(), c.from.as_str(), c.to.as_str(), c.looser))
            .collect();
        assert_eq!(
            got,
            [
                ("model", "local", "bigger", false),
                ("approval", "untrusted", "never", true),
                ("sandbox", "workspace-write", "read-only", false),
            ]
        );
        assert_eq!(next.changes[1].by, "--approval");
    }
}
