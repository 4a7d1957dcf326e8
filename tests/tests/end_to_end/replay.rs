//! `latch engine replay` on a session the real agent loop recorded: the
//! default engine asked again gives exactly what was sent (its views
//! serialize to the captured request bodies byte for byte), the window
//! example and the summarize-and-discard baseline are asked under the same
//! requests, nothing is written to the store, and a trace replays like the
//! store it came from.

use latch::compare::driver::model_profile;
use latch::compare::recording::from_store;
use latch::compare::replay::{ReplayEngine, ReplayOptions, provider_request, replay};
use latch::compare::{EngineChoice, run_in, trace};
use latch::config::Config;
use latch_conformance::compare::replay::{Outcome, Standing};
use latch_conformance::compare::{SessionKind, is_summary_request, plan};
use latch_engine_sdk::types::MediaRef;
use latch_kernel::{EventKind, Store, sha256_hex};
use latch_provider::{MediaResolver, Provider, ProviderConfig, ProviderKind, RequestContext};
use std::path::Path;

const WINDOW: u64 = 24_000;
const RESERVE: u64 = 4_000;

struct NoMedia;

impl MediaResolver for NoMedia {
    fn resolve(&self, media: &MediaRef) -> Result<Vec<u8>, String> {
        Err(format!("no artifact {}", media.sha256))
    }
}

/// The store file's bytes and its event count.
fn fingerprint(path: &Path) -> (String, u64) {
    let bytes = std::fs::read(path).unwrap();
    let store = Store::open_read_only(path).unwrap();
    (sha256_hex(&bytes), store.total_event_count().unwrap())
}

