//! The environment a sandboxed command inherits: Latch's own, minus every
//! variable whose name looks like a secret ([`SECRET_MARKERS`], compared
//! case-insensitively: `ANTHROPIC_API_KEY`, `GITHUB_TOKEN`, `PGPASSWORD`,
//! …) unless the policy passes it through (`[sandbox] env_passthrough`).
//! Like Codex's default shell environment policy: a command the model runs
//! never reads the user's keys from its environment by accident.
//!
//! [`latch_config_dir`] is where Latch keeps its own secrets (the API key
//! in the user's config, the serve tokens); the sandbox hides it.
//!
//! The provider keys ([`PROVIDER_KEYS`]) are left out in every mode,
//! `full-access` and granted escalations included, and so from every MCP
//! server too, unless the user names them in `env_passthrough`.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// The variable that moves Latch's config directory.
pub const CONFIG_DIR_ENV: &str = "LATCH_CONFIG_DIR";

/// Latch's config directory (the user's config, the trust answers, the
/// serve tokens): `$LATCH_CONFIG_DIR`, else `$XDG_CONFIG_HOME/latch` (when
/// absolute), else `~/.config/latch`. The host reads its config there and
/// the sandbox hides it from every confined command, wherever it is.
pub fn latch_config_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(CONFIG_DIR_ENV) {
        return Some(PathBuf::from(dir));
    }
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    xdg.or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|d| d.join("latch"))
}

/// Parts of a variable name that mark it as a secret.
pub const SECRET_MARKERS: &[&str] = &["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL"];

/// The variables Latch reads provider keys from: never inherited by a
/// command or an MCP server, whatever the mode, unless passed through.
pub const PROVIDER_KEYS: &[&str] = &["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];

/// The provider keys among `names` that are not in `passthrough`.
pub fn hidden_provider_keys(
    names: impl IntoIterator<Item = OsString>,
    passthrough: &[String],
) -> Vec<OsString> {
    names
        .into_iter()
        .filter(|n| {
            PROVIDER_KEYS.iter().any(|k| OsStr::new(k) == n.as_os_str())
                && !passthrough.iter().any(|p| OsStr::new(p) == n.as_os_str())
        })
        .collect()
}

/// True when `name` contains one of [`SECRET_MARKERS`], in any case.
pub fn looks_secret(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_ascii_uppercase();
    SECRET_MARKERS.iter().any(|m| upper.contains(m))
}

/// The names among `names` a sandboxed command must not inherit: those
/// that look secret and are not in `passthrough` (exact names).
pub fn hidden(names: impl IntoIterator<Item = OsString>, passthrough: &[String]) -> Vec<OsString> {
    names
        .into_iter()
        .filter(|n| looks_secret(n) && !passthrough.iter().any(|p| OsStr::new(p) == n.as_os_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names_are_hidden_unless_passed_through() {
        let names = [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "github_token",
            "PGPASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "PATH",
            "HOME",
            "CARGO_HOME",
            "FOO_API_KEY",
        ]
        .map(OsString::from);
        let passthrough = vec!["FOO_API_KEY".to_string()];
        let hidden = hidden(names, &passthrough);
        assert_eq!(
            hidden,
            [
                "ANTHROPIC_API_KEY",
                "OPENAI_API_KEY",
                "github_token",
                "PGPASSWORD",
                "AWS_SECRET_ACCESS_KEY",
                "GOOGLE_APPLICATION_CREDENTIALS",
            ]
            .map(OsString::from)
        );
    }
}
