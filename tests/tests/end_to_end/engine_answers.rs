//! What an engine returns besides its views (issue 36): its `recall`
//! answers and the token total its report claims. The adversarial fixture,
//! configured as `[engine] component`, through the real `latch run` against
//! the local wire-format server: a forged, foreign or oversized recall
//! answer ends the turn like a refused view, with nothing of it committed or
//! sent; a lying total never reaches calibration; `engine check` fails each.

use crate::trust::{Setup, assert_case_fails, assert_nothing_forged, check_mode, setup_with};
use latch::agent::calibration::{CalibrationKey, reduce};
use latch_fixture_engine::INJECTION;
use latch_kernel::{EventKind, StoredEvent};
use latch_provider::fake::{Script, ScriptedTurn};

/// Every event of every session of the workspace.
fn all_events(s: &Setup) -> Vec<StoredEvent> {
    let store = s.store();
    store
        .list_sessions(&s.ws.path().canonicalize().unwrap().display().to_string())
        .unwrap()
        .iter()
        .flat_map(|r| store.events(&r.id, 0, u64::MAX, 10_000).unwrap())
        .collect()
}

fn recall_results(events: &[StoredEvent]) -> Vec<(bool, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(r) if r.name == "recall" => Some((r.is_error, r.content.clone())),
            _ => None,
        })
        .collect()
}

/// A recall answer with a rewritten user message (still citing its event),
/// with an event that is not the session's, or with more events than the
/// call's limit: each run ends naming the recall rule, the forged text is
/// neither committed nor sent, and no request follows the refused answer.
/// An honest engine's answer, in the same store, reaches the model.
#[test]
fn forged_recall_answers_are_refused_like_bad_views() {
    let recall = || ScriptedTurn::tool_call("recall", r#"{"query":"milk","limit":1}"#);
    let s = setup_with(Script::new([
        recall(),
        recall(),
        recall(),
        recall(),
        ScriptedTurn::text("Found it."),
    ]));
    let task = "Find what the notes say about the milk";
    for (mode, says) in [
        ("forge-recall", "differs from the stored event"),
        ("recall-foreign", "is not an event of this session"),
        ("recall-over-limit", "but the call's limit is 1"),
    ] {
        let before = s.bodies().len();
        let out = s.run(Some(mode), task);
        assert_eq!(out.code, 1, "{mode}: the run fails: {}", out.all());
        assert!(
            out.stderr
                .contains("returned a recall answer that breaks the recall rule"),
            "{mode}: the error names the rule: {}",
            out.all()
        );
        assert!(out.stderr.contains(says), "{mode}: {}", out.all());
        assert!(
            out.stderr.contains("nothing committed is lost"),
            "{mode}: the refusal says what the user can do: {}",
            out.all()
        );
        assert_eq!(
            s.bodies().len(),
            before + 1,
            "{mode}: only the request that called recall was sent"
        );
    }
    let events = all_events(&s);
    let results = recall_results(&events);
    assert_eq!(
        results.len(),
        3,
        "each refused call is answered: {results:?}"
    );
    for (is_error, content) in &results {
        assert!(is_error, "a refused answer is never a result: {content}");
        assert!(!content.contains("original event"), "{content}");
    }
    for e in &events {
        let json = serde_json::to_string(&e.kind).unwrap();
        assert!(
            !json.contains("FORGED-7731"),
            "forged text committed: {json}"
        );
    }
    assert_nothing_forged(&s.bodies());
    assert!(INJECTION.contains("FORGED-7731"));

    // The honest engine's answer is committed and reaches the model.
    let out = s.run(Some("ok"), task);
    assert_eq!(out.code, 0, "{}", out.all());
    let results = recall_results(&all_events(&s));
    let answered: Vec<_> = results.iter().filter(|r| !r.0).collect();
    assert_eq!(answered.len(), 1, "{results:?}");
    let honest = answered[0];
    assert!(
        honest.1.starts_with("1 original event matching \"milk\""),
        "{honest:?}"
    );
    let last = s.bodies().pop().unwrap();
    assert!(last.contains("1 original event matching"), "{last}");
    assert!(last.contains(task), "{last}");
}

/// An engine whose report claims a total of 1 token: what the store keeps
/// as Latch's estimate of each request is the host's own count of the view
/// it sent, so the calibration of the model (shared by every session of
/// it) stays near 1 instead of shrinking every later budget.
#[test]
fn a_lying_total_never_reaches_calibration() {
    let s = setup_with(Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#),
        ScriptedTurn::text("Done."),
    ]));
    let out = s.run(Some("lie-total"), "read the notes");
    assert_eq!(out.code, 0, "{}", out.all());
    let events = all_events(&s);
    let mut figures = 0;
    for e in &events {
        if let EventKind::ProviderUsage {
            input_tokens: Some(reported),
            estimated_input_tokens: Some(estimated),
            ..
        } = &e.kind
        {
            figures += 1;
            assert!(
                *estimated * 2 > *reported && *estimated < *reported * 2,
                "the estimate is the host's count: estimated {estimated}, reported {reported}"
            );
        }
    }
    assert_eq!(figures, 2, "one usage report per request");
    let base_url = s.server.openai_base_url();
    let key = CalibrationKey {
        provider: "openai-compatible",
        base_url: &base_url,
        default_base_url: None,
        model: "local",
    };
    let calibration = reduce(&events, &key).expect("calibrated");
    assert_eq!(calibration.samples, 2);
    assert!(
        calibration.ratio < 2.0,
        "the lie does not shrink budgets: ratio {}",
        calibration.ratio
    );
}

/// `engine check` fails each lie on the case that names it, with evidence.
#[test]
fn engine_check_fails_each_lying_answer() {
    for (mode, case, rule) in [
        ("forge-recall", "recall", "recall"),
        ("recall-foreign", "recall", "recall"),
        ("recall-over-limit", "recall", "recall"),
        ("lie-total", "budget", "report total"),
    ] {
        let report = check_mode(mode);
        println!("{mode}:\n{}", report.table());
        assert_case_fails(&report, case, rule);
    }
}
