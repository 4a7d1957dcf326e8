//! An image from the system clipboard, for Ctrl-V in the terminal UI.
//! Terminals paste text, never image bytes, so Latch asks the desktop's
//! clipboard tool for a PNG: `wl-paste` under Wayland (`WAYLAND_DISPLAY`),
//! `xclip` under X11 (`DISPLAY`), `pngpaste` or `osascript` on macOS. The
//! tools are run, not linked (a clipboard crate would talk to the display
//! server itself): they work wherever the user's desktop does, cost no
//! build time, and a stub on `PATH` stands in for them in tests.
//!
//! The bytes are checked by [`crate::agent::images`] like any other image
//! before anything is recorded.

use std::ffi::OsString;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one clipboard tool may take (a clipboard owner that does not
/// answer would otherwise hang the paste).
const TOOL_TIMEOUT: Duration = Duration::from_secs(5);

/// Why no image came from the clipboard.
#[derive(Debug, thiserror::Error)]
pub enum ClipboardError {
    /// No clipboard can be reached from here.
    #[error(
        "no clipboard to read: neither WAYLAND_DISPLAY nor DISPLAY is set (over SSH, copy the \
         image to the workspace and attach it with /image PATH or @path)"
    )]
    NoDisplay,
    /// Every tool that was tried failed; what each said.
    #[error(
        "no image in the clipboard (tried {}); copy an image, or attach a file with /image \
         PATH or @path",
        .tried.join("; ")
    )]
    NoImage {
        /// Each tool tried and how it failed, e.g. `xclip: not installed`.
        tried: Vec<String>,
    },
}

/// Where the clipboard tools are looked for.
#[derive(Clone, Debug, Default)]
pub struct ClipboardEnv {
    /// `WAYLAND_DISPLAY` is set.
    pub wayland: bool,
    /// `DISPLAY` is set.
    pub x11: bool,
    /// On macOS.
    pub macos: bool,
    /// `PATH` for the tools (`None`: this process's).
    pub path: Option<OsString>,
}

impl ClipboardEnv {
    /// This process's environment.
    pub fn current() -> ClipboardEnv {
        let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
        ClipboardEnv {
            wayland: set("WAYLAND_DISPLAY"),
            x11: set("DISPLAY"),
            macos: cfg!(target_os = "macos"),
            path: None,
        }
    }

    /// The tools to try, in order: a program and its arguments. `osascript`
    /// writes the PNG to `scratch` (AppleScript has no stdout for bytes).
    fn tools(&self, scratch: &std::path::Path) -> Vec<(&'static str, Vec<String>)> {
        let mut tools = Vec::new();
        if self.wayland {
            tools.push((
                "wl-paste",
                vec!["--no-newline".into(), "--type".into(), "image/png".into()],
            ));
        }
        if self.x11 {
            tools.push((
                "xclip",
                ["-selection", "clipboard", "-t", "image/png", "-o"]
                    .map(String::from)
                    .to_vec(),
            ));
        }
        if self.macos {
            tools.push(("pngpaste", vec!["-".into()]));
            tools.push((
                "osascript",
                vec![
                    "-e".into(),
                    "set png to (the clipboard as «class PNGf»)".into(),
                    "-e".into(),
                    format!(
                        "set out to open for access POSIX file \"{}\" with write permission",
                        scratch.display()
                    ),
                    "-e".into(),
                    "write png to out".into(),
                    "-e".into(),
                    "close access out".into(),
                ],
            ));
        }
        tools
    }
}

/// The image on the clipboard, as the first tool that has one gives it.
pub fn read_image(env: &ClipboardEnv) -> Result<Vec<u8>, ClipboardError> {
    // Where `osascript` writes; removed when this returns.
    let scratch = tempfile::Builder::new()
        .prefix("latch-clipboard-")
        .suffix(".png")
        .tempfile()
        .ok();
    let scratch_path = scratch
        .as_ref()
        .map(|f| f.path().to_path_buf())
        .unwrap_or_else(|| std::env::temp_dir().join("latch-clipboard.png"));
    let tools = env.tools(&scratch_path);
    if tools.is_empty() {
        return Err(ClipboardError::NoDisplay);
    }
    let mut tried = Vec::new();
    for (program, args) in tools {
        let got = run(program, &args, env.path.as_ref()).and_then(|bytes| {
            if program != "osascript" {
                return Ok(bytes);
            }
            match std::fs::read(&scratch_path) {
                Ok(b) if !b.is_empty() => Ok(b),
                _ => Err("no image/png in the clipboard".to_string()),
            }
        });
        match got {
            Ok(bytes) => return Ok(bytes),
            Err(why) => tried.push(format!("{program}: {why}")),
        }
    }
    Err(ClipboardError::NoImage { tried })
}

/// Run one tool; its stdout, or why it gave nothing.
fn run(program: &str, args: &[String], path: Option<&OsString>) -> Result<Vec<u8>, String> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "not installed".to_string(),
        _ => format!("could not start: {e}"),
    })?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + TOOL_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("gave no answer in {} s", TOOL_TIMEOUT.as_secs()));
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let bytes = out.join().unwrap_or_default();
    let said = String::from_utf8_lossy(&err.join().unwrap_or_default())
        .trim()
        .chars()
        .take(200)
        .collect::<String>();
    if !status.success() {
        return Err(if said.is_empty() {
            format!("exited with {status}")
        } else {
            said
        });
    }
    if bytes.is_empty() && program != "osascript" {
        return Err("no image/png in the clipboard".into());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn stub(dir: &std::path::Path, name: &str, script: &str) {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn tools_are_tried_in_order_and_every_failure_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let env = ClipboardEnv {
            wayland: true,
            x11: true,
            macos: false,
            path: Some(dir.path().into()),
        };
        // Neither installed.
        let err = read_image(&env).unwrap_err().to_string();
        assert!(
            err.contains("tried wl-paste: not installed; xclip: not installed")
                && err.contains("/image PATH"),
            "{err}"
        );
        // wl-paste has no image, xclip has one.
        stub(
            dir.path(),
            "wl-paste",
            "echo 'No suitable type of content copied' >&2; exit 1",
        );
        stub(dir.path(), "xclip", "printf 'PNGBYTES'");
        assert_eq!(read_image(&env).unwrap(), b"PNGBYTES");
        // Empty output is no image either.
        stub(dir.path(), "xclip", "true");
        let err = read_image(&env).unwrap_err().to_string();
        assert!(
            err.contains("wl-paste: No suitable type of content copied")
                && err.contains("xclip: no image/png in the clipboard"),
            "{err}"
        );
        let none = ClipboardEnv::default();
        assert!(matches!(read_image(&none), Err(ClipboardError::NoDisplay)));
        // macOS: pngpaste missing, osascript writes the PNG to the file
        // its script names.
        stub(
            dir.path(),
            "osascript",
            r#"for a in "$@"; do case "$a" in *'POSIX file "'*) f=${a#*POSIX file \"}; printf MACPNG > "${f%%\" with*}";; esac; done"#,
        );
        let mac = ClipboardEnv {
            macos: true,
            path: Some(dir.path().into()),
            ..ClipboardEnv::default()
        };
        assert_eq!(read_image(&mac).unwrap(), b"MACPNG");
    }
}
