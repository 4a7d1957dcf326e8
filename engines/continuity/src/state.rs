//! Rendering the canonical task state (L1) under a token budget.
//!
//! The canonical core — goal, constraints, required validations, current
//! evidence, active failure lineages and durable disproofs — comes first.
//! Memory lines follow and are dropped lowest priority first under budget
//! pressure: notes, then files and stale evidence, then hypotheses, then
//! criteria, actions and questions, then decisions. A rejected hypothesis is
//! only ever rendered in the "Rejected hypotheses" section, never as active.

use latch_engine_sdk::estimate;
use latch_engine_sdk::types::*;

use crate::render::one_line;

/// Section titles in display order.
const SECTIONS: [&str; 15] = [
    "Goal",
    "Constraints",
    "Required validations",
    "Current evidence",
    "Active failure lineages",
    "Disproofs (understood and closed; not real problems)",
    "Decisions",
    "Completion criteria",
    "Next actions",
    "Open questions",
    "Active hypotheses",
    "Rejected hypotheses (do not pursue)",
    "Stale evidence (the workspace changed since)",
    "Files",
    "Notes",
];

/// Priority tier of each section: 0 is the canonical core; higher tiers drop
/// first.
const TIERS: [u8; 15] = [0, 0, 0, 0, 0, 0, 1, 2, 2, 2, 3, 3, 4, 4, 5];

/// Longest single rendered line, in characters.
const MAX_LINE_CHARS: usize = 2_000;

struct Line {
    section: usize,
    /// Order inside the tier when selecting (smaller first).
    rank: (u64, u64),
    /// Order inside the section when displaying.
    order: usize,
    text: String,
    cost: u64,
}

/// The state body (without a header line) within about `avail` tokens of
/// room: the core may take up to half of `avail`, memory lines fill up to a
/// quarter of it.
pub fn render_state(profile: EstimatorProfile, state: &CanonicalState, avail: u64) -> String {
    let lines = collect(profile, state);
    let section_cost: Vec<u64> = SECTIONS
        .iter()
        .map(|s| estimate(profile, &format!("## {s}\n")) as u64)
        .collect();
    let core: u64 = lines
        .iter()
        .filter(|l| TIERS[l.section] == 0)
        .map(|l| l.cost)
        .sum::<u64>()
        + section_cost.iter().take(6).sum::<u64>();
    // Reserve room for the omission note.
    let note_cost = 24u64;
    let cap = (avail / 4)
        .max(core.min(avail / 2))
        .saturating_sub(note_cost);

    let mut order: Vec<usize> = (0..lines.len()).collect();
    order.sort_by_key(|&i| (TIERS[lines[i].section], lines[i].rank));
    let mut used = 0u64;
    let mut has_section = [false; 15];
    let mut keep = vec![false; lines.len()];
    let mut omitted = 0usize;
    // Strict priority: once a line does not fit, it and every line of lower
    // priority are omitted.
    let mut full = false;
    for i in order {
        let l = &lines[i];
        let extra = if has_section[l.section] {
            0
        } else {
            section_cost[l.section]
        };
        if !full && used + l.cost + extra <= cap {
            used += l.cost + extra;
            has_section[l.section] = true;
            keep[i] = true;
        } else {
            full = true;
            omitted += 1;
        }
    }

    let mut text = String::new();
    for (s, title) in SECTIONS.iter().enumerate() {
        let mut in_section: Vec<&Line> = lines
            .iter()
            .enumerate()
            .filter(|(i, l)| keep[*i] && l.section == s)
            .map(|(_, l)| l)
            .collect();
        if in_section.is_empty() {
            continue;
        }
        in_section.sort_by_key(|l| l.order);
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str("## ");
        text.push_str(title);
        text.push('\n');
        for l in in_section {
            text.push_str(&l.text);
            text.push('\n');
        }
    }
    if text.is_empty() {
        text.push_str("(no task state recorded yet)\n");
    }
    if omitted > 0 {
        text.push_str(&format!(
            "\n({omitted} lower-priority lines omitted under the token budget)\n"
        ));
    }
    text
}

