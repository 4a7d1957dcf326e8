//! `baseline:summarize`: the summarize-and-discard strategy of the
//! summarizing peers (Codex's local compaction, Claude Code's auto-compact),
//! as a Latch engine, so that `latch engine compare` always has the peers'
//! strategy in its table.
//!
//! * Until a compaction limit the view is the whole history: the session
//!   context, then every conversation event verbatim.
//! * The limit is 90% of the context window (never above the hard budget
//!   `window - reserve`). When the next view would cross it, the engine
//!   makes ONE extra model request through its [`Summarizer`]: the view it
//!   would have sent plus [`SUMMARY_PROMPT`] as a last user message, with
//!   the same system prompt. Like the peers' it may fill the whole window
//!   but for the summary's own output ([`SUMMARY_OUTPUT_TOKENS`]), and at
//!   least as much as an agent request; oldest units are dropped only if
//!   even that does not fit.
//! * The answer becomes a kernel-context snapshot (persisted by the host,
//!   a new epoch generation, `epoch-start` after the newest event), and from
//!   then on the view is: the session context, the user's messages (newest
//!   first up to [`USER_MESSAGE_TOKENS`], kept in chronological order, whole
//!   messages only), the summary, then the turns that follow it.
//!
//! The engine only re-renders durable events and writes its summary as
//! kernel context, so the host's view checks apply to it as to any engine.
//! A fresh instance on the same log finds the persisted summary and returns
//! the same view without asking the model again. It keeps no archive the
//! model can search: `recall` answers `unsupported`, as the peers have no
//! recall.

use super::wire::last_user_text;
use latch_engine_sdk::estimate::message_tokens;
use latch_engine_sdk::types::*;
use latch_engine_sdk::validate::{kernel_message, session_context_message};
use latch_engine_sdk::{Engine, SessionView, estimate};
use serde_json::Value;

/// The compaction limit as a share of the context window, in percent.
pub const COMPACT_PERCENT: u64 = 90;
/// Most tokens of user messages kept after a compaction.
pub const USER_MESSAGE_TOKENS: u64 = 20_000;
/// Room left in the window for the summary itself (the summary request's
/// output limit).
pub const SUMMARY_OUTPUT_TOKENS: u64 = 4_000;

/// The last user message of a summary request.
pub const SUMMARY_PROMPT: &str = "CONTEXT CHECKPOINT. Write a handoff summary of this session for \
the model that will continue it without the history above: the progress so far and the decisions \
taken, the constraints and preferences the user stated, the exact data (errors, identifiers, \
paths) still needed, and what remains to be done. Be concise and structured.";

/// What precedes the summary in the views after a compaction.
pub const SUMMARY_PREFIX: &str = "An earlier model worked on this task and handed over the \
summary below; the history it summarizes is no longer shown. Build on it and do not repeat work \
that is already done.";

/// True when `body` (a provider request) is a summary request: its last
/// user message's text is [`SUMMARY_PROMPT`].
pub fn is_summary_request(body: &Value) -> bool {
    last_user_text(body).trim_end().ends_with(SUMMARY_PROMPT)
}

/// The request a compaction sends to the model.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRequest {
    /// The system prompt of the view it replaces.
    pub system: String,
    /// The history to summarize, then [`SUMMARY_PROMPT`] as a user message.
    pub messages: Vec<Message>,
}

/// Asks a model for a summary. The host implements it over a real provider
/// connection; the call counts as an extra model call.
pub trait Summarizer: Send {
    /// The model's summary of `request`, or why it could not be had.
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, String>;
}

/// A summary that was persisted, as read back from the log.
#[derive(Clone, Debug)]
struct Summary {
    seq: Option<u64>,
    entry: KernelContextEntry,
}

/// The summarize-and-discard engine.
pub struct SummarizeEngine {
    model: ModelProfile,
    estimator: EstimatorProfile,
    summarizer: Option<Box<dyn Summarizer>>,
    compact_percent: u64,
    user_message_tokens: u64,
    /// Every event up to this sequence number has been read.
    watermark: u64,
    /// Conversation events, in order.
    conversation: Vec<Event>,
    /// The newest persisted summary.
    summary: Option<Summary>,
    /// The highest kernel-context revision in the log.
    revision: u64,
}

impl SummarizeEngine {
    /// An engine that summarizes through `summarizer`.
    pub fn with_summarizer(model: ModelProfile, summarizer: Box<dyn Summarizer>) -> Self {
        let mut engine = <Self as Engine>::new(model);
        engine.summarizer = Some(summarizer);
        engine
    }

    /// The compaction limit for `budget`: 90% of the window, never above
    /// the hard budget.
    pub fn compaction_limit(&self, budget: &ContextBudget) -> u64 {
        (budget.context_window_tokens * self.compact_percent / 100).min(budget.limit_tokens())
    }

