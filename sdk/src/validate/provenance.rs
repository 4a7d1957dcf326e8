//! Provenance: the host accepts a view only when everything in it comes from
//! where it says it does.
//!
//! * `system` is the request's system prompt, byte for byte.
//! * A message with no kernel tag and no source events is the session-context
//!   message ([`session_context_message`]), at most once.
//! * Every other message without a kernel tag is a conversation message: the
//!   canonical rendering ([`rendering`]) of the durable events of this session
//!   it cites in `source-seqs`, a tool result possibly in its elided form
//!   ([`elided_tool_result`]). Cited sequence numbers strictly increase across
//!   the view's conversation messages (gaps allowed), so each event renders at
//!   most once and in log order.
//! * Engine-authored text appears only as kernel context: user text whose tag
//!   names either a persisted kernel-context entry this engine may see (same
//!   generation, revision, kind and text) or an entry of this view's
//!   `persist` list.
//! * Persisted entries rise above the session's kernel-context revision,
//!   carry a generation no older than the session's, and fit
//!   [`KernelContextLimits`].
//!
//! [`ViewChecker`] applies these rules incrementally: messages equal to the
//! previous accepted view's leading messages were checked then (durable
//! events never change), so a warm request reads only the events that new
//! messages cite.

use super::canon::{rendering, renders_part, session_context_message};
use super::{ViewRule, check_nonempty, check_protocol_after};
use crate::engine::SessionView;
use crate::estimate::{estimate, message_tokens};
use crate::types::*;
use std::collections::{BTreeSet, HashMap};

/// A refusal: the rule broken and what broke it.
pub type Refusal = (ViewRule, String);

/// Size limits on the kernel context an engine asks the host to persist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelContextLimits {
    /// Most bytes of text in one entry.
    pub entry_bytes: u64,
    /// Most bytes of text persisted by one view (or one `manual-compact`).
    pub view_bytes: u64,
}

impl Default for KernelContextLimits {
    /// 1 MiB an entry and 2 MiB a view: a snapshot filling a whole 256k-token
    /// window is about 1 MiB of text, and the continuity engine's snapshots
    /// are a fraction of that.
    fn default() -> Self {
        KernelContextLimits {
            entry_bytes: 1 << 20,
            view_bytes: 2 << 20,
        }
    }
}

/// Check entries an engine asks the host to persist (from `materialize` or
/// `manual-compact`) against the session they will join: text present and
/// within `limits`, revisions rising above `info.kernel-context-revision` and
/// each other, generations no older than `info.kernel-context-generation`.
pub fn check_entries(
    info: &SessionInfo,
    entries: &[KernelContextEntry],
    limits: &KernelContextLimits,
) -> Result<(), Refusal> {
    let mut last = info.kernel_context_revision;
    let mut total = 0u64;
    for (i, e) in entries.iter().enumerate() {
        if e.text.trim().is_empty() {
            return Err((
                ViewRule::KernelContext,
                format!("entry {i} (revision {}) has no text", e.revision),
            ));
        }
        let bytes = e.text.len() as u64;
        if bytes > limits.entry_bytes {
            return Err((
                ViewRule::KernelContextSize,
                format!(
                    "entry {i} (revision {}) holds {bytes} bytes; one entry may hold at most {} ([engine.limits] context_entry_bytes)",
                    e.revision, limits.entry_bytes
                ),
            ));
        }
        total += bytes;
        if total > limits.view_bytes {
            return Err((
                ViewRule::KernelContextSize,
                format!(
                    "the entries to persist hold more than {} bytes together ([engine.limits] context_view_bytes)",
                    limits.view_bytes
                ),
            ));
        }
        if e.revision <= last {
            return Err((
                ViewRule::KernelContext,
                format!(
                    "entry {i} has revision {}, which does not rise above revision {last} (the session's kernel-context revision is {}); number new entries above `session-info.kernel-context-revision`",
                    e.revision, info.kernel_context_revision
                ),
            ));
        }
        last = e.revision;
        if e.generation < info.kernel_context_generation {
            return Err((
                ViewRule::KernelContext,
                format!(
                    "entry {i} (revision {}) has generation {}, older than the session's generation {}",
                    e.revision, e.generation, info.kernel_context_generation
                ),
            ));
        }
    }
    Ok(())
}

