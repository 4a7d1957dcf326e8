//! Images from the user, through the real `latch` binary against the
//! scripted provider over HTTP: `latch run --image FILE` reaches each
//! provider in its own image format, is stored as an immutable `MediaRef`
//! artifact with its dimensions and priced from them in `/context`;
//! `/image PATH` and `@path` in the line interface attach images too; a
//! resume replays the captured bytes, not the file's new contents; a file
//! that is not an image is refused before anything is recorded; Ctrl-V in
//! the terminal UI attaches the clipboard's image (a stub `xclip` on
//! `PATH` stands in for the desktop's clipboard).

use super::{at, latch, project, resume_last, runtime};
use base64::Engine as _;
use latch_engine_sdk::types::{MediaRef, Part};
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn, WireFormat};
use std::path::Path;

/// A PNG header of `w`×`h` pixels with `tag` after it, so each image's
/// bytes (and hash) are distinct.
fn png(w: u32, h: u32, tag: &str) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    b.extend_from_slice(&w.to_be_bytes());
    b.extend_from_slice(&h.to_be_bytes());
    b.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    b.extend_from_slice(tag.as_bytes());
    b
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn store(ws: &Path) -> Store {
    Store::open(latch_kernel::default_store_path(ws)).unwrap()
}

/// The images of every user message of the workspace's latest session.
fn user_images(ws: &Path) -> Vec<Vec<MediaRef>> {
    let key = ws.canonicalize().unwrap().display().to_string();
    let s = store(ws);
    let session = s.latest_root_session(&key).unwrap().unwrap();
    s.all_events(&session.id)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::UserMessage { parts } => Some(
                parts
                    .into_iter()
                    .filter_map(|p| match p {
                        Part::Image(m) => Some(m),
                        _ => None,
                    })
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// `latch run --image shot.png` in each wire format: the request carries
/// the exact bytes in that provider's image shape, and the stored message
/// holds a reference with the header's dimensions.
#[test]
fn run_image_reaches_each_provider_in_its_format() {
    let rt = runtime();
    for format in [
        WireFormat::Anthropic,
        WireFormat::OpenAi,
        WireFormat::Responses,
    ] {
        let server = rt
            .block_on(FakeServer::start(Script::new([ScriptedTurn::text(
                "A red square.",
            )])))
            .unwrap();
        let ws = project();
        let bytes = png(1000, 750, "run");
        std::fs::write(ws.path().join("shot.png"), &bytes).unwrap();
        let mut cmd = latch(ws.path());
        match format {
            WireFormat::Anthropic => {
                cmd.env("ANTHROPIC_API_KEY", "k")
                    .env("ANTHROPIC_BASE_URL", server.anthropic_base_url());
            }
            WireFormat::Responses => {
                cmd.env("OPENAI_API_KEY", "k").args([
                    "--provider",
                    "openai",
                    "--base-url",
                    &server.openai_base_url(),
                    "--model",
                    "gpt-test",
                ]);
            }
            WireFormat::OpenAi => {
                cmd.args(at(&server));
            }
        }
        let out = cmd
            .current_dir(ws.path())
            .args(["run", "--image", "shot.png", "what is in the picture?"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{format:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let body = server.requests()[0].body.to_string();
        let data = b64(&bytes);
        let expected = match format {
            WireFormat::Anthropic => {
                let block = &server.requests()[0].body["messages"];
                let found = block.as_array().unwrap().iter().any(|m| {
                    m["content"].as_array().is_some_and(|c| {
                        c.iter().any(|b| {
                            b["type"] == "image"
                                && b["source"]["type"] == "base64"
                                && b["source"]["media_type"] == "image/png"
                                && b["source"]["data"] == data.as_str()
                        })
                    })
                });
                assert!(found, "{body}");
                data.clone()
            }
            WireFormat::OpenAi => {
                format!(r#""image_url":{{"url":"data:image/png;base64,{data}"}}"#)
            }
            WireFormat::Responses => format!(r#""image_url":"data:image/png;base64,{data}""#),
        };
        assert!(body.contains(&expected), "{format:?}: {body}");
        let images = user_images(ws.path());
        assert_eq!(images.len(), 1);
        let m = &images[0][0];
        assert_eq!(
            (m.mime_type.as_str(), m.width, m.height, m.byte_len),
            ("image/png", Some(1000), Some(750), bytes.len() as u64)
        );
        assert_eq!(m.sha256, latch_kernel::sha256_hex(&bytes));
    }
}

/// `/context` prices the image from its dimensions (1000×750 → 1000
/// tokens), not from its byte length.
#[test]
fn context_prices_the_image_from_its_dimensions() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text(
            "Seen.",
        )])))
        .unwrap();
    let ws = project();
    std::fs::write(ws.path().join("shot.png"), png(1000, 750, "ctx")).unwrap();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "look at @shot.png please"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = latch(ws.path())
        .args(["context", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["image_count"], 1, "{report}");
    assert_eq!(
        report["image_tokens"],
        latch_engine_sdk::estimate::image_tokens(Some(1000), Some(750)),
        "{report}"
    );
    assert_eq!(report["image_tokens"], 1000);
}

/// `@shot.png` in a task, then the file changes on disk; resuming and
/// attaching another image with `/image` sends the first image's captured
/// bytes again (never the new contents) and the second one beside it.
#[test]
fn resume_replays_the_captured_image_and_image_attaches_another() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("A red square."),
            ScriptedTurn::text("A blue circle."),
        ])))
        .unwrap();
    let ws = project();
    let first = png(640, 480, "first");
    std::fs::write(ws.path().join("shot.png"), &first).unwrap();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "what is in @shot.png?"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let changed = png(640, 480, "changed on disk");
    std::fs::write(ws.path().join("shot.png"), &changed).unwrap();
    let second = png(320, 200, "second");
    std::fs::write(ws.path().join("other.png"), &second).unwrap();
    let mut cmd = latch(ws.path());
    cmd.args(at(&server));
    let out = resume_last(cmd, b"/image other.png\nand this one?\n");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("attached image/png 320×200"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{stdout}");
    let body = requests[1].body.to_string();
    assert!(body.contains(&b64(&first)), "the captured bytes replay");
    assert!(
        !body.contains(&b64(&changed)),
        "never the file's new contents"
    );
    assert!(body.contains(&b64(&second)), "/image attached the second");
    let images = user_images(ws.path());
    assert_eq!(images.len(), 2);
    assert_eq!(images[1].len(), 1);
    assert_eq!(
        (images[1][0].width, images[1][0].height),
        (Some(320), Some(200))
    );
}