    fn sync(&mut self, session: &dyn SessionView) {
        let latest = session.latest_seq();
        if latest < self.watermark {
            // A different (shorter) log: start over, keeping the settings.
            *self = SummarizeEngine {
                summarizer: self.summarizer.take(),
                estimator: self.estimator,
                compact_percent: self.compact_percent,
                user_message_tokens: self.user_message_tokens,
                ..<Self as Engine>::new(self.model.clone())
            };
        }
        let mut events = Vec::new();
        session.for_each_event(self.watermark + 1, u64::MAX, &mut |e| events.push(e));
        for e in events {
            self.watermark = self.watermark.max(e.seq);
            match &e.body {
                EventBody::KernelContext(k) => {
                    self.revision = self.revision.max(k.revision);
                    if k.kind == KernelContextKind::Snapshot {
                        self.summary = Some(Summary {
                            seq: Some(e.seq),
                            entry: k.clone(),
                        });
                    }
                }
                _ if e.is_conversation() => self.conversation.push(e),
                _ => {}
            }
        }
    }

    /// The view's messages after the session context: the kept user
    /// messages and the summary when there is one, then the turns since.
    fn body(&self, summary: Option<&Summary>, room_for_users: u64) -> Vec<Message> {
        let p = self.estimator;
        let Some(summary) = summary else {
            return units_from(&self.conversation);
        };
        let start = summary.entry.epoch_start.unwrap_or(0);
        let mut users: Vec<Message> = Vec::new();
        let mut used = 0u64;
        for e in self.conversation.iter().rev() {
            if e.seq >= start || !e.is_user_message() {
                continue;
            }
            let Some(m) = e.to_message() else { continue };
            let t = message_tokens(p, &m);
            if used + t > room_for_users {
                break;
            }
            used += t;
            users.push(m);
        }
        users.reverse();
        users.push(kernel_message(&summary.entry, summary.seq));
        let tail: Vec<Event> = self
            .conversation
            .iter()
            .filter(|e| e.seq >= start)
            .cloned()
            .collect();
        users.extend(units_from(&tail));
        users
    }

    fn tokens(&self, system: &str, messages: &[Message], tools: u64) -> u64 {
        let p = self.estimator;
        estimate(p, system) as u64
            + messages.iter().map(|m| message_tokens(p, m)).sum::<u64>()
            + tools
    }

    fn summarize(
        &mut self,
        request: &ContextRequest,
        mut history: Vec<Message>,
    ) -> Result<String, EngineError> {
        let limit = request
            .budget
            .context_window_tokens
            .saturating_sub(SUMMARY_OUTPUT_TOKENS)
            .max(request.budget.limit_tokens());
        let prompt = Message::text(Role::User, SUMMARY_PROMPT);
        // Drop the oldest whole units (after the session context) until the
        // summary request fits.
        while history.len() > 1
            && self.tokens(
                &request.system_prompt,
                &history,
                request.budget.tools_tokens + message_tokens(self.estimator, &prompt),
            ) > limit
        {
            history.remove(1);
            while history.len() > 1
                && history[1]
                    .parts
                    .iter()
                    .any(|p| matches!(p, Part::ToolResult(_)))
            {
                history.remove(1);
            }
        }
        history.push(prompt);
        let summarizer = self.summarizer.as_mut().ok_or_else(|| {
            EngineError::Unsupported(
                "baseline:summarize needs a summarizer (a model connection) to compact; it runs only inside `latch engine compare`".into(),
            )
        })?;
        let text = summarizer
            .summarize(&SummaryRequest {
                system: request.system_prompt.clone(),
                messages: history,
            })
            .map_err(|e| EngineError::Internal(format!("the summary request failed: {e}")))?;
        if text.trim().is_empty() {
            return Err(EngineError::Internal(
                "the model answered the summary request with no text".into(),
            ));
        }
        Ok(text)
    }
}

/// Conversation events as messages, without a leading result whose call is
/// not among them.
fn units_from(events: &[Event]) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    let mut open = false;
    for e in events {
        let Some(m) = e.to_message() else { continue };
        match &e.body {
            EventBody::AssistantMessage(_) => open = true,
            EventBody::ToolResult(_) if !open => continue,
            EventBody::UserMessage(_) | EventBody::Notification(_) => open = false,
            _ => {}
        }
        out.push(m);
    }
    out
}

impl Engine for SummarizeEngine {
    fn new(model: ModelProfile) -> Self {
        SummarizeEngine {
            estimator: model.estimator,
            model,
            summarizer: None,
            compact_percent: COMPACT_PERCENT,
            user_message_tokens: USER_MESSAGE_TOKENS,
            watermark: 0,
            conversation: Vec::new(),
            summary: None,
            revision: 0,
        }
    }

    fn config(&self) -> String {
        serde_json::json!({
            "compact_percent": self.compact_percent,
            "user_message_tokens": self.user_message_tokens,
        })
        .to_string()
    }

