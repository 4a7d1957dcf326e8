//! Latch's own repository directory and what it tells git instead of the
//! workspace's config.
//!
//! Every git Latch runs uses `GIT_DIR` (and `GIT_COMMON_DIR`) = a directory
//! of Latch's, private to the user and outside every workspace: an empty
//! repository whose `config` defines no program (no hook path, no
//! fsmonitor, no filter, diff or merge driver, no include) and whose
//! `info/attributes` is empty. The workspace's `.git/config`, its
//! includes, hooks and `commondir` are therefore never read by git.
//!
//! What Latch still takes from the repository it reads as plain data,
//! never through git: the ignore rules of `info/exclude` (and the user's
//! global ignore file), the attributes of `info/attributes` (and the
//! user's global attributes file), composed into files of Latch's own that
//! git gets as `core.excludesFile` and `core.attributesFile`; and a short
//! list of settings that change how a file's bytes map to a blob
//! ([`REPOSITORY_SETTINGS`]), each checked against the values git
//! accepts, none able to name a program.

use super::GitError;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Settings read from the repository's config (and `config.worktree`),
/// with the values each may take; any other value is ignored.
pub const REPOSITORY_SETTINGS: &[(&str, &[&str])] = &[
    ("core.autocrlf", &["true", "false", "input"]),
    ("core.eol", &["lf", "crlf", "native"]),
    ("core.filemode", &["true", "false"]),
    ("core.symlinks", &["true", "false"]),
    ("core.ignorecase", &["true", "false"]),
    ("core.precomposeunicode", &["true", "false"]),
    ("extensions.objectformat", &["sha1", "sha256"]),
];

/// Latch's private base directory for its git: `$XDG_RUNTIME_DIR/latch-git`
/// when that is set and usable, else `<temp dir>/latch-git-<uid>`; created with mode 0700
/// and refused unless it is a real directory of this user that nobody else
/// may write.
pub(crate) fn base_dir() -> Result<PathBuf, GitError> {
    // SAFETY: geteuid cannot fail and touches no memory.
    let uid = unsafe { libc::geteuid() };
    let fallback = std::env::temp_dir().join(format!("latch-git-{uid}"));
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && runtime.is_absolute()
        && runtime.is_dir()
    {
        // A runtime dir Latch cannot use: the temp dir will do.
        let base = runtime.join("latch-git");
        if private_dir(&base, uid).is_ok() {
            return Ok(base);
        }
    }
    private_dir(&fallback, uid)?;
    Ok(fallback)
}

/// Create `dir` (mode 0700) when missing; refuse it unless it is a
/// directory (not a link) owned by `uid` that no one else may write.
fn private_dir(dir: &Path, uid: u32) -> Result<(), GitError> {
    let unsafe_dir = |why: &str| GitError::OwnDir {
        path: dir.to_path_buf(),
        why: why.to_string(),
    };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(unsafe_dir(&e.to_string())),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| unsafe_dir(&e.to_string()))?;
    if !meta.is_dir() {
        return Err(unsafe_dir("it is not a directory"));
    }
    if meta.uid() != uid {
        return Err(unsafe_dir("another user owns it"));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(unsafe_dir("others may write it"));
    }
    Ok(())
}

