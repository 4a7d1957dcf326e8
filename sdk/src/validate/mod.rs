//! The checks the host applies to every view, whatever engine produced it:
//! the hard budget invariant under the canonical estimator, protocol safety
//! ([`check_view`]) and provenance ([`provenance`]: the system prompt, the
//! session context, every conversation message the canonical rendering of the
//! events it cites, engine-authored text only as kernel context, persisted
//! entries rising and bounded). A view that fails is refused with the rule it
//! broke; the host never repairs it and never falls back to another engine.
//! Engines and the conformance suite run the same checks: this module is the
//! one implementation.

pub mod canon;
pub mod provenance;
pub mod recall;

pub use canon::{
    elided_tool_result, elision_marker, framed, kernel_message, session_context_message,
};
pub use provenance::{KernelContextLimits, ViewChecker, check_entries, check_in_session};
pub use recall::check_recall;

use crate::estimate::{estimate, message_tokens};
use crate::types::*;
use std::collections::BTreeSet;

/// The rule a refused view broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ViewRule {
    /// `system + messages + tools <= context_window - reserve`.
    HardBudget,
    /// Every tool call is answered by results before the next assistant turn.
    UnansweredToolCall,
    /// A tool result with no open call before it.
    OrphanToolResult,
    /// A tool call in a user message, or a result in an assistant message.
    MisplacedPart,
    /// Two tool calls share an id.
    DuplicateToolCall,
    /// Persisted kernel-context entries must have rising revisions and text.
    KernelContext,
    /// The view has no messages at all.
    Empty,
    /// The view continues a previous view it does not have (see
    /// [`crate::ViewAssembler`]).
    Continuation,
    /// `system` must be the request's system prompt.
    SystemPrompt,
    /// The session-context message must be the canonical rendering of the
    /// request's session context.
    SessionContext,
    /// A conversation message must be the canonical rendering of the events
    /// of this session it cites; engine-authored text only as kernel context.
    Provenance,
    /// Cited events strictly rise through the view: each once, in log order.
    SourceOrder,
    /// Kernel context to persist must fit the configured byte limits.
    KernelContextSize,
    /// A `recall` answer holds at most `limit` events of this session, each
    /// exactly as stored, in log order.
    Recall,
}

impl std::fmt::Display for ViewRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ViewRule::HardBudget => "hard budget",
            ViewRule::UnansweredToolCall => "unanswered tool call",
            ViewRule::OrphanToolResult => "orphan tool result",
            ViewRule::MisplacedPart => "misplaced part",
            ViewRule::DuplicateToolCall => "duplicate tool call",
            ViewRule::KernelContext => "kernel context",
            ViewRule::Empty => "non-empty view",
            ViewRule::Continuation => "view continuation",
            ViewRule::SystemPrompt => "system prompt",
            ViewRule::SessionContext => "session context",
            ViewRule::Provenance => "provenance",
            ViewRule::SourceOrder => "source order",
            ViewRule::KernelContextSize => "kernel-context size",
            ViewRule::Recall => "recall",
        })
    }
}

/// Tokens of the request the view describes, under the canonical estimator:
/// the system prompt, every message and the reserved tool schemas.
pub fn request_tokens(profile: EstimatorProfile, view: &ContextView, tools_tokens: u64) -> u64 {
    estimate(profile, &view.system) as u64
        + view
            .messages
            .iter()
            .map(|m| message_tokens(profile, m))
            .sum::<u64>()
        + tools_tokens
}

/// Check a view against the request it answers: not empty, within the hard
/// budget, protocol-safe, persisted entries with text and rising revisions.
/// [`ViewChecker`] adds provenance and the session's kernel-context bounds.
pub fn check_view(
    profile: EstimatorProfile,
    request: &ContextRequest,
    view: &ContextView,
) -> Result<(), (ViewRule, String)> {
    check_nonempty(view)?;
    check_budget(profile, request, view)?;
    check_protocol(&view.messages)?;
    let mut last_revision = None;
    for entry in &view.persist {
        if entry.text.trim().is_empty() {
            return Err((
                ViewRule::KernelContext,
                format!("entry at revision {} has no text", entry.revision),
            ));
        }
        if let Some(prev) = last_revision
            && entry.revision <= prev
        {
            return Err((
                ViewRule::KernelContext,
                format!(
                    "revision {} follows revision {prev}; revisions must rise",
                    entry.revision
                ),
            ));
        }
        last_revision = Some(entry.revision);
    }
    Ok(())
}

