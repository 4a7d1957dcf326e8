//! The keys of a workspace's `.latch/config.toml` that take effect only
//! once the user trusts that config: what lowers safety, what changes where
//! the provider key goes, and what starts a program. The list is data
//! ([`RULES`]); a new capability that starts a program registers with one
//! line, e.g. `Rule::program("hooks.*")`.
//!
//! A rule compares the workspace's value with the value that would apply
//! without it (the user's config, else the default), so a workspace may
//! always make Latch stricter: `mode = "read-only"` or `approval =
//! "untrusted"` never need trust.

use latch_sandbox::{ApprovalMode, SandboxMode};
use toml::Value;

/// What a key that needs trust would do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// It loosens the sandbox or the approvals.
    LowersSafety,
    /// It changes where the provider's API key (and every request) is sent.
    MovesProviderKey,
    /// It starts a program (an MCP server, a hook, an engine component).
    StartsProgram,
    /// It sends the agent group's tasks and messages to another machine
    /// (`[group] store`, a shared PostgreSQL).
    SharesGroup,
}

impl Effect {
    /// The words shown beside the key, e.g. `lowers safety`.
    pub fn label(self) -> &'static str {
        match self {
            Effect::LowersSafety => "lowers safety",
            Effect::MovesProviderKey => "changes where the provider key goes",
            Effect::StartsProgram => "starts a program",
            Effect::SharesGroup => "sends the agent group's tasks and messages to another machine",
        }
    }
}

/// One key that needs trust.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// The dotted key, e.g. `sandbox.mode`; a trailing `.*` stands for
    /// every entry of that table (each MCP server, each hook).
    pub key: &'static str,
    /// What it does.
    pub effect: Effect,
    /// True when the workspace's `value` needs trust, given the value that
    /// applies without it (`None`: the default).
    pub needs_trust: fn(value: &Value, without: Option<&Value>) -> bool,
}

impl Rule {
    /// A rule for `key` that needs trust when `needs_trust` says so.
    pub const fn new(
        key: &'static str,
        effect: Effect,
        needs_trust: fn(&Value, Option<&Value>) -> bool,
    ) -> Rule {
        Rule {
            key,
            effect,
            needs_trust,
        }
    }

    /// Every entry of the table `key` (ending in `.*`) starts a program.
    pub const fn program(key: &'static str) -> Rule {
        Rule::new(key, Effect::StartsProgram, starts_program)
    }
}

/// The keys of a workspace config that need trust.
pub const RULES: &[Rule] = &[
    Rule::new("sandbox.mode", Effect::LowersSafety, looser_sandbox),
    Rule::new("sandbox.network", Effect::LowersSafety, turns_on),
    Rule::new("sandbox.writable_roots", Effect::LowersSafety, adds_entries),
    Rule::new(
        "sandbox.env_passthrough",
        Effect::LowersSafety,
        adds_entries,
    ),
    Rule::new(
        "sandbox.allow_unix_sockets",
        Effect::LowersSafety,
        adds_entries,
    ),
    Rule::new(
        "permissions.approval",
        Effect::LowersSafety,
        looser_approval,
    ),
    Rule::new("provider.base_url", Effect::MovesProviderKey, differs),
    Rule::new("provider.api_key", Effect::MovesProviderKey, differs),
    Rule::new("engine.component", Effect::StartsProgram, not_builtin),
    Rule::new(
        "engine.child_policy.component",
        Effect::StartsProgram,
        not_builtin,
    ),
    Rule::program("mcp.servers.*"),
    Rule::program("hooks.*"),
    Rule::new("group.store", Effect::SharesGroup, differs),
];

/// `full-access` over `workspace-write` over `read-only`.
fn looser_sandbox(value: &Value, without: Option<&Value>) -> bool {
    let rank = |v: Option<&Value>| -> u8 {
        match v
            .and_then(Value::as_str)
            .map(str::parse::<SandboxMode>)
            .unwrap_or(Ok(SandboxMode::default()))
        {
            Ok(SandboxMode::ReadOnly) => 0,
            Ok(SandboxMode::WorkspaceWrite) => 1,
            Ok(SandboxMode::FullAccess) => 2,
            // Not a mode: the loader refuses it before trust is asked.
            Err(_) => 2,
        }
    };
    rank(Some(value)) > rank(without)
}

