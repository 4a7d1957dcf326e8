//! The screen drawn on ratatui's `TestBackend` at 120×40 and 80×24 for the
//! recorded demo session, and the keys that drive interrupts, steering,
//! exit and permission answers.

mod keys;
mod log_sink;
mod screen;

use latch_kernel::{EventKind, StoredEvent};
use latch_surface::Surface;
use latch_tui::{UiState, draw};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// The demo session as `latch demo --store` recorded it (one JSON object
/// per event: seq, session, time_ms, kind, body).
pub fn demo_log() -> (String, Vec<StoredEvent>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/demo.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let events: Vec<StoredEvent> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let seq = v["seq"].as_u64().unwrap();
            let kind = v["kind"].as_str().unwrap();
            StoredEvent {
                seq,
                session: v["session"].as_str().unwrap().to_string(),
                time_ms: v["time_ms"].as_u64().unwrap(),
                kind: EventKind::from_row(seq, kind, &v["body"].to_string()).unwrap(),
            }
        })
        .collect();
    (events[0].session.clone(), events)
}

/// The finished demo, as a resumed screen shows it.
pub fn demo_state() -> UiState {
    let (session, events) = demo_log();
    UiState::new(Surface::replay(&session, &events), "demo · scripted model")
}

/// Draw `state` at `w`×`h`; the screen's rows as text.
pub fn screen(state: &UiState, w: u16, h: u16) -> Vec<String> {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| draw(f, state)).unwrap();
    let buf = terminal.backend().buffer();
    (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect()
}

pub fn has(rows: &[String], needle: &str) -> bool {
    rows.iter().any(|r| r.contains(needle))
}

#[test]
fn wide_screen_shows_transcript_sidebar_and_status() {
    let state = demo_state();
    let rows = screen(&state, 120, 40);
    let all = rows.join("\n");
    // Transcript (left of the sidebar): the end of the session in view —
    // the edit as a diff, validation rows, certification and the answer.
    let left: Vec<String> = rows.iter().map(|r| r.chars().take(81).collect()).collect();
    assert!(has(&left, "✓ edit_file src/math.sh"), "{all}");
    assert!(has(&left, "-echo $(( $1 - $2 ))"), "{all}");
    assert!(has(&left, "+echo $(( $1 + $2 ))"), "{all}");
    assert!(has(&left, "◆ validation passed: sh test.sh"), "{all}");
    assert!(has(&left, "◆ completion certified"), "{all}");
    assert!(has(&left, "● Done: `add` now adds"), "{all}");
    // Sidebar (right): task state, context and usage.
    let right: Vec<String> = rows.iter().map(|r| r.chars().skip(82).collect()).collect();
    assert!(has(&right, "TASK"), "{all}");
    assert!(has(&right, "goal Make `sh test.sh` pass"), "{all}");
    assert!(has(&right, "✓ sh test.sh passes @gen 3"), "{all}");
    assert!(has(&right, "USAGE"), "{all}");
    assert!(has(&right, "6 requests"), "{all}");
    assert!(has(&right, "workspace generation 3"), "{all}");
    // Status line: the session is idle, and says so.
    assert!(rows[39].contains("ready"), "{}", rows[39]);
    assert!(rows[39].contains("demo · scripted model"), "{}", rows[39]);
    // Input box above it.
    assert!(rows[36].contains("message · /help"), "{}", rows[36]);
}

#[test]
fn narrow_screen_drops_the_sidebar_behind_a_key() {
    let mut state = demo_state();
    let rows = screen(&state, 80, 24);
    let all = rows.join("\n");
    assert!(!has(&rows, "TASK"), "{all}");
    assert!(has(&rows, "● Done: `add` now adds"), "{all}");
    assert!(has(&rows, "◆ completion certified"), "{all}");
    assert!(rows[23].contains("ready"), "{}", rows[23]);
    // Ctrl-B shows it in place of the transcript.
    latch_tui::keys::on_key(&mut state, keys::ctrl('b'));
    let rows = screen(&state, 80, 24);
    let all = rows.join("\n");
    assert!(has(&rows, "TASK") && has(&rows, "USAGE"), "{all}");
    assert!(!has(&rows, "● Done:"), "{all}");
}

