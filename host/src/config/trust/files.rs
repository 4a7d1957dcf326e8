//! The workspace files a trusted key runs: an MCP server's script, a hook's
//! script, an engine component — every file of the workspace that a key
//! which starts a program names by path (in its command, its arguments,
//! its environment or its component). Their SHA-256 goes into the trust
//! grant with the config's own, so a script rewritten after the user said
//! yes (by a command, by the model's file tools, by a `git pull`) makes the
//! workspace ask again; and a trusted MCP server is checked against them
//! again right before it starts or restarts ([`NamedFile::unchanged`]).
//!
//! Names are found as a shell would split a command line: each word (split
//! at blanks, quotes, `=` and the shell's operators) that is the path of a
//! file — relative to the workspace, or absolute inside it — counts. A
//! directory named (a server's data, `.`) is not hashed: its files change
//! as the work goes on. What a program reads by other means (a module
//! imported by name, a `Makefile` found by `make`) is not covered: the
//! question says so, and such a program is better confined (`sandbox =
//! "workspace-write"` on the server).

use super::Effect;
use super::GatedKey;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// At most this many files are hashed for one config.
const MAX_FILES: usize = 256;

/// A workspace file a trusted key names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedFile {
    /// The key that names it, e.g. `["mcp", "servers", "fs"]`.
    pub key: Vec<String>,
    /// The file (as named, resolved against the workspace).
    pub path: PathBuf,
    /// The path shown to the user (relative to the workspace).
    pub shown: String,
    /// SHA-256 (hex) of its bytes when the config was assessed.
    pub sha256: String,
}

impl NamedFile {
    /// Ok when the file still has the bytes it had when trusted, else why
    /// not, in words that say what to do.
    pub fn unchanged(&self) -> Result<(), String> {
        match hash_file(&self.path) {
            Some(now) if now == self.sha256 => Ok(()),
            Some(_) => Err(format!(
                "{} changed since this workspace's config was trusted; review it, then run \
                 `latch trust` (or pass --trust-workspace) to run it",
                self.shown
            )),
            None => Err(format!(
                "{} can no longer be read; it was trusted as part of this workspace's config",
                self.shown
            )),
        }
    }
}

/// The files `workspace`'s config layer `table` names under the keys in
/// `keys` that start a program, each with its hash, in the order found.
pub fn named_files(workspace: &Path, table: &Table, keys: &[GatedKey]) -> Vec<NamedFile> {
    let root = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let mut out: Vec<NamedFile> = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for key in keys.iter().filter(|k| k.effect == Effect::StartsProgram) {
        let Some(value) = lookup(table, &key.path) else {
            continue;
        };
        let mut words = Vec::new();
        strings(value, &mut words);
        for word in words.iter().flat_map(|s| split_words(s)) {
            if out.len() >= MAX_FILES {
                return out;
            }
            let Some(path) = resolve(&root, &word) else {
                continue;
            };
            let Ok(real) = std::fs::canonicalize(&path) else {
                continue;
            };
            if seen.contains(&real) {
                continue;
            }
            let Some(sha256) = hash_file(&path) else {
                continue;
            };
            seen.push(real);
            out.push(NamedFile {
                key: key.path.clone(),
                shown: path
                    .strip_prefix(&root)
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| path.display().to_string()),
                path,
                sha256,
            });
        }
    }
    out
}

/// The grant's digest: the config's own SHA-256 when it names no file (as
/// before files were hashed, so earlier answers stand), else the SHA-256 of
/// the config's bytes and of each named file (its path and hash).
pub fn grant_digest(text: &str, files: &[NamedFile]) -> String {
    let mut h = Sha256::new();
    h.update(text.as_bytes());
    if files.is_empty() {
        return hex::encode(h.finalize());
    }
    h.update(b"\n\0latch trust: the files it runs\0\n");
    let mut sorted: Vec<&NamedFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.shown.cmp(&b.shown));
    for f in sorted {
        h.update(f.shown.as_bytes());
        h.update(b"\0");
        h.update(f.sha256.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

fn lookup<'a>(table: &'a Table, path: &[String]) -> Option<&'a Value> {
    let (last, parents) = path.split_last()?;
    let mut t = table;
    for p in parents {
        t = t.get(p)?.as_table()?;
    }
    t.get(last)
}

