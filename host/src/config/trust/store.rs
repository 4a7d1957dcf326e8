//! The user's recorded answers: `trusted-workspaces.toml` in the user's
//! Latch config dir (`$LATCH_CONFIG_DIR`, else `$XDG_CONFIG_HOME/latch`,
//! else `~/.config/latch`). One entry per workspace: its canonical path and
//! the SHA-256 of the `.latch/config.toml` the user trusted, so a changed
//! config is asked about again. Also the provider endpoints the user has
//! used (a session created with them) or accepted when a resumed session
//! named one: only those, and what the flags and the trusted config name,
//! receive the API key without a question. Written whole to a temporary
//! file and renamed over the old one, so a crash never leaves half a file.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file's name inside the user's config dir.
pub const FILE_NAME: &str = "trusted-workspaces.toml";

/// Why the recorded answers could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TrustStoreError {
    /// No user config dir is known (no `$HOME`, no `$XDG_CONFIG_HOME`).
    #[error(
        "no user config directory is known (set HOME, XDG_CONFIG_HOME or LATCH_CONFIG_DIR), so \
         the answer cannot be recorded; pass --trust-workspace for this run instead"
    )]
    NoConfigDir,
    /// The file could not be read or written.
    #[error("cannot {action} {path}: {message}")]
    Io {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's message.
        message: String,
    },
    /// The file is not what Latch writes.
    #[error("{path} is not a valid trust file ({message}); fix or delete it")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// One trusted workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedWorkspace {
    /// The canonical workspace path.
    pub path: PathBuf,
    /// SHA-256 (hex) of the `.latch/config.toml` the user trusted.
    pub config_sha256: String,
    /// When, in milliseconds since the Unix epoch.
    pub trusted_at_ms: u64,
}

/// A provider endpoint the user has used or accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownEndpoint {
    /// The base URL, without credentials and trailing `/`.
    pub url: String,
    /// When, in milliseconds since the Unix epoch.
    pub known_at_ms: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default, rename = "workspace")]
    workspaces: Vec<TrustedWorkspace>,
    #[serde(default, rename = "endpoint")]
    endpoints: Vec<KnownEndpoint>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The recorded answers.
