//! The user's intents survive rotation, the cost-aware rotation policy, and
//! the recall the model calls through the port.

use super::*;

/// The first task: a constraint and a code word that appear nowhere else.
const FIRST_TASK: &str =
    "Fix the flaky parser test. Constraint: never edit files under vendor/. Code word: PAPAYA-7.";

/// A session with the first task, then `units` tool exchanges of about
/// `size` characters each and a follow-up user message every `every` units,
/// materialized before every model reply with `config` (as JSON).
/// Returns the views and the first task's sequence number.
fn long_task(config: &str, units: usize, every: usize, size: usize) -> (Vec<ContextView>, u64) {
    let mut e = engine();
    e.set_config(config).expect("config");
    let mut s = session();
    let first = s.user(FIRST_TASK);
    let mut views = Vec::new();
    let mut query = FIRST_TASK.to_string();
    for i in 0..units {
        if i > 0 && i % every == 0 {
            query = "continue".to_string();
            s.user(&query);
        }
        let req = request(100_000, 2_000, &query);
        let v = e.materialize(&s, &req).expect("materialize");
        check_view(&v, &req);
        s.persist(&v.persist);
        views.push(v);
        s.tool_exchange(
            &format!("c{i}"),
            "shell",
            &format!("{{\"command\":\"step {i}\"}}"),
            &format!("step {i} output {}", "lorem ipsum ".repeat(size / 12)),
        );
    }
    (views, first)
}

fn text_of(v: &ContextView) -> String {
    serde_json::to_string(&v.messages).expect("json")
}