/// A view must have at least one message.
pub fn check_nonempty(view: &ContextView) -> Result<(), (ViewRule, String)> {
    if view.messages.is_empty() {
        return Err((ViewRule::Empty, "the view has no messages".into()));
    }
    Ok(())
}

/// The hard budget: `system + messages + tools <= window - reserve` under
/// the canonical estimator.
pub fn check_budget(
    profile: EstimatorProfile,
    request: &ContextRequest,
    view: &ContextView,
) -> Result<(), (ViewRule, String)> {
    let limit = request.budget.limit_tokens();
    let total = request_tokens(profile, view, request.budget.tools_tokens);
    if total > limit {
        return Err((
            ViewRule::HardBudget,
            format!(
                "the request costs ≈{total} tokens (system + messages + {} for tools) but the limit is {limit} (window {} - reserve {})",
                request.budget.tools_tokens,
                request.budget.context_window_tokens,
                request.budget.reserve_tokens
            ),
        ));
    }
    Ok(())
}

/// Protocol safety over a message list: every tool call is answered before the
/// next assistant message, no result is an orphan, ids are unique.
pub fn check_protocol(messages: &[Message]) -> Result<(), (ViewRule, String)> {
    let mut seen = BTreeSet::new();
    check_protocol_after(messages, 0, &mut |id| seen.insert(id))
}

