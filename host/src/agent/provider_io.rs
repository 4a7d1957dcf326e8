//! What travels between the agent loop and the provider beside the
//! engine's view: the opaque provider state replayed with the view's
//! assistant messages, the events a provider turn commits (message, opaque
//! state, usage with Latch's estimate beside it), and the provider figures
//! `/context` shows.

use super::calibration::{self, Calibration};
use latch_engine_sdk::types::{Message, Role};
use latch_kernel::{EventKind, OpaqueBlock, OpaqueState, ProviderCallId, Store, StoreError};
use latch_provider::{AssistantTurn, ProviderState, RequestContext, Usage, Wire};

/// The request context of `messages` (the view sent to the provider): the
/// stored provider state of every assistant message, by message index, and
/// the session's prompt-cache key.
pub(crate) fn request_context(
    store: &Store,
    session: &str,
    messages: &[Message],
) -> Result<RequestContext, StoreError> {
    let cited: Vec<u64> = messages
        .iter()
        .filter(|m| m.role == Role::Assistant && m.kernel.is_none())
        .flat_map(|m| m.source_seqs.iter().copied())
        .collect();
    let states = store.provider_states(session, &cited)?;
    let mut ctx = RequestContext {
        cache_key: Some(session.to_string()),
        ..RequestContext::default()
    };
    for (i, m) in messages.iter().enumerate() {
        if m.role != Role::Assistant || m.kernel.is_some() {
            continue;
        }
        // An assistant message renders one assistant event; its state is
        // replayed whole (a state that only records call ids has nothing
        // to replay).
        if let [seq] = m.source_seqs[..]
            && let Some(state) = states.get(&seq).filter(|s| !s.blocks.is_empty())
        {
            ctx.replay.insert(i, to_provider(state));
        }
    }
    Ok(ctx)
}

fn to_provider(state: &OpaqueState) -> ProviderState {
    ProviderState {
        wire: state.wire.clone(),
        blocks: state
            .blocks
            .iter()
            .map(|b| latch_provider::OpaqueBlock {
                before_part: b.before_part,
                json: b.json.clone(),
            })
            .collect(),
    }
}

fn to_stored(state: &ProviderState, call_ids: Vec<ProviderCallId>) -> OpaqueState {
    OpaqueState {
        wire: state.wire.clone(),
        blocks: state
            .blocks
            .iter()
            .map(|b| OpaqueBlock {
                before_part: b.before_part,
                json: b.json.clone(),
            })
            .collect(),
        call_ids,
    }
}

/// Who a usage report is about, and Latch's figures for the same request.
pub(crate) struct RequestFigures<'a> {
    /// The provider's name (`anthropic`, `openai`, ...).
    pub provider: &'a str,
    /// The model.
    pub model: &'a str,
    /// The base URL of the server the request went to.
    pub base_url: &'a str,
    /// Latch's estimate of the request's input (the view's total).
    pub estimated_input_tokens: u64,
    /// Latch's estimate of the prefix shared with the previous request.
    pub common_prefix_tokens: u64,
}

/// The usage event of one request: every figure as reported, unknown as
/// unknown, with Latch's estimate beside it.
pub(crate) fn usage_event(usage: &Usage, figures: &RequestFigures) -> EventKind {
    EventKind::ProviderUsage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cache_creation_tokens: usage.cache_creation_tokens,
        cache_miss_tokens: usage.cache_miss_tokens,
        common_prefix_tokens: Some(figures.common_prefix_tokens),
        reasoning_tokens: usage.reasoning_tokens,
        estimated_input_tokens: Some(figures.estimated_input_tokens),
        provider: Some(figures.provider.to_string()),
        model: Some(figures.model.to_string()),
        base_url: Some(figures.base_url.to_string()),
    }
}

/// The events one provider turn commits, in one batch: the assistant
/// message, its opaque provider state right after it (so the state's
/// sequence number is the message's plus one) with the provider's own ids
/// of the calls that got session ids (`call_ids`), then the usage.
pub(crate) fn turn_events(
    turn: &AssistantTurn,
    figures: &RequestFigures,
    wire: Wire,
    call_ids: Vec<ProviderCallId>,
) -> Vec<EventKind> {
    let mut events = vec![EventKind::AssistantMessage {
        parts: turn.parts.clone(),
    }];
    match &turn.provider_state {
        Some(state) => events.push(EventKind::ProviderState(to_stored(state, call_ids))),
        None if !call_ids.is_empty() => events.push(EventKind::ProviderState(OpaqueState {
            wire: wire.name().to_string(),
            blocks: Vec::new(),
            call_ids,
        })),
        None => {}
    }
    events.push(usage_event(&turn.usage, figures));
    events
}

/// The provider's usage and Latch's common-prefix estimate from a stored
/// usage event.
pub fn usage_of(event: &EventKind) -> Option<(Usage, Option<u64>)> {
    match event {
        EventKind::ProviderUsage {
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_creation_tokens,
            cache_miss_tokens,
            common_prefix_tokens,
            reasoning_tokens,
            ..
        } => Some((
            Usage {
                input_tokens: *input_tokens,
                output_tokens: *output_tokens,
                cache_read_tokens: *cache_read_tokens,
                cache_creation_tokens: *cache_creation_tokens,
                cache_miss_tokens: *cache_miss_tokens,
                reasoning_tokens: *reasoning_tokens,
            },
            *common_prefix_tokens,
        )),
        _ => None,
    }
}

/// The provider's side of `/context`: its figures for the last request,
/// Latch's estimate of that same request, and the calibration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderFigures {
    /// The provider's name.
    pub provider: String,
    /// The model.
    pub model: String,
    /// What the provider reported for the session's last request.
    pub last: Option<Usage>,
    /// Latch's estimate of that request's input.
    pub last_estimated_input_tokens: Option<u64>,
    /// The provider-to-estimate ratio of this server and model.
    pub calibration: Option<Calibration>,
    /// The server's base URL.
    pub base_url: String,
}

/// The calibration of one server and model from the store's usage events.
pub(crate) fn calibration_of(
    store: &Store,
    key: &calibration::CalibrationKey,
) -> Result<Option<Calibration>, StoreError> {
    let events = store.recent_usage(calibration::SCAN)?;
    Ok(calibration::reduce(&events, key))
}