/// The provenance rules over one view, remembering the last accepted view so
/// that a warm request checks only what is new. Keep one per engine instance;
/// [`ViewChecker::reset`] it when the instance is replaced.
#[derive(Clone, Debug)]
pub struct ViewChecker {
    profile: EstimatorProfile,
    limits: KernelContextLimits,
    /// The last accepted view's messages, kept by [`ViewChecker::check`]
    /// (which finds the known prefix by comparing).
    accepted: Vec<Message>,
    /// The canonical price of each message of the last accepted view.
    tokens: Vec<u64>,
    /// The last system prompt priced, and its price.
    system: Option<(String, u64)>,
    /// The tool-call ids of the last accepted view.
    call_ids: BTreeSet<String>,
}

impl ViewChecker {
    /// A checker that has accepted no view yet.
    pub fn new(profile: EstimatorProfile, limits: KernelContextLimits) -> Self {
        ViewChecker {
            profile,
            limits,
            accepted: Vec::new(),
            tokens: Vec::new(),
            system: None,
            call_ids: BTreeSet::new(),
        }
    }

    /// Forget the last accepted view (the next check reads every cited event).
    pub fn reset(&mut self) {
        self.accepted.clear();
        self.tokens.clear();
        self.call_ids.clear();
    }

    /// Every rule the host applies to a view, in this order: the system
    /// prompt, a message at all, protocol safety, kernel-context entries
    /// ([`check_entries`]), provenance, the hard budget (everything
    /// [`super::check_view`] checks, and more). `session` is the session as
    /// the engine saw it. On success the view becomes the previous accepted
    /// one; the messages it shares with that view's start are not checked
    /// again.
    pub fn check(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
        view: &ContextView,
    ) -> Result<(), Refusal> {
        let known = self
            .accepted
            .iter()
            .zip(&view.messages)
            .take_while(|(a, b)| a == b)
            .count();
        self.check_known(session, request, view, known)?;
        self.accepted.clone_from(&view.messages);
        Ok(())
    }

    /// [`ViewChecker::check`] for a view whose first `kept` messages are,
    /// by construction, the first `kept` messages of the last view this
    /// checker accepted (a continuation restored by a
    /// [`crate::ViewAssembler`] that is reset whenever a view is refused):
    /// nothing is compared or copied, so a warm check costs what is new.
    pub fn check_continued(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
        view: &ContextView,
        kept: usize,
    ) -> Result<(), Refusal> {
        let known = if kept <= self.tokens.len() { kept } else { 0 };
        self.accepted.clear();
        self.check_known(session, request, view, known)
    }

    fn check_known(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
        view: &ContextView,
        known: usize,
    ) -> Result<(), Refusal> {
        if view.system != request.system_prompt {
            return Err((
                ViewRule::SystemPrompt,
                format!(
                    "the view's system prompt ({} bytes, starting {:?}) is not the request's ({} bytes); send `request.system-prompt` unchanged",
                    view.system.len(),
                    excerpt(&view.system),
                    request.system_prompt.len()
                ),
            ));
        }
        check_nonempty(view)?;
        // Protocol: a view that only appends to the accepted one (which
        // ended with every call answered) is checked from where it grows.
        let appends = known > 0 && known == self.tokens.len();
        let mut new_ids: Vec<&str> = Vec::new();
        if appends {
            let ids = &self.call_ids;
            let mut fresh = BTreeSet::new();
            check_protocol_after(&view.messages, known, &mut |id| {
                !ids.contains(id) && fresh.insert(id)
            })?;
            new_ids.extend(fresh);
        } else {
            let mut all = BTreeSet::new();
            check_protocol_after(&view.messages, 0, &mut |id| all.insert(id))?;
            new_ids.extend(all);
        }
        check_entries(&session.info(), &view.persist, &self.limits)?;
        self.check_messages(session, request, view, known)?;
        // The hard budget, pricing only the messages that are new.
        let known = known.min(self.tokens.len());
        let mut tokens = Vec::with_capacity(view.messages.len());
        tokens.extend_from_slice(&self.tokens[..known]);
        tokens.extend(
            view.messages[known..]
                .iter()
                .map(|m| message_tokens(self.profile, m)),
        );
        let system = match &self.system {
            Some((text, t)) if *text == view.system => *t,
            _ => {
                let t = estimate(self.profile, &view.system) as u64;
                self.system = Some((view.system.clone(), t));
                t
            }
        };
        let total = system + tokens.iter().sum::<u64>() + request.budget.tools_tokens;
        let limit = request.budget.limit_tokens();
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
        self.tokens = tokens;
        if !appends {
            self.call_ids.clear();
        }
        self.call_ids
            .extend(new_ids.into_iter().map(str::to_string));
        Ok(())
    }

