//! A config file from anywhere never panics the host: a short seeded
//! property run (part of `cargo test`) over arbitrary TOML text — mutations
//! of a full, valid config and free text — and over structurally valid TOML
//! that puts wrong values (wrong types, huge and negative numbers, odd
//! strings) under every key Latch knows. Each parses or is refused with an
//! error naming the file; everything the command line derives from a
//! parsed config (provider choice, model profiles, limits, the sandbox
//! policy, MCP checks) is computed without a panic. The libFuzzer target
//! `fuzz/fuzz_targets/config.rs` runs the same exercise for minutes.

use latch::config::Config;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunConfig, RngSeed, TestRunner};
use std::path::Path;

const SEED: u64 = 0xc0f1_6a11;

fn seeded(cases: u32) -> RunConfig {
    let mut c = RunConfig::default();
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(SEED);
    }
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = cases;
    }
    c.failure_persistence = None;
    c
}

/// Parses `text` as a config file and derives what the command line does
/// from it; panics only on a broken invariant.
fn exercise(text: &str) {
    let path = Path::new("fuzz.toml");
    let parsed = Config::parse(text, path);
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

/// A config using every section.
const FULL: &str = r#"[engine]
component = "builtin:continuity"
[engine.config]
recent_tokens = 64000
rotation = "cost"
[engine.limits]
deadline_ms = 5000
memory_mib = 512
context_entry_bytes = 1048576
context_view_bytes = 2097152
[engine.child_policy]
component = "builtin:same"
[context]
recent_tokens = 64000
[provider]
kind = "openai-compatible"
model = "qwen"
base_url = "http://localhost:11434/v1"
api_key = "k"
max_tokens = 8192
wire = "chat"
[models.qwen]
context_window_tokens = 32000
reserve_tokens = 8000
estimator = "cjk-optimized"
max_tokens = 4096
thinking_budget_tokens = 2048
reasoning_effort = "medium"
[agent]
max_steps = 200
[agents]
max_concurrent = 4
[permissions]
approval = "on-request"
[sandbox]
mode = "workspace-write"
network = false
writable_roots = ["~/.cargo/registry", "out"]
env_passthrough = ["NPM_TOKEN"]
[skills]
enabled = true
catalog_percent = 2
[mcp.servers.fs]
command = "npx"
args = ["-y", "server"]
env = { LOG_LEVEL = "warn" }
network = true
sandbox = "full-access"
startup_timeout_ms = 30000
tool_timeout_ms = 120000
[mcp.servers.remote]
url = "http://127.0.0.1:3001/mcp"
headers = { Authorization = "Bearer x" }
enabled = false
"#;

/// TOML values of every type, hostile ones included.
const VALUES: &[&str] = &[
    "0",
    "-1",
    "1",
    "18446744073709551615",
    "9223372036854775807",
    "-9223372036854775808",
    "1e400",
    "nan",
    "inf",
    "-inf",
    "0.5",
    "\"\"",
    "\"x\"",
    "\"~\"",
    "\"~/\"",
    "\"/\"",
    "\"..\"",
    "\"a=b\"",
    "\"\\u0000\"",
    "\"http://\"",
    "\"builtin:\"",
    "\"\\uFFFF\"",
    "true",
    "false",
    "[]",
    "[1, \"a\"]",
    "{}",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
    "[[1]]",
];

#[derive(Clone, Debug)]
enum Edit {
    Drop(usize),
    Duplicate(usize),
    Value(usize, usize),
    Insert(usize, String),
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Drop),
        any::<usize>().prop_map(Edit::Duplicate),
        (any::<usize>(), 0..VALUES.len()).prop_map(|(l, v)| Edit::Value(l, v)),
        (any::<usize>(), "\\PC{0,16}").prop_map(|(l, s)| Edit::Insert(l, s)),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

fn mutate(edits: &[Edit]) -> String {
    let mut lines: Vec<String> = FULL.lines().map(str::to_string).collect();
    for e in edits {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        let at = |i: usize| i % n;
        match e {
            Edit::Drop(i) => {
                lines.remove(at(*i));
            }
            Edit::Duplicate(i) => {
                let l = lines[at(*i)].clone();
                lines.insert(at(*i), l);
            }
            Edit::Value(i, v) => {
                let i = at(*i);
                if let Some((key, _)) = lines[i].split_once('=') {
                    lines[i] = format!("{key}= {}", VALUES[*v]);
                }
            }
            Edit::Insert(i, s) => lines.insert(at(*i), s.clone()),
            Edit::Truncate(i) => {
                let l = &mut lines[at(*i)];
                let cut = l
                    .char_indices()
                    .nth(*i % (l.len() + 1))
                    .map_or(l.len(), |(c, _)| c);
                l.truncate(cut);
            }
        }
    }
    lines.join("\n")
}

#[test]
fn arbitrary_config_text_parses_or_is_refused_never_panics() {
    let strategy = prop_oneof![
        4 => proptest::collection::vec(edit(), 1..8).prop_map(|e| mutate(&e)),
        1 => "\\PC{0,200}",
        1 => proptest::collection::vec(proptest::sample::select(
            &["[", "]", "=", "\"", "\n", "[[x]]", "[mcp.servers.a]", "a.b.c = 1", "'''", "#"][..],
        ), 0..30).prop_map(|v| v.concat()),
    ];
    TestRunner::new(seeded(300))
        .run(&strategy, |text| {
            exercise(&text);
            Ok(())
        })
        .unwrap();
}

/// Every key Latch knows, by table.
const SCHEMA: &[(&str, &[&str])] = &[
    ("engine", &["component", "config"]),
    (
        "engine.limits",
        &[
            "deadline_ms",
            "memory_mib",
            "context_entry_bytes",
            "context_view_bytes",
        ],
    ),
    ("engine.child_policy", &["component"]),
    ("context", &["recent_tokens"]),
    (
        "provider",
        &["kind", "model", "base_url", "api_key", "max_tokens", "wire"],
    ),
    (
        "models.m",
        &[
            "context_window_tokens",
            "reserve_tokens",
            "estimator",
            "max_tokens",
            "thinking_budget_tokens",
            "reasoning_effort",
        ],
    ),
    ("agent", &["max_steps"]),
    ("agents", &["max_concurrent"]),
    ("permissions", &["approval"]),
    (
        "sandbox",
        &["mode", "network", "writable_roots", "env_passthrough"],
    ),
    ("skills", &["enabled", "catalog_percent"]),
    (
        "mcp.servers.s",
        &[
            "command",
            "args",
            "env",
            "url",
            "headers",
            "enabled",
            "sandbox",
            "network",
            "startup_timeout_ms",
            "tool_timeout_ms",
        ],
    ),
];

#[test]
fn wrong_values_under_every_known_key_are_refused_never_panic() {
    let keys: Vec<(&str, &str)> = SCHEMA
        .iter()
        .flat_map(|(t, ks)| ks.iter().map(move |k| (*t, *k)))
        .collect();
    let strategy =
        proptest::collection::vec((proptest::sample::select(keys), 0..VALUES.len()), 1..6);
    TestRunner::new(seeded(300))
        .run(&strategy, |entries| {
            // Each table once, each key once: valid TOML, wrong values.
            let mut tables: std::collections::BTreeMap<
                &str,
                std::collections::BTreeMap<&str, &str>,
            > = Default::default();
            for ((table, key), v) in entries {
                tables.entry(table).or_default().insert(key, VALUES[v]);
            }
            let mut text = String::new();
            for (table, keys) in tables {
                text.push_str(&format!("[{table}]\n"));
                for (key, value) in keys {
                    text.push_str(&format!("{key} = {value}\n"));
                }
            }
            exercise(&text);
            Ok(())
        })
        .unwrap();
}