/// [`check_protocol`] over `messages[start..]`, for a view whose first
/// `start` messages form a protocol-safe view (every call answered).
/// `first_use(id)` is called with every tool-call id of the new messages and
/// answers whether the id was never used before (in the first `start`
/// messages or earlier new ones).
pub fn check_protocol_after<'a>(
    messages: &'a [Message],
    start: usize,
    first_use: &mut dyn FnMut(&'a str) -> bool,
) -> Result<(), (ViewRule, String)> {
    let mut open: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate().skip(start) {
        match m.role {
            Role::Assistant => {
                if let Some(id) = open.first() {
                    return Err((
                        ViewRule::UnansweredToolCall,
                        format!("tool call `{id}` has no result before assistant message {i}"),
                    ));
                }
                for p in &m.parts {
                    match p {
                        Part::ToolCall(c) => {
                            if !first_use(c.id.as_str()) {
                                return Err((
                                    ViewRule::DuplicateToolCall,
                                    format!("tool call id `{}` appears twice", c.id),
                                ));
                            }
                            open.push(c.id.as_str());
                        }
                        Part::ToolResult(r) => {
                            return Err((
                                ViewRule::MisplacedPart,
                                format!(
                                    "assistant message {i} carries a result for `{}`",
                                    r.call_id
                                ),
                            ));
                        }
                        _ => {}
                    }
                }
            }
            Role::User => {
                for p in &m.parts {
                    match p {
                        Part::ToolResult(r) => match open.iter().position(|id| *id == r.call_id) {
                            Some(pos) => {
                                open.remove(pos);
                            }
                            None => {
                                return Err((
                                    ViewRule::OrphanToolResult,
                                    format!(
                                        "message {i} answers `{}`, which no open tool call made",
                                        r.call_id
                                    ),
                                ));
                            }
                        },
                        Part::ToolCall(c) => {
                            return Err((
                                ViewRule::MisplacedPart,
                                format!("user message {i} carries tool call `{}`", c.id),
                            ));
                        }
                        _ => {}
                    }
                }
                if !open.is_empty() && !m.parts.iter().any(|p| matches!(p, Part::ToolResult(_))) {
                    return Err((
                        ViewRule::UnansweredToolCall,
                        format!(
                            "message {i} comes between tool call `{}` and its result",
                            open[0]
                        ),
                    ));
                }
            }
        }
    }
    if let Some(id) = open.first() {
        return Err((
            ViewRule::UnansweredToolCall,
            format!("tool call `{id}` has no result"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(ToolCall {
                id: id.into(),
                name: "t".into(),
                arguments_json: "{}".into(),
            })],
            kernel: None,
            source_seqs: vec![],
        }
    }

    fn result(id: &str) -> Message {
        Message {
            role: Role::User,
            parts: vec![Part::ToolResult(ToolResult {
                call_id: id.into(),
                name: "t".into(),
                content: "ok".into(),
                is_error: false,
                images: vec![],
            })],
            kernel: None,
            source_seqs: vec![],
        }
    }

    #[test]
    fn whole_units_pass() {
        let msgs = vec![
            Message::text(Role::User, "hi"),
            call("a"),
            result("a"),
            Message::text(Role::Assistant, "done"),
        ];
        assert_eq!(check_protocol(&msgs), Ok(()));
    }

    #[test]
    fn orphan_result_is_refused() {
        let msgs = vec![Message::text(Role::User, "hi"), result("a")];
        assert_eq!(
            check_protocol(&msgs).unwrap_err().0,
            ViewRule::OrphanToolResult
        );
    }

    #[test]
    fn unanswered_call_is_refused() {
        let msgs = vec![Message::text(Role::User, "hi"), call("a")];
        assert_eq!(
            check_protocol(&msgs).unwrap_err().0,
            ViewRule::UnansweredToolCall
        );
        let msgs = vec![
            call("a"),
            Message::text(Role::User, "interjection"),
            result("a"),
        ];
        assert_eq!(
            check_protocol(&msgs).unwrap_err().0,
            ViewRule::UnansweredToolCall
        );
        let msgs = vec![call("a"), call("b"), result("a"), result("b")];
        assert_eq!(
            check_protocol(&msgs).unwrap_err().0,
            ViewRule::UnansweredToolCall
        );
    }

    #[test]
    fn misplaced_parts_are_refused() {
        let mut in_assistant = result("a");
        in_assistant.role = Role::Assistant;
        let hi = Message::text(Role::User, "hi");
        let err = check_protocol(&[hi, in_assistant]).unwrap_err();
        assert_eq!(err.0, ViewRule::MisplacedPart);
        assert!(
            err.1
                .contains("assistant message 1 carries a result for `a`"),
            "{}",
            err.1
        );
        let mut in_user = call("b");
        in_user.role = Role::User;
        let err = check_protocol(&[in_user]).unwrap_err();
        assert_eq!(err.0, ViewRule::MisplacedPart);
        assert!(
            err.1.contains("user message 0 carries tool call `b`"),
            "{}",
            err.1
        );
    }

    #[test]
    fn rules_name_themselves() {
        let names: Vec<String> = [
            ViewRule::HardBudget,
            ViewRule::UnansweredToolCall,
            ViewRule::OrphanToolResult,
            ViewRule::MisplacedPart,
            ViewRule::DuplicateToolCall,
            ViewRule::KernelContext,
            ViewRule::Empty,
            ViewRule::Continuation,
            ViewRule::SystemPrompt,
            ViewRule::SessionContext,
            ViewRule::Provenance,
            ViewRule::SourceOrder,
            ViewRule::KernelContextSize,
        ]
        .iter()
        .map(ViewRule::to_string)
        .collect();
        assert_eq!(
            names,
            [
                "hard budget",
                "unanswered tool call",
                "orphan tool result",
                "misplaced part",
                "duplicate tool call",
                "kernel context",
                "non-empty view",
                "view continuation",
                "system prompt",
                "session context",
                "provenance",
                "source order",
                "kernel-context size",
            ]
        );
    }

    const P: EstimatorProfile = EstimatorProfile::Openai;

    fn view(messages: Vec<Message>) -> ContextView {
        ContextView {
            system: "You are a careful agent.".into(),
            kept_messages: 0,
            messages,
            persist: vec![],
            report: ContextReport::empty("test"),
        }
    }

    /// A request whose limit is exactly `limit` tokens, with 7 for tools.
    fn request_with_limit(limit: u64) -> ContextRequest {
        ContextRequest {
            system_prompt: "You are a careful agent.".into(),
            session_context: SessionContext {
                workspace: "/w".into(),
                repository_instructions: String::new(),
                mode: "run".into(),
            },
            budget: ContextBudget {
                context_window_tokens: limit + 100,
                reserve_tokens: 100,
                recent_tokens: 1_000,
                tools_tokens: 7,
                extension_tokens: 0,
            },
            query: String::new(),
            extensions: vec![],
        }
    }

    #[test]
    fn the_request_price_is_system_messages_and_tools() {
        let msgs = vec![
            Message::text(Role::User, "hello there"),
            call("a"),
            result("a"),
        ];
        let v = view(msgs.clone());
        let parts: u64 = msgs.iter().map(|m| message_tokens(P, m)).sum();
        let system = estimate(P, &v.system) as u64;
        assert!(parts > 0 && system > 0);
        assert_eq!(request_tokens(P, &v, 7), system + parts + 7);
        assert_eq!(request_tokens(P, &v, 0), system + parts);
    }

    #[test]
    fn the_hard_budget_holds_to_the_token() {
        let v = view(vec![Message::text(Role::User, "fix the parser")]);
        let cost = request_tokens(P, &v, 7);
        assert_eq!(check_view(P, &request_with_limit(cost), &v), Ok(()));
        let err = check_view(P, &request_with_limit(cost - 1), &v).unwrap_err();
        assert_eq!(err.0, ViewRule::HardBudget);
        assert!(
            err.1.contains(&format!("≈{cost} tokens"))
                && err.1.contains(&format!("limit is {}", cost - 1)),
            "{}",
            err.1
        );
        assert_eq!(check_budget(P, &request_with_limit(cost), &v), Ok(()));
    }

    #[test]
    fn a_view_needs_messages_and_checks_its_protocol() {
        let empty = view(vec![]);
        assert_eq!(check_nonempty(&empty).unwrap_err().0, ViewRule::Empty);
        assert_eq!(
            check_view(P, &request_with_limit(10_000), &empty)
                .unwrap_err()
                .0,
            ViewRule::Empty
        );
        assert_eq!(check_nonempty(&view(vec![result("a")])), Ok(()));
        let orphan = view(vec![Message::text(Role::User, "hi"), result("a")]);
        assert_eq!(
            check_view(P, &request_with_limit(10_000), &orphan)
                .unwrap_err()
                .0,
            ViewRule::OrphanToolResult
        );
    }

    #[test]
    fn entries_to_persist_need_text_and_rising_revisions() {
        let entry = |revision, text: &str| KernelContextEntry {
            generation: 1,
            revision,
            kind: KernelContextKind::StateUpdate,
            epoch_start: None,
            text: text.into(),
        };
        let req = request_with_limit(10_000);
        let mut v = view(vec![Message::text(Role::User, "hi")]);
        v.persist = vec![entry(3, "a"), entry(4, "b"), entry(9, "c")];
        assert_eq!(check_view(P, &req, &v), Ok(()));
        v.persist = vec![entry(3, "a"), entry(3, "b")];
        let err = check_view(P, &req, &v).unwrap_err();
        assert_eq!(err.0, ViewRule::KernelContext);
        assert!(err.1.contains("revision 3 follows revision 3"), "{}", err.1);
        v.persist = vec![entry(4, "a"), entry(3, "b")];
        assert_eq!(
            check_view(P, &req, &v).unwrap_err().0,
            ViewRule::KernelContext
        );
        v.persist = vec![entry(3, "a"), entry(4, "  \n")];
        let err = check_view(P, &req, &v).unwrap_err();
        assert_eq!(err.0, ViewRule::KernelContext);
        assert!(err.1.contains("revision 4 has no text"), "{}", err.1);
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let msgs = vec![call("a"), result("a"), call("a"), result("a")];
        assert_eq!(
            check_protocol(&msgs).unwrap_err().0,
            ViewRule::DuplicateToolCall
        );
    }
}
