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

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use latch_engine_sdk::estimate::message_tokens;
use latch_engine_sdk::types::*;
use latch_engine_sdk::words;
use serde::Serialize;

use crate::render::{SEP, one_line};

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
    /// Lower-case words of the intent, notes, files and tools (bounded), as
    /// ascending ids of the builder's term table (see
    /// [`EpisodeBuilder::keywords`]).
    pub keywords: Vec<u32>,
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
            keywords: Vec::new(),
            volume: 0,
            events: 0,
        }
    }

    /// True when the episode has the keyword `id`.
    pub fn has_keyword(&self, id: u32) -> bool {
        self.keywords.binary_search(&id).is_ok()
    }
}

/// Every keyword the builder has seen, interned: an episode stores ids, and
/// the postings (term id to closed episodes) are indexed by id.
#[derive(Clone, Debug, Default)]
struct Terms {
    ids: HashMap<Box<str>, u32, BuildHasherDefault<TermHasher>>,
    names: Vec<Box<str>>,
    postings: Vec<Vec<u32>>,
    /// Scratch buffer for lower-casing a word.
    word: String,
}

impl Terms {
    fn intern(&mut self, word: &str) -> u32 {
        if let Some(&id) = self.ids.get(word) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(word.into());
        self.ids.insert(word.into(), id);
        self.postings.push(Vec::new());
        id
    }

    /// Add the keywords of `text` (its first [`KEYWORD_SCAN_CHARS`]
    /// characters, split and lower-cased as [`latch_engine_sdk::tokenize_words`] does) to `ep`
    /// until it holds [`MAX_KEYWORDS`].
    fn add_keywords(&mut self, ep: &mut Episode, text: &str) {
        if ep.keywords.len() >= MAX_KEYWORDS {
            return;
        }
        let end = if text.len() <= KEYWORD_SCAN_CHARS {
            text.len()
        } else {
            text.char_indices()
                .nth(KEYWORD_SCAN_CHARS)
                .map(|(i, _)| i)
                .unwrap_or(text.len())
        };
        let mut word = std::mem::take(&mut self.word);
        for w in text[..end].split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if w.is_empty() {
                continue;
            }
            if ep.keywords.len() >= MAX_KEYWORDS {
                break;
            }
            word.clear();
            if w.is_ascii() {
                if w.len() < 3 {
                    continue;
                }
                word.push_str(w);
                word.make_ascii_lowercase();
            } else {
                word.push_str(&w.to_lowercase());
            }
            if is_keyword(&word) {
                let id = self.intern(&word);
                if let Err(at) = ep.keywords.binary_search(&id) {
                    ep.keywords.insert(at, id);
                }
            }
        }
        self.word = word;
    }

    fn add_file(&mut self, ep: &mut Episode, path: &str) {
        if ep.files.contains(path) {
            return;
        }
        let path = one_line(path, 200);
        if path.is_empty() {
            return;
        }
        self.add_keywords(ep, &path);
        ep.files.insert(path);
    }
}

/// Where an event falls in the segmentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// At or below the watermark: already folded in.
    Seen,
    /// Kernel context or a manual compact: in no episode.
    Outside,
    /// A user message: a new intent starts an episode.
    Intent,
    /// The open episode reached the volume cap: its next part starts here.
    Split,
    /// Conversation before the first user message starts an episode.
    SessionStart,
    /// The event joins the open episode.
    Continues,
}

/// The segmentation rule alone: where episodes start, and how many there
/// are. [`EpisodeBuilder`] follows it; on its own it counts episodes
/// without reading their words.
#[derive(Clone, Debug)]
pub struct Segmenter {
    watermark: u64,
    volume_cap: u64,
    /// The open episode's conversation volume.
    open_volume: Option<u64>,
    count: usize,
}

impl Segmenter {
    /// No episodes yet, with a volume cap in estimated tokens.
    pub fn new(volume_cap: u64) -> Self {
        Segmenter {
            watermark: 0,
            volume_cap: volume_cap.max(1),
            open_volume: None,
            count: 0,
        }
    }