#[derive(Clone, Debug)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// The store in the user's config dir (see the module docs).
    pub fn user() -> Result<TrustStore, TrustStoreError> {
        super::super::user_config_dir()
            .map(|dir| TrustStore::at(dir.join(FILE_NAME)))
            .ok_or(TrustStoreError::NoConfigDir)
    }

    /// The store in the file `path`.
    pub fn at(path: impl Into<PathBuf>) -> TrustStore {
        TrustStore { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<File, TrustStoreError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(File::default()),
            Err(e) => {
                return Err(TrustStoreError::Io {
                    action: "read",
                    path: self.path.clone(),
                    message: e.to_string(),
                });
            }
        };
        toml::from_str(&text).map_err(|e| TrustStoreError::Invalid {
            path: self.path.clone(),
            message: e.to_string(),
        })
    }

    fn write(&self, file: &File) -> Result<(), TrustStoreError> {
        let io = |e: std::io::Error| TrustStoreError::Io {
            action: "write",
            path: self.path.clone(),
            message: e.to_string(),
        };
        let body = toml::to_string(file).map_err(|e| TrustStoreError::Invalid {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        let text = format!(
            "# Workspaces whose .latch/config.toml you trusted (`latch trust`; \
             `latch trust --revoke` removes one).\n# A config that changes is asked about again.\n\n{body}"
        );
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }

    /// The entry of `workspace` (canonical), if any.
    pub fn get(&self, workspace: &Path) -> Result<Option<TrustedWorkspace>, TrustStoreError> {
        Ok(self
            .read()?
            .workspaces
            .into_iter()
            .find(|w| w.path == workspace))
    }

    /// True when `workspace`'s config with this hash is trusted.
    pub fn trusts(&self, workspace: &Path, config_sha256: &str) -> Result<bool, TrustStoreError> {
        Ok(self
            .get(workspace)?
            .is_some_and(|w| w.config_sha256 == config_sha256))
    }

    /// Record that the user trusts `workspace`'s config with this hash (it
    /// replaces an earlier answer for the workspace).
    pub fn trust(&self, workspace: &Path, config_sha256: &str) -> Result<(), TrustStoreError> {
        let mut file = self.read()?;
        file.workspaces.retain(|w| w.path != workspace);
        file.workspaces.push(TrustedWorkspace {
            path: workspace.to_path_buf(),
            config_sha256: config_sha256.to_string(),
            trusted_at_ms: now_ms(),
        });
        file.workspaces.sort_by(|a, b| a.path.cmp(&b.path));
        self.write(&file)
    }

    /// True when the user has used or accepted the endpoint `url` (compared
    /// as [`KnownEndpoint::url`] is kept).
    pub fn knows_endpoint(&self, url: &str) -> Result<bool, TrustStoreError> {
        let url = endpoint_key(url);
        Ok(self.read()?.endpoints.iter().any(|e| e.url == url))
    }

    /// Record that the user used or accepted the endpoint `url`.
    pub fn know_endpoint(&self, url: &str) -> Result<(), TrustStoreError> {
        let url = endpoint_key(url);
        let mut file = self.read()?;
        if file.endpoints.iter().any(|e| e.url == url) {
            return Ok(());
        }
        file.endpoints.push(KnownEndpoint {
            url,
            known_at_ms: now_ms(),
        });
        self.write(&file)
    }

    /// Forget `workspace`; true when it was recorded.
    pub fn revoke(&self, workspace: &Path) -> Result<bool, TrustStoreError> {
        let mut file = self.read()?;
        let before = file.workspaces.len();
        file.workspaces.retain(|w| w.path != workspace);
        if file.workspaces.len() == before {
            return Ok(false);
        }
        self.write(&file)?;
        Ok(true)
    }
}

/// How an endpoint is compared: trimmed, without a trailing `/` and without
/// credentials (`user:password@`), which are never recorded.
pub fn endpoint_key(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!(
                "{}://{}{}",
                scheme.to_ascii_lowercase(),
                host.to_ascii_lowercase(),
                path
            )
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_known_once_recorded_and_compared_without_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::at(dir.path().join("trusted-workspaces.toml"));
        store.trust(Path::new("/w/a"), "h1").unwrap();
        assert!(!store.knows_endpoint("http://127.0.0.1:8080/v1").unwrap());
        store
            .know_endpoint("http://u:secret@127.0.0.1:8080/v1/")
            .unwrap();
        assert!(store.knows_endpoint("http://127.0.0.1:8080/v1").unwrap());
        assert!(store.knows_endpoint("HTTP://127.0.0.1:8080/v1/").unwrap());
        assert!(!store.knows_endpoint("http://127.0.0.1:8080/v2").unwrap());
        assert!(
            store.trusts(Path::new("/w/a"), "h1").unwrap(),
            "workspaces stay"
        );
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(!text.contains("secret"), "{text}");
    }

    #[test]
    fn answers_are_recorded_per_workspace_and_hash_and_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::at(dir.path().join("sub/trusted-workspaces.toml"));
        let (a, b) = (Path::new("/w/a"), Path::new("/w/b"));
        assert!(!store.trusts(a, "h1").unwrap(), "nothing recorded yet");
        store.trust(a, "h1").unwrap();
        store.trust(b, "h9").unwrap();
        assert!(store.trusts(a, "h1").unwrap());
        assert!(
            !store.trusts(a, "h2").unwrap(),
            "a changed config asks again"
        );
        store.trust(a, "h2").unwrap();
        assert!(store.trusts(a, "h2").unwrap() && !store.trusts(a, "h1").unwrap());
        assert!(store.revoke(a).unwrap());
        assert!(!store.revoke(a).unwrap());
        assert!(!store.trusts(a, "h2").unwrap());
        assert!(store.trusts(b, "h9").unwrap(), "other workspaces stay");
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(text.contains("latch trust --revoke"), "{text}");
        std::fs::write(store.path(), "garbage = [").unwrap();
        let e = store.trusts(b, "h9").unwrap_err().to_string();
        assert!(e.contains("not a valid trust file"), "{e}");
    }
}