#[test]
fn a_first_message_constraint_survives_follow_ups_and_rotations() {
    let (views, first) = long_task("{}", 60, 15, 600);
    let follow_ups = 60 / 15 - 1;
    let rotations = views
        .iter()
        .filter(|v| v.report.status == "rotated")
        .count();
    assert!(follow_ups >= 3 && rotations >= 5, "{rotations} rotations");
    let last = views.last().expect("views");
    assert!(
        last.report.first_retained_seq.is_some_and(|s| s > first),
        "the first task left working memory"
    );
    for v in views.iter().skip(1) {
        let text = text_of(v);
        assert!(text.contains("PAPAYA-7"), "the code word is visible");
        assert!(text.contains("never edit files under vendor/"));
    }
    // What carries it is the pinned intent: without a user budget it is
    // gone after the first rotation past it.
    let (views, _) = long_task(r#"{"user_tokens": 0}"#, 60, 15, 600);
    assert!(!text_of(views.last().expect("views")).contains("PAPAYA-7"));
}

#[test]
fn pinned_intents_are_the_first_and_the_newest_within_the_budget() {
    let mut e = engine();
    e.set_config(r#"{"user_tokens": 300}"#).expect("config");
    let mut s = session();
    s.user(FIRST_TASK);
    let mut seqs = Vec::new();
    for i in 0..30 {
        seqs.push(s.user(&format!("follow-up number {i}: {}", "details ".repeat(20))));
        s.tool_exchange(&format!("c{i}"), "shell", "{}", &"lorem ipsum ".repeat(80));
    }
    let req = request(100_000, 2_000, "continue");
    let v = e.materialize(&s, &req).expect("materialize");
    check_view(&v, &req);
    let pinned: Vec<&KernelContextEntry> = v
        .persist
        .iter()
        .filter(|k| k.kind == KernelContextKind::Recall && k.text.contains(" · user\n"))
        .collect();
    let texts: Vec<&str> = pinned.iter().map(|k| k.text.as_str()).collect();
    assert!(
        texts[0].contains("PAPAYA-7"),
        "the first task first: {texts:?}"
    );
    assert!(pinned.len() >= 2, "and the newest after it: {texts:?}");
    let start = v.report.first_retained_seq.expect("retained");
    let shown: Vec<u64> = pinned
        .iter()
        .filter_map(|k| render::parse_recall(&k.text))
        .collect();
    assert!(shown.windows(2).all(|w| w[0] < w[1]), "chronological");
    // The newest archived follow-ups, with no gap before the newest.
    let archived: Vec<u64> = seqs.iter().copied().filter(|s| *s < start).collect();
    let newest = &archived[archived.len() - (shown.len() - 1)..];
    assert_eq!(&shown[1..], newest);
    let tokens: u64 = pinned
        .iter()
        .map(|k| entry_tokens(P, k.kind, &k.text))
        .sum();
    assert!(tokens <= 300, "within user_tokens: {tokens}");
}

#[test]
fn cost_rotation_comes_earlier_but_never_per_turn_and_resumes_equal() {
    let config = r#"{"rotation": "cost", "retain_percent": 25}"#;
    let mut host = Checker::new(Some(config), true);
    let mut script = Script::new(11, 90);
    script.budget.recent_tokens = 40_000;
    let _ = testkit::run(&script, &mut host);
    assert!(host.rotations >= 2, "{} rotations", host.rotations);
    // Under the threshold policy the same session barely rotates.
    let mut plain = Checker::new(Some(r#"{"rotation": "threshold"}"#), false);
    let _ = testkit::run(&script, &mut plain);
    assert!(
        plain.rotations < host.rotations,
        "cost {} vs threshold {}",
        host.rotations,
        plain.rotations
    );
}

#[test]
fn cost_rotations_say_why_and_keep_the_requested_share() {
    let (views, _) = long_task(
        r#"{"rotation": "cost", "retain_percent": 25, "recent_tokens": 20000}"#,
        80,
        100,
        600,
    );
    let rotated: Vec<usize> = views
        .iter()
        .enumerate()
        .filter(|(_, v)| v.report.status == "rotated")
        .map(|(i, _)| i)
        .collect();
    assert!(rotated.len() >= 2, "{rotated:?}");
    for w in rotated.windows(2) {
        assert!(
            (w[1] - w[0]) as u64 >= budget::MIN_EPOCH_REQUESTS,
            "occasional: {rotated:?}"
        );
    }
    for &i in &rotated {
        let r = &views[i].report;
        assert!(
            r.rotation_reason
                .as_deref()
                .is_some_and(|r| r.starts_with("cost")),
            "{:?}",
            r.rotation_reason
        );
        assert!(r.recent_tokens < 20_000 / 4, "retains about a quarter");
    }
}

#[test]
fn the_ports_recall_finds_a_wordy_querys_rarest_word() {
    let mut s = session();
    s.user("build it");
    s.tool_exchange(
        "c1",
        "shell",
        r#"{"command":"cargo build"}"#,
        "error[E0599]: no method named `frobnicate_v2` found for struct `Parser`",
    );
    for i in 0..5 {
        s.tool_exchange(&format!("d{i}"), "shell", "{}", "compiling crates");
    }
    let found = engine()
        .recall(&s, "what was the exact frobnicate_v2 diagnostic again", 4)
        .expect("recall");
    assert!(
        found
            .iter()
            .any(|e| matches!(&e.body, EventBody::ToolResult(r) if r.content.contains("E0599"))),
        "{found:?}"
    );
}

#[test]
fn the_index_names_recall_and_points_at_the_matching_line() {
    let mut e = engine();
    let mut s = session();
    s.user("set up the build");
    s.tool_exchange(
        "c1",
        "shell",
        r#"{"command":"cargo build"}"#,
        "Compiling parser\nerror[E0599]: no method named `frobnicate_v2` found\nbuild failed",
    );
    for i in 0..40 {
        s.user(&format!("next step {i}"));
        s.tool_exchange(&format!("d{i}"), "shell", "{}", &"lorem ipsum ".repeat(60));
    }
    let req = request(100_000, 2_000, "where does frobnicate_v2 fail");
    let v = e.materialize(&s, &req).expect("materialize");
    check_view(&v, &req);
    let index = v
        .persist
        .iter()
        .find(|k| k.kind == KernelContextKind::ArchiveIndex)
        .expect("an index");
    assert!(
        index.text.contains("call the `recall` tool"),
        "{}",
        index.text
    );
    assert!(
        index.text.contains(
            "match: event 3, tool result shell: \"error[E0599]: no method named `frobnicate_v2` found\""
        ),
        "{}",
        index.text
    );
}
