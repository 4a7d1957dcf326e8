//! The order in which a new epoch allocates recalled originals and the
//! episode index: the spec's (recall first) by default, the index first on
//! request, each pinned.

use super::*;

/// A long session whose archive holds many matches of `zebra`, then one
/// materialization with a working memory small enough to start an epoch
/// whose snapshot group needs recall and the index; the view for `config`
/// under a `window`-token budget.
fn snapshot_view(config: &str, window: u64) -> ContextView {
    let mut s = session();
    for i in 0..40 {
        s.user(&format!("turn {i}: look at module m{i} again"));
        s.tool_exchange(
            &format!("c{i}"),
            "shell",
            &format!("{{\"command\":\"grep zebra m{i}\"}}"),
            &format!(
                "m{i}.rs:{i}: zebra stripes counted {i} {}",
                "lorem ipsum ".repeat(30)
            ),
        );
        s.assistant(&format!("Module m{i} has a zebra."));
    }
    s.user("where were the zebra stripes counted?");
    let mut e = engine();
    e.set_config(&format!(
        r#"{{"rotation": "threshold", "retain_percent": 75, {config}}}"#
    ))
    .expect("config");
    let req = request(window, 600, "zebra stripes counted");
    let v = e.materialize(&s, &req).expect("materialize");
    check_view(&v, &req);
    assert_eq!(v.report.status, "rotated", "a new epoch with an archive");
    v
}

/// Tokens of recalled originals (searched, not the user's pinned
/// messages) and of the index, and the kinds of the snapshot group in order.
fn shares(v: &ContextView) -> (u64, u64, Vec<KernelContextKind>) {
    let kinds: Vec<KernelContextKind> = v
        .messages
        .iter()
        .filter_map(|m| m.kernel.as_ref().map(|k| k.kind))
        .collect();
    let originals = v.report.recall_tokens - v.report.episode_tokens;
    (originals, v.report.episode_tokens, kinds)
}

/// The kinds after the pinned user messages: what recall and the index
/// added, in order (runs of one kind collapsed).
fn order(kinds: &[KernelContextKind]) -> Vec<KernelContextKind> {
    let mut out: Vec<KernelContextKind> = Vec::new();
    for k in kinds {
        if matches!(
            k,
            KernelContextKind::Recall | KernelContextKind::ArchiveIndex
        ) && out.last() != Some(k)
        {
            out.push(*k);
        }
    }
    out
}

#[test]
fn recalled_originals_come_before_the_index_by_default() {
    // Plenty of room: both orders show everything; only the order differs.
    let spec = snapshot_view("\"allocation\": \"recall-first\"", 100_000);
    let other = snapshot_view("\"allocation\": \"index-first\"", 100_000);
    let (a_orig, a_index, a_kinds) = shares(&spec);
    let (b_orig, b_index, b_kinds) = shares(&other);
    assert!(a_orig > 0 && a_index > 0, "{a_orig} {a_index}");
    assert_eq!((a_orig, a_index), (b_orig, b_index), "the same entries");
    let last_two = |kinds: &[KernelContextKind]| order(kinds).split_off(order(kinds).len() - 2);
    assert_eq!(
        last_two(&a_kinds),
        [KernelContextKind::Recall, KernelContextKind::ArchiveIndex],
        "the spec's order: recalled originals (4), then the index (5)"
    );
    assert_eq!(
        last_two(&b_kinds),
        [KernelContextKind::ArchiveIndex, KernelContextKind::Recall]
    );
    // The default is the spec's order.
    let default = snapshot_view("\"user_tokens\": 4000", 100_000);
    assert!(
        serde_json::to_string(&default).unwrap() == serde_json::to_string(&spec).unwrap(),
        "the default allocation is not recall-first"
    );
}

#[test]
fn under_a_tight_budget_the_first_in_order_keeps_its_share() {
    // Find a budget where the two compete: recall-first keeps more
    // originals, index-first a larger index.
    let mut seen = 0;
    for window in (3_000..9_000).step_by(250) {
        let (a_orig, a_index, _) =
            shares(&snapshot_view("\"allocation\": \"recall-first\"", window));
        let (b_orig, b_index, _) =
            shares(&snapshot_view("\"allocation\": \"index-first\"", window));
        assert!(
            a_orig >= b_orig,
            "window {window}: recall-first recalled less"
        );
        assert!(
            a_index <= b_index,
            "window {window}: index-first indexed less"
        );
        if a_orig > b_orig && a_index < b_index {
            seen += 1;
        }
    }
    assert!(seen >= 3, "the orders competed at only {seen} budgets");
}