/// `path` holds exactly `content` (written through a temp file and a
/// rename when it does not, so a reader never sees half of it).
fn ensure_file(path: &Path, content: &[u8]) -> Result<(), GitError> {
    if std::fs::read(path).is_ok_and(|c| c == content) {
        return Ok(());
    }
    let io = |e: std::io::Error| GitError::OwnDir {
        path: path.to_path_buf(),
        why: e.to_string(),
    };
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, content).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Latch's own repository directory for `object_format` (`sha1` or
/// `sha256`) under `base`, created or repaired.
pub(crate) fn git_dir(base: &Path, object_format: &str) -> Result<PathBuf, GitError> {
    let dir = base.join(format!("git-{object_format}"));
    let io = |p: &Path, e: std::io::Error| GitError::OwnDir {
        path: p.to_path_buf(),
        why: e.to_string(),
    };
    for sub in ["refs", "objects", "info"] {
        let p = dir.join(sub);
        std::fs::create_dir_all(&p).map_err(|e| io(&p, e))?;
    }
    ensure_file(&dir.join("HEAD"), b"ref: refs/heads/latch\n")?;
    let extensions = if object_format == "sha1" {
        String::new()
    } else {
        format!("[extensions]\n\tobjectformat = {object_format}\n")
    };
    let version = if object_format == "sha1" { 0 } else { 1 };
    let config = format!(
        "# Latch's own git: no program is ever configured here.\n\
         [core]\n\
         \trepositoryformatversion = {version}\n\
         \tbare = false\n\
         \tfsmonitor = false\n\
         \thooksPath = /dev/null\n\
         \tuntrackedCache = false\n\
         \tsplitIndex = false\n\
         {extensions}"
    );
    ensure_file(&dir.join("config"), config.as_bytes())?;
    ensure_file(&dir.join("info/attributes"), b"")?;
    ensure_file(&dir.join("info/exclude"), b"")?;
    Ok(dir)
}

/// The user's global git file `name` (`ignore`, `attributes`) where git
/// looks for it when the user's config names none:
/// `$XDG_CONFIG_HOME/git/NAME`, else `~/.config/git/NAME`.
fn user_git_file(name: &str, key: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    // The user's own config may name another file (`core.excludesFile`).
    let configs = [
        xdg.as_ref().map(|x| x.join("git/config")),
        home.as_ref().map(|h| h.join(".gitconfig")),
    ];
    let mut named = None;
    for text in configs
        .iter()
        .flatten()
        .filter_map(|p| std::fs::read(p).ok())
    {
        if let Some(v) = config_value(&text, key) {
            named = Some(v);
        }
    }
    match named {
        Some(v) if v.starts_with("~/") => home.map(|h| h.join(&v[2..])),
        Some(v) if v.starts_with('/') => Some(PathBuf::from(v)),
        Some(_) => None,
        None => xdg.map(|x| x.join("git").join(name)),
    }
}

/// The ignore rules and attributes git gets for `common_dir`'s repository
/// (see the module docs): `(excludes file, attributes file)`, under
/// `base`, rewritten when their sources changed.
pub(crate) fn composed_files(
    base: &Path,
    common_dir: &Path,
) -> Result<(PathBuf, PathBuf), GitError> {
    let key = &crate::event::sha256_hex(common_dir.as_os_str().as_encoded_bytes())[..16];
    let dir = base.join("repos").join(key);
    std::fs::create_dir_all(&dir).map_err(|e| GitError::OwnDir {
        path: dir.clone(),
        why: e.to_string(),
    })?;
    let compose = |user: Option<PathBuf>, repo: PathBuf| {
        let mut out = Vec::new();
        for source in user.into_iter().chain([repo]) {
            if let Ok(bytes) = std::fs::read(&source) {
                out.extend_from_slice(&bytes);
                if !bytes.ends_with(b"\n") {
                    out.push(b'\n');
                }
            }
        }
        out
    };
    let excludes = dir.join("exclude");
    ensure_file(
        &excludes,
        &compose(
            user_git_file("ignore", "core.excludesfile"),
            common_dir.join("info/exclude"),
        ),
    )?;
    let attributes = dir.join("attributes");
    ensure_file(
        &attributes,
        &compose(
            user_git_file("attributes", "core.attributesfile"),
            common_dir.join("info/attributes"),
        ),
    )?;
    Ok((excludes, attributes))
}

/// The [`REPOSITORY_SETTINGS`] the repository sets, as `key=value`, read
/// from `common_dir/config` then `git_dir/config.worktree` (later wins).
pub(crate) fn repository_settings(git_dir: &Path, common_dir: &Path) -> Vec<String> {
    let texts: Vec<Vec<u8>> = [common_dir.join("config"), git_dir.join("config.worktree")]
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .collect();
    let mut out = Vec::new();
    for (key, allowed) in REPOSITORY_SETTINGS {
        let mut value = None;
        for text in &texts {
            if let Some(v) = config_value(text, key) {
                value = Some(v);
            }
        }
        let Some(v) = value.map(|v| normalized_bool(&v.to_ascii_lowercase())) else {
            continue;
        };
        if allowed.contains(&v.as_str()) {
            out.push(format!("{key}={v}"));
        }
    }
    out
}

