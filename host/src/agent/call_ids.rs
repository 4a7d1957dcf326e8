//! Tool-call ids between the provider, the log and the wire.
//!
//! Some OpenAI-compatible servers reuse ids across responses (`call_0` in
//! every one) or send none; engines and the protocol checks need ids that
//! are unique in the session. So:
//!
//! * **The log and every engine** see a session-unique id: the provider's
//!   own when it is usable, else one the kernel's rule gives
//!   ([`latch_kernel::state::call_ids`]). [`assign`] applies it to a turn
//!   before it is committed; the provider's own id of every call that got
//!   another is kept in the message's `provider_state`, committed in the
//!   same batch.
//! * **The wire** sees the provider's own id wherever the API pairs results
//!   with the ids it issued ([`to_wire`]): Chat Completions pairs each
//!   `tool` message with the assistant message right before it, so every
//!   call goes back with the id the server issued unless it repeats within
//!   that one message or is missing; Anthropic Messages and OpenAI
//!   Responses pair across the whole request, so ids must be unique there
//!   and a repeated provider id goes back only on its newest call (the one
//!   the request answers), the older ones with their session id.
//!
//! A session written by an older build that holds repeated ids reads
//! repaired (the kernel renames on read), and the repaired calls' stored ids
//! are the provider's own, so the wire gets them back the same way.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use latch_engine_sdk::types::{Message, Part, Role};
use latch_kernel::{ProviderCallId, Store, StoreError};
use latch_provider::{AssistantTurn, Wire};

/// Gives the calls of `turn` (the provider's answer, not yet committed)
/// their session-unique ids, in place. Returns the provider's own id of
/// every call whose id changed (`""` where the provider sent none).
pub(crate) fn assign(
    store: &Store,
    session: &str,
    turn: &mut AssistantTurn,
) -> Result<Vec<ProviderCallId>, StoreError> {
    let sent: Vec<String> = turn.tool_calls().map(|c| c.id.clone()).collect();
    if sent.is_empty() {
        return Ok(Vec::new());
    }
    let refs: Vec<&str> = sent.iter().map(String::as_str).collect();
    let assigned = store.with_kernel(session, |k| k.call_ids().assign(&refs))?;
    let mut changed = Vec::new();
    let calls = turn.parts.iter_mut().filter_map(|p| match p {
        Part::ToolCall(c) => Some(c),
        _ => None,
    });
    for (call, id) in calls.zip(assigned) {
        if call.id != id {
            changed.push(ProviderCallId {
                call: id.clone(),
                provider: std::mem::replace(&mut call.id, id),
            });
        }
    }
    Ok(changed)
}

/// Rewrites the ids of `messages` (a view about to be sent over `wire`)
/// into the ids the provider expects back; see the module notes.
pub(crate) fn to_wire(
    store: &Store,
    session: &str,
    wire: Wire,
    messages: &mut [Message],
) -> Result<(), StoreError> {
    let provider_ids = provider_ids(store, session, wire, messages)?;
    if provider_ids.is_empty() {
        return Ok(());
    }
    let per_message = matches!(wire, Wire::Chat(_));
    let map = wire_ids(messages, &provider_ids, per_message);
    for m in messages.iter_mut() {
        for p in &mut m.parts {
            let id = match p {
                Part::ToolCall(c) => &mut c.id,
                Part::ToolResult(r) => &mut r.call_id,
                _ => continue,
            };
            if let Some(w) = map.get(id.as_str()) {
                *id = w.clone();
            }
        }
    }
    Ok(())
}

/// The provider's own id of each call of `messages` whose session id
/// differs from it: recorded beside the message when this build chose
/// another id (only for the wire that issued it), and the stored id of a
/// call an older log repeated (see [`latch_kernel::state::call_ids`]).
fn provider_ids(
    store: &Store,
    session: &str,
    wire: Wire,
    messages: &[Message],
) -> Result<HashMap<String, String>, StoreError> {
    store.with_kernel(session, |k| {
        let ids = k.call_ids();
        messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                Part::ToolCall(c) => ids
                    .provider_id(&c.id, wire.name())
                    .map(|own| (c.id.clone(), own.to_string())),
                _ => None,
            })
            .collect()
    })
}