#[test]
fn tool_output_is_folded_and_expands() {
    let mut state = demo_state();
    // Scroll to the read of test.sh (the top of the session).
    state.scroll = 200;
    let rows = screen(&state, 120, 40);
    let all = rows.join("\n");
    assert!(has(&rows, "✓ read_file test.sh"), "{all}");
    assert!(has(&rows, "more lines (Ctrl-O expands)"), "{all}");
    assert!(!has(&rows, "expected 5\""), "{all}");
    latch_tui::keys::on_key(&mut state, keys::ctrl('o'));
    let rows = screen(&state, 120, 40);
    assert!(has(&rows, "expected 5\""), "{}", rows.join("\n"));
}

#[test]
fn a_resize_reflows_the_transcript() {
    let state = demo_state();
    for (w, h) in [(120, 40), (60, 20), (100, 30), (80, 24)] {
        let rows = screen(&state, w, h);
        assert_eq!(rows.len(), h as usize);
        assert!(has(&rows, "completion certified"), "{w}x{h}");
        assert!(rows.iter().all(|r| r.chars().count() == w as usize));
    }
}

#[test]
fn usage_the_provider_did_not_report_shows_as_unknown_never_zero() {
    let usage = |input, output| EventKind::ProviderUsage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: None,
        cache_creation_tokens: None,
        cache_miss_tokens: None,
        common_prefix_tokens: None,
        reasoning_tokens: None,
        estimated_input_tokens: None,
        provider: None,
        model: None,
        base_url: None,
    };
    let event = |seq, kind| StoredEvent {
        seq,
        session: "s".into(),
        time_ms: 0,
        kind,
    };
    let mut surface = Surface::new("s");
    surface.apply(&event(1, usage(None, None)));
    let state = UiState::new(surface.clone(), "s");
    let all = screen(&state, 120, 40).join("\n");
    assert!(all.contains("1 requests · – in · – out"), "{all}");
    assert!(all.contains("last: – in · – out"), "{all}");
    surface.apply(&event(2, usage(Some(900), None)));
    let all = screen(&UiState::new(surface, "s"), 120, 40).join("\n");
    assert!(all.contains("2 requests · 900 in · – out"), "{all}");
    assert!(all.contains("last: 900 in · – out"), "{all}");
}

/// The sidebar shows the session's cost from the price table: priced with
/// the cache apart, unknown for a model without a price, and the config's
/// prices over the built-in ones.
#[test]
fn the_sidebar_shows_the_session_cost_or_unknown() {
    let usage = |model: &str| EventKind::ProviderUsage {
        input_tokens: Some(1_000_000),
        output_tokens: Some(100_000),
        cache_read_tokens: Some(600_000),
        cache_creation_tokens: Some(300_000),
        cache_miss_tokens: Some(400_000),
        common_prefix_tokens: None,
        reasoning_tokens: None,
        estimated_input_tokens: None,
        provider: Some("anthropic".into()),
        model: Some(model.into()),
        base_url: None,
    };
    let event = |kind| StoredEvent {
        seq: 1,
        session: "s".into(),
        time_ms: 0,
        kind,
    };
    let mut priced = Surface::new("s");
    priced.apply(&event(usage("claude-sonnet-4-5-20250929")));
    let all = screen(&UiState::new(priced.clone(), "s"), 120, 40).join("\n");
    // 0.1M plain input at $3, 0.1M output at $15, 0.6M read at $0.30,
    // 0.3M written at $3.75.
    assert!(all.contains("cost $3.10"), "{all}");
    assert!(
        all.contains("cache read $0.1800") && all.contains("cache write $1.12"),
        "{all}"
    );

    let mut table = latch_surface::PriceTable::builtin();
    table.set(
        "claude-sonnet-4-5",
        latch_surface::ModelPrice {
            input: 0.0,
            output: 0.0,
            cache_read: Some(0.0),
            cache_write: Some(0.0),
        },
    );
    let all = screen(&UiState::new(priced, "s").with_prices(table), 120, 40).join("\n");
    assert!(all.contains("cost $0.0000"), "{all}");

    let mut local = Surface::new("s");
    local.apply(&event(usage("local")));
    let all = screen(&UiState::new(local, "s"), 120, 40).join("\n");
    assert!(all.contains("cost unknown (no price for local"), "{all}");
}
