//! The skill list for the session context: name and description of each
//! skill in name order, within a token cap (≈2% of the context window by
//! default), with a note naming what the cap left out.

use super::Skill;
use latch_engine_sdk::estimate;
use latch_engine_sdk::types::EstimatorProfile;

/// The name of the extension source that carries the list.
pub const CATALOG_SOURCE: &str = "skills";
/// Default share of the context window the list may take, in percent.
pub const DEFAULT_CATALOG_PERCENT: u32 = 2;
/// Most names the left-out note spells out.
const NOTE_NAMES: usize = 20;

/// The list's text and what it left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catalog {
    /// The text (empty when there are no skills).
    pub text: String,
    /// Names listed.
    pub listed: Vec<String>,
    /// Names left out by the cap.
    pub omitted: Vec<String>,
}

const HEADER: &str = "Skills: folders of instructions (and sometimes scripts, references and \
assets) for particular tasks. When a task matches a skill's description, call \
`load_skill {\"name\": NAME}` first and follow its instructions; \
`load_skill {\"name\": NAME, \"path\": \"references/x.md\"}` reads one file of the skill.";

fn line(skill: &Skill) -> String {
    let description: String = skill
        .description
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    format!("\n- {}: {description}", skill.name)
}

fn note(omitted: &[String], cap: u64) -> String {
    let mut names: Vec<&str> = omitted
        .iter()
        .take(NOTE_NAMES)
        .map(String::as_str)
        .collect();
    if omitted.len() > NOTE_NAMES {
        names.push("…");
    }
    format!(
        "\n[{} more skill(s) not listed here (the list is capped at ≈{cap} tokens): {}. \
         load_skill loads any of them by name; `latch skills` lists them all.]",
        omitted.len(),
        names.join(", ")
    )
}

/// The list of `skills` (in name order) within `max_tokens`.
pub fn catalog(skills: &[Skill], max_tokens: u64, profile: EstimatorProfile) -> Catalog {
    if skills.is_empty() {
        return Catalog {
            text: String::new(),
            listed: vec![],
            omitted: vec![],
        };
    }
    let tokens = |t: &str| estimate(profile, t) as u64;
    let mut text = HEADER.to_string();
    let mut listed = Vec::new();
    let mut omitted = Vec::new();
    for (i, skill) in skills.iter().enumerate() {
        if !omitted.is_empty() {
            omitted.push(skill.name.clone());
            continue;
        }
        let candidate = format!("{text}{}", line(skill));
        // Room is kept for the note whenever something may still be left out.
        let rest: Vec<String> = skills[i + 1..].iter().map(|s| s.name.clone()).collect();
        let with_note = if rest.is_empty() {
            candidate.clone()
        } else {
            format!("{candidate}{}", note(&rest, max_tokens))
        };
        if tokens(&with_note) <= max_tokens {
            text = candidate;
            listed.push(skill.name.clone());
        } else {
            omitted.push(skill.name.clone());
        }
    }
    if !omitted.is_empty() {
        text.push_str(&note(&omitted, max_tokens));
    }
    Catalog {
        text,
        listed,
        omitted,
    }
}

/// The cap for a context window and a percentage.
pub fn cap_tokens(context_window_tokens: u64, percent: u32) -> u64 {
    context_window_tokens.saturating_mul(u64::from(percent)) / 100
}
