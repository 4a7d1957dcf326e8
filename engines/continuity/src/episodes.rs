//! L2 episodes: intent-aligned event ranges, their deterministic scores and
//! the bounded episode index.
//!
//! A user message starts a new episode; an episode whose conversation volume
//! reaches the cap is split at the next assistant message or notification.
//! Each episode carries its event range, topic, file entities, tool names,
//! structural markers and a bounded keyword set. The [`EpisodeBuilder`] is a
//! fold over events with a sequence watermark: the closed episodes, the open
//! trailing one, and the last sequence number seen. [`build`] is the one-shot
//! builder; both use [`EpisodeBuilder::push`], so incremental extension equals
//! a full rebuild at every prefix.

use std::collections::{BTreeMap, BTreeSet};

use latch_engine_sdk::estimate::message_tokens;
use latch_engine_sdk::tokenize_words;
use latch_engine_sdk::types::*;
use serde::Serialize;

use crate::render::{SEP, conversation_message, one_line};

/// Most keywords kept for one episode.
const MAX_KEYWORDS: usize = 48;
/// Most characters of a message scanned for keywords.
const KEYWORD_SCAN_CHARS: usize = 2_000;
/// Longest topic, in characters.
const TOPIC_CHARS: usize = 80;
/// Candidates taken per query word or file, and from the newest episodes.
pub const CANDIDATES_PER_TERM: usize = 64;
/// Most current files used for scoring (the newest by sequence number).
pub const MAX_SCORED_FILES: usize = 16;

/// A structural marker of an episode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Marker {
    /// A validation passed.
    ValidationPassed,
    /// A validation failed.
    ValidationFailed,
    /// The kernel asked the model to re-ground.
    Reground,
    /// The workspace was (possibly) mutated.
    Mutation,
    /// Other evidence was recorded.
    Evidence,
    /// A failure: a tool error or a kernel failure note.
    Failure,
}

impl Marker {
    /// The marker's label.
    pub fn label(self) -> &'static str {
        match self {
            Marker::ValidationPassed => "validation-passed",
            Marker::ValidationFailed => "validation-failed",
            Marker::Reground => "reground",
            Marker::Mutation => "mutation",
            Marker::Evidence => "evidence",
            Marker::Failure => "failure",
        }
    }

    /// The marker's weight in the index score.
    pub fn weight(self) -> u64 {
        match self {
            Marker::ValidationFailed | Marker::Failure => 3,
            Marker::ValidationPassed | Marker::Reground => 2,
            Marker::Mutation | Marker::Evidence => 1,
        }
    }
}

/// One intent-aligned range of events.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Episode {
    /// First event of the range.
    pub first_seq: u64,
    /// Last event of the range.
    pub last_seq: u64,
    /// The intent: the first line of the user message that started it.
    pub topic: String,
    /// 0 for an intent's first episode, then 1, 2, ... for volume splits.
    pub part: u32,
    /// Workspace-relative paths the episode touched.
    pub files: BTreeSet<String>,
    /// Tools called.
    pub tools: BTreeSet<String>,
    /// Structural markers.
    pub markers: BTreeSet<Marker>,
    /// Lower-case words of the intent, notes, files and tools (bounded).
    pub keywords: BTreeSet<String>,
    /// Conversation volume in estimated tokens.
    pub volume: u64,
    /// Events in the range (conversation and kernel notes).
    pub events: u32,
}

impl Episode {
    fn new(seq: u64, topic: String, part: u32) -> Self {
        Episode {
            first_seq: seq,
            last_seq: seq,
            topic,
            part,
            files: BTreeSet::new(),
            tools: BTreeSet::new(),
            markers: BTreeSet::new(),
            keywords: BTreeSet::new(),
            volume: 0,
            events: 0,
        }
    }

    fn add_keywords(&mut self, text: &str) {
        if self.keywords.len() >= MAX_KEYWORDS {
            return;
        }
        let end = text
            .char_indices()
            .nth(KEYWORD_SCAN_CHARS)
            .map(|(i, _)| i)
            .unwrap_or(text.len());
        for w in tokenize_words(&text[..end]) {
            if self.keywords.len() >= MAX_KEYWORDS {
                break;
            }
            if is_keyword(&w) {
                self.keywords.insert(w);
            }
        }
    }

    fn add_file(&mut self, path: &str) {
        if self.files.contains(path) {
            return;
        }
        let path = one_line(path, 200);
        if path.is_empty() {
            return;
        }
        self.add_keywords(&path);
        self.files.insert(path);
    }
}

