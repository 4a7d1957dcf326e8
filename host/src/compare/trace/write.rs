//! Writing a [`Recording`] as a trace: the header, the sessions, the
//! artifacts, then every event of the sessions' logs once, in rising
//! sequence order (engine-hidden events as `hidden` lines, but for the
//! request records), redacted on request.

use super::redact::redact;
use super::{HEADER_TYPE, TraceError, VERSION};
use crate::compare::recording::{Recorded, Recording};
use latch_engine_sdk::types::{MediaRef, ModelProfile};
use latch_kernel::EventKind;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

#[derive(Serialize)]
struct Header<'a> {
    r#type: &'static str,
    version: u32,
    root: &'a str,
    redacted: bool,
    latch: &'static str,
}

#[derive(Serialize)]
struct SessionLine<'a> {
    r#type: &'static str,
    id: &'a str,
    parent: Option<&'a str>,
    workspace: &'a str,
    model: Option<&'a ModelProfile>,
    replayed: bool,
}

#[derive(Serialize)]
struct ArtifactLine<'a> {
    r#type: &'static str,
    #[serde(flatten)]
    artifact: &'a MediaRef,
}

#[derive(Serialize)]
struct EventLine<'a> {
    r#type: &'static str,
    seq: u64,
    session: &'a str,
    time_ms: u64,
    event: &'a EventKind,
}

#[derive(Serialize)]
struct HiddenLine<'a> {
    r#type: &'static str,
    seq: u64,
    session: &'a str,
    time_ms: u64,
    kind: &'a str,
}

fn line(out: &mut String, value: &impl Serialize) {
    out.push_str(&serde_json::to_string(value).expect("trace lines serialize"));
    out.push('\n');
}

/// True when a trace carries the content of `event`: every kind engines
/// see, and the request records replay asks again.
pub fn carried(event: &EventKind) -> bool {
    !event.hidden_from_engines() || matches!(event, EventKind::ModelRequest(_))
}

/// The trace of `recording` (redacted with `redacted`), as text.
pub fn to_string(recording: &Recording, redacted: bool) -> String {
    let mut out = String::new();
    let root = recording.sessions.first();
    line(
        &mut out,
        &Header {
            r#type: HEADER_TYPE,
            version: VERSION,
            root: root.map_or("", |s| s.id.as_str()),
            redacted: redacted || recording.redacted,
            latch: env!("CARGO_PKG_VERSION"),
        },
    );
    for s in &recording.sessions {
        line(
            &mut out,
            &SessionLine {
                r#type: "session",
                id: &s.id,
                parent: s.parent.as_deref(),
                workspace: &s.workspace,
                model: Some(&s.model),
                replayed: true,
            },
        );
    }
    // Every event once, by sequence number.
    let mut events = BTreeMap::new();
    for s in &recording.sessions {
        for l in &s.log {
            events.entry(l.seq).or_insert(l);
        }
    }
    // Sessions that only contribute workspace-wide events.
    let replayed: BTreeSet<&str> = recording.sessions.iter().map(|s| s.id.as_str()).collect();
    let mut others: BTreeSet<&str> = BTreeSet::new();
    for l in events.values() {
        if !replayed.contains(l.session.as_str()) && others.insert(l.session.as_str()) {
            line(
                &mut out,
                &SessionLine {
                    r#type: "session",
                    id: &l.session,
                    parent: None,
                    workspace: root.map_or("", |s| s.workspace.as_str()),
                    model: None,
                    replayed: false,
                },
            );
        }
    }
    for a in recording.artifacts.values() {
        line(
            &mut out,
            &ArtifactLine {
                r#type: "artifact",
                artifact: a,
            },
        );
    }
    for l in events.values() {
        match &l.event {
            Recorded::Event(e) if carried(e) => {
                let redacted_event;
                let event = if redacted {
                    redacted_event = redact(e);
                    &redacted_event
                } else {
                    e
                };
                line(
                    &mut out,
                    &EventLine {
                        r#type: "event",
                        seq: l.seq,
                        session: &l.session,
                        time_ms: l.time_ms,
                        event,
                    },
                );
            }
            other => line(
                &mut out,
                &HiddenLine {
                    r#type: "hidden",
                    seq: l.seq,
                    session: &l.session,
                    time_ms: l.time_ms,
                    kind: other.kind_name(),
                },
            ),
        }
    }
    out
}

/// Write the trace of `recording` to `path` (redacted with `redacted`).
pub fn write(recording: &Recording, path: &Path, redacted: bool) -> Result<(), TraceError> {
    let io = |source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::create(path).map_err(io)?;
    file.write_all(to_string(recording, redacted).as_bytes())
        .map_err(io)?;
    file.sync_all().map_err(io)
}
