//! The first call on a log with no epoch of this engine (after an engine
//! switch) folds the whole session holding only the newest units: its
//! views equal those of a fold that held everything.

use super::*;

/// A long session with no kernel context: `turns` user turns of a tool
/// exchange and a reply each.
fn switched(turns: usize) -> MemorySession {
    let mut s = session();
    for i in 0..turns {
        s.user(&format!("turn {i}: look at module m{} again", i % 31));
        s.tool_exchange(
            &format!("c{i}"),
            "shell",
            &format!("{{\"command\":\"grep zebra m{i}\"}}"),
            &format!("m{i}.rs: zebra {i} {}", "lorem ipsum ".repeat(i % 25)),
        );
        s.assistant(&format!("Module m{i} done."));
    }
    s.user("where was zebra 17?");
    s
}

fn json(v: &ContextView) -> String {
    serde_json::to_string(v).expect("json")
}

/// The units the engine's fold holds.
fn held(e: &ContinuityEngine) -> usize {
    e.cache.as_ref().map_or(0, |c| c.fold.units().count())
}

#[test]
fn a_fold_that_dropped_old_units_gives_the_view_of_one_that_kept_them() {
    let s = switched(2_000);
    for recent in [800, 3_000, 12_000] {
        let req = request(100_000, recent, "zebra 17");
        // Fresh: the fold keeps about `recent` tokens of conversation.
        let mut dropping = ContinuityEngine::new(model());
        let v = dropping.materialize(&s, &req).expect("view");
        check_view(&v, &req);
        assert_eq!(v.report.status, "rotated");
        assert!(
            held(&dropping) < 2_000 / 2,
            "{} units held",
            held(&dropping)
        );
        // A fold first loaded for a far larger working memory keeps every
        // unit; serving the smaller request from it gives the same bytes.
        let mut keeping = ContinuityEngine::new(model());
        let mut whole = ViewAssembler::new();
        let first = keeping
            .materialize(&s, &request(100_000, 90_000, "zebra 17"))
            .expect("view");
        whole.assemble(first).expect("whole");
        assert!(held(&keeping) > 2_000, "{} units held", held(&keeping));
        let w = keeping.materialize(&s, &req).expect("view");
        let w = whole.assemble(w).expect("whole");
        assert!(
            json(&v) == json(&w),
            "recent {recent}: dropping old units changed the view"
        );
        assert!(v.report.evicted_tokens > 0);
        assert!(
            v.report.recall_tokens > v.report.episode_tokens && v.report.episode_tokens > 0,
            "archival matches are recalled and indexed: {:?}",
            v.report
        );
    }
}

#[test]
fn a_larger_working_memory_after_dropping_reloads_the_log() {
    let s = switched(1_500);
    let small = request(100_000, 800, "zebra 17");
    let large = request(100_000, 20_000, "zebra 17");
    // Keep three quarters on rotation: far more than the small fold held.
    let engine = || {
        let mut e = ContinuityEngine::new(model());
        e.set_config(r#"{"rotation": "threshold", "retain_percent": 75}"#)
            .expect("config");
        e
    };
    let mut e = engine();
    let mut whole = ViewAssembler::new();
    whole
        .assemble(e.materialize(&s, &small).expect("view"))
        .expect("whole");
    let warm = whole
        .assemble(e.materialize(&s, &large).expect("view"))
        .expect("whole");
    let cold = engine().materialize(&s, &large).expect("view");
    assert!(cold.report.recent_tokens > 10_000, "{:?}", cold.report);
    assert!(
        json(&warm) == json(&cold),
        "a widened request saw a shortened fold"
    );
    // And a manual compact (the default budget's working memory) too.
    let mut e = engine();
    e.materialize(&s, &small).expect("view");
    let warm = e.manual_compact(&s).expect("compact");
    let cold = engine().manual_compact(&s).expect("compact");
    assert_eq!(warm, cold);
}