/// The wire id of every call of `messages` that has a provider id of its
/// own (by session id), unique within one message (`per_message`) or the
/// whole request; newest calls choose first.
fn wire_ids(
    messages: &[Message],
    provider_ids: &HashMap<String, String>,
    per_message: bool,
) -> BTreeMap<String, String> {
    let calls: Vec<Vec<&str>> = messages
        .iter()
        .map(|m| {
            m.parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall(c) if m.role == Role::Assistant => Some(c.id.as_str()),
                    _ => None,
                })
                .collect()
        })
        .collect();
    let mut map = BTreeMap::new();
    let scopes: Vec<Vec<&str>> = if per_message {
        calls
    } else {
        vec![calls.into_iter().flatten().collect()]
    };
    for scope in scopes {
        // Calls without a provider id of their own keep their id; the rest
        // choose among what is left, newest first.
        let mut taken: BTreeSet<String> = scope
            .iter()
            .filter(|id| !provider_ids.contains_key(**id))
            .map(|id| id.to_string())
            .collect();
        for id in scope.iter().rev() {
            let Some(own) = provider_ids.get(*id) else {
                continue;
            };
            let chosen = [own.as_str(), id]
                .into_iter()
                .find(|c| !taken.contains(*c))
                .map(str::to_string)
                .unwrap_or_else(|| {
                    (1..)
                        .map(|k| format!("{id}_{k}"))
                        .find(|c| !taken.contains(c))
                        .expect("an unbounded range has a free name")
                });
            taken.insert(chosen.clone());
            if chosen != *id {
                map.insert(id.to_string(), chosen);
            }
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::{ToolCall, ToolResult};

    fn assistant(ids: &[&str]) -> Message {
        Message {
            role: Role::Assistant,
            parts: ids
                .iter()
                .map(|id| {
                    Part::ToolCall(ToolCall {
                        id: id.to_string(),
                        name: "shell".into(),
                        arguments_json: "{}".into(),
                    })
                })
                .collect(),
            source_seqs: vec![],
            kernel: None,
        }
    }

    fn results(ids: &[&str]) -> Message {
        Message {
            role: Role::User,
            parts: ids
                .iter()
                .map(|id| {
                    Part::ToolResult(ToolResult {
                        call_id: id.to_string(),
                        name: "shell".into(),
                        content: "ok".into(),
                        is_error: false,
                        images: vec![],
                    })
                })
                .collect(),
            source_seqs: vec![],
            kernel: None,
        }
    }

    fn apply(messages: &mut [Message], map: &BTreeMap<String, String>) -> Vec<Vec<String>> {
        messages
            .iter_mut()
            .map(|m| {
                m.parts
                    .iter_mut()
                    .map(|p| {
                        let id = match p {
                            Part::ToolCall(c) => &mut c.id,
                            Part::ToolResult(r) => &mut r.call_id,
                            _ => unreachable!(),
                        };
                        if let Some(w) = map.get(id.as_str()) {
                            *id = w.clone();
                        }
                        id.clone()
                    })
                    .collect()
            })
            .collect()
    }

    /// `call_0` issued twice and one call with no id: the session ids are
    /// `call_0`, `call_latch_2`, `call_latch_3`.
    fn session() -> (Vec<Message>, HashMap<String, String>) {
        let messages = vec![
            assistant(&["call_0"]),
            results(&["call_0"]),
            assistant(&["call_latch_2"]),
            results(&["call_latch_2"]),
            assistant(&["call_latch_3"]),
            results(&["call_latch_3"]),
        ];
        let provider = HashMap::from([("call_latch_2".to_string(), "call_0".to_string())]);
        (messages, provider)
    }

    #[test]
    fn chat_completions_gets_every_id_the_server_issued() {
        let (mut messages, provider) = session();
        let map = wire_ids(&messages, &provider, true);
        assert_eq!(
            apply(&mut messages, &map),
            [
                vec!["call_0"],
                vec!["call_0"],
                vec!["call_0"],
                vec!["call_0"],
                vec!["call_latch_3"],
                vec!["call_latch_3"],
            ]
        );
    }

    #[test]
    fn request_wide_pairing_keeps_ids_unique_and_the_newest_own_id() {
        let (mut messages, mut provider) = session();
        // The newest call carries the repeated provider id; the older one
        // keeps its own (session) id.
        let map = wire_ids(&messages, &provider, false);
        assert_eq!(
            apply(&mut messages.clone(), &map),
            [
                vec!["call_0"],
                vec!["call_0"],
                vec!["call_latch_2"],
                vec!["call_latch_2"],
                vec!["call_latch_3"],
                vec!["call_latch_3"],
            ]
        );
        // An older log: both stored `call_0`, the first as read `call_0`,
        // the second renamed on read; a third repeat renamed as well.
        messages.push(assistant(&["call_latch_4"]));
        messages.push(results(&["call_latch_4"]));
        provider.insert("call_latch_4".into(), "call_0".into());
        let map = wire_ids(&messages, &provider, false);
        let ids = apply(&mut messages, &map);
        // `call_0` is the first call's own id, so no later call may use it
        // in a request-wide scope: the newest keeps its session id.
        assert_eq!(ids[6], ["call_latch_4"]);
        let calls: Vec<&String> = [0, 2, 4, 6].iter().map(|i| &ids[*i][0]).collect();
        let unique: BTreeSet<&&String> = calls.iter().collect();
        assert_eq!(unique.len(), calls.len(), "{calls:?}");
    }

    #[test]
    fn two_calls_with_one_id_in_one_message_stay_apart() {
        let mut messages = vec![
            assistant(&["call_0", "call_latch_2"]),
            results(&["call_0", "call_latch_2"]),
        ];
        let provider = HashMap::from([("call_latch_2".to_string(), "call_0".to_string())]);
        for per_message in [true, false] {
            let map = wire_ids(&messages, &provider, per_message);
            assert!(map.is_empty(), "{map:?}");
        }
        // A provider id equal to another call's session id never merges
        // the two.
        let provider = HashMap::from([("call_latch_2".to_string(), "x".to_string())]);
        messages[0] = assistant(&["x", "call_latch_2"]);
        messages[1] = results(&["x", "call_latch_2"]);
        let map = wire_ids(&messages, &provider, true);
        assert!(map.is_empty(), "{map:?}");
    }
}