/// A file that is not an image, and an `@path` image that does not exist,
/// are refused with what was wrong; no user message is recorded.
#[test]
fn bad_images_are_refused_before_anything_is_recorded() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text("x")])))
        .unwrap();
    let ws = project();
    std::fs::write(ws.path().join("notes.txt"), "not a picture").unwrap();
    let out = latch(ws.path())
        .current_dir(ws.path())
        .args(at(&server))
        .args(["run", "--image", "notes.txt", "look"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("is not a PNG, JPEG, GIF or WebP image"),
        "{stderr}"
    );
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "look at @missing.png"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("cannot read image") && stderr.contains("missing.png"),
        "{stderr}"
    );
    assert!(server.requests().is_empty());
    assert!(user_images(ws.path()).is_empty());
}

/// `@shot.png` typed (or pasted) into the terminal UI (tmux) attaches the
/// image: the transcript shows it and the request carries its bytes.
#[test]
fn at_path_in_the_terminal_ui_attaches_the_image() {
    use super::tui::{Tmux, latch_line};
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text(
            "A red square.",
        )])))
        .unwrap();
    let ws = project();
    let bytes = png(800, 600, "tui");
    std::fs::write(ws.path().join("shot.png"), &bytes).unwrap();
    let tmux = Tmux::new();
    tmux.start("img", &latch_line(ws.path(), &server, &[]));
    tmux.wait_for("img", &["ready"]);
    tmux.text("img", "what is in @shot.png");
    tmux.keys("img", &["Enter"]);
    tmux.wait_for("img", &["[image image/png", "A red square."]);
    assert!(server.requests()[0].body.to_string().contains(&b64(&bytes)));
    let images = user_images(ws.path());
    assert_eq!(
        (images[0][0].width, images[0][0].height),
        (Some(800), Some(600))
    );
}

/// Ctrl-V in the terminal UI (tmux) reads the clipboard through `xclip`
/// (a stub on `PATH`, `DISPLAY` set, no Wayland): with no image there, the
/// status line names what was tried; with one, the input box shows its
/// chip and the request carries exactly its bytes.
#[test]
fn ctrl_v_in_the_terminal_ui_attaches_the_clipboards_image() {
    use super::tui::{Tmux, latch_line};
    use std::os::unix::fs::PermissionsExt;
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text(
            "A pasted square.",
        )])))
        .unwrap();
    let ws = project();
    let desk = tempfile::tempdir().unwrap();
    let clip = desk.path().join("clip.png");
    let xclip = desk.path().join("xclip");
    std::fs::write(
        &xclip,
        format!(
            "#!/bin/sh\necho \"$@\" > '{args}'\n[ -f '{clip}' ] || {{ echo 'Error: target image/png not available' >&2; exit 1; }}\ncat '{clip}'\n",
            args = desk.path().join("args").display(),
            clip = clip.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&xclip, std::fs::Permissions::from_mode(0o755)).unwrap();
    let line = format!(
        "env -u WAYLAND_DISPLAY DISPLAY=:7 PATH='{}:{}' {}",
        desk.path().display(),
        std::env::var("PATH").unwrap_or_default(),
        latch_line(ws.path(), &server, &[])
    );
    let tmux = Tmux::new();
    tmux.start("paste", &line);
    tmux.wait_for("paste", &["ready"]);
    tmux.keys("paste", &["C-v"]);
    tmux.wait_for(
        "paste",
        &["no image in the clipboard (tried xclip: Error: target image/png not available)"],
    );
    let bytes = png(800, 600, "clipboard");
    std::fs::write(&clip, &bytes).unwrap();
    tmux.keys("paste", &["C-v"]);
    tmux.wait_for("paste", &["[image 1: 800×600 png]"]);
    assert_eq!(
        std::fs::read_to_string(desk.path().join("args")).unwrap(),
        "-selection clipboard -t image/png -o\n"
    );
    tmux.text("paste", "what is this");
    tmux.keys("paste", &["Enter"]);
    tmux.wait_for("paste", &["A pasted square."]);
    let body = server.requests()[0].body.to_string();
    assert_eq!(body.matches("data:image/").count(), 1, "{body}");
    assert!(
        body.contains(&format!(
            r#""image_url":{{"url":"data:image/png;base64,{}"}}"#,
            b64(&bytes)
        )),
        "{body}"
    );
    let images = user_images(ws.path());
    assert_eq!(images.len(), 1);
    assert_eq!(images[0][0].sha256, latch_kernel::sha256_hex(&bytes));
    // Sent with the message: the chip is gone.
    let screen = tmux.screen("paste").join("\n");
    assert!(!screen.contains("[image 1:"), "{screen}");
}
