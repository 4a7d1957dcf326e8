//! Images, rewind and cost on the page, in one headless Chromium session
//! over two `latch serve` workspaces:
//!
//! * a file that is not an image, attached with the Image control, is
//!   refused with the server's reason on the page and nothing is recorded;
//!   a PNG attached instead shows as a chip, reaches the scripted provider
//!   as its exact base64, is stored with the user's message and shows as a
//!   thumbnail in the transcript; the sidebar's cost of a model without a
//!   price is unknown;
//! * after the scripted model edits two files, Rewind on the user's
//!   message previews the file it restores and the one changed outside
//!   Latch, and confirming puts the first file's bytes back on disk,
//!   leaves the other alone and shows the `rewound` note; the sidebar's
//!   cost is the configured prices applied to the reported usage.
//!
//! Pasting an image into the message and dropping one on the composer
//! attach it as the Image control does. Screenshots: `target/web-image.png`,
//! `target/web-rewind.png`.

use super::browser::{browser, driver, until};
use super::{Served, project, runtime, serve};
use base64::Engine as _;
use fantoccini::{Client, Locator};
use latch_engine_sdk::types::Part;
use latch_kernel::EventKind;
use latch_provider::fake::{FakeServer, Script, ScriptedTurn, ScriptedUsage, WireUsage};

/// A real 3×2 red PNG (the browser decodes it for the thumbnail).
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAMAAAACCAYAAACddGYaAAAAEUlEQVR4nGP4z8DwH4YZkDkAm34L9XKwuTwAAAAASUVORK5CYII=";

const TRANSCRIPT: &str = "document.getElementById('transcript').innerText";
const COST: &str = "(document.getElementById('cost') || {innerText: ''}).innerText";

/// 1,000 input tokens of which 200 read from the cache, 100 output.
fn reported() -> ScriptedUsage {
    ScriptedUsage::Reported(WireUsage {
        input_tokens: Some(1_000),
        output_tokens: Some(100),
        cache_read_tokens: Some(200),
        ..WireUsage::default()
    })
}

/// The user messages of `id` in the served workspace's store.
fn user_messages(served: &Served, id: &str) -> Vec<Vec<Part>> {
    served
        .store()
        .all_events(id)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::UserMessage { parts } => Some(parts),
            _ => None,
        })
        .collect()
}

async fn open(c: &Client, served: &Served, id: &str) {
    c.goto(&format!("{}&session={id}", served.url))
        .await
        .unwrap();
    until(
        c,
        "the live stream",
        "document.getElementById('status').innerText.startsWith('live')",
    )
    .await;
}

/// Click the element `css` names, finding it again when the page
/// re-rendered it between the find and the click (a stale reference).
async fn click(c: &Client, css: &str) {
    for _ in 0..50 {
        let clicked = match c.find(Locator::Css(css)).await {
            Ok(element) => element.click().await,
            Err(e) => Err(e),
        };
        match clicked {
            Ok(()) => return,
            Err(fantoccini::error::CmdError::Standard(e))
                if e.error == fantoccini::error::ErrorStatus::StaleElementReference =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("clicking {css}: {e}"),
        }
    }
    panic!("{css} was re-rendered under every click for five seconds");
}