    /// Number of episodes, the open one included.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True before the first episode.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Fold one event in (`volume` as for [`EpisodeBuilder::push`]) and say
    /// where it falls.
    pub fn push(&mut self, event: &Event, volume: u64) -> Step {
        if event.seq <= self.watermark && self.watermark != 0 {
            return Step::Seen;
        }
        self.watermark = event.seq;
        let full = self.open_volume.is_some_and(|v| v >= self.volume_cap);
        let step = match &event.body {
            EventBody::KernelContext(_) | EventBody::ManualCompact => return Step::Outside,
            EventBody::UserMessage(_) => Step::Intent,
            EventBody::AssistantMessage(_) | EventBody::Notification(_) if full => Step::Split,
            _ if self.open_volume.is_none() => Step::SessionStart,
            _ => Step::Continues,
        };
        let open = match step {
            Step::Continues => self.open_volume.get_or_insert(0),
            _ => {
                self.count += 1;
                self.open_volume.insert(0)
            }
        };
        *open += volume;
        step
    }
}

/// The incremental episode builder: closed episodes, the open trailing one
/// and a sequence watermark, plus inverted indexes (keyword and file to
/// closed episodes) so that scoring reads a bounded candidate set.
#[derive(Clone, Debug)]
pub struct EpisodeBuilder {
    closed: Vec<Episode>,
    open: Option<Episode>,
    segments: Segmenter,
    terms: Terms,
    file_terms: HashMap<String, Vec<u32>, BuildHasherDefault<TermHasher>>,
}

/// A small, fixed (unseeded) multiplicative hasher for short terms: the
/// maps it serves are only looked up, never iterated, so the builder stays
/// deterministic.
#[derive(Default)]
struct TermHasher(u64);

impl Hasher for TermHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
        self.0 = h;
    }
}

impl EpisodeBuilder {
    /// An empty builder with a volume cap in estimated tokens.
    pub fn new(volume_cap: u64) -> Self {
        EpisodeBuilder {
            closed: Vec::new(),
            open: None,
            segments: Segmenter::new(volume_cap),
            terms: Terms::default(),
            file_terms: HashMap::default(),
        }
    }