    fn set_config(&mut self, json: &str) -> Result<(), ConfigError> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| ConfigError::Malformed(e.to_string()))?;
        let map = value
            .as_object()
            .ok_or_else(|| ConfigError::Malformed(format!("expected an object, got {value}")))?;
        let (mut percent, mut users) = (self.compact_percent, self.user_message_tokens);
        for (key, v) in map {
            let bad = |why: &str| ConfigError::InvalidValue((key.clone(), why.to_string()));
            match key.as_str() {
                "compact_percent" => {
                    percent = v
                        .as_u64()
                        .filter(|n| (1..=100).contains(n))
                        .ok_or_else(|| bad("expected an integer from 1 to 100"))?
                }
                "user_message_tokens" => {
                    users = v
                        .as_u64()
                        .ok_or_else(|| bad("expected a non-negative integer"))?
                }
                other => return Err(ConfigError::UnknownKey(other.to_string())),
            }
        }
        self.compact_percent = percent;
        self.user_message_tokens = users;
        Ok(())
    }

    fn set_estimator(&mut self, profile: EstimatorProfile) {
        self.estimator = profile;
    }

    fn default_budget(&self) -> ContextBudget {
        ContextBudget::for_model(&self.model)
    }

    fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, EngineError> {
        self.sync(session);
        let budget = &request.budget;
        let compact_at = self.compaction_limit(budget);
        let context = session_context_message(&request.session_context);
        let fixed = self.tokens(
            &request.system_prompt,
            std::slice::from_ref(&context),
            budget.tools_tokens,
        );
        if fixed > budget.limit_tokens() {
            return Err(EngineError::BudgetExceeded(format!(
                "instructions and tools need {fixed} tokens but the limit is {}",
                budget.limit_tokens()
            )));
        }
        let summary = self.summary.clone();
        let mut messages = vec![context.clone()];
        messages.extend(self.body(summary.as_ref(), self.user_message_tokens));
        let mut persist = Vec::new();
        let mut reason = None;
        let mut current = summary;
        if self.tokens(&request.system_prompt, &messages, budget.tools_tokens) > compact_at {
            let text = self.summarize(request, messages)?;
            let entry = KernelContextEntry {
                generation: current.as_ref().map_or(0, |s| s.entry.generation) + 1,
                revision: self.revision + 1,
                kind: KernelContextKind::Snapshot,
                epoch_start: Some(session.latest_seq() + 1),
                text: format!("{SUMMARY_PREFIX}\n\n{text}"),
            };
            let next = Summary {
                seq: None,
                entry: entry.clone(),
            };
            let summary_tokens = message_tokens(self.estimator, &kernel_message(&entry, None));
            let room = budget
                .limit_tokens()
                .saturating_sub(fixed + summary_tokens)
                .min(self.user_message_tokens);
            messages = vec![context];
            messages.extend(self.body(Some(&next), room));
            persist.push(entry);
            reason = Some(format!(
                "the history crossed {}% of the window",
                self.compact_percent
            ));
            current = Some(next);
        }
        let total = self.tokens(&request.system_prompt, &messages, budget.tools_tokens);
        if total > budget.limit_tokens() {
            return Err(EngineError::BudgetExceeded(format!(
                "after compaction the view still needs {total} tokens but the limit is {}",
                budget.limit_tokens()
            )));
        }
        let summary_tokens = messages
            .iter()
            .filter(|m| m.kernel.is_some())
            .map(|m| message_tokens(self.estimator, m))
            .sum::<u64>();
        let p = self.estimator;
        let instructions =
            estimate(p, &request.system_prompt) as u64 + message_tokens(p, &messages[0]);
        let mut report =
            ContextReport::empty(format!("summarize-baseline {}", env!("CARGO_PKG_VERSION")));
        report.instructions_tokens = instructions;
        report.state_tokens = summary_tokens;
        report.recent_tokens =
            total.saturating_sub(instructions + summary_tokens + budget.tools_tokens);
        report.tools_tokens = budget.tools_tokens;
        report.total_tokens = total;
        report.limit_tokens = budget.limit_tokens();
        report.reserve_tokens = budget.reserve_tokens;
        report.headroom_tokens = budget.limit_tokens() - total;
        report.first_retained_seq = messages
            .iter()
            .skip(1)
            .find_map(|m| m.source_seqs.first().copied());
        report.event_count = session.info().event_count;
        report.status = if persist.is_empty() {
            "ok"
        } else {
            "compacted"
        }
        .into();
        report.epoch_generation = Some(current.as_ref().map_or(0, |s| s.entry.generation));
        report.rotation_reason = reason;
        report.request_tokens = total;
        Ok(ContextView {
            system: request.system_prompt.clone(),
            kept_messages: 0,
            messages,
            persist,
            report,
        })
    }

    fn recall(
        &mut self,
        _session: &dyn SessionView,
        _query: &str,
        _limit: u32,
    ) -> Result<Vec<Event>, EngineError> {
        Err(EngineError::Unsupported(
            "summarize-and-discard keeps no archive the model can search: its peers have no recall"
                .into(),
        ))
    }
}
