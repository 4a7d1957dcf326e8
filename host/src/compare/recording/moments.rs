//! The moments of a recorded session at which its engine was asked for
//! something replay asks again: every model request (its
//! [`latch_kernel::RequestRecord`], the kernel-context entries it
//! persisted, its response and what the provider reported) and every
//! `/compact` (the entries it persisted).

use super::RecordedSession;
use crate::compare::CompareError;
use latch_engine_sdk::types::{ContextBudget, Part, SessionContext};
use latch_kernel::{EventKind, RequestShape};
use std::sync::Arc;

/// What the provider reported for a recorded request, and Latch's own
/// estimate of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordedUsage {
    /// The recorded engine's estimate of the request (its report's total).
    pub estimated_input_tokens: Option<u64>,
    /// Input tokens the provider reported (cached or not).
    pub input_tokens: Option<u64>,
    /// Of those, read from its cache.
    pub cache_read_tokens: Option<u64>,
    /// Written to its cache.
    pub cache_creation_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
}

/// One recorded model request.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestPoint {
    /// Its index among the session's requests.
    pub index: usize,
    /// Index in the session's log of its record (the engine saw the log
    /// before it).
    pub at: usize,
    /// The engine that served it.
    pub engine: String,
    /// Its budget.
    pub budget: ContextBudget,
    /// Its recall query.
    pub query: String,
    /// What the agent's requests shared.
    pub shape: Arc<RequestShape>,
    /// The session context every request of the session carries.
    pub session_context: SessionContext,
    /// Sequence numbers of the kernel-context entries it persisted.
    pub slots: Vec<u64>,
    /// Sequence number of its response (the assistant message), if one was
    /// committed.
    pub response_seq: Option<u64>,
    /// What the provider reported, if it answered.
    pub usage: Option<RecordedUsage>,
}

/// One recorded `/compact`.
#[derive(Clone, Debug, PartialEq)]
pub struct CompactPoint {
    /// Index in the session's log of the `manual_compact` event.
    pub at: usize,
    /// Sequence numbers of the kernel-context entries it persisted.
    pub slots: Vec<u64>,
    /// The latest user message's text (the query `/compact` asks with).
    pub query: String,
}

/// A moment of the recorded session, in log order (few per session, so
/// the size of the request variant does not matter).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Moment {
    /// A model request.
    Request(RequestPoint),
    /// A `/compact`.
    Compact(CompactPoint),
}

impl Moment {
    /// Index in the log where the moment starts.
    pub fn at(&self) -> usize {
        match self {
            Moment::Request(r) => r.at,
            Moment::Compact(c) => c.at,
        }
    }
}

fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every moment of `session`, in log order. A session that asked the model
/// without recording its requests (written by a Latch before they were
/// recorded) is refused, saying so.
pub fn moments(session: &RecordedSession) -> Result<Vec<Moment>, CompareError> {
    let mut out: Vec<Moment> = Vec::new();
    let mut query: Option<String> = None;
    let mut shape: Option<Arc<RequestShape>> = None;
    let mut context: Option<SessionContext> = None;
    let mut latest_user = String::new();
    let mut unrecorded = 0usize;
    let mut requests = 0usize;
    // Where own kernel-context entries go: the moment they follow, until
    // another own event comes.
    let mut open: Option<usize> = None;
    for (i, l) in session.log.iter().enumerate() {
        if l.session != session.id {
            continue;
        }
        let Some(event) = l.event.event() else {
            // Hidden content: it cannot be a request, a compact, an entry
            // or a response, and it closes nothing (a provider-state row
            // follows its assistant message).
            continue;
        };
        match event {
            EventKind::KernelContext(_) => {
                if let Some(m) = open.and_then(|o| out.get_mut(o)) {
                    match m {
                        Moment::Request(r) => r.slots.push(l.seq),
                        Moment::Compact(c) => c.slots.push(l.seq),
                    }
                }
                continue;
            }
            EventKind::ModelRequest(r) => {
                if let Some(q) = &r.query {
                    query = Some(q.clone());
                }
                if let Some(s) = &r.shape {
                    shape = Some(Arc::new(s.clone()));
                }
                let (Some(q), Some(s)) = (&query, &shape) else {
                    return Err(CompareError::Plan(format!(
                        "session {}: the request recorded at event {} names no query or shape \
                         before it; the log is incomplete",
                        session.id, l.seq
                    )));
                };
                out.push(Moment::Request(RequestPoint {
                    index: requests,
                    at: i,
                    engine: r.engine.clone(),
                    budget: r.budget,
                    query: q.clone(),
                    shape: s.clone(),
                    session_context: context.clone().unwrap_or_else(|| SessionContext {
                        workspace: session.workspace.clone(),
                        repository_instructions: String::new(),
                        mode: String::new(),
                    }),
                    slots: Vec::new(),
                    response_seq: None,
                    usage: None,
                }));
                requests += 1;
                open = Some(out.len() - 1);
                continue;
            }
            EventKind::ManualCompact => {
                out.push(Moment::Compact(CompactPoint {
                    at: i,
                    slots: Vec::new(),
                    query: latest_user.clone(),
                }));
                open = Some(out.len() - 1);
                continue;
            }
            EventKind::RunStarted {
                context: Some(c), ..
            } if context.is_none() => context = Some(c.clone()),
            EventKind::UserMessage { parts } => latest_user = text_of(parts),
            EventKind::AssistantMessage { .. } => {
                if requests == 0 {
                    unrecorded += 1;
                } else if let Some(Moment::Request(r)) = out.last_mut()
                    && r.response_seq.is_none()
                {
                    r.response_seq = Some(l.seq);
                }
            }
            EventKind::ProviderUsage {
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_creation_tokens,
                estimated_input_tokens,
                ..
            } => {
                if let Some(Moment::Request(r)) = out
                    .iter_mut()
                    .rev()
                    .find(|m| matches!(m, Moment::Request(_)))
                    && r.usage.is_none()
                {
                    r.usage = Some(RecordedUsage {
                        estimated_input_tokens: *estimated_input_tokens,
                        input_tokens: *input_tokens,
                        cache_read_tokens: *cache_read_tokens,
                        cache_creation_tokens: *cache_creation_tokens,
                        output_tokens: *output_tokens,
                    });
                }
            }
            _ => {}
        }
        open = None;
    }
    if unrecorded > 0 && requests == 0 {
        return Err(CompareError::Unrecorded(session.id.clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::recording::{Logged, Recorded};
    use latch_engine_sdk::types::{KernelContextEntry, KernelContextKind, ModelProfile};
    use latch_kernel::RequestRecord;

    fn log(events: Vec<(u64, &str, EventKind)>) -> RecordedSession {
        RecordedSession {
            id: "s".into(),
            parent: None,
            workspace: "/w".into(),
            model: ModelProfile::with_defaults("anthropic", "m"),
            log: events
                .into_iter()
                .map(|(seq, session, e)| Logged {
                    seq,
                    session: session.into(),
                    time_ms: seq,
                    event: Recorded::Event(e),
                })
                .collect(),
        }
    }

    fn request(query: Option<&str>, shape: bool) -> EventKind {
        EventKind::ModelRequest(RequestRecord {
            engine: "builtin:continuity".into(),
            budget: ContextBudget::for_model(&ModelProfile::with_defaults("anthropic", "m")),
            query: query.map(str::to_string),
            shape: shape.then(|| RequestShape {
                system_prompt: "sys".into(),
                tools: vec![],
                extensions: vec![],
                model: "m".into(),
                wire: "anthropic".into(),
                max_tokens: 100,
            }),
        })
    }

    fn entry(revision: u64) -> EventKind {
        EventKind::kernel_context(
            "builtin:continuity",
            KernelContextEntry {
                generation: 1,
                revision,
                kind: KernelContextKind::Snapshot,
                epoch_start: None,
                text: "state".into(),
            },
        )
    }

    fn usage(estimated: u64) -> EventKind {
        EventKind::ProviderUsage {
            input_tokens: Some(estimated + 5),
            output_tokens: Some(3),
            cache_read_tokens: None,
            cache_creation_tokens: None,
            cache_miss_tokens: None,
            common_prefix_tokens: None,
            reasoning_tokens: None,
            estimated_input_tokens: Some(estimated),
            provider: None,
            model: None,
            base_url: None,
        }
    }

    #[test]
    fn requests_carry_their_entries_response_usage_and_resolved_query() {
        let context = SessionContext {
            workspace: "/w".into(),
            repository_instructions: String::new(),
            mode: "run".into(),
        };
        let s = log(vec![
            (
                1,
                "s",
                EventKind::RunStarted {
                    mode: "run".into(),
                    context: Some(context.clone()),
                },
            ),
            (2, "s", EventKind::user_text("fix it")),
            (3, "s", request(Some("fix it"), true)),
            (
                4,
                "other",
                EventKind::Mutation {
                    source: "shell".into(),
                    paths: vec![],
                    command: None,
                    unchanged: false,
                },
            ),
            (5, "s", entry(1)),
            (6, "s", entry(2)),
            (7, "s", EventKind::assistant_text("done")),
            (8, "s", usage(900)),
            (9, "s", EventKind::ManualCompact),
            (10, "s", entry(3)),
            (11, "s", request(None, false)),
            (12, "s", EventKind::assistant_text("again")),
            (13, "s", entry(4)),
        ]);
        let m = moments(&s).unwrap();
        assert_eq!(m.len(), 3);
        let Moment::Request(first) = &m[0] else {
            panic!()
        };
        assert_eq!((first.index, first.at), (0, 2));
        assert_eq!(
            first.slots,
            [5, 6],
            "another session's event in between changes nothing"
        );
        assert_eq!(first.response_seq, Some(7));
        assert_eq!(first.usage.unwrap().estimated_input_tokens, Some(900));
        assert_eq!(first.session_context, context);
        let Moment::Compact(compact) = &m[1] else {
            panic!()
        };
        assert_eq!(
            (compact.at, compact.slots.clone(), compact.query.as_str()),
            (8, vec![10], "fix it")
        );
        let Moment::Request(second) = &m[2] else {
            panic!()
        };
        assert_eq!(second.query, "fix it", "an unchanged query is carried over");
        assert_eq!(second.shape.system_prompt, "sys");
        assert!(
            second.slots.is_empty(),
            "an entry after the response is nobody's"
        );
        assert_eq!(second.usage, None);
    }

    #[test]
    fn a_session_that_asked_without_recording_its_requests_is_refused() {
        let s = log(vec![
            (1, "s", EventKind::user_text("fix it")),
            (2, "s", entry(1)),
            (3, "s", EventKind::assistant_text("done")),
        ]);
        let e = moments(&s).unwrap_err().to_string();
        assert!(e.contains("session s") && e.contains("record"), "{e}");
        assert!(
            moments(&log(vec![(1, "s", EventKind::user_text("hi"))]))
                .unwrap()
                .is_empty()
        );
    }
}
