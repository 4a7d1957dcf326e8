//! The planted facts of a compared session and how their survival is
//! graded from what the model was actually sent.
//!
//! Four facts are planted early in every session: a constraint and a code
//! word in the first user message, an exact diagnostic that only one early
//! tool output prints, and a hypothesis recorded through the task-state
//! tools and then rejected. At the end the script asks about them; a fact is
//! `visible` when the request that carries the question shows it, `recalled`
//! when the model's `recall` tool returned it, and `lost` otherwise. The
//! rejected hypothesis survives only when it is shown as rejected: its
//! latest mention must say so, or it grades `active`.

use serde::Serialize;

/// Which planted fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FactId {
    /// A constraint stated only in the first user message.
    Constraint,
    /// A code word stated only in the first user message.
    CodeWord,
    /// An exact diagnostic printed only by one early tool output.
    Diagnostic,
    /// A hypothesis recorded with `add_hypothesis`, then rejected.
    RejectedHypothesis,
}

/// One planted fact: what must be seen, and how the model asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fact {
    /// Which fact.
    pub id: FactId,
    /// A short label for tables.
    pub label: &'static str,
    /// The exact text whose presence shows the fact.
    pub marker: &'static str,
    /// The `recall` query the model sends when the fact is not in its
    /// request (plain words, every one of which the fact's event contains).
    pub query: &'static str,
}

/// The hypothesis that is recorded, then rejected.
pub const HYPOTHESIS: &str = "the import fails because the CSV parser drops quoted newlines";
/// Why it is rejected.
pub const HYPOTHESIS_REASON: &str =
    "the failure reproduces with an input that has no quoted fields";
/// The exact diagnostic line (printed by one early tool output only).
pub const DIAGNOSTIC_LINE: &str =
    "ERROR ledger: checksum mismatch in block 0x5eed at offset 4096 (expected 9f1c, got 03ab)";

/// The four facts, in table order.
pub const FACTS: [Fact; 4] = [
    Fact {
        id: FactId::Constraint,
        label: "constraint",
        marker: "never touch the files under vendor/zlib",
        query: "vendor zlib pinned",
    },
    Fact {
        id: FactId::CodeWord,
        label: "code word",
        marker: "TANGERINE-7731",
        query: "release code word",
    },
    Fact {
        id: FactId::Diagnostic,
        label: "diagnostic",
        marker: "checksum mismatch in block 0x5eed at offset 4096",
        query: "checksum mismatch block",
    },
    Fact {
        id: FactId::RejectedHypothesis,
        label: "rejected hypothesis",
        marker: HYPOTHESIS,
        query: "CSV parser quoted newlines",
    },
];

/// The fact with this id.
pub fn fact(id: FactId) -> &'static Fact {
    FACTS
        .iter()
        .find(|f| f.id == id)
        .expect("every fact id is in FACTS")
}

/// The first user message's sentences that plant the constraint and the code
/// word.
pub fn first_task_facts() -> String {
    format!(
        "Constraint: {} — they are pinned upstream. The release code word is {}; quote it when you report.",
        fact(FactId::Constraint).marker,
        fact(FactId::CodeWord).marker
    )
}

/// How a fact fared by the end of the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Survival {
    /// In the request that asked about it.
    Visible,
    /// Not in the request, but returned by the model's `recall` tool.
    Recalled,
    /// Neither.
    Lost,
    /// The rejected hypothesis was shown as active (its latest mention does
    /// not say it was rejected): worse than lost.
    Active,
}

impl Survival {
    /// True for `visible` and `recalled`.
    pub fn survived(self) -> bool {
        matches!(self, Survival::Visible | Survival::Recalled)
    }

    /// The table word.
    pub fn word(self) -> &'static str {
        match self {
            Survival::Visible => "visible",
            Survival::Recalled => "recalled",
            Survival::Lost => "lost",
            Survival::Active => "ACTIVE",
        }
    }
}

