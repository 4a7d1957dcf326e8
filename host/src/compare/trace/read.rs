//! Reading a trace back into a [`Recording`], refusing anything the format
//! does not allow with the line and the field at fault: a line that is not
//! JSON, a missing or mistyped field (found by its path, e.g.
//! `event.data.parts[0].Text`), an unknown line type or event kind, a
//! version this Latch does not read, events out of order or of a session
//! no line declared.

use super::{HEADER_TYPE, TraceError, VERSION};
use crate::compare::recording::{Logged, Recorded, RecordedSession, Recording};
use latch_engine_sdk::types::{MediaRef, ModelProfile};
use latch_kernel::{ENGINE_HIDDEN_KINDS, EventKind};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

#[derive(Deserialize)]
struct Header {
    version: u32,
    root: String,
    #[serde(default)]
    redacted: bool,
}

#[derive(Deserialize)]
struct SessionLine {
    id: String,
    #[serde(default)]
    parent: Option<String>,
    workspace: String,
    #[serde(default)]
    model: Option<ModelProfile>,
    #[serde(default = "yes")]
    replayed: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct EventLine {
    seq: u64,
    session: String,
    time_ms: u64,
    event: EventKind,
}

#[derive(Deserialize)]
struct HiddenLine {
    seq: u64,
    session: String,
    time_ms: u64,
    kind: String,
}

/// A trace read from a file.
pub fn read(path: &Path) -> Result<Recording, TraceError> {
    let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    read_str(&text, path)
}

struct Declared {
    line: SessionLine,
    log: Vec<Logged>,
}

/// A trace read from `text` (`path` names it in errors).
pub fn read_str(text: &str, path: &Path) -> Result<Recording, TraceError> {
    let bad = |line: usize, field: &str, message: String| TraceError::Malformed {
        path: path.to_path_buf(),
        line,
        field: field.to_string(),
        message,
    };
    // Typed lines are read from their text (not from a parsed value, whose
    // keys are sorted), so an event's `kind` comes before its `data` and a
    // bad field is found by its whole path.
    fn parse<T: DeserializeOwned>(
        raw: &str,
        line: usize,
        prefix: &str,
        bad: &dyn Fn(usize, &str, String) -> TraceError,
    ) -> Result<T, TraceError> {
        let mut de = serde_json::Deserializer::from_str(raw);
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let field = e.path().to_string();
            let field = if field == "." {
                prefix.to_string()
            } else {
                field
            };
            bad(line, &field, e.into_inner().to_string())
        })
    }
    let mut header: Option<Header> = None;
    let mut sessions: Vec<Declared> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut artifacts = BTreeMap::new();
    let mut last_seq: Option<u64> = None;
    let mut events: Vec<Logged> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(raw)
            .map_err(|e| bad(n, "(line)", format!("not a JSON object: {e}")))?;
        let Some(kind) = value
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return Err(bad(
                n,
                "type",
                "every line needs a `type`: latch-trace, session, artifact, event or hidden".into(),
            ));
        };
        if header.is_none() {
            if kind != HEADER_TYPE {
                return Err(bad(
                    n,
                    "type",
                    format!(
                        "a trace starts with its header line (`\"type\": \"{HEADER_TYPE}\"`), not `{kind}`"
                    ),
                ));
            }
            let h: Header = parse(raw, n, "(line)", &bad)?;
            if h.version != VERSION {
                return Err(bad(
                    n,
                    "version",
                    format!(
                        "this Latch reads trace version {VERSION}; the file is version {}{}",
                        h.version,
                        if h.version > VERSION {
                            " (written by a newer Latch: upgrade Latch to read it)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            header = Some(h);
            continue;
        }
        match kind.as_str() {
            HEADER_TYPE => {
                return Err(bad(
                    n,
                    "type",
                    "a trace has one header line, the first".into(),
                ));
            }
            "session" => {
                let s: SessionLine = parse(raw, n, "(line)", &bad)?;
                if index.contains_key(&s.id) {
                    return Err(bad(
                        n,
                        "id",
                        format!("session `{}` is declared twice", s.id),
                    ));
                }
                if s.replayed && s.model.is_none() {
                    return Err(bad(
                        n,
                        "model",
                        format!("replayed session `{}` needs its model profile", s.id),
                    ));
                }
                index.insert(s.id.clone(), sessions.len());
                sessions.push(Declared {
                    line: s,
                    log: Vec::new(),
                });
            }
            "artifact" => {
                let a: MediaRef = parse(raw, n, "(line)", &bad)?;
                artifacts.insert(a.sha256.clone(), a);
            }
            "event" | "hidden" => {
                let logged = if kind == "event" {
                    let e: EventLine = parse(raw, n, "event", &bad)?;
                    Logged {
                        seq: e.seq,
                        session: e.session,
                        time_ms: e.time_ms,
                        event: Recorded::Event(e.event),
                    }
                } else {
                    let h: HiddenLine = parse(raw, n, "(line)", &bad)?;
                    if !ENGINE_HIDDEN_KINDS.contains(&h.kind.as_str()) {
                        return Err(bad(
                            n,
                            "kind",
                            format!(
                                "`{}` is not an engine-hidden kind; hidden lines carry only {}",
                                h.kind,
                                ENGINE_HIDDEN_KINDS.join(", ")
                            ),
                        ));
                    }
                    Logged {
                        seq: h.seq,
                        session: h.session,
                        time_ms: h.time_ms,
                        event: Recorded::Hidden(h.kind),
                    }
                };
                if let Some(last) = last_seq
                    && logged.seq <= last
                {
                    return Err(bad(
                        n,
                        "seq",
                        format!(
                            "{} does not rise above the previous event's {last}; events come in rising sequence order",
                            logged.seq
                        ),
                    ));
                }
                if !index.contains_key(&logged.session) {
                    return Err(bad(
                        n,
                        "session",
                        format!(
                            "session `{}` is not declared by a session line before it",
                            logged.session
                        ),
                    ));
                }
                last_seq = Some(logged.seq);
                events.push(logged);
            }
            other => {
                return Err(bad(
                    n,
                    "type",
                    format!(
                        "unknown line type `{other}` (expected latch-trace, session, artifact, event or hidden)"
                    ),
                ));
            }
        }
    }
    let Some(header) = header else {
        return Err(bad(
            1,
            "type",
            format!(
                "the file is empty; a trace starts with its header line (`\"type\": \"{HEADER_TYPE}\"`)"
            ),
        ));
    };
    let Some(&root) = index.get(&header.root) else {
        return Err(bad(
            1,
            "root",
            format!(
                "no session line declares the root session `{}`",
                header.root
            ),
        ));
    };
    if !sessions[root].line.replayed {
        return Err(bad(
            1,
            "root",
            format!("the root session `{}` is not replayed", header.root),
        ));
    }
    // Each replayed session's log: its own events and the workspace-wide
    // events of the others of its workspace.
    for d in &mut sessions {
        if !d.line.replayed {
            continue;
        }
        d.log = events
            .iter()
            .filter(|l| {
                l.session == d.line.id
                    || matches!(&l.event, Recorded::Event(e) if e.is_workspace_wide())
            })
            .cloned()
            .collect();
    }
    let workspace_of: HashMap<String, String> = sessions
        .iter()
        .map(|d| (d.line.id.clone(), d.line.workspace.clone()))
        .collect();
    let mut out = Vec::new();
    let order = std::iter::once(root).chain((0..sessions.len()).filter(|&i| i != root));
    for i in order {
        let d = &sessions[i];
        if !d.line.replayed {
            continue;
        }
        let workspace = &d.line.workspace;
        out.push(RecordedSession {
            id: d.line.id.clone(),
            parent: d.line.parent.clone(),
            workspace: workspace.clone(),
            model: d.line.model.clone().expect("checked above"),
            log: d
                .log
                .iter()
                .filter(|l| {
                    l.session == d.line.id || workspace_of.get(&l.session) == Some(workspace)
                })
                .cloned()
                .collect(),
        });
    }
    Ok(Recording {
        source: format!("trace {}", path.display()),
        redacted: header.redacted,
        sessions: out,
        artifacts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::trace::write::to_string;
    use latch_engine_sdk::types::{ContextBudget, Part};
    use latch_kernel::{RequestRecord, RequestShape};

    fn recording() -> Recording {
        let model = ModelProfile::with_defaults("anthropic", "m");
        let ev = |seq: u64, session: &str, event: Recorded| Logged {
            seq,
            session: session.into(),
            time_ms: 1_000 + seq,
            event,
        };
        let request = EventKind::ModelRequest(RequestRecord {
            engine: "builtin:continuity".into(),
            budget: ContextBudget::for_model(&model),
            query: Some("fix it".into()),
            shape: Some(RequestShape {
                system_prompt: "sys".into(),
                tools: vec![serde_json::json!({"name": "shell"})],
                extensions: vec![],
                model: "m".into(),
                wire: "anthropic".into(),
                max_tokens: 100,
            }),
        });
        let wide = EventKind::Mutation {
            source: "shell".into(),
            paths: vec![],
            command: Some("make".into()),
            unchanged: false,
        };
        let log = vec![
            ev(1, "root", Recorded::Event(EventKind::user_text("fix it"))),
            ev(2, "root", Recorded::Hidden("session_profile".into())),
            ev(3, "other", Recorded::Event(wide)),
            ev(4, "root", Recorded::Event(request)),
            ev(
                5,
                "root",
                Recorded::Event(EventKind::assistant_text("done")),
            ),
        ];
        Recording {
            source: "store t.db".into(),
            redacted: false,
            sessions: vec![RecordedSession {
                id: "root".into(),
                parent: None,
                workspace: "/w".into(),
                model,
                log,
            }],
            artifacts: BTreeMap::new(),
        }
    }

    fn error(text: &str) -> (usize, String, String) {
        match read_str(text, Path::new("t.jsonl")).unwrap_err() {
            TraceError::Malformed {
                line,
                field,
                message,
                ..
            } => (line, field, message),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_written_trace_reads_back_as_the_recording() {
        let r = recording();
        let text = to_string(&r, false);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with(r#"{"type":"latch-trace","version":1,"root":"root""#),
            "{}",
            lines[0]
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(r#"{"type":"hidden","seq":2"#))
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains(r#""id":"other""#) && l.contains(r#""replayed":false"#))
        );
        let back = read_str(&text, Path::new("t.jsonl")).unwrap();
        assert_eq!(back.source, "trace t.jsonl");
        assert_eq!(back.sessions, r.sessions);
        assert!(!back.redacted);
    }

    #[test]
    fn a_malformed_trace_is_refused_with_its_line_and_field() {
        let good = to_string(&recording(), false);
        let lines: Vec<String> = good.lines().map(str::to_string).collect();
        let with = |i: usize, line: &str| {
            let mut l = lines.clone();
            l[i] = line.to_string();
            l.join("\n")
        };
        let event_at = lines
            .iter()
            .position(|l| l.contains(r#""type":"event""#))
            .unwrap();

        let (line, field, message) = error(&with(event_at, "{not json"));
        assert_eq!((line, field.as_str()), (event_at + 1, "(line)"));
        assert!(message.contains("not a JSON object"), "{message}");

        let bad_seq = lines[event_at].replacen(r#""seq":1"#, r#""seq":"one""#, 1);
        let (line, field, message) = error(&with(event_at, &bad_seq));
        assert_eq!((line, field.as_str()), (event_at + 1, "seq"), "{message}");
        assert!(message.contains("invalid type: string"), "{message}");

        let bad_part = lines[event_at].replacen(r#"{"Text":"fix it"}"#, r#"{"Txt":"fix it"}"#, 1);
        assert_ne!(bad_part, lines[event_at]);
        let (_, field, message) = error(&with(event_at, &bad_part));
        assert!(
            field.starts_with("event.data.parts[0]"),
            "{field}: {message}"
        );

        let unknown = lines[event_at].replacen("user_message", "user_mesage", 1);
        let (_, field, message) = error(&with(event_at, &unknown));
        assert!(field.starts_with("event"), "{field}");
        assert!(message.contains("user_mesage"), "{message}");

        let (line, field, message) = error(&with(
            0,
            &lines[0].replacen(r#""version":1"#, r#""version":2"#, 1),
        ));
        assert_eq!((line, field.as_str()), (1, "version"));
        assert!(message.contains("newer Latch"), "{message}");

        let (line, field, _) = error(&with(0, &lines[1]));
        assert_eq!(
            (line, field.as_str()),
            (1, "type"),
            "the header comes first"
        );

        let (_, field, message) = error(&with(
            event_at,
            &lines[event_at].replacen(r#""type":"event""#, r#""type":"evnt""#, 1),
        ));
        assert_eq!(field, "type");
        assert!(message.contains("unknown line type `evnt`"), "{message}");

        let last = lines.len() - 1;
        let back = lines[last].replacen(r#""seq":5"#, r#""seq":3"#, 1);
        let (line, field, message) = error(&with(last, &back));
        assert_eq!((line, field.as_str()), (last + 1, "seq"));
        assert!(
            message.contains("does not rise above the previous event's 4"),
            "{message}"
        );

        let stranger = lines[last].replacen(r#""session":"root""#, r#""session":"nobody""#, 1);
        let (_, field, message) = error(&with(last, &stranger));
        assert_eq!(field, "session");
        assert!(message.contains("`nobody` is not declared"), "{message}");

        let hidden_at = lines
            .iter()
            .position(|l| l.contains(r#""type":"hidden""#))
            .unwrap();
        let not_hidden = lines[hidden_at].replacen("session_profile", "user_message", 1);
        let (_, field, _) = error(&with(hidden_at, &not_hidden));
        assert_eq!(field, "kind");

        let (line, field, _) = error(&with(
            0,
            &lines[0].replacen(r#""root":"root""#, r#""root":"ghost""#, 1),
        ));
        assert_eq!((line, field.as_str()), (1, "root"));

        let (line, field, message) = error("");
        assert_eq!((line, field.as_str()), (1, "type"));
        assert!(message.contains("empty"), "{message}");
        let shown = read_str(&with(event_at, "{not json"), Path::new("t.jsonl"))
            .unwrap_err()
            .to_string();
        assert!(
            shown.starts_with(&format!(
                "trace t.jsonl line {}, field `(line)`",
                event_at + 1
            )),
            "{shown}"
        );
        let _ = Part::Text(String::new());
    }
}