    fn check_messages(
        &self,
        session: &dyn SessionView,
        request: &ContextRequest,
        view: &ContextView,
        known: usize,
    ) -> Result<(), Refusal> {
        let context = session_context_message(&request.session_context);
        let mut context_seen = false;
        let mut last_cited: Option<u64> = None;
        // Messages to check against the log, and the events they need.
        let mut conversation: Vec<usize> = Vec::new();
        let mut persisted: Vec<(usize, u64)> = Vec::new();
        let mut needed: Vec<u64> = Vec::new();
        for (i, m) in view.messages.iter().enumerate() {
            if i < known {
                // Accepted with the previous view: only the order of its
                // sources and the session context's place matter now.
                if m.kernel.is_none() {
                    if m.source_seqs.is_empty() {
                        context_seen = true;
                    }
                    last_cited = m.source_seqs.last().copied().or(last_cited);
                }
                continue;
            }
            if let Some(tag) = &m.kernel {
                let text = kernel_text(i, m)?;
                match tag.seq {
                    Some(seq) => {
                        if m.source_seqs.iter().any(|s| *s != seq) {
                            return Err((
                                ViewRule::KernelContext,
                                format!(
                                    "kernel-context message {i} is tagged with seq {seq} but cites {:?}",
                                    m.source_seqs
                                ),
                            ));
                        }
                        if i >= known {
                            persisted.push((i, seq));
                            needed.push(seq);
                        }
                    }
                    None => {
                        let listed = view.persist.iter().any(|e| {
                            e.generation == tag.generation
                                && e.revision == tag.revision
                                && e.kind == tag.kind
                                && e.text == text
                        });
                        if !m.source_seqs.is_empty() || (i >= known && !listed) {
                            return Err((
                                ViewRule::KernelContext,
                                format!(
                                    "message {i} is unpersisted kernel context (generation {}, revision {}) that is not, word for word, an entry of the view's persist list",
                                    tag.generation, tag.revision
                                ),
                            ));
                        }
                    }
                }
                continue;
            }
            if m.source_seqs.is_empty() {
                if *m == context && !context_seen {
                    context_seen = true;
                    continue;
                }
                let (rule, what) = if i == 0 || looks_like_context(m) {
                    (
                        ViewRule::SessionContext,
                        "is not the canonical session-context message (see `session-context` in the contract), or repeats it",
                    )
                } else {
                    (
                        ViewRule::Provenance,
                        "cites no event and carries no kernel tag: engine-authored text may appear only as kernel context",
                    )
                };
                return Err((rule, format!("message {i} ({}) {what}", describe(m))));
            }
            for &s in &m.source_seqs {
                if let Some(prev) = last_cited
                    && s <= prev
                {
                    return Err((
                        ViewRule::SourceOrder,
                        format!(
                            "message {i} cites seq {s} after seq {prev}; cited events must strictly rise through the view (each event once, in log order)"
                        ),
                    ));
                }
                last_cited = Some(s);
            }
            if i >= known {
                conversation.push(i);
                needed.extend_from_slice(&m.source_seqs);
            }
        }
        needed.sort_unstable();
        needed.dedup();
        let events = fetch(session, &needed);
        for (i, seq) in persisted {
            let m = &view.messages[i];
            let tag = m.kernel.as_ref().expect("kernel message");
            let ok = match events.get(&seq).map(|e| &e.body) {
                Some(EventBody::KernelContext(entry)) => {
                    entry.generation == tag.generation
                        && entry.revision == tag.revision
                        && entry.kind == tag.kind
                        && entry.text == kernel_text(i, m)?
                }
                _ => false,
            };
            if !ok {
                return Err((
                    ViewRule::KernelContext,
                    format!(
                        "message {i} claims persisted kernel context at seq {seq} (generation {}, revision {}), but this engine's entries in the session hold no such entry with that text",
                        tag.generation, tag.revision
                    ),
                ));
            }
        }
        for i in conversation {
            let m = &view.messages[i];
            let mut cited = Vec::with_capacity(m.source_seqs.len());
            for s in &m.source_seqs {
                match events.get(s) {
                    Some(e) => cited.push(e),
                    None => {
                        return Err((
                            ViewRule::Provenance,
                            format!(
                                "message {i} cites seq {s}, which is not an event of this session"
                            ),
                        ));
                    }
                }
            }
            let (role, parts) = rendering(&cited)
                .map_err(|e| (ViewRule::Provenance, format!("message {i}: {e}")))?;
            let same = role == m.role
                && parts.len() == m.parts.len()
                && m.parts
                    .iter()
                    .zip(&parts)
                    .all(|(p, o)| renders_part(self.profile, p, o));
            if !same {
                return Err((
                    ViewRule::Provenance,
                    format!(
                        "message {i} ({}) is not the canonical rendering of the events it cites {:?}",
                        describe(m),
                        m.source_seqs
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Check one view with nothing remembered: what an engine author runs on
/// each view, and the conformance suite's `provenance` case.
pub fn check_in_session(
    profile: EstimatorProfile,
    limits: &KernelContextLimits,
    session: &dyn SessionView,
    request: &ContextRequest,
    view: &ContextView,
) -> Result<(), Refusal> {
    ViewChecker::new(profile, *limits).check(session, request, view)
}

/// The text of a kernel-context message: user text parts only.
fn kernel_text(i: usize, m: &Message) -> Result<String, Refusal> {
    if m.role != Role::User || !m.parts.iter().all(|p| matches!(p, Part::Text(_))) {
        return Err((
            ViewRule::KernelContext,
            format!("kernel-context message {i} must be user text only"),
        ));
    }
    Ok(m.parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => t.as_str(),
            _ => "",
        })
        .collect())
}

fn looks_like_context(m: &Message) -> bool {
    matches!(m.parts.first(), Some(Part::Text(t)) if t.starts_with("# Session"))
}

/// A short description of a message for evidence: role, part kinds and the
/// start of its text.
fn describe(m: &Message) -> String {
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let first = m.parts.iter().find_map(|p| match p {
        Part::Text(t) => Some(excerpt(t)),
        Part::ToolCall(c) => Some(format!("tool call `{}`", excerpt(&c.name))),
        Part::ToolResult(r) => Some(format!("tool result for `{}`", excerpt(&r.call_id))),
        Part::Image(_) => None,
    });
    match first {
        Some(f) => format!("{role}: {f:?}"),
        None => role.to_string(),
    }
}

fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// The events of `session` with the given sequence numbers (sorted, unique),
/// read in as few pages as their spread allows. Numbers that are not events
/// of the session are absent from the map.
pub(crate) fn fetch(session: &dyn SessionView, seqs: &[u64]) -> HashMap<u64, Event> {
    let mut found = HashMap::with_capacity(seqs.len());
    let mut i = 0;
    while i < seqs.len() {
        let to = seqs[seqs.len() - 1].saturating_add(1);
        let want = (seqs.len() - i) as u32;
        let limit = want
            .saturating_mul(2)
            .saturating_add(16)
            .min(crate::MAX_PAGE);
        let page = session.events(seqs[i], to, limit);
        let Some(last) = page.last().map(|e| e.seq) else {
            break;
        };
        let full = page.len() >= limit as usize;
        for e in page {
            if seqs[i..].binary_search(&e.seq).is_ok() {
                found.insert(e.seq, e);
            }
        }
        while i < seqs.len() && seqs[i] <= last {
            i += 1;
        }
        if !full {
            break;
        }
    }
    found
}

#[cfg(test)]
mod tests;