fn collect(profile: EstimatorProfile, state: &CanonicalState) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut push = |section: usize, rank: (u64, u64), order: usize, text: String| {
        let text = format!("- {}", one_line(&text, MAX_LINE_CHARS));
        let cost = estimate(profile, &text) as u64 + 1;
        lines.push(Line {
            section,
            rank,
            order,
            text,
            cost,
        });
    };
    // Core lines keep display order when selected; memory lines prefer the
    // newest (highest sequence number first).
    let newest = |seq: u64| (u64::MAX - seq, 0);
    if let Some(goal) = &state.goal {
        push(0, (0, 0), 0, goal.text.clone());
    }
    for (i, c) in state.constraints.iter().enumerate() {
        push(1, (1, i as u64), i, c.text.clone());
    }
    for (i, v) in state.validations.iter().enumerate() {
        let status = match state.evidence.iter().find(|e| e.requirement == v.text) {
            None => "not yet validated".to_string(),
            Some(e) if e.stale => format!(
                "stale: last {} at generation {}; rerun",
                outcome(e),
                e.generation
            ),
            Some(e) => format!(
                "{} at generation {} by `{}`",
                outcome(e),
                e.generation,
                one_line(&e.command, 200)
            ),
        };
        push(2, (2, i as u64), i, format!("{} [{status}]", v.text));
    }
    let mut current = 0usize;
    let mut stale = 0usize;
    for e in &state.evidence {
        let text = format!(
            "{}: {} — `{}` (generation {}, event {})",
            outcome(e),
            e.requirement,
            one_line(&e.command, 200),
            e.generation,
            e.seq
        );
        if e.stale {
            push(12, newest(e.seq), stale, text);
            stale += 1;
        } else {
            push(3, (3, current as u64), current, text);
            current += 1;
        }
    }
    for (i, f) in state.failures.iter().enumerate() {
        push(
            4,
            (4, i as u64),
            i,
            format!(
                "{} ×{} (events {}..{}): {}",
                f.key, f.count, f.first_seq, f.last_seq, f.summary
            ),
        );
    }
    for (i, d) in state.disproofs.iter().enumerate() {
        push(5, (5, i as u64), i, d.text.clone());
    }
    let entries = [
        (6, &state.decisions),
        (7, &state.criteria),
        (8, &state.actions),
        (9, &state.questions),
    ];
    for (section, list) in entries {
        for (i, e) in list.iter().enumerate() {
            push(section, newest(e.seq), i, e.text.clone());
        }
    }
    let (mut active, mut rejected) = (0usize, 0usize);
    for h in &state.hypotheses {
        match h.status {
            HypothesisStatus::Active => {
                push(10, newest(h.seq), active, h.text.clone());
                active += 1;
            }
            HypothesisStatus::Rejected => {
                let reason = h
                    .reason
                    .as_deref()
                    .map(|r| format!(" — rejected: {r}"))
                    .unwrap_or_else(|| " — rejected".into());
                push(11, newest(h.seq), rejected, format!("{}{reason}", h.text));
                rejected += 1;
            }
        }
    }
    for (i, f) in state.files.iter().enumerate() {
        let hash = f
            .sha256
            .as_deref()
            .map(|h| format!(", sha256 {}", h.chars().take(12).collect::<String>()))
            .unwrap_or_default();
        push(
            13,
            newest(f.seq),
            i,
            format!("{} ({} bytes{hash}, event {})", f.path, f.size, f.seq),
        );
    }
    for (i, n) in state.notes.iter().enumerate() {
        push(14, newest(n.seq), i, n.text.clone());
    }
    lines
}

