//! What a session cost: `latch sessions --json`, `latch context` and the
//! config's `[prices]`, from the usage the provider reported over the wire.

use super::*;

fn two_requests() -> Script {
    Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"src/math.sh"}"#),
        ScriptedTurn::text("It subtracts."),
    ])
}

/// The cost `latch sessions --json` shows for the only session.
fn listed_cost(ws: &Path) -> serde_json::Value {
    let out = latch(ws).args(["sessions", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list:#}");
    list[0]["cost"].clone()
}

/// Over the Anthropic wire format (cache writes on the first request,
/// reads on the second), the cost is the recorded usage at the model's list
/// prices with reads and writes priced apart; `[prices]` replaces them.
#[test]
fn the_cost_follows_reported_usage_and_the_price_table() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(two_requests())).unwrap();
    let ws = project();
    let out = latch(ws.path())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", server.anthropic_base_url())
        .args(["--model", "claude-sonnet-4-5", "run", "what does add do?"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The expected figure, from the usage events in the store.
    let store = Store::open(latch_kernel::default_store_path(ws.path())).unwrap();
    let key = ws.path().canonicalize().unwrap().display().to_string();
    let session = store.list_sessions(&key).unwrap().remove(0);
    let (mut plain, mut output, mut read, mut write) = (0u64, 0u64, 0u64, 0u64);
    for e in store.events(&session.id, 0, u64::MAX, 10_000).unwrap() {
        if let EventKind::ProviderUsage {
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_creation_tokens,
            ..
        } = e.kind
        {
            let (r, w) = (
                cache_read_tokens.unwrap_or(0),
                cache_creation_tokens.unwrap_or(0),
            );
            plain += input_tokens.unwrap() - r - w;
            output += output_tokens.unwrap();
            read += r;
            write += w;
        }
    }
    drop(store);
    assert!(read > 0 && write > 0, "the fake reports both");
    let price = |p: [f64; 4]| {
        (plain as f64 * p[0] + output as f64 * p[1] + read as f64 * p[2] + write as f64 * p[3])
            / 1e6
    };
    let cost = listed_cost(ws.path());
    let close = |v: &serde_json::Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
    assert!(
        close(&cost["total_usd"], price([3.0, 15.0, 0.30, 3.75])),
        "{cost:#}"
    );
    assert!(
        close(&cost["cache_read_usd"], read as f64 * 0.30 / 1e6),
        "{cost:#}"
    );
    assert!(
        close(&cost["cache_write_usd"], write as f64 * 3.75 / 1e6),
        "{cost:#}"
    );
    assert_eq!(cost["priced_requests"], 2);

    // `latch context` shows the same figure.
    let out = latch(ws.path()).arg("context").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = cost["text"].as_str().unwrap();
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("session cost") && l.ends_with(text)),
        "{stdout}"
    );
    assert!(stdout.contains("cache reads $"), "{stdout}");

    // The user's `[prices]` replace the list prices.
    let config = ws.path().join(".test-home/config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        "[prices.\"claude-sonnet-4-5\"]\ninput = 1.0\noutput = 2.0\ncache_read = 0.5\ncache_write = 4.0\n",
    )
    .unwrap();
    let cost = listed_cost(ws.path());
    assert!(
        close(&cost["total_usd"], price([1.0, 2.0, 0.5, 4.0])),
        "{cost:#}"
    );
}

/// A model with no price is unknown, never free.
#[test]
fn a_model_without_a_price_costs_unknown() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(two_requests())).unwrap();
    let ws = project();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "what does add do?"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let cost = listed_cost(ws.path());
    assert!(cost["total_usd"].is_null(), "{cost:#}");
    assert!(
        cost["text"]
            .as_str()
            .unwrap()
            .starts_with("unknown (no price for local"),
        "{cost:#}"
    );
    let out = latch(ws.path()).arg("context").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("unknown (no price for local"), "{stdout}");
}