/// Every string in `value`, at any depth.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Table(t) => t.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// The words of a command line as a shell would see the paths in it.
fn split_words(s: &str) -> Vec<String> {
    s.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                ';' | '&' | '|' | '(' | ')' | '<' | '>' | '`' | '\'' | '"' | '='
            )
    })
    .filter(|w| !w.is_empty())
    .map(str::to_string)
    .collect()
}

/// The file `word` names: relative to the workspace, or absolute inside it;
/// a regular file only.
fn resolve(root: &Path, word: &str) -> Option<PathBuf> {
    // `./x` and `x` name the same file: `.` components are dropped.
    let named: PathBuf = Path::new(word)
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    if named.as_os_str().is_empty() {
        return None;
    }
    let path = if named.is_absolute() {
        let real = std::fs::canonicalize(&named).ok()?;
        if !real.starts_with(root) {
            return None;
        }
        named
    } else {
        root.join(named)
    };
    std::fs::metadata(&path)
        .ok()
        .filter(|m| m.is_file())
        .map(|_| path)
}

fn hash_file(path: &Path) -> Option<String> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut h = Sha256::new();
    std::io::copy(&mut file, &mut h).ok()?;
    Some(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::super::gated_keys;
    use super::*;

    #[test]
    fn the_files_a_server_a_hook_and_an_engine_run_are_found_and_hashed() {
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        std::fs::create_dir_all(w.join("tools")).unwrap();
        std::fs::create_dir_all(w.join("engines")).unwrap();
        std::fs::write(w.join("tools/mcp.js"), "server").unwrap();
        std::fs::write(w.join("tools/guard.sh"), "guard").unwrap();
        std::fs::write(w.join("engines/e.wasm"), "wasm").unwrap();
        std::fs::write(w.join("data.json"), "{}").unwrap();
        let text = r#"
[mcp.servers.local]
command = "node"
args = ["tools/mcp.js", "--root", "."]
[mcp.servers.npm]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
[hooks]
pre_tool = ["sh ./tools/guard.sh \"$LATCH_TOOL\" && echo ok", "CONFIG=data.json true"]
[engine]
component = "engines/e.wasm"
"#;
        let table: Table = toml::from_str(text).unwrap();
        let keys = gated_keys(&table, &Table::new());
        let files = named_files(w, &table, &keys);
        let shown: Vec<&str> = files.iter().map(|f| f.shown.as_str()).collect();
        assert_eq!(
            shown,
            [
                "engines/e.wasm",
                "tools/mcp.js",
                "tools/guard.sh",
                "data.json"
            ]
        );
        assert_eq!(files[1].key, ["mcp", "servers", "local"]);
        assert!(files.iter().all(|f| f.unchanged().is_ok()));
        let before = grant_digest(text, &files);
        assert_ne!(before, super::super::sha256(text));
        // The server's script rewritten: a new digest, and the file says so.
        std::fs::write(w.join("tools/mcp.js"), "server, with a payload").unwrap();
        let err = files[1].unchanged().unwrap_err();
        assert!(
            err.contains("tools/mcp.js changed") && err.contains("latch trust"),
            "{err}"
        );
        let again = named_files(w, &table, &keys);
        assert_ne!(grant_digest(text, &again), before);
        // A config that names no file keeps the digest it always had.
        let plain = "[hooks]\nturn_end = [\"notify-send done\"]\n";
        let t: Table = toml::from_str(plain).unwrap();
        let k = gated_keys(&t, &Table::new());
        assert!(named_files(w, &t, &k).is_empty());
        assert_eq!(grant_digest(plain, &[]), super::super::sha256(plain));
    }

    #[test]
    fn paths_outside_the_workspace_and_directories_are_not_hashed() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("x.sh"), "x").unwrap();
        let text = format!(
            "[hooks]\nturn_end = [\"{} . /usr/bin/env\"]\n",
            outside.path().join("x.sh").display()
        );
        let table: Table = toml::from_str(&text).unwrap();
        let keys = gated_keys(&table, &Table::new());
        assert!(named_files(ws.path(), &table, &keys).is_empty());
    }
}
