//! What a replayed view kept of its session: which of the session's user
//! messages, canonical constraints and decisions the view shows, and which
//! of the tool results the model later referred to again it still shows.
//!
//! * A user message is *visible* when the view cites it as conversation, or
//!   when a message of the view (kernel context restating the task, a
//!   summary) contains its text word for word.
//! * A constraint or decision is visible when its text appears anywhere in
//!   the view (kernel context, conversation, a tool call's arguments).
//! * A *re-reference* is the model coming back to an earlier tool result in
//!   a response: a call repeating an earlier call's tool and arguments
//!   (re-reading the same file, re-running the same command), or a quote of
//!   one of the result's error lines. At the request that response answered,
//!   the result was *in view* when the view cites it with its content
//!   whole; otherwise the host asks the engine's `recall` and it is
//!   *recallable* when the answer holds it, *lost* when not.

use aho_corasick::AhoCorasick;
use latch_engine_sdk::types::{Event, EventBody, Message, Part};
use latch_engine_sdk::{RECALL_TOOL, words};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};

/// Visible of total, for one kind of item.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Share {
    /// Items the view shows.
    pub visible: u64,
    /// Items the session had at that request.
    pub total: u64,
}

impl Share {
    /// Add another request's share.
    pub fn add(&mut self, other: Share) {
        self.visible += other.visible;
        self.total += other.total;
    }

    /// `visible / total` in percent; `None` when there was nothing.
    pub fn percent(&self) -> Option<f64> {
        (self.total > 0).then(|| 100.0 * self.visible as f64 / self.total as f64)
    }
}

/// What one view kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Kept {
    /// The session's user messages so far.
    pub user_messages: Share,
    /// Constraints of the canonical state.
    pub constraints: Share,
    /// Decisions of the canonical state.
    pub decisions: Share,
}

impl Kept {
    /// Add another request's figures.
    pub fn add(&mut self, other: &Kept) {
        self.user_messages.add(other.user_messages);
        self.constraints.add(other.constraints);
        self.decisions.add(other.decisions);
    }
}

/// The items a view is graded against at one request.
#[derive(Clone, Debug, Default)]
pub struct Items<'a> {
    /// The session's user messages so far: sequence number (as the engine
    /// sees the log) and text.
    pub user_messages: Vec<(u64, &'a str)>,
    /// Constraint texts.
    pub constraints: Vec<&'a str>,
    /// Decision texts.
    pub decisions: Vec<&'a str>,
}

/// The text of every part of the view, one part per line: texts (kernel
/// context included), tool calls' names and arguments, tool results.
pub fn view_text(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        for p in &m.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::ToolCall(c) => {
                    out.push_str(&c.name);
                    out.push(' ');
                    out.push_str(&c.arguments_json);
                }
                Part::ToolResult(r) => out.push_str(&r.content),
                Part::Image(_) => {}
            }
            out.push('\n');
        }
    }
    out
}

/// `text` as it reads inside a JSON string (a tool call's arguments).
fn json_escaped(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_default();
    quoted[1..quoted.len().saturating_sub(1).max(1)].to_string()
}

/// Grade `messages` (a whole view) against `items`.
pub fn kept(messages: &[Message], items: &Items) -> Kept {
    let cited: BTreeSet<u64> = messages
        .iter()
        .filter(|m| m.kernel.is_none())
        .flat_map(|m| m.source_seqs.iter().copied())
        .collect();
    // Every text searched for, with the item it shows: (kind, index).
    let mut needles: Vec<String> = Vec::new();
    let mut owners: Vec<(u8, usize)> = Vec::new();
    let mut add = |text: &str, owner: (u8, usize)| {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        needles.push(text.to_string());
        owners.push(owner);
        let escaped = json_escaped(text);
        if escaped != text {
            needles.push(escaped);
            owners.push(owner);
        }
    };
    for (i, (seq, text)) in items.user_messages.iter().enumerate() {
        if !cited.contains(seq) {
            add(text, (0, i));
        }
    }
    for (i, text) in items.constraints.iter().enumerate() {
        add(text, (1, i));
    }
    for (i, text) in items.decisions.iter().enumerate() {
        add(text, (2, i));
    }
    let mut found: BTreeSet<(u8, usize)> = BTreeSet::new();
    if !needles.is_empty()
        && let Ok(ac) = AhoCorasick::new(&needles)
    {
        let text = view_text(messages);
        let wanted: BTreeSet<(u8, usize)> = owners.iter().copied().collect();
        for m in ac.find_overlapping_iter(&text) {
            found.insert(owners[m.pattern().as_usize()]);
            if found.len() == wanted.len() {
                break;
            }
        }
    }
    let users_cited = items
        .user_messages
        .iter()
        .filter(|(seq, _)| cited.contains(seq))
        .count() as u64;
    let count = |kind: u8| found.iter().filter(|(k, _)| *k == kind).count() as u64;
    Kept {
        user_messages: Share {
            visible: users_cited + count(0),
            total: items.user_messages.len() as u64,
        },
        constraints: Share {
            visible: count(1),
            total: items.constraints.len() as u64,
        },
        decisions: Share {
            visible: count(2),
            total: items.decisions.len() as u64,
        },
    }
}