#[test]
fn the_page_uploads_an_image_rewinds_files_and_shows_the_cost() {
    let rt = runtime();
    let files = tempfile::tempdir().unwrap();
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG_B64)
        .unwrap();
    let shot = files.path().join("shot.png");
    let notes = files.path().join("notes.txt");
    std::fs::write(&shot, &png).unwrap();
    std::fs::write(&notes, "not a picture\n").unwrap();

    // Workspace A: images, and the cost of a model without a price.
    let ws_a = project();
    let provider_a = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text(
            "A red square.",
        )])))
        .unwrap();
    let served_a = serve(ws_a.path(), &provider_a, &[]);

    // Workspace B: two files the model edits, priced usage.
    let ws_b = project();
    std::fs::write(ws_b.path().join("src/util.sh"), "util() { :; }\n").unwrap();
    std::fs::create_dir_all(ws_b.path().join(".latch")).unwrap();
    std::fs::write(
        ws_b.path().join(".latch/config.toml"),
        "[prices.local]\ninput = 2.0\noutput = 10.0\ncache_read = 0.5\ncache_write = 4.0\n",
    )
    .unwrap();
    let provider_b = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("Reading both.")
                .with_tool_call("read_file", r#"{"path":"src/math.sh"}"#)
                .with_tool_call("read_file", r#"{"path":"src/util.sh"}"#)
                .with_usage(reported()),
            ScriptedTurn::text("Fixing both.")
                .with_tool_call(
                    "edit_file",
                    r#"{"path":"src/math.sh","old_string":"$1 - $2","new_string":"$1 + $2"}"#,
                )
                .with_tool_call(
                    "edit_file",
                    r#"{"path":"src/util.sh","old_string":":","new_string":"echo util"}"#,
                )
                .with_usage(reported()),
            ScriptedTurn::text("Fixed both files.").with_usage(reported()),
        ])))
        .unwrap();
    let served_b = serve(ws_b.path(), &provider_b, &["--trust-workspace"]);

    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let c = browser(drv.1, profile.path()).await;

        // A file that is not an image: refused with the reason, nothing
        // recorded, the text and the attachment kept.
        let id = served_a.new_session().await;
        open(&c, &served_a, &id).await;
        let attach = c.find(Locator::Css("#attach")).await.unwrap();
        attach.send_keys(&notes.display().to_string()).await.unwrap();
        until(&c, "the file's chip", "document.querySelector('#attachments .chip') && document.getElementById('attachments').innerText.includes('notes.txt')").await;
        c.find(Locator::Css("#input")).await.unwrap().send_keys("what is in it?").await.unwrap();
        click(&c, "#send").await;
        until(&c, "the refusal", "document.getElementById('notice').innerText.includes('notes.txt is not a PNG, JPEG, GIF or WebP image')").await;
        until(&c, "the text kept", "document.getElementById('input').value === 'what is in it?'").await;
        assert!(user_messages(&served_a, &id).is_empty(), "nothing recorded for a bad file");
        assert!(provider_a.requests().is_empty(), "nothing sent for a bad file");

        // The PNG instead: a chip with its thumbnail, then the message.
        click(&c, "#attachments .chip .remove").await;
        until(&c, "no chip", "document.getElementById('attachments').children.length === 0").await;
        let attach = c.find(Locator::Css("#attach")).await.unwrap();
        attach.send_keys(&shot.display().to_string()).await.unwrap();
        until(&c, "the image's chip", "document.querySelector('#attachments .chip img.thumb') && document.querySelector('#attachments .chip img.thumb').naturalWidth === 3").await;
        click(&c, "#send").await;
        until(&c, "the answer", &format!("{TRANSCRIPT}.includes('A red square.')")).await;
        until(&c, "the chips cleared", "document.getElementById('attachments').children.length === 0").await;
        until(&c, "the thumbnail in the transcript", "[...document.querySelectorAll('#transcript .user img.thumb')].some(i => i.naturalWidth === 3 && i.naturalHeight === 2)").await;
        until(&c, "the thumbnail in place of the placeholder", "document.querySelector('#transcript .user').innerText.trim() === 'what is in it?'").await;
        let requests = provider_a.requests();
        assert_eq!(requests.len(), 1);
        assert!(
            requests[0].body.to_string().contains(PNG_B64),
            "the provider gets the image's exact base64: {}",
            requests[0].body
        );
        let users = user_messages(&served_a, &id);
        assert_eq!(users.len(), 1);
        let image = users[0].iter().find_map(|p| match p {
            Part::Image(m) => Some(m.clone()),
            _ => None,
        });
        let image = image.expect("the user's message holds the image");
        assert_eq!((image.width, image.height), (Some(3), Some(2)));
        assert!(users[0].contains(&Part::Text("what is in it?".into())));
        // Pasted into the message, or dropped on the composer: attached too.
        let file = format!("new File([Uint8Array.from(atob('{PNG_B64}'), ch => ch.charCodeAt(0))], 'pasted.png', {{type: 'image/png'}})");
        c.execute(&format!("const d = new DataTransfer(); d.items.add({file}); document.getElementById('input').dispatchEvent(new ClipboardEvent('paste', {{clipboardData: d, bubbles: true, cancelable: true}}));"), vec![]).await.unwrap();
        until(&c, "the pasted image's chip", "document.querySelectorAll('#attachments .chip img.thumb').length === 1 && document.getElementById('attachments').innerText.includes('pasted.png')").await;
        c.execute(&format!("const d = new DataTransfer(); d.items.add({file}); document.getElementById('composer').dispatchEvent(new DragEvent('drop', {{dataTransfer: d, bubbles: true, cancelable: true}}));"), vec![]).await.unwrap();
        until(&c, "the dropped image's chip", "document.querySelectorAll('#attachments .chip img.thumb').length === 2").await;
        let png = c.screenshot().await.unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/web-image.png");
        std::fs::write(&path, &png).unwrap();
        for _ in 0..2 {
            c.execute("document.querySelector('#attachments .chip .remove').click();", vec![]).await.unwrap();
        }
        until(&c, "no chip", "document.getElementById('attachments').children.length === 0").await;
        until(&c, "the unknown cost", &format!("{COST}.startsWith('cost unknown (no price for local')")).await;

        // The image route needs the token, like every API route.
        let r = reqwest::Client::new()
            .get(format!("{}/api/sessions/{id}/images/{}", served_a.base, image.sha256))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401);

        // Workspace B: the model edits two files; one is changed outside.
        let id = served_b.new_session().await;
        open(&c, &served_b, &id).await;
        let math = ws_b.path().join("src/math.sh");
        let util = ws_b.path().join("src/util.sh");
        let math_before = std::fs::read(&math).unwrap();
        c.find(Locator::Css("#input")).await.unwrap().send_keys("fix both\n").await.unwrap();
        until(&c, "the answer", &format!("{TRANSCRIPT}.includes('Fixed both files.')")).await;
        assert_ne!(std::fs::read(&math).unwrap(), math_before, "the model edited math.sh");
        assert_eq!(std::fs::read_to_string(&util).unwrap(), "util() { echo util; }\n");
        // Three requests of 800 plain input ($2/M), 200 cache reads
        // ($0.5/M) and 100 output ($10/M): 3 × $0.0027.
        until(&c, "the priced cost", &format!("{COST} === 'cost $0.0081'")).await;
        std::fs::write(&util, "changed outside\n").unwrap();

        // A rewind from another origin is refused before it runs.
        let r = reqwest::Client::new()
            .post(format!("{}/api/sessions/{id}/rewind/1", served_b.base))
            .bearer_auth(&served_b.token)
            .header("origin", "http://127.0.0.1:1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403);

        // Rewind to before the message: the preview, then the rewind.
        click(&c, "#transcript .user-row .rewind").await;
        until(&c, "the preview", "document.getElementById('panel-rewind') && document.getElementById('panel-rewind').innerText.includes('restore src/math.sh')").await;
        until(&c, "the conflict shown", "document.getElementById('panel-rewind').innerText.includes('left alone src/util.sh: changed outside Latch')").await;
        assert_ne!(std::fs::read(&math).unwrap(), math_before, "the preview changes nothing");
        let png = c.screenshot().await.unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/web-rewind.png");
        std::fs::write(&path, &png).unwrap();
        click(&c, "#rewind-confirm").await;
        until(&c, "the rewound note", &format!("{TRANSCRIPT}.includes('the user rewound the files to their state before message')")).await;
        until(&c, "the rewind's result", "document.getElementById('panel-rewind').innerText.includes('Rewound 1 file')").await;
        assert_eq!(std::fs::read(&math).unwrap(), math_before, "math.sh restored byte for byte");
        assert_eq!(
            std::fs::read_to_string(&util).unwrap(),
            "changed outside\n",
            "the outside change is left alone"
        );
        let rewound = served_b
            .store()
            .all_events(&id)
            .unwrap()
            .into_iter()
            .filter(|e| matches!(e.kind, EventKind::Rewound { .. }))
            .count();
        assert_eq!(rewound, 1, "one durable rewind");
        c.close().await.unwrap();
    });
}