/// `never` asks least, then `on-request`, `edits`, `untrusted`.
fn looser_approval(value: &Value, without: Option<&Value>) -> bool {
    let rank = |v: Option<&Value>| -> u8 {
        match v
            .and_then(Value::as_str)
            .map(str::parse::<ApprovalMode>)
            .unwrap_or(Ok(ApprovalMode::default()))
        {
            Ok(ApprovalMode::Untrusted) => 0,
            Ok(ApprovalMode::Edits) => 1,
            Ok(ApprovalMode::OnRequest) => 2,
            Ok(ApprovalMode::Never) => 3,
            Err(_) => 3,
        }
    };
    rank(Some(value)) > rank(without)
}

fn turns_on(value: &Value, without: Option<&Value>) -> bool {
    value.as_bool() == Some(true) && without.and_then(Value::as_bool) != Some(true)
}

/// A list with an entry the user's config does not have.
fn adds_entries(value: &Value, without: Option<&Value>) -> bool {
    let had = without.and_then(Value::as_array);
    value
        .as_array()
        .is_some_and(|entries| entries.iter().any(|e| !had.is_some_and(|h| h.contains(e))))
}

fn differs(value: &Value, without: Option<&Value>) -> bool {
    Some(value) != without
}

/// A component path (the `builtin:` engines ship inside Latch).
fn not_builtin(value: &Value, without: Option<&Value>) -> bool {
    value.as_str().is_some_and(|v| !v.starts_with("builtin:")) && Some(value) != without
}

/// Any entry but one that only turns the entry off (`enabled = false`),
/// an empty command list (a hook point with no commands), or a number (a
/// hook timeout).
fn starts_program(value: &Value, _without: Option<&Value>) -> bool {
    match value {
        Value::Table(t) => {
            !(t.len() == 1 && t.get("enabled").and_then(Value::as_bool) == Some(false))
        }
        Value::Array(commands) => !commands.is_empty(),
        Value::Integer(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Value {
        let table: toml::Table = toml::from_str(&format!("x = {text}")).unwrap();
        table["x"].clone()
    }

    #[test]
    fn a_workspace_may_always_be_stricter() {
        assert!(looser_sandbox(&v("\"full-access\""), None));
        assert!(!looser_sandbox(&v("\"workspace-write\""), None));
        assert!(!looser_sandbox(&v("\"read-only\""), None));
        assert!(looser_sandbox(
            &v("\"workspace-write\""),
            Some(&v("\"read-only\""))
        ));
        assert!(looser_approval(&v("\"never\""), None));
        assert!(!looser_approval(&v("\"untrusted\""), None));
        assert!(!looser_approval(&v("\"on-request\""), None));
        assert!(looser_approval(
            &v("\"on-request\""),
            Some(&v("\"untrusted\""))
        ));
        assert!(turns_on(&v("true"), None) && !turns_on(&v("false"), None));
        assert!(!turns_on(&v("true"), Some(&v("true"))));
        assert!(adds_entries(&v("[\"~/.ssh\"]"), None));
        assert!(!adds_entries(&v("[]"), None));
        assert!(!adds_entries(&v("[\"a\"]"), Some(&v("[\"a\", \"b\"]"))));
        assert!(differs(&v("\"http://evil\""), None));
        assert!(!differs(&v("\"http://a\""), Some(&v("\"http://a\""))));
        assert!(not_builtin(&v("\"e.wasm\""), None));
        assert!(!not_builtin(&v("\"builtin:continuity\""), None));
        assert!(starts_program(&v("{ command = \"npx\" }"), None));
        assert!(starts_program(&v("{ url = \"http://x/mcp\" }"), None));
        assert!(!starts_program(&v("{ enabled = false }"), None));
        assert!(starts_program(&v("[\"./check.sh\"]"), None));
        assert!(!starts_program(&v("[]"), None));
        assert!(!starts_program(&v("5000"), None));
    }

    #[test]
    fn a_shared_group_store_needs_trust() {
        let rule = RULES.iter().find(|r| r.key == "group.store").unwrap();
        assert_eq!(rule.effect, Effect::SharesGroup);
        let store = v("\"postgres://latch@db.example/groups\"");
        assert!((rule.needs_trust)(&store, None));
        assert!(!(rule.needs_trust)(&store, Some(&store)));
    }
}