fn outcome(e: &Evidence) -> &'static str {
    match e.outcome {
        ValidationOutcome::Passed => "passed",
        ValidationOutcome::Failed => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: EstimatorProfile = EstimatorProfile::Openai;

    fn entry(text: &str, seq: u64) -> StateEntry {
        StateEntry {
            text: text.into(),
            seq,
        }
    }

    fn state() -> CanonicalState {
        let mut s = CanonicalState::empty();
        s.revision = 3;
        s.goal = Some(entry("ship the parser", 1));
        s.constraints = vec![entry("never edit generated files", 2)];
        s.decisions = vec![entry("use a recursive-descent parser", 3)];
        s.hypotheses = vec![
            Hypothesis {
                text: "the cache races".into(),
                seq: 4,
                status: HypothesisStatus::Rejected,
                reason: Some("single-threaded".into()),
            },
            Hypothesis {
                text: "the lexer drops a token".into(),
                seq: 5,
                status: HypothesisStatus::Active,
                reason: None,
            },
        ];
        s.notes = (0..200)
            .map(|i| entry(&format!("note number {i} with some words"), 10 + i))
            .collect();
        s
    }

    #[test]
    fn rejected_hypotheses_never_render_active() {
        let text = render_state(P, &state(), 100_000);
        let active = text.split("## Active hypotheses").nth(1).unwrap_or("");
        let active = active.split("## ").next().unwrap_or("");
        assert!(active.contains("the lexer drops a token"));
        assert!(!active.contains("the cache races"));
        assert!(text.contains("the cache races — rejected: single-threaded"));
    }

    #[test]
    fn notes_drop_before_hypotheses_before_decisions() {
        let text = render_state(P, &state(), 1_200);
        assert!(text.contains("ship the parser"));
        assert!(text.contains("never edit generated files"));
        assert!(text.contains("recursive-descent"));
        assert!(text.contains("the lexer drops a token"));
        assert!(text.contains("omitted under the token budget"));
        assert!(!text.contains("note number 0 "), "oldest notes drop first");
        let tiny = render_state(P, &state(), 160);
        assert!(tiny.contains("ship the parser"));
        assert!(!tiny.contains("note number"));
        assert!(estimate(P, &tiny) as u64 <= 160);
    }

    /// Which memory sections of `text` have at least one line.
    fn present(text: &str) -> [bool; 3] {
        ["## Notes\n", "## Active hypotheses\n", "## Decisions\n"].map(|t| text.contains(t))
    }

    /// As the budget shrinks one token at a time, notes go first, then
    /// hypotheses, then decisions: never a note without every hypothesis and
    /// decision, never a hypothesis without every decision.
    #[test]
    fn under_a_shrinking_budget_notes_drop_then_hypotheses_then_decisions() {
        let mut s = CanonicalState::empty();
        s.goal = Some(entry("ship the parser", 1));
        let words = "about the same length as every other memory line";
        s.decisions = (0..6)
            .map(|i| entry(&format!("decision {i} {words}"), 100 + i))
            .collect();
        s.hypotheses = (0..6)
            .map(|i| Hypothesis {
                text: format!("hypothesis {i} {words}"),
                // Newer than every decision: recency never outranks a tier.
                seq: 200 + i,
                status: HypothesisStatus::Active,
                reason: None,
            })
            .collect();
        s.notes = (0..6)
            .map(|i| entry(&format!("note {i} {words}"), 300 + i))
            .collect();
        let count = |text: &str, what: &str| text.matches(&format!("- {what} ")).count();
        // The budget at which each kind first loses a line, and loses all.
        let mut first_loss: [Option<u64>; 3] = [None; 3];
        let mut gone: [Option<u64>; 3] = [None; 3];
        for avail in (40..1_600u64).rev() {
            let text = render_state(P, &s, avail);
            let n = ["note", "hypothesis", "decision"].map(|w| count(&text, w));
            let has = present(&text);
            for k in 0..3 {
                if n[k] < 6 && first_loss[k].is_none() {
                    first_loss[k] = Some(avail);
                }
                if !has[k] && gone[k].is_none() {
                    gone[k] = Some(avail);
                }
            }
            // A lower-priority line only while every higher one is kept.
            if n[0] > 0 {
                assert!(n[1] == 6 && n[2] == 6, "at {avail}: {n:?}\n{text}");
            }
            if n[1] > 0 {
                assert_eq!(n[2], 6, "at {avail}: {n:?}\n{text}");
            }
        }
        let [notes, hypotheses, decisions] = gone.map(|g| g.expect("every kind drops out"));
        assert!(
            notes > hypotheses && hypotheses > decisions,
            "notes gone below {notes}, hypotheses below {hypotheses}, decisions below {decisions}"
        );
        assert!(first_loss[0] > first_loss[1] && first_loss[1] > first_loss[2]);
        // The core outlives them all.
        assert!(render_state(P, &s, 160).contains("ship the parser"));
        assert!(!present(&render_state(P, &s, 160)).contains(&true));
    }

    /// Evidence the workspace has moved past renders only as stale: in its
    /// own section with its outcome, command, generation and event, and on
    /// its requirement as "stale ...; rerun", never as current evidence.
    #[test]
    fn stale_evidence_renders_as_stale_and_never_as_current() {
        let mut s = CanonicalState::empty();
        s.validations = vec![entry("cargo test", 2), entry("cargo clippy", 3)];
        s.evidence = vec![
            Evidence {
                requirement: "cargo test".into(),
                command: "cargo test --workspace".into(),
                outcome: ValidationOutcome::Passed,
                generation: 4,
                stale: true,
                seq: 9,
            },
            Evidence {
                requirement: "cargo clippy".into(),
                command: "cargo clippy -- -D warnings".into(),
                outcome: ValidationOutcome::Failed,
                generation: 7,
                stale: false,
                seq: 12,
            },
        ];
        let text = render_state(P, &s, 100_000);
        let section = |title: &str| {
            text.split(&format!("## {title}\n"))
                .nth(1)
                .map(|rest| rest.split("\n## ").next().unwrap_or(""))
                .unwrap_or_else(|| panic!("no {title} section:\n{text}"))
                .to_string()
        };
        assert_eq!(
            section("Stale evidence (the workspace changed since)").trim_end(),
            "- passed: cargo test — `cargo test --workspace` (generation 4, event 9)"
        );
        assert_eq!(
            section("Current evidence").trim_end(),
            "- failed: cargo clippy — `cargo clippy -- -D warnings` (generation 7, event 12)"
        );
        assert_eq!(
            section("Required validations").trim_end(),
            "- cargo test [stale: last passed at generation 4; rerun]\n\
             - cargo clippy [failed at generation 7 by `cargo clippy -- -D warnings`]"
        );
        // Stale evidence is memory, not core: it drops before decisions.
        s.decisions = vec![entry("keep the parser recursive-descent", 5)];
        let squeezed = (20..4_000)
            .rev()
            .map(|avail| render_state(P, &s, avail))
            .find(|t| !t.contains("## Stale evidence"))
            .expect("stale evidence drops under pressure");
        assert!(
            squeezed.contains("keep the parser recursive-descent"),
            "{squeezed}"
        );
        assert!(squeezed.contains("## Current evidence"), "{squeezed}");
    }
}