/// A git boolean in its canonical spelling (other values unchanged).
fn normalized_bool(v: &str) -> String {
    match v {
        "yes" | "on" | "1" | "" => "true".into(),
        "no" | "off" | "0" => "false".into(),
        other => other.into(),
    }
}

/// The last value of `key` (`section.name`, lower case) in a git config
/// text, read as plain data: sections with a subsection and `include`
/// directives are skipped, a key without `=` is `true`, quotes are removed
/// and a comment ends the line.
pub(crate) fn config_value(text: &[u8], key: &str) -> Option<String> {
    let (want_section, want_name) = key.split_once('.')?;
    let text = String::from_utf8_lossy(text);
    let mut section = String::new();
    let mut found = None;
    for line in text.lines() {
        let mut line = line.trim();
        if let Some(rest) = line.strip_prefix('[') {
            let Some(end) = rest.find(']') else { continue };
            let header = rest[..end].trim();
            section = if header.contains(['"', ' ', '\t', '.']) {
                String::new()
            } else {
                header.to_ascii_lowercase()
            };
            line = rest[end + 1..].trim();
            if line.is_empty() {
                continue;
            }
        }
        if section != want_section || line.starts_with(['#', ';']) {
            continue;
        }
        let (name, value) = match line.split_once('=') {
            Some((n, v)) => (n.trim(), v.trim()),
            None => (line, "true"),
        };
        if !name.eq_ignore_ascii_case(want_name) {
            continue;
        }
        let mut out = String::new();
        let mut quoted = false;
        for c in value.chars() {
            match c {
                '"' => quoted = !quoted,
                '#' | ';' if !quoted => break,
                c => out.push(c),
            }
        }
        found = Some(out.trim().to_string());
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_values_are_read_as_plain_data() {
        let text = b"[core]\n\tautocrlf = input ; a comment\n\tfsmonitor = \"touch x\"\n\
                     [core \"sub\"]\n\tautocrlf = true\n[include]\n\tpath = evil\n\
                     [Core] eol = crlf\n[extensions]\n\tobjectFormat = sha256\n\tbare\n";
        assert_eq!(
            config_value(text, "core.autocrlf").as_deref(),
            Some("input")
        );
        assert_eq!(config_value(text, "core.eol").as_deref(), Some("crlf"));
        assert_eq!(
            config_value(text, "core.fsmonitor").as_deref(),
            Some("touch x")
        );
        assert_eq!(
            config_value(text, "extensions.objectformat").as_deref(),
            Some("sha256")
        );
        assert_eq!(
            config_value(text, "extensions.bare").as_deref(),
            Some("true")
        );
        assert_eq!(config_value(text, "include.path").as_deref(), Some("evil"));
        assert_eq!(config_value(text, "core.pager"), None);
    }

    #[test]
    fn only_listed_settings_with_listed_values_are_taken() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config"),
            "[core]\n\tautocrlf = yes\n\tfsmonitor = touch /tmp/x\n\teol = $(touch x)\n\
             \tsymlinks = off\n[extensions]\n\tobjectformat = sha256\n",
        )
        .unwrap();
        assert_eq!(
            repository_settings(dir.path(), dir.path()),
            [
                "core.autocrlf=true",
                "core.symlinks=false",
                "extensions.objectformat=sha256"
            ]
        );
    }

    #[test]
    fn a_private_dir_that_others_may_write_or_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let uid = unsafe { libc::geteuid() };
        let own = dir.path().join("own");
        private_dir(&own, uid).unwrap();
        assert_eq!(
            std::fs::metadata(&own).unwrap().permissions().mode() & 0o777,
            0o700
        );
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(private_dir(&own, uid).is_err());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(private_dir(&link, uid).is_err());
    }
}