#[test]
fn the_default_engine_replays_what_was_sent_and_the_others_are_asked_the_same() {
    // A mixed session (reads, edits, shell, search, validation, task
    // state) at a small window: the continuity engine rotates and the
    // baseline compacts.
    let config = Config::default();
    let model = model_profile(&config, WINDOW, Some(RESERVE)).unwrap();
    let plan = plan(SessionKind::Mixed500, Some(30)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let limits = config.limits();
    let spec = "builtin:continuity";
    let choice = EngineChoice::resolve(spec, Path::new("."), &limits).unwrap();
    let run = run_in(spec, &choice, &plan, &model, dir.path()).unwrap();
    assert_eq!(run.figures.error, None);
    assert!(run.figures.rotations >= 1, "the recorded engine rotated");
    let sent: Vec<&serde_json::Value> = run
        .record
        .exchanges
        .iter()
        .map(|x| &x.body)
        .filter(|b| !is_summary_request(b))
        .collect();

    let db = latch_kernel::default_store_path(&dir.path().canonicalize().unwrap());
    let before = fingerprint(&db);
    let store = Store::open_read_only(&db).unwrap();
    let record = store.session(&run.session).unwrap();
    let recording = from_store(&store, &record, true).unwrap();
    let engines = [
        ReplayEngine::from_spec(spec, Path::new("."), &limits).unwrap(),
        ReplayEngine::from_spec(latch_tests::WINDOW_WASM, Path::new("."), &limits).unwrap(),
        ReplayEngine::from_spec("baseline:summarize", Path::new("."), &limits).unwrap(),
    ];
    let provider = Provider::new(ProviderConfig {
        base_url: Some("http://127.0.0.1:9".into()),
        api_key: Some("replay".into()),
        ..ProviderConfig::new(ProviderKind::Anthropic)
    })
    .unwrap();
    let ctx = RequestContext {
        cache_key: Some(run.session.clone()),
        ..RequestContext::default()
    };
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    let mut checked = 0;
    let report = replay(&recording, &engines, &ReplayOptions::default(), &mut |v| {
        if v.engine == 0 {
            let req = provider_request(v.shape, v.view);
            let body = provider.request_body_with(&req, &ctx, &NoMedia).unwrap();
            bodies.push(serde_json::to_vec(&body).unwrap());
        } else {
            assert!(v.view.report.total_tokens <= v.request_sent.budget.limit_tokens());
        }
        checked += 1;
    })
    .unwrap();

    // Byte for byte what the provider received, request by request.
    assert_eq!(bodies.len(), sent.len(), "one view per recorded request");
    for (i, (body, sent)) in bodies.iter().zip(&sent).enumerate() {
        let sent = serde_json::to_vec(sent).unwrap();
        if let Some(at) = body.iter().zip(&sent).position(|(a, b)| a != b) {
            let show = |b: &[u8]| {
                String::from_utf8_lossy(&b[at.saturating_sub(60)..(at + 60).min(b.len())])
                    .to_string()
            };
            panic!(
                "request {i} differs from what was sent at byte {at}:\nreplayed …{}…\nsent     …{}…",
                show(body),
                show(&sent)
            );
        }
        assert_eq!(body.len(), sent.len(), "request {i}");
    }
    // Its sizes are what the recording measured and recorded.
    let continuity = &report.engines[0];
    for (i, r) in continuity.requests.iter().enumerate() {
        let Outcome::Viewed { priced, .. } = &r.outcome else {
            panic!("request {i}: {:?}", r.outcome)
        };
        assert_eq!(priced.tokens, run.record.request_tokens[i], "request {i}");
        assert_eq!(Some(priced.tokens), report.recorded[i].estimated_tokens);
    }
    let s = continuity.summary();
    assert_eq!(s.rotations, run.figures.rotations);
    assert_eq!(s.kept.user_messages.visible, s.kept.user_messages.total);
    assert!(s.kept.decisions.total > 0 && s.kept.decisions.visible == s.kept.decisions.total);
    assert!(report.rereferences > 0, "a unit is read twice a cycle");
    assert_eq!(
        s.standings.lost, 0,
        "continuity keeps or recalls every re-read"
    );

    // The window example and the baseline answer every request within the
    // same budget; the baseline summarizes (an extra call each time).
    for e in &report.engines[1..] {
        let s = e.summary();
        assert_eq!(
            (s.viewed, s.refused, s.failed),
            (sent.len(), 0, 0),
            "{}",
            e.engine
        );
        assert!(s.peak_tokens <= WINDOW, "{}: {}", e.engine, s.peak_tokens);
    }
    let window = report.engines[1].summary();
    assert!(window.kept.user_messages.visible < window.kept.user_messages.total);
    let baseline = report.engines[2].summary();
    assert!(
        baseline.extra_calls >= 1,
        "the baseline compacted at {WINDOW}"
    );
    assert!(
        report.engines[2]
            .rereferences
            .iter()
            .any(|r| r.standing == Standing::Lost),
        "summarize-and-discard has no recall"
    );
    assert_eq!(checked, 3 * sent.len());

    // Nothing was written: the same bytes and events.
    drop(store);
    assert_eq!(fingerprint(&db), before);

    // A trace replays like the store it came from; redacted, its sizes stay.
    let path = dir.path().join("session.jsonl");
    trace::write(&recording, &path, false).unwrap();
    let from_trace = trace::read(&path).unwrap();
    let redacted_path = dir.path().join("redacted.jsonl");
    trace::write(&recording, &redacted_path, true).unwrap();
    let redacted = trace::read(&redacted_path).unwrap();
    assert!(redacted.redacted);
    let tokens = |r: &latch::compare::recording::Recording| -> Vec<u64> {
        let report = replay(r, &engines[..1], &ReplayOptions::default(), &mut |_| {}).unwrap();
        report.engines[0]
            .requests
            .iter()
            .map(|q| match &q.outcome {
                Outcome::Viewed { priced, .. } => priced.tokens,
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let stored: Vec<u64> = run.record.request_tokens[..sent.len()].to_vec();
    assert_eq!(tokens(&from_trace), stored);
    let secret = plan
        .files
        .iter()
        .find(|(f, _)| f == "src/unit_0.rs")
        .unwrap();
    let text = std::fs::read_to_string(&redacted_path).unwrap();
    assert!(
        !text.contains("Folds batch 3 of unit 0"),
        "file contents are gone: {}",
        secret.0
    );
    assert!(text.contains("src/unit_0.rs"), "paths stay");
    let redacted_tokens = tokens(&redacted);
    assert_eq!(redacted_tokens.len(), stored.len());
    let kept = recording.sessions[0]
        .own_events()
        .filter(|(_, e)| matches!(e, EventKind::ModelRequest(_)))
        .count();
    assert_eq!(kept, sent.len());
}

/// The traces shipped under `tests/fixtures/traces/`.
fn shipped_traces() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/traces");
    let mut traces: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    traces.sort();
    traces
}

#[test]
fn every_shipped_trace_replays_and_the_default_engine_sends_what_was_recorded() {
    let traces = shipped_traces();
    let name = |p: &std::path::PathBuf| p.file_stem().unwrap().to_string_lossy().into_owned();
    let names: Vec<String> = traces.iter().map(name).collect();
    for wanted in ["steps80", "mixed500"] {
        assert!(
            names.iter().any(|n| n == wanted),
            "{wanted} missing: {names:?}"
        );
    }
    let limits = Config::default().limits();
    let all = [
        ReplayEngine::from_spec("builtin:continuity", Path::new("."), &limits).unwrap(),
        ReplayEngine::from_spec(latch_tests::WINDOW_WASM, Path::new("."), &limits).unwrap(),
    ];
    let mut real = 0;
    for path in &traces {
        let recording = trace::read(path).unwrap();
        if name(path).starts_with("repo-") {
            assert!(
                recording.redacted,
                "{}: real sessions ship redacted",
                path.display()
            );
            real += 1;
        }
        // The big scripted session through the default engine only; the
        // others through the window example too.
        let engines = if name(path) == "mixed500" {
            &all[..1]
        } else {
            &all[..]
        };
        let report = replay(&recording, engines, &ReplayOptions::default(), &mut |_| {}).unwrap();
        assert!(!report.recorded.is_empty(), "{}", path.display());
        for e in &report.engines {
            let s = e.summary();
            assert_eq!(
                (s.refused, s.failed),
                (0, 0),
                "{}: {}",
                path.display(),
                e.engine
            );
        }
        for (i, r) in report.engines[0].requests.iter().enumerate() {
            let Outcome::Viewed { priced, .. } = &r.outcome else {
                panic!("{} request {i}: {:?}", path.display(), r.outcome)
            };
            assert_eq!(
                Some(priced.tokens),
                report.recorded[i].estimated_tokens,
                "{} session {} request {}",
                path.display(),
                r.session,
                r.request
            );
        }
    }
    assert!(
        real >= 3,
        "three real sessions of this repository: {names:?}"
    );
}