/// What `text` shows of `fact`: `Some(true)` when it shows the fact (for
/// the hypothesis: its latest mention says it was rejected), `Some(false)`
/// when it shows the hypothesis only as active, `None` when the fact is not
/// there at all.
pub fn shows(fact: &Fact, text: &str) -> Option<bool> {
    match fact.id {
        FactId::RejectedHypothesis => text
            .lines()
            .rfind(|l| l.contains(fact.marker))
            .map(|l| l.to_ascii_lowercase().contains("reject")),
        _ => text.contains(fact.marker).then_some(true),
    }
}

/// Grade one fact from the text of the request that asked about it and the
/// text of what the model's `recall` returned for it (if it called it).
pub fn grade(fact: &Fact, request_text: &str, recall_result: Option<&str>) -> Survival {
    match shows(fact, request_text) {
        Some(true) => return Survival::Visible,
        Some(false) => return Survival::Active,
        None => {}
    }
    match recall_result.and_then(|r| shows(fact, r)) {
        Some(true) => Survival::Recalled,
        Some(false) => Survival::Active,
        None => Survival::Lost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_facts_are_visible_recalled_or_lost() {
        let code = fact(FactId::CodeWord);
        assert_eq!(
            grade(code, "the word is TANGERINE-7731", None),
            Survival::Visible
        );
        assert_eq!(
            grade(code, "nothing here", Some("event 3: TANGERINE-7731")),
            Survival::Recalled
        );
        assert_eq!(
            grade(code, "nothing here", Some("unknown tool `recall`")),
            Survival::Lost
        );
        assert_eq!(grade(code, "nothing here", None), Survival::Lost);
    }

    #[test]
    fn the_hypothesis_survives_only_as_rejected() {
        let h = fact(FactId::RejectedHypothesis);
        let added = format!("tool_use add_hypothesis {{\"text\":\"{HYPOTHESIS}\"}}");
        let rejected = format!(
            "tool_use reject_hypothesis {{\"reason\":\"{HYPOTHESIS_REASON}\",\"text\":\"{HYPOTHESIS}\"}}"
        );
        assert_eq!(
            grade(h, &format!("{added}\n{rejected}"), None),
            Survival::Visible
        );
        assert_eq!(
            grade(h, &format!("- {HYPOTHESIS} — rejected: x"), None),
            Survival::Visible
        );
        assert_eq!(grade(h, &added, None), Survival::Active, "only ever added");
        assert_eq!(
            grade(
                h,
                &format!("{rejected}\n## Active hypotheses\n- {HYPOTHESIS}"),
                None
            ),
            Survival::Active,
            "the latest mention decides"
        );
        assert_eq!(
            grade(h, "no mention", Some(&format!("{added}\n{rejected}"))),
            Survival::Recalled
        );
        assert_eq!(grade(h, "no mention", Some(&added)), Survival::Active);
    }

    #[test]
    fn the_first_task_plants_both_user_facts_and_queries_match_them() {
        let text = first_task_facts();
        assert_eq!(shows(fact(FactId::Constraint), &text), Some(true));
        assert_eq!(shows(fact(FactId::CodeWord), &text), Some(true));
        assert!(DIAGNOSTIC_LINE.contains(fact(FactId::Diagnostic).marker));
        // Every query word occurs in the text that plants its fact, so a
        // full-text recall finds it.
        let sources = [
            (FactId::Constraint, text.clone()),
            (FactId::CodeWord, text.clone()),
            (FactId::Diagnostic, DIAGNOSTIC_LINE.to_string()),
            (FactId::RejectedHypothesis, HYPOTHESIS.to_string()),
        ];
        for (id, source) in sources {
            for word in fact(id).query.split_whitespace() {
                assert!(
                    source.to_lowercase().contains(&word.to_lowercase()),
                    "{word} of {id:?}"
                );
            }
        }
    }
}
