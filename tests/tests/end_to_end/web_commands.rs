//! Custom slash commands and hooks on the page, in headless Chromium: the
//! workspace's `/review` is offered as the user types `/rev`, listed by
//! `/help`, and sent as `/review src/math.sh`, which the server expands
//! (`$ARGUMENTS`) into the message the model receives; a `turn_end` hook's
//! run shows in the transcript.

use super::browser::{browser, driver, until};
use super::{Served, project, runtime, serve};
use fantoccini::Locator;
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};

#[test]
fn the_page_completes_runs_and_lists_a_custom_command_and_shows_a_hook() {
    let rt = runtime();
    let ws = project();
    std::fs::create_dir_all(ws.path().join(".latch/commands")).unwrap();
    std::fs::write(
        ws.path().join(".latch/commands/review.md"),
        "---\ndescription: Review one file for bugs\nargument-hint: <file>\n---\n\
         Review $ARGUMENTS and list its bugs.\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join(".latch/config.toml"),
        "[hooks]\nturn_end = [\"echo reviewed by the hook\"]\n",
    )
    .unwrap();
    let provider = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text(
            "Reviewed: add subtracts.",
        )])))
        .unwrap();
    let served: Served = serve(ws.path(), &provider, &["--trust-workspace"]);
    let drv = driver();
    let profile = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let id = served.new_session().await;
        let c = browser(drv.1, profile.path()).await;
        c.goto(&format!("{}&session={id}", served.url)).await.unwrap();
        until(&c, "the live stream", "document.getElementById('status').innerText.startsWith('live')").await;
        let input = c.find(Locator::Css("#input")).await.unwrap();
        input.send_keys("/rev").await.unwrap();
        until(&c, "the completion", "document.getElementById('completions').innerText.includes('/review')").await;
        input.clear().await.unwrap();
        input.send_keys("/help\n").await.unwrap();
        until(&c, "the help", "document.getElementById('completions').innerText.includes('/review <file> — Review one file for bugs')").await;
        input.send_keys("/review src/math.sh\n").await.unwrap();
        let transcript = "document.getElementById('transcript').innerText";
        until(&c, "the expanded message", &format!("{transcript}.includes('Review src/math.sh and list its bugs.')")).await;
        until(&c, "the answer", &format!("{transcript}.includes('Reviewed: add subtracts.')")).await;
        until(&c, "the hook row", &format!("{transcript}.includes('turn_end `echo reviewed by the hook`: ok: reviewed by the hook')")).await;
        c.close().await.unwrap();
    });
    assert!(
        provider.requests().iter().any(|r| r
            .body
            .to_string()
            .contains("Review src/math.sh and list its bugs.")),
        "the model gets the expanded prompt"
    );
}