/// The incremental episode builder: closed episodes, the open trailing one
/// and a sequence watermark, plus inverted indexes (keyword and file to
/// closed episodes) so that scoring reads a bounded candidate set.
#[derive(Clone, Debug)]
pub struct EpisodeBuilder {
    closed: Vec<Episode>,
    open: Option<Episode>,
    watermark: u64,
    volume_cap: u64,
    terms: BTreeMap<String, Vec<u32>>,
    file_terms: BTreeMap<String, Vec<u32>>,
}

impl EpisodeBuilder {
    /// An empty builder with a volume cap in estimated tokens.
    pub fn new(volume_cap: u64) -> Self {
        EpisodeBuilder {
            closed: Vec::new(),
            open: None,
            watermark: 0,
            volume_cap: volume_cap.max(1),
            terms: BTreeMap::new(),
            file_terms: BTreeMap::new(),
        }
    }

    /// The last sequence number folded in.
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// Number of episodes, the open one included.
    pub fn len(&self) -> usize {
        self.closed.len() + usize::from(self.open.is_some())
    }

    /// True before the first episode.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every episode in order, the open one last.
    pub fn episodes(&self) -> impl Iterator<Item = &Episode> {
        self.closed.iter().chain(self.open.iter())
    }

    /// Fold one event in; `volume` is its conversation volume (see
    /// [`event_volume`]). Events at or below the watermark are ignored.
    pub fn push(&mut self, event: &Event, volume: u64) {
        if event.seq <= self.watermark && self.watermark != 0 {
            return;
        }
        self.watermark = event.seq;
        match &event.body {
            EventBody::KernelContext(_) | EventBody::ManualCompact => return,
            EventBody::UserMessage(parts) => {
                let text = parts_text(parts);
                let topic = match one_line(&text, TOPIC_CHARS) {
                    t if t.is_empty() => "(image)".to_string(),
                    t => t,
                };
                self.close();
                let mut ep = Episode::new(event.seq, topic, 0);
                ep.add_keywords(&text);
                self.open = Some(ep);
            }
            EventBody::AssistantMessage(_) | EventBody::Notification(_) => {
                if let Some(open) = &self.open
                    && open.volume >= self.volume_cap
                {
                    let next = Episode::new(event.seq, open.topic.clone(), open.part + 1);
                    let mut next = next;
                    next.keywords = open
                        .keywords
                        .iter()
                        .take(MAX_KEYWORDS / 2)
                        .cloned()
                        .collect();
                    self.close();
                    self.open = Some(next);
                }
            }
            _ => {}
        }
        let ep = self
            .open
            .get_or_insert_with(|| Episode::new(event.seq, "(session start)".into(), 0));
        ep.last_seq = event.seq;
        ep.events += 1;
        ep.volume += volume;
        match &event.body {
            EventBody::AssistantMessage(parts) => {
                for p in parts {
                    if let Part::ToolCall(c) = p {
                        if !ep.tools.contains(&c.name) {
                            let name = one_line(&c.name, 60);
                            ep.add_keywords(&name);
                            ep.tools.insert(name);
                        }
                        for path in argument_paths(&c.arguments_json) {
                            ep.add_file(&path);
                        }
                    }
                }
            }
            EventBody::ToolResult(r) if r.is_error => {
                ep.markers.insert(Marker::Failure);
            }
            EventBody::Kernel(note) => {
                let marker = match note.kind {
                    KernelNoteKind::ValidationPassed => Some(Marker::ValidationPassed),
                    KernelNoteKind::ValidationFailed => Some(Marker::ValidationFailed),
                    KernelNoteKind::Reground => Some(Marker::Reground),
                    KernelNoteKind::Mutation | KernelNoteKind::ExternalChange => {
                        Some(Marker::Mutation)
                    }
                    KernelNoteKind::Evidence => Some(Marker::Evidence),
                    KernelNoteKind::Failure => Some(Marker::Failure),
                    _ => None,
                };
                if let Some(m) = marker {
                    ep.markers.insert(m);
                }
                ep.add_keywords(&note.summary);
                for f in &note.files {
                    ep.add_file(f);
                }
            }
            _ => {}
        }
    }

    fn close(&mut self) {
        if let Some(ep) = self.open.take() {
            let idx = self.closed.len() as u32;
            for w in &ep.keywords {
                match self.terms.get_mut(w) {
                    Some(list) => list.push(idx),
                    None => {
                        self.terms.insert(w.clone(), vec![idx]);
                    }
                }
            }
            for f in &ep.files {
                match self.file_terms.get_mut(f) {
                    Some(list) => list.push(idx),
                    None => {
                        self.file_terms.insert(f.clone(), vec![idx]);
                    }
                }
            }
            self.closed.push(ep);
        }
    }

