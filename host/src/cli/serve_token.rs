//! The token of `latch serve`: the server's secret, kept per workspace in
//! the user's config directory (`<config dir>/serve-tokens/<workspace
//! hash>`, mode 0600, hidden from every confined command). It never rides
//! in a URL: the printed link carries a one-tab code, and each tab's
//! credential is derived from this secret (see `latch_web::server::tabs`),
//! so a tab open on the page reconnects by itself after the server
//! restarts. `latch serve --new-token` replaces it (every open tab is then
//! refused and must open the newly printed link).

use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why the kept token could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token file could not be written.
    #[error(
        "cannot keep the server's token in {path}: {source}; check that directory's \
         permissions, or set LATCH_CONFIG_DIR to a writable directory"
    )]
    Write {
        /// The token file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// Where the token of `workspace` (its store key) is kept under `dir`.
pub fn token_path(dir: &Path, workspace: &str) -> PathBuf {
    let hash = hex::encode(Sha256::digest(workspace.as_bytes()));
    dir.join("serve-tokens").join(&hash[..24])
}

/// A fresh random token.
pub fn fresh() -> String {
    format!("{:032x}", rand::random::<u128>())
}

fn valid(token: &str) -> bool {
    token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The token of `workspace`: the kept one, or (none kept, unreadable, or
/// `rotate`) a fresh one, kept for the next start. Without a config
/// directory the token lives only as long as the server.
pub fn load_or_create(
    dir: Option<&Path>,
    workspace: &str,
    rotate: bool,
) -> Result<String, TokenError> {
    let Some(dir) = dir else {
        return Ok(fresh());
    };
    let path = token_path(dir, workspace);
    if !rotate
        && let Ok(kept) = std::fs::read_to_string(&path)
        && valid(kept.trim())
    {
        return Ok(kept.trim().to_string());
    }
    let token = fresh();
    write(&path, &token).map_err(|source| TokenError::Write { path, source })?;
    Ok(token)
}

fn write(path: &Path, token: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(token.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_token_is_reused_until_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(Some(dir.path()), "/ws/a", false).unwrap();
        assert!(valid(&first));
        assert_eq!(
            load_or_create(Some(dir.path()), "/ws/a", false).unwrap(),
            first
        );
        let other = load_or_create(Some(dir.path()), "/ws/b", false).unwrap();
        assert_ne!(other, first, "each workspace has its own token");
        let rotated = load_or_create(Some(dir.path()), "/ws/a", true).unwrap();
        assert_ne!(rotated, first);
        assert_eq!(
            load_or_create(Some(dir.path()), "/ws/a", false).unwrap(),
            rotated
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_token_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        load_or_create(Some(dir.path()), "/ws", false).unwrap();
        let mode = std::fs::metadata(token_path(dir.path(), "/ws"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_damaged_token_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = token_path(dir.path(), "/ws");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "not a token").unwrap();
        let t = load_or_create(Some(dir.path()), "/ws", false).unwrap();
        assert!(valid(&t));
    }
}