/// How the model came back to an earlier result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reuse {
    /// It repeated the call (same tool, same arguments).
    Repeated,
    /// It quoted one of the result's error lines.
    Quoted,
}

/// One re-reference found in the recorded log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rereference {
    /// The request whose response came back to the result (its index in
    /// the session's requests).
    pub request: usize,
    /// The result's sequence number in the recorded log.
    pub result_seq: u64,
    /// The call the result answers.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// How the model came back to it.
    pub how: Reuse,
    /// What the host asks the engine's `recall` when the view lacks it,
    /// as plain words: the tool and the call's arguments (what the model is
    /// about to ask again), then a line of the result (or the quoted line).
    pub queries: Vec<String>,
}

/// Where a re-referenced result stood at the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    /// The view showed it whole.
    InView,
    /// Not in view, but the engine's `recall` returned it.
    Recallable,
    /// Neither.
    Lost,
}

/// Tools whose repeated calls record or prove something rather than read
/// it again.
fn records(tool: &str) -> bool {
    tool == RECALL_TOOL
        || tool == "validate"
        || tool == "complete"
        || [
            "add_", "record_", "reject_", "revise_", "resolve_", "require_", "set_",
        ]
        .iter()
        .any(|p| tool.starts_with(p))
}

/// Lines worth quoting: long enough to be specific, and naming an error.
fn error_lines(content: &str) -> Vec<String> {
    const MARKERS: [&str; 8] = [
        "error",
        "panic",
        "failed",
        "failure",
        "exception",
        "fatal",
        "no such file",
        "not found",
    ];
    content
        .lines()
        .map(str::trim)
        .filter(|l| l.chars().count() >= 20)
        .filter(|l| {
            let lower = l.to_ascii_lowercase();
            MARKERS.iter().any(|m| lower.contains(m))
        })
        .take(8)
        .map(str::to_string)
        .collect()
}

/// The tool and the string values of a call's arguments, as at most eight
/// plain words.
fn call_query(tool: &str, arguments: &str) -> String {
    let mut text = tool.to_string();
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str(arguments) {
        for v in map.values() {
            if let serde_json::Value::String(s) = v {
                text.push(' ');
                text.push_str(s);
            }
        }
    }
    words(&text).take(8).collect::<Vec<_>>().join(" ")
}

/// At most eight words of the first line of `text` that has three or more.
fn query_of(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| words(l).nth(2).is_some())
        .unwrap_or(text);
    words(line).take(8).collect::<Vec<_>>().join(" ")
}

/// A call's identity for repetition: its tool and its arguments as JSON
/// (key order normalized).
fn call_key(name: &str, arguments: &str) -> String {
    let args = serde_json::from_str::<serde_json::Value>(arguments)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| arguments.to_string());
    format!("{name} {args}")
}