    /// The episode at `index` (the open one is last).
    pub fn get(&self, index: usize) -> Option<&Episode> {
        self.closed.get(index).or(if index == self.closed.len() {
            self.open.as_ref()
        } else {
            None
        })
    }

    /// How many episodes start before `seq` (the archival ones when `seq` is
    /// the epoch start).
    pub fn count_before(&self, seq: u64) -> usize {
        let closed = self.closed.partition_point(|e| e.first_seq < seq);
        if closed == self.closed.len() && self.open.as_ref().is_some_and(|e| e.first_seq < seq) {
            closed + 1
        } else {
            closed
        }
    }

    /// Indices of the episodes the index shows among the first `archival`:
    /// the best `max` by [`score`] (newer first on ties), in chronological
    /// order. Candidates are the newest [`CANDIDATES_PER_TERM`] episodes per
    /// query word and per current file, and the newest
    /// [`CANDIDATES_PER_TERM`] episodes, so the cost does not grow with the
    /// session.
    pub fn select(
        &self,
        archival: usize,
        query: &BTreeSet<String>,
        files: &BTreeSet<String>,
        max: usize,
    ) -> Vec<usize> {
        let mut candidates: BTreeSet<usize> =
            (archival.saturating_sub(CANDIDATES_PER_TERM)..archival).collect();
        let lists = query
            .iter()
            .filter_map(|w| self.terms.get(w))
            .chain(files.iter().filter_map(|f| self.file_terms.get(f)));
        for list in lists {
            let end = list.partition_point(|&i| (i as usize) < archival);
            candidates.extend(
                list[end.saturating_sub(CANDIDATES_PER_TERM)..end]
                    .iter()
                    .map(|&i| i as usize),
            );
        }
        let mut ranked: Vec<(u64, usize)> = candidates
            .into_iter()
            .filter_map(|i| {
                self.get(i)
                    .map(|ep| (score(ep, query, files, i, archival), i))
            })
            .collect();
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        let mut chosen: Vec<usize> = ranked.into_iter().take(max).map(|(_, i)| i).collect();
        chosen.sort_unstable();
        chosen
    }
}

/// The one-shot builder: every episode of `events` (ascending).
pub fn build(profile: EstimatorProfile, events: &[Event], volume_cap: u64) -> Vec<Episode> {
    let mut b = EpisodeBuilder::new(volume_cap);
    for e in events {
        b.push(e, event_volume(profile, e));
    }
    b.episodes().cloned().collect()
}

/// The conversation volume of an event: the canonical price of its message,
/// or 0 for events that are not conversation.
pub fn event_volume(profile: EstimatorProfile, event: &Event) -> u64 {
    conversation_message(event)
        .map(|m| message_tokens(profile, &m))
        .unwrap_or(0)
}

fn parts_text(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Paths named in tool-call arguments (`"path"`, `"file"`, `"file_path"`),
/// found by a cheap scan rather than a JSON parse.
fn argument_paths(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["\"path\"", "\"file\"", "\"file_path\""] {
        let mut rest = args;
        while let Some(i) = rest.find(key) {
            rest = &rest[i + key.len()..];
            let after = rest.trim_start();
            let Some(after) = after.strip_prefix(':') else {
                continue;
            };
            let after = after.trim_start();
            let Some(value) = after.strip_prefix('"') else {
                continue;
            };
            if let Some(end) = value.find('"') {
                out.push(value[..end].to_string());
            }
        }
    }
    out
}

const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "that", "this", "from", "into", "are", "was", "were", "you",
    "your", "but", "not", "can", "has", "have", "had", "its", "our", "all", "any", "out", "use",
    "now", "then", "than", "there", "their", "them", "they", "what", "when", "where", "which",
    "while", "will", "would", "should", "could", "please", "also", "just", "let", "lets", "make",
    "sure", "about", "again", "some", "more",
];

/// Lower-case content words of `text`: at least three characters, no
/// stopwords, deduplicated in first-seen order.
pub fn keywords(text: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for w in tokenize_words(text) {
        if !is_keyword(&w) {
            continue;
        }
        if seen.insert(w.clone()) {
            out.push(w);
        }
    }
    out
}

fn is_keyword(w: &str) -> bool {
    w.chars().nth(2).is_some() && !STOPWORDS.contains(&w)
}

