//! A local npm registry for tests: it serves the packages `.ci/run`
//! installed into `.ci/cache/npm/node_modules` (every version found in the
//! tree) the way registry.npmjs.org does — a packument per name, a tarball
//! per version with its SHA-512 integrity — so `npx -y PACKAGE` downloads,
//! unpacks into its cache and runs exactly as on a user's machine, without
//! the internet. Tarballs are made with the system's `tar` on first request.

use sha2::{Digest, Sha512};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A running registry; it stops with the test process.
pub struct Registry {
    /// `http://127.0.0.1:PORT/`.
    pub url: String,
}

type Packages = BTreeMap<String, BTreeMap<String, (PathBuf, serde_json::Value)>>;

/// Every package directory under `node_modules` (nested ones included).
fn scan(node_modules: &Path, out: &mut Packages) {
    let Ok(entries) = std::fs::read_dir(node_modules) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue;
        }
        if name.starts_with('@') {
            scan(&path, out);
            continue;
        }
        let Ok(text) = std::fs::read_to_string(path.join("package.json")) else {
            continue;
        };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if let (Some(n), Some(v)) = (json["name"].as_str(), json["version"].as_str()) {
            out.entry(n.to_string())
                .or_default()
                .insert(v.to_string(), (path.clone(), json.clone()));
        }
        scan(&path.join("node_modules"), out);
    }
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A package directory as an npm tarball (`package/...`, no nested
/// `node_modules`).
fn tarball(dir: &Path) -> Vec<u8> {
    let out = std::process::Command::new("tar")
        .args([
            "-czf",
            "-",
            "--exclude=./node_modules",
            "--transform",
            "s,^\\.,package,",
            "-C",
        ])
        .arg(dir)
        .arg(".")
        .output()
        .expect("the system's tar runs");
    assert!(
        out.status.success(),
        "tar failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `1.2.3` before `1.10.0`; a pre-release before its release.
fn version_key(v: &str) -> (Vec<u64>, bool) {
    let (core, pre) = v.split_once('-').map_or((v, false), |(c, _)| (c, true));
    (
        core.split('.').map(|p| p.parse().unwrap_or(0)).collect(),
        !pre,
    )
}

struct State {
    packages: Packages,
    tarballs: HashMap<(String, String), Vec<u8>>,
    base: String,
}

impl State {
    fn tarball(&mut self, name: &str, version: &str) -> Option<Vec<u8>> {
        let key = (name.to_string(), version.to_string());
        if !self.tarballs.contains_key(&key) {
            let (dir, _) = self.packages.get(name)?.get(version)?;
            let data = tarball(dir);
            self.tarballs.insert(key.clone(), data);
        }
        self.tarballs.get(&key).cloned()
    }

    fn packument(&mut self, name: &str) -> Option<Vec<u8>> {
        let versions: Vec<(String, serde_json::Value)> = self
            .packages
            .get(name)?
            .iter()
            .map(|(v, (_, j))| (v.clone(), j.clone()))
            .collect();
        let mut out = serde_json::Map::new();
        for (version, mut manifest) in versions {
            let data = self.tarball(name, &version)?;
            manifest["dist"] = serde_json::json!({
                "tarball": format!("{}-/{}/{}.tgz", self.base, name, version),
                "integrity": format!("sha512-{}", base64(&Sha512::digest(&data))),
            });
            out.insert(version, manifest);
        }
        let latest = out.keys().max_by_key(|v| version_key(v))?.clone();
        Some(
            serde_json::json!({
                "name": name,
                "dist-tags": { "latest": latest },
                "versions": out,
            })
            .to_string()
            .into_bytes(),
        )
    }
}

fn decode(path: &str) -> String {
    path.replace("%2f", "/")
        .replace("%2F", "/")
        .replace("%40", "@")
}

fn serve(mut stream: TcpStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        // Skip the headers.
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                break;
            }
        }
        let path = decode(path.trim_start_matches('/'));
        let body = {
            let mut state = state.lock().unwrap();
            match path.strip_prefix("-/") {
                Some(rest) => rest
                    .strip_suffix(".tgz")
                    .and_then(|r| r.rsplit_once('/'))
                    .and_then(|(n, v)| state.tarball(n, v)),
                None => state.packument(&path),
            }
        };
        let head = match &body {
            Some(b) => format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                b.len()
            ),
            None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_string(),
        };
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        if let Some(b) = body
            && stream.write_all(&b).is_err()
        {
            return;
        }
    }
}

impl Registry {
    /// Serve `node_modules` on a free local port.
    pub fn start(node_modules: &Path) -> Registry {
        let mut packages = Packages::new();
        scan(node_modules, &mut packages);
        assert!(
            !packages.is_empty(),
            "no packages under {}",
            node_modules.display()
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://127.0.0.1:{}/",
            listener.local_addr().unwrap().port()
        );
        let state = Arc::new(Mutex::new(State {
            packages,
            tarballs: HashMap::new(),
            base: url.clone(),
        }));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = state.clone();
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        Registry { url }
    }
}

#[test]
fn base64_matches_the_standard_alphabet() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"foobar"), "Zm9vYmFy");
}
