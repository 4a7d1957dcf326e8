//! What every fuzz target checks, shared: decoding a provider's stream must
//! never panic, must not depend on how the body was cut into chunks, and a
//! committed turn names every tool it calls.

use latch_engine_sdk::types::Part;
use latch_provider::decode::{Failure, StreamDecoder, decode_body};
use latch_provider::sse::SseParser;
use latch_provider::{AssistantTurn, ProviderKind, StreamEvent, Wire};

/// Up to three cut points from the first bytes of `data`, and the rest.
pub fn split(data: &[u8]) -> (Vec<usize>, &[u8]) {
    let n = data
        .first()
        .map_or(0, |b| usize::from(b % 4))
        .min(data.len().saturating_sub(1));
    let (head, body) = data.split_at((1 + n).min(data.len()));
    let cuts = head
        .iter()
        .skip(1)
        .map(|b| usize::from(*b) * body.len() / 256)
        .collect();
    (cuts, body)
}

/// The SSE parser gives the same events however the bytes are cut.
pub fn sse(data: &[u8]) {
    let (cuts, body) = split(data);
    let mut whole = SseParser::new();
    let expected = whole.push(body);
    let mut parser = SseParser::new();
    let mut got = Vec::new();
    let mut from = 0;
    let mut points = cuts;
    points.sort_unstable();
    points.push(body.len());
    for to in points {
        got.extend(parser.push(&body[from..to]));
        from = to;
    }
    assert_eq!(got, expected);
    assert_eq!(parser.has_pending(), whole.has_pending());
    for e in &expected {
        assert!(!e.data.contains('\r') && !e.event.contains(['\r', '\n']));
    }
}

fn outcome(r: &Result<AssistantTurn, Failure>, events: &[StreamEvent]) -> String {
    format!("{r:?} / {events:?}")
}

/// A wire decoder never panics, is chunking invariant, and names every tool
/// a committed turn calls.
pub fn decoder(wire: Wire, kind: ProviderKind, data: &[u8]) {
    let (cuts, body) = split(data);
    let mut all = Vec::new();
    let whole = decode_body(wire, kind, body, &mut |e| all.push(e));
    let mut events = Vec::new();
    let mut decoder = StreamDecoder::new(wire, kind);
    let mut points = cuts;
    points.sort_unstable();
    points.push(body.len());
    let mut from = 0;
    let mut chunked = None;
    for to in points {
        match decoder.push(&body[from..to], &mut |e| events.push(e)) {
            Ok(Some(turn)) => {
                chunked = Some(Ok(turn));
                break;
            }
            Ok(None) => {}
            Err(f) => {
                chunked = Some(Err(f));
                break;
            }
        }
        from = to;
    }
    let chunked = chunked.unwrap_or_else(|| decoder.finish());
    assert_eq!(outcome(&whole, &all), outcome(&chunked, &events));
    if let Ok(turn) = &whole {
        for p in &turn.parts {
            if let Part::ToolCall(c) = p {
                assert!(
                    !c.name.is_empty(),
                    "a committed tool call without a name: {c:?}"
                );
            }
        }
    }
    // Error bodies come from the same place.
    let _ = latch_provider::error::error_message_from_body(&String::from_utf8_lossy(body));
}

/// The config loader takes any text: it parses or refuses with an error
/// naming the file, never panics, and everything the command line derives
/// from a parsed config (provider choice, model profiles, limits, the
/// sandbox policy, MCP checks) is computed without panicking. Mirrors
/// `tests/tests/end_to_end/config_inputs.rs`.
#[cfg(feature = "config")]
pub fn config(text: &str) {
    use latch::config::Config;
    use std::path::Path;
    let path = Path::new("fuzz.toml");
    let parsed = Config::parse(text, path);
    // The file loader agrees with the parser.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).unwrap();
    let loaded = Config::load(dir.path(), Some(&file));
    assert_eq!(parsed.is_ok(), loaded.is_ok(), "{parsed:?} / {loaded:?}");
    let c = match parsed {
        Ok(c) => c,
        Err(e) => {
            assert!(e.to_string().contains("fuzz.toml"), "{e}");
            return;
        }
    };
    let _ = c.engine_source(Path::new("/w"));
    let _ = c.engine_config_json();
    let _ = c.limits();
    let _ = c.reasoning();
    let _ = c.sandbox.policy(Path::new("/w"), None);
    let _ = c.mcp.check();
    let _ = latch::cli::setup::choose_provider(&Default::default(), &c);
    let max_tokens = c.provider.max_tokens.unwrap_or(8_192);
    for name in c.models.keys() {
        for mt in [max_tokens, 0, u32::MAX] {
            if let Ok(m) = c.model_profile("anthropic", name, mt) {
                let _ = latch_tools::skills::cap_tokens(
                    m.context_window_tokens,
                    c.skills.catalog_percent,
                );
            }
        }
    }
}