/// The deterministic score of an episode: lexical overlap with the query,
/// overlap with the current file entities, marker weights and recency
/// (`rank` of `count` archival episodes, oldest 0).
pub fn score(
    ep: &Episode,
    query: &BTreeSet<String>,
    files: &BTreeSet<String>,
    rank: usize,
    count: usize,
) -> u64 {
    let lexical = query.iter().filter(|w| ep.keywords.contains(*w)).count() as u64;
    let file_overlap = ep.files.iter().filter(|f| files.contains(*f)).count() as u64;
    let markers: u64 = ep.markers.iter().map(|m| m.weight()).sum();
    let recency = if count == 0 {
        0
    } else {
        (6 * (rank as u64 + 1)) / count as u64
    };
    8 * lexical + 4 * file_overlap + markers + recency
}

/// One index line for an episode.
pub fn index_line(ep: &Episode) -> String {
    let mut line = format!(
        "- events {}..{}{SEP}{}",
        ep.first_seq, ep.last_seq, ep.topic
    );
    if ep.part > 0 {
        line.push_str(&format!(" (part {})", ep.part + 1));
    }
    let list = |set: &BTreeSet<String>| {
        let mut s: Vec<&str> = set.iter().map(String::as_str).take(4).collect();
        let more = set.len().saturating_sub(4);
        let more_text = format!("+{more}");
        if more > 0 {
            s.push(&more_text);
        }
        s.join(", ")
    };
    if !ep.files.is_empty() {
        line.push_str(&format!("{SEP}files: {}", list(&ep.files)));
    }
    if !ep.tools.is_empty() {
        line.push_str(&format!("{SEP}tools: {}", list(&ep.tools)));
    }
    if !ep.markers.is_empty() {
        let m: Vec<&str> = ep.markers.iter().map(|m| m.label()).collect();
        line.push_str(&format!("{SEP}markers: {}", m.join(", ")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::MemorySession;

    #[test]
    fn user_messages_start_episodes_and_volume_splits() {
        let mut s = MemorySession::new("s", ModelProfile::with_defaults("openai", "m"));
        s.user("fix the parser in src/parser.rs");
        s.tool_exchange(
            "c1",
            "read_file",
            r#"{"path":"src/parser.rs"}"#,
            &"x".repeat(400),
        );
        s.push(EventBody::Kernel(KernelNote {
            kind: KernelNoteKind::ValidationFailed,
            summary: "cargo test failed".into(),
            files: vec!["src/parser.rs".into()],
        }));
        for i in 0..10 {
            s.tool_exchange(&format!("d{i}"), "edit", "{}", &"y".repeat(400));
        }
        s.user("now the lexer");
        let eps = build(EstimatorProfile::Openai, &s.events, 300);
        assert!(eps.len() > 2, "volume cap splits the long intent");
        assert_eq!(eps[0].topic, "fix the parser in src/parser.rs");
        assert!(eps[0].files.contains("src/parser.rs"));
        assert!(eps[0].tools.contains("read_file"));
        assert!(eps[0].markers.contains(&Marker::ValidationFailed));
        assert!(eps[1].part >= 1 && eps[1].topic == eps[0].topic);
        assert_eq!(eps.last().map(|e| e.topic.as_str()), Some("now the lexer"));
        let ranges: Vec<(u64, u64)> = eps.iter().map(|e| (e.first_seq, e.last_seq)).collect();
        for w in ranges.windows(2) {
            assert!(w[0].1 < w[1].0, "ranges are disjoint and ordered");
        }
    }

    #[test]
    fn scoring_prefers_lexical_overlap_then_recency() {
        let mut s = MemorySession::new("s", ModelProfile::with_defaults("openai", "m"));
        s.user("the parser breaks");
        s.user("other things");
        s.user("newest work");
        let mut b = EpisodeBuilder::new(1_000);
        for e in &s.events {
            b.push(e, 10);
        }
        let q: BTreeSet<String> = ["parser".to_string()].into();
        let none = BTreeSet::new();
        assert_eq!(b.select(3, &q, &none, 1), vec![0]);
        assert_eq!(b.select(3, &none, &none, 1), vec![2]);
        assert_eq!(b.select(3, &none, &none, 2), vec![1, 2]);
        assert_eq!(
            b.select(2, &none, &none, 1),
            vec![1],
            "only archival episodes"
        );
        assert_eq!(b.count_before(3), 2);
        assert_eq!(b.count_before(100), 3);
    }

    #[test]
    fn argument_paths_are_found() {
        assert_eq!(
            argument_paths(r#"{"path": "a/b.rs", "x": 1}"#),
            vec!["a/b.rs".to_string()]
        );
        assert_eq!(
            argument_paths(r#"{"file_path":"c.rs"}"#),
            vec!["c.rs".to_string()]
        );
        assert!(argument_paths(r#"{"path": 3}"#).is_empty());
    }
}
