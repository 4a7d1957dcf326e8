//! A new epoch never starts after a unit the model has not been shown: the
//! results answering its last tool calls, and what was delivered or said
//! after them, stay in the view through every rotation.

use super::*;

/// The conversation events after the latest assistant message: the model
/// has not been shown them yet (the results of its last calls, delivered
/// notifications, the user's newest message).
pub(super) fn unseen_events(s: &MemorySession) -> Vec<u64> {
    let after = s
        .events
        .iter()
        .rposition(|e| matches!(e.body, EventBody::AssistantMessage(_)))
        .map_or(0, |i| i + 1);
    s.events[after..]
        .iter()
        .filter(|e| {
            matches!(
                e.body,
                EventBody::UserMessage(_) | EventBody::Notification(_) | EventBody::ToolResult(_)
            )
        })
        .map(|e| e.seq)
        .collect()
}

/// Every event of [`unseen_events`] is cited by a conversation message of
/// `view`.
pub(super) fn assert_unseen_shown(s: &MemorySession, view: &ContextView) {
    let shown: BTreeSet<u64> = view
        .messages
        .iter()
        .filter(|m| m.kernel.is_none())
        .flat_map(|m| m.source_seqs.iter().copied())
        .collect();
    for seq in unseen_events(s) {
        assert!(
            shown.contains(&seq),
            "event {seq}, which the model has not been shown, is not in the view \
             (status {}, reason {:?}, first retained {:?})",
            view.report.status,
            view.report.rotation_reason,
            view.report.first_retained_seq
        );
    }
}

/// What reaches the log after the model's `wait_agents` call and its
/// result, before the model's next request.
#[derive(Clone, Copy, Debug)]
enum After {
    /// Nothing: the tool result is the last unit.
    Nothing,
    /// A message another agent sent, delivered at the safe boundary.
    Notification,
    /// That, and a message from the user.
    NotificationAndUser,
}

/// The report a child hands over in round `i`: about 400 tokens.
fn report(i: usize) -> String {
    format!(
        "[Latch] Child agent c{i} (adder) completed.\nSummary: REPORT-{i:03} {}",
        "add() subtracted; the operator was wrong and is fixed now. ".repeat(25)
    )
}

/// A lead that waits for a child's report every step, `rounds` times,
/// materialized (with `config`, in a 200k window with `recent` tokens of
/// working memory) before each of its requests. Every view is checked as
/// the host checks it, must show everything the model has not been shown
/// yet, and must equal a fresh instance's view.
fn waiting_lead(config: &str, recent: u64, after: After, rounds: usize) -> Vec<ContextView> {
    let configured = || {
        let mut e = engine();
        e.set_config(config).expect("config");
        e
    };
    let mut e = configured();
    let mut s = session();
    s.user("Delegate the two fixes, wait for the children's reports, then prove the suite.");
    let req = request(200_000, recent, "");
    let mut views = Vec::new();
    for i in 0..rounds {
        let v = e.materialize(&s, &req).expect("materialize");
        check_view(&v, &req);
        assert_unseen_shown(&s, &v);
        let fresh = configured().materialize(&s, &req).expect("fresh");
        assert_eq!(
            serde_json::to_string(&fresh).ok(),
            serde_json::to_string(&v).ok(),
            "a fresh instance gives the same view at round {i}"
        );
        s.persist(&v.persist);
        views.push(v);
        let id = format!("w{i}");
        s.push(EventBody::AssistantMessage(vec![
            Part::Text("Waiting for the children's reports.".into()),
            Part::ToolCall(ToolCall {
                id: id.clone(),
                name: "wait_agents".into(),
                arguments_json: r#"{"timeout_s":120}"#.into(),
            }),
        ]));
        s.push(EventBody::ToolResult(ToolResult {
            call_id: id,
            name: "wait_agents".into(),
            content: report(i),
            is_error: false,
            images: vec![],
        }));
        if matches!(after, After::Notification | After::NotificationAndUser) {
            s.push(EventBody::Notification(format!(
                "[Latch] Message from c{i} (adder): NOTE-{i:03} fixed with `+`."
            )));
        }
        if matches!(after, After::NotificationAndUser) {
            s.user(&format!("USER-{i:03}: keep going."));
        }
    }
    views
}

fn text_of(v: &ContextView) -> String {
    serde_json::to_string(&v.messages).expect("json")
}

#[test]
fn a_rotation_keeps_the_tool_results_the_model_has_not_seen() {
    for (config, recent, policy) in [
        ("{}", 64_000, "cost"),
        (
            r#"{"rotation": "threshold", "retain_percent": 10}"#,
            3_000,
            "working memory",
        ),
    ] {
        for after in [
            After::Nothing,
            After::Notification,
            After::NotificationAndUser,
        ] {
            let views = waiting_lead(config, recent, after, 40);
            let rotated: Vec<usize> = (1..views.len())
                .filter(|&i| views[i].report.status == "rotated")
                .collect();
            assert!(
                rotated.len() >= 3,
                "{policy} {after:?}: {} rotations",
                rotated.len()
            );
            for &i in &rotated {
                let v = &views[i];
                let why = format!("{policy} {after:?}, view {i}");
                assert!(
                    v.report
                        .rotation_reason
                        .as_deref()
                        .is_some_and(|r| r.starts_with(policy)),
                    "{why}: {:?}",
                    v.report.rotation_reason
                );
                // The report the model asked for in its last request, and
                // what arrived after it, are in the new epoch's tail.
                let text = text_of(v);
                let prev = i - 1;
                assert!(text.contains(&format!("REPORT-{prev:03}")), "{why}");
                if matches!(after, After::Notification | After::NotificationAndUser) {
                    assert!(text.contains(&format!("NOTE-{prev:03}")), "{why}");
                }
                // What the model has seen still leaves with the old epoch:
                // the rotation is not undone.
                assert!(v.report.evicted_tokens > 0, "{why}");
                if let Some(seen) = prev.checked_sub(1) {
                    assert!(!text.contains(&format!("REPORT-{seen:03}")), "{why}");
                }
                // No second rotation on the next request.
                if let Some(next) = views.get(i + 1) {
                    assert_eq!(next.report.status, "ok", "{why}");
                }
            }
        }
    }
}

#[test]
fn a_compact_keeps_what_arrived_after_the_models_last_reply() {
    let mut e = engine();
    let mut s = session();
    let req = request(100_000, 50_000, "");
    let views = chat(&mut e, &mut s, &req, 5, 100);
    let g = views[4].report.epoch_generation.unwrap_or(0);
    // A report delivered after the model's last reply, then `/compact`.
    s.push(EventBody::Notification(
        "[Latch] Child agent c1 (adder) completed.\nSummary: REPORT-LATE".into(),
    ));
    s.push(EventBody::ManualCompact);
    let entries = e.manual_compact(&s).expect("compact");
    s.persist(&entries);
    s.user("after compact");
    let v = e.materialize(&s, &req).expect("view");
    check_view(&v, &req);
    assert_unseen_shown(&s, &v);
    assert_eq!(v.report.epoch_generation, Some(g + 1));
    assert_eq!(v.report.status, "compacted");
    assert!(text_of(&v).contains("REPORT-LATE"));
    // What the model had seen is gone from working memory.
    assert!(v.report.evicted_tokens > 0);
    assert!(!text_of(&v).contains("answer 4"));
}