/// Every re-reference in `events` (a session's own events, in order):
/// `responses` maps the sequence number of each request's response (its
/// assistant message) to the request's index.
pub fn rereferences(events: &[Event], responses: &HashMap<u64, usize>) -> Vec<Rereference> {
    struct Seen {
        seq: u64,
        call_id: String,
        tool: String,
        queries: Vec<String>,
    }
    // Each call's identity and recall query, by call id.
    let mut keys: HashMap<String, (String, String)> = HashMap::new();
    let mut latest: HashMap<String, Seen> = HashMap::new();
    let mut quotable: Vec<(String, Seen)> = Vec::new();
    let mut out = Vec::new();
    for e in events {
        match &e.body {
            EventBody::AssistantMessage(parts) => {
                if let Some(&request) = responses.get(&e.seq) {
                    let mut said = String::new();
                    let mut seen: BTreeSet<u64> = BTreeSet::new();
                    for p in parts {
                        match p {
                            Part::ToolCall(c) => {
                                said.push_str(&c.arguments_json);
                                said.push('\n');
                                if records(&c.name) {
                                    continue;
                                }
                                let key = call_key(&c.name, &c.arguments_json);
                                if let Some(s) = latest.get(&key)
                                    && seen.insert(s.seq)
                                {
                                    out.push(Rereference {
                                        request,
                                        result_seq: s.seq,
                                        call_id: s.call_id.clone(),
                                        tool: s.tool.clone(),
                                        how: Reuse::Repeated,
                                        queries: s.queries.clone(),
                                    });
                                }
                            }
                            Part::Text(t) => {
                                said.push_str(t);
                                said.push('\n');
                            }
                            _ => {}
                        }
                    }
                    for (line, s) in &quotable {
                        if !seen.contains(&s.seq) && said.contains(line.as_str()) {
                            seen.insert(s.seq);
                            out.push(Rereference {
                                request,
                                result_seq: s.seq,
                                call_id: s.call_id.clone(),
                                tool: s.tool.clone(),
                                how: Reuse::Quoted,
                                queries: vec![query_of(line), s.queries[0].clone()],
                            });
                        }
                    }
                }
                for p in parts {
                    if let Part::ToolCall(c) = p {
                        keys.insert(
                            c.id.clone(),
                            (
                                call_key(&c.name, &c.arguments_json),
                                call_query(&c.name, &c.arguments_json),
                            ),
                        );
                    }
                }
            }
            EventBody::ToolResult(r) if r.name != RECALL_TOOL => {
                let (key, call) = keys
                    .get(&r.call_id)
                    .cloned()
                    .unwrap_or_else(|| (String::new(), r.name.clone()));
                let seen = |first: String| Seen {
                    seq: e.seq,
                    call_id: r.call_id.clone(),
                    tool: r.name.clone(),
                    queries: vec![first, query_of(&r.content)],
                };
                for line in error_lines(&r.content) {
                    quotable.push((line, seen(call.clone())));
                }
                if !key.is_empty() && !records(&r.name) {
                    latest.insert(key, seen(call.clone()));
                }
            }
            _ => {}
        }
    }
    out
}

/// True when the view shows the result `(seq, call_id)` with `content`
/// whole.
pub fn in_view(messages: &[Message], seq: u64, call_id: &str, content: &str) -> bool {
    messages
        .iter()
        .filter(|m| m.kernel.is_none() && m.source_seqs.contains(&seq))
        .flat_map(|m| &m.parts)
        .any(|p| matches!(p, Part::ToolResult(r) if r.call_id == call_id && r.content == content))
}

/// Counts of each standing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Standings {
    /// Shown whole in the view.
    pub in_view: u64,
    /// Returned by `recall` only.
    pub recallable: u64,
    /// Neither.
    pub lost: u64,
}

impl Standings {
    /// Count one more.
    pub fn add(&mut self, s: Standing) {
        match s {
            Standing::InView => self.in_view += 1,
            Standing::Recallable => self.recallable += 1,
            Standing::Lost => self.lost += 1,
        }
    }

