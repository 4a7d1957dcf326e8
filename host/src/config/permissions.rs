//! `[permissions]` and `[sandbox]`: when the user is asked, what commands
//! may touch and which secret-looking variables they keep. Unknown keys and unknown mode names are refused with
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
    /// Variables sandboxed commands keep although their names look secret
    /// (contain `KEY`, `SECRET`, `TOKEN`, `PASSWORD` or `CREDENTIAL`). The
    /// provider keys Latch itself reads reach no command and no MCP server,
    /// in any mode, unless named here.
    #[serde(default, deserialize_with = "passthrough")]
    pub env_passthrough: Vec<String>,
    /// Unix sockets (or directories of them) outside the workspace and the
    /// session temp dir that sandboxed commands may connect to, e.g.
    /// `/run/user/1000/docker.sock` (`~/` is the home directory, relative
    /// paths are resolved against the workspace).
    #[serde(default)]
    pub allow_unix_sockets: Vec<PathBuf>,
}

/// The variables Latch reads provider keys from: passed to no command and
/// no MCP server unless named in `env_passthrough` (every one of them is in
/// [`latch_sandbox::env::PROVIDER_KEYS`], which the sandbox leaves out).
#[cfg(test)]
pub fn provider_key_vars() -> Vec<&'static str> {
    use latch_provider::ProviderKind;
    let mut vars: Vec<&'static str> = [
        ProviderKind::Anthropic,
        ProviderKind::OpenAi,
        ProviderKind::OpenAiCompatible,
    ]
    .into_iter()
    .map(ProviderKind::api_key_env)
    .collect();
    vars.dedup();
    vars
}

fn passthrough<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    for name in &names {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(serde::de::Error::custom(format!(
                "[sandbox] env_passthrough: `{name}` is not a variable name"
            )));
        }
    }
    Ok(names)
}

impl SandboxConfig {
    /// The policy for `workspace`, with `mode` (from `--sandbox`) in place
    /// of the configured one when given.
    pub fn policy(&self, workspace: &Path, mode: Option<SandboxMode>) -> SandboxPolicy {
        SandboxPolicy {
            mode: mode.unwrap_or(self.mode),
            network: self.network,
            writable_roots: resolve(&self.writable_roots, workspace),
            env_passthrough: self.env_passthrough.clone(),
            allow_unix_sockets: resolve(&self.allow_unix_sockets, workspace),
        }
    }
}

/// `~/` against the home directory, relative paths against `workspace`.
fn resolve(paths: &[PathBuf], workspace: &Path) -> Vec<PathBuf> {
    paths
        .iter()
        .map(|p| match p.strip_prefix("~") {
            Ok(rest) => dirs::home_dir().unwrap_or_default().join(rest),
            Err(_) => workspace.join(p),
        })
        .collect()
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
        let c = Config::parse(
            "[sandbox]\nallow_unix_sockets = [\"/run/user/1000/docker.sock\", \"run/app.sock\"]\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(
            c.sandbox.policy(Path::new("/w"), None).allow_unix_sockets,
            vec![
                Path::new("/run/user/1000/docker.sock"),
                Path::new("/w/run/app.sock")
            ]
        );
    }

    #[test]
    fn env_passthrough_reaches_the_policy_and_provider_keys_only_when_named() {
        let c = Config::parse(
            "[sandbox]\nenv_passthrough = [\"NPM_TOKEN\", \"OPENAI_API_KEY\"]\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let p = c.sandbox.policy(Path::new("/w"), None);
        assert_eq!(p.env_passthrough, ["NPM_TOKEN", "OPENAI_API_KEY"]);
        // Every variable a provider key is read from is one the sandbox
        // leaves out of every command.
        for var in super::provider_key_vars() {
            assert!(latch_sandbox::env::PROVIDER_KEYS.contains(&var), "{var}");
        }
        let err = Config::parse(
            "[sandbox]\nenv_passthrough = [\"A=B\"]\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("not a variable name"), "{err}");
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