    /// The last sequence number folded in.
    pub fn watermark(&self) -> u64 {
        self.segments.watermark
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

    /// The keywords of an episode of this builder, in lexical order.
    pub fn keywords(&self, ep: &Episode) -> Vec<&str> {
        let mut words: Vec<&str> = ep
            .keywords
            .iter()
            .filter_map(|&id| self.terms.names.get(id as usize).map(|n| &**n))
            .collect();
        words.sort_unstable();
        words
    }

    /// The term ids of `words` this builder knows (a word it has never seen
    /// is in no episode).
    pub fn term_ids(&self, words: &BTreeSet<String>) -> Vec<u32> {
        words
            .iter()
            .filter_map(|w| self.terms.ids.get(w.as_str()).copied())
            .collect()
    }

    /// Fold one event in; `volume` is its conversation volume (see
    /// [`event_volume`]). Events at or below the watermark are ignored.
    pub fn push(&mut self, event: &Event, volume: u64) {
        match self.segments.push(event, volume) {
            Step::Seen | Step::Outside => return,
            Step::Intent => {
                let EventBody::UserMessage(parts) = &event.body else {
                    unreachable!("only a user message starts an intent")
                };
                let text = parts_text(parts);
                let topic = match one_line(&text, TOPIC_CHARS) {
                    t if t.is_empty() => "(image)".to_string(),
                    t => t,
                };
                self.close();
                let mut ep = Episode::new(event.seq, topic, 0);
                self.terms.add_keywords(&mut ep, &text);
                self.open = Some(ep);
            }
            Step::Split => {
                let open = self.open.as_ref().expect("a split follows an open episode");
                // The next part carries the intent's first keywords (in
                // lexical order).
                let mut next = Episode::new(event.seq, open.topic.clone(), open.part + 1);
                let mut carried: Vec<u32> = open.keywords.clone();
                carried.sort_by(|a, b| {
                    self.terms.names[*a as usize].cmp(&self.terms.names[*b as usize])
                });
                carried.truncate(MAX_KEYWORDS / 2);
                carried.sort_unstable();
                next.keywords = carried;
                self.close();
                self.open = Some(next);
            }
            Step::SessionStart => {
                self.open = Some(Episode::new(event.seq, "(session start)".into(), 0));
            }
            Step::Continues => {}
        }
        let ep = self.open.as_mut().expect("the segmenter opened an episode");
        let terms = &mut self.terms;
        ep.last_seq = event.seq;
        ep.events += 1;
        ep.volume += volume;
        match &event.body {
            EventBody::AssistantMessage(parts) => {
                for p in parts {
                    if let Part::ToolCall(c) = p {
                        if !ep.tools.contains(&c.name) {
                            let name = one_line(&c.name, 60);
                            terms.add_keywords(ep, &name);
                            ep.tools.insert(name);
                        }
                        for path in argument_paths(&c.arguments_json) {
                            terms.add_file(ep, path);
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
                terms.add_keywords(ep, &note.summary);
                for f in &note.files {
                    terms.add_file(ep, f);
                }
            }
            _ => {}
        }
    }

    fn close(&mut self) {
        if let Some(ep) = self.open.take() {
            let idx = self.closed.len() as u32;
            for &id in &ep.keywords {
                self.terms.postings[id as usize].push(idx);
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
        let query = self.term_ids(query);
        let lists = query
            .iter()
            .map(|&id| &self.terms.postings[id as usize])
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
                    .map(|ep| (score(ep, &query, files, i, archival), i))
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
    event
        .to_message()
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
fn argument_paths(args: &str) -> Vec<&str> {
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
                out.push(&value[..end]);
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

/// The first `max` distinct content words of `text` (lower-cased, at least
/// three characters, no stopwords), in first-seen order. Meant for short
/// lists such as a query's words: it reads only as far as it needs.
pub fn keywords(text: &str, max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in words(text) {
        if out.len() == max {
            break;
        }
        if is_keyword(&w) && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// Longest stopword, in bytes.
const STOPWORD_MAX_LEN: usize = 6;

fn is_keyword(w: &str) -> bool {
    w.chars().nth(2).is_some() && (w.len() > STOPWORD_MAX_LEN || !STOPWORDS.contains(&w))
}

/// The deterministic score of an episode: lexical overlap with the query
/// (its words' term ids, see [`EpisodeBuilder::term_ids`]),
/// overlap with the current file entities, marker weights and recency
/// (`rank` of `count` archival episodes, oldest 0).
pub fn score(
    ep: &Episode,
    query: &[u32],
    files: &BTreeSet<String>,
    rank: usize,
    count: usize,
) -> u64 {
    let lexical = query.iter().filter(|&&id| ep.has_keyword(id)).count() as u64;
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

    /// Every term of the score, each on its own: 8 per query keyword, 4 per
    /// current file, each marker's weight, and recency up to 6.
    #[test]
    fn the_score_adds_keywords_files_markers_and_recency() {
        let note = |kind, summary: &str, files: &[&str]| {
            EventBody::Kernel(KernelNote {
                kind,
                summary: summary.into(),
                files: files.iter().map(|f| f.to_string()).collect(),
            })
        };
        let mut s = MemorySession::new("s", ModelProfile::with_defaults("openai", "m"));
        s.user("plain work");
        s.user("tests pass");
        s.push(note(KernelNoteKind::ValidationPassed, "ok", &[]));
        s.user("an edit");
        s.push(note(KernelNoteKind::Mutation, "wrote", &["src/a.rs"]));
        s.user("evidence gathering");
        s.push(note(KernelNoteKind::Evidence, "kept", &[]));
        s.user("everything in src/b.rs and src/c.rs");
        s.push(note(
            KernelNoteKind::Mutation,
            "wrote",
            &["src/b.rs", "src/c.rs"],
        ));
        s.push(note(KernelNoteKind::ValidationPassed, "ok", &[]));
        s.push(note(KernelNoteKind::Evidence, "kept", &[]));
        s.push(note(KernelNoteKind::ValidationFailed, "bad", &[]));
        s.push(note(KernelNoteKind::Failure, "bad", &[]));
        s.push(note(KernelNoteKind::Reground, "again", &[]));
        let mut b = EpisodeBuilder::new(1_000);
        for e in &s.events {
            b.push(e, 10);
        }
        let eps: Vec<&Episode> = b.episodes().collect();
        assert_eq!(eps.len(), 5);
        let labels = |ep: &Episode| ep.markers.iter().map(|m| m.label()).collect::<Vec<_>>();
        assert_eq!(labels(eps[1]), ["validation-passed"]);
        assert_eq!(labels(eps[2]), ["mutation"]);
        assert_eq!(labels(eps[3]), ["evidence"]);
        let none = BTreeSet::new();
        // Recency alone, at the newest of a single episode: 6.
        assert_eq!(score(eps[0], &[], &none, 0, 1), 6);
        // Without recency (a score at rank 0 of many is 0 for the oldest).
        let bare = |ep: &Episode| score(ep, &[], &none, 0, 100);
        assert_eq!(bare(eps[0]), 0);
        assert_eq!(bare(eps[1]), 2, "validation passed weighs 2");
        assert_eq!(bare(eps[2]), 1, "a mutation weighs 1");
        assert_eq!(bare(eps[3]), 1, "evidence weighs 1");
        // Mutation 1 + passed 2 + evidence 1 + failed 3 + failure 3 + reground 2.
        assert_eq!(bare(eps[4]), 12);
        // 4 per current file the episode touched.
        let files: BTreeSet<String> = ["src/b.rs", "src/c.rs", "src/z.rs"]
            .map(String::from)
            .into();
        assert_eq!(score(eps[4], &[], &files, 0, 100), 12 + 8);
        assert_eq!(
            score(eps[2], &[], &files, 0, 100),
            1,
            "src/a.rs is not current"
        );
        // 8 per query keyword, recency by rank among the archive.
        let q = b.term_ids(&["evidence".to_string(), "gathering".to_string()].into());
        assert_eq!(q.len(), 2);
        assert_eq!(score(eps[3], &q, &none, 0, 100), 1 + 16);
        assert_eq!(score(eps[3], &q[..1], &none, 0, 100), 1 + 8);
        assert_eq!(score(eps[3], &q, &none, 3, 4), 1 + 16 + 6);
        assert_eq!(score(eps[3], &q, &none, 1, 4), 1 + 16 + 3);
        // Selection follows the score: of the four oldest, the newest
        // (evidence 1 + recency 6) wins unless a current file lifts the
        // edit (mutation 1 + file 4 + recency 4).
        let one: BTreeSet<String> = ["src/a.rs".to_string()].into();
        assert_eq!(b.select(4, &none, &none, 1), vec![3]);
        assert_eq!(b.select(4, &none, &one, 1), vec![2]);
    }

    #[test]
    fn stopwords_fit_the_length_bound() {
        assert!(STOPWORDS.iter().all(|w| w.len() <= STOPWORD_MAX_LEN));
        assert!(STOPWORDS.iter().any(|w| w.len() == STOPWORD_MAX_LEN));
    }

    #[test]
    fn query_keywords_are_the_first_distinct_content_words() {
        let text = "Fix the Parser: the parser panics, then the lexer and the parser_v2 fail";
        assert_eq!(
            keywords(text, 8),
            ["fix", "parser", "panics", "lexer", "parser_v2", "fail"]
        );
        assert_eq!(keywords(text, 2), ["fix", "parser"]);
        assert!(keywords("the and of it", 8).is_empty());
    }

    #[test]
    fn keywords_are_interned_words() {
        let mut s = MemorySession::new("s", ModelProfile::with_defaults("openai", "m"));
        s.user("Fix THE Parser, the parser's überfluß and the __init__ of src/lib.rs");
        let mut b = EpisodeBuilder::new(1_000);
        for e in &s.events {
            b.push(e, 10);
        }
        let ep = b.get(0).expect("episode");
        assert_eq!(
            b.keywords(ep),
            vec!["__init__", "fix", "lib", "parser", "src", "überfluß"]
        );
        let q: BTreeSet<String> = ["parser".to_string(), "unknown".to_string()].into();
        assert_eq!(b.term_ids(&q).len(), 1);
    }

    #[test]
    fn argument_paths_are_found() {
        assert_eq!(
            argument_paths(r#"{"path": "a/b.rs", "x": 1}"#),
            vec!["a/b.rs"]
        );
        assert_eq!(argument_paths(r#"{"file_path":"c.rs"}"#), vec!["c.rs"]);
        assert!(argument_paths(r#"{"path": 3}"#).is_empty());
    }
}