    /// How many there are.
    pub fn total(&self) -> u64 {
        self.in_view + self.recallable + self.lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::{KernelContextKind, KernelTag, Role, ToolCall, ToolResult};

    fn call(id: &str, name: &str, args: &str) -> Part {
        Part::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments_json: args.into(),
        })
    }

    fn result(id: &str, name: &str, content: &str) -> EventBody {
        EventBody::ToolResult(ToolResult {
            call_id: id.into(),
            name: name.into(),
            content: content.into(),
            is_error: false,
            images: vec![],
        })
    }

    fn ev(seq: u64, body: EventBody) -> Event {
        Event {
            seq,
            time_ms: 0,
            body,
        }
    }

    #[test]
    fn users_constraints_and_decisions_are_visible_cited_or_restated() {
        let kernel = Message {
            role: Role::User,
            parts: vec![Part::Text(
                "Task: fix the \"parser\" bug\nConstraints: keep the API".into(),
            )],
            kernel: Some(KernelTag {
                kind: KernelContextKind::Snapshot,
                generation: 1,
                revision: 1,
                seq: Some(2),
            }),
            source_seqs: vec![],
        };
        let mut cited = Message::text(Role::User, "and add a test");
        cited.source_seqs = vec![9];
        let args = Message {
            role: Role::Assistant,
            parts: vec![call(
                "c1",
                "record_decision",
                r#"{"text":"use the \"fast\" path"}"#,
            )],
            kernel: None,
            source_seqs: vec![10],
        };
        let view = [kernel, cited, args];
        let items = Items {
            user_messages: vec![
                (3, "fix the \"parser\" bug"),
                (9, "and add a test"),
                (12, "gone"),
            ],
            constraints: vec!["keep the API", "never push"],
            decisions: vec!["use the \"fast\" path"],
        };
        let k = kept(&view, &items);
        assert_eq!(
            k.user_messages,
            Share {
                visible: 2,
                total: 3
            }
        );
        assert_eq!(
            k.constraints,
            Share {
                visible: 1,
                total: 2
            }
        );
        assert_eq!(
            k.decisions,
            Share {
                visible: 1,
                total: 1
            },
            "found JSON-escaped"
        );
        assert_eq!(k.user_messages.percent().map(|p| p.round()), Some(67.0));
        assert_eq!(Share::default().percent(), None);
    }

    #[test]
    fn repeated_calls_and_quoted_errors_are_re_references() {
        let events = [
            ev(
                1,
                EventBody::AssistantMessage(vec![call("a", "read_file", r#"{"path":"src/x.rs"}"#)]),
            ),
            ev(
                2,
                result("a", "read_file", "fn main() {}\nmore code here today"),
            ),
            ev(
                3,
                EventBody::AssistantMessage(vec![call(
                    "b",
                    "shell",
                    r#"{"command":"cargo build"}"#,
                )]),
            ),
            ev(
                4,
                result(
                    "b",
                    "shell",
                    "Compiling\nerror[E0425]: cannot find value `x` in this scope\n",
                ),
            ),
            // Not a response of a request (e.g. a repaired turn): skipped.
            ev(
                5,
                EventBody::AssistantMessage(vec![call(
                    "c",
                    "read_file",
                    r#"{ "path": "src/x.rs" }"#,
                )]),
            ),
            ev(6, result("c", "read_file", "fn main() {}")),
            ev(
                7,
                EventBody::AssistantMessage(vec![
                    Part::Text(
                        "The build says error[E0425]: cannot find value `x` in this scope".into(),
                    ),
                    call("d", "read_file", r#"{ "path": "src/x.rs" }"#),
                    call("e", "add_note", r#"{"text":"x"}"#),
                ]),
            ),
            ev(8, result("d", "read_file", "fn main() {}")),
        ];
        let responses: HashMap<u64, usize> = [(1, 0), (3, 1), (7, 2)].into_iter().collect();
        let found = rereferences(&events, &responses);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(
            (found[0].request, found[0].result_seq, found[0].how),
            (2, 6, Reuse::Repeated),
            "the latest result of the same call, arguments normalized"
        );
        assert_eq!(found[0].queries, ["read_file src x rs", "fn main"]);
        assert_eq!((found[1].result_seq, found[1].how), (4, Reuse::Quoted));
        assert_eq!(
            found[1].queries,
            [
                "error e0425 cannot find value x in this",
                "shell cargo build"
            ]
        );
        let view = [ev(6, result("c", "read_file", "fn main() {}"))
            .to_message()
            .unwrap()];
        assert!(in_view(&view, 6, "c", "fn main() {}"));
        assert!(!in_view(&view, 6, "c", "elided"));
        assert!(!in_view(&view, 4, "b", "fn main() {}"));
    }
}
