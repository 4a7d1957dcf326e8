//! Decoding a streamed response body into a committed turn: the SSE parser
//! feeding the wire format's stream state, exactly as the transport runs
//! them. [`StreamDecoder`] is what [`crate::Provider`] drives over HTTP, and
//! what the fuzz targets and property tests drive with arbitrary bytes, so
//! the code they exercise is the code that reads a provider's answer.

use crate::error::ProviderError;
use crate::request::{AssistantTurn, StreamEvent};
use crate::sse::{MAX_EVENT_BYTES, SseParser};
use crate::wire::WireStream;
use crate::{ProviderKind, Wire, anthropic, openai, responses};

pub use crate::wire::Failure;

/// The decoding state of one response body.
pub struct StreamDecoder {
    wire: Wire,
    provider: &'static str,
    parser: SseParser,
    state: Option<Box<dyn WireStream>>,
    saw_events: bool,
}

impl std::fmt::Debug for StreamDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamDecoder")
            .field("wire", &self.wire)
            .field("provider", &self.provider)
            .finish()
    }
}

impl StreamDecoder {
    /// A decoder for a response in `wire` from `kind`.
    pub fn new(wire: Wire, kind: ProviderKind) -> Self {
        let provider = kind.name();
        let state: Box<dyn WireStream> = match wire {
            Wire::Anthropic => Box::new(anthropic::AnthropicStream::new()),
            Wire::Responses => Box::new(responses::ResponsesStream::new()),
            Wire::Chat(_) => Box::new(openai::OpenAiStream::new(provider)),
        };
        StreamDecoder {
            wire,
            provider,
            parser: SseParser::new(),
            state: Some(state),
            saw_events: false,
        }
    }

    /// Feeds a chunk of the body, forwarding transient events to `emit`.
    /// Returns the committed turn once the terminal event arrived (later
    /// calls return a protocol error), `None` while more is needed.
    pub fn push(
        &mut self,
        chunk: &[u8],
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Option<AssistantTurn>, Failure> {
        let events = self.parser.push(chunk);
        if self.parser.overflowed() {
            return Err(self.protocol(format!(
                "an event of the stream is larger than {} MiB",
                MAX_EVENT_BYTES >> 20
            )));
        }
        for ev in events {
            self.saw_events = true;
            let Some(state) = self.state.as_mut() else {
                return Err(self.protocol("data after the terminal event".into()));
            };
            state.on_sse(&ev, emit)?;
            if state.is_complete() {
                let state = self.state.take().expect("checked above");
                return state.into_turn().map(Some).map_err(Failure::Fatal);
            }
        }
        Ok(None)
    }

    /// True once the body held one whole event (a chunk, an error, the
    /// terminal event): the server answered, whatever it said.
    pub fn saw_events(&self) -> bool {
        self.saw_events
    }

    /// The body ended cleanly: the turn, where the wire format allows a body
    /// to end without its terminal event, else [`ProviderError::Interrupted`].
    pub fn finish(mut self) -> Result<AssistantTurn, Failure> {
        let provider = self.provider;
        match self.state.take() {
            Some(state) if state.may_end_without_terminal() && !self.parser.has_pending() => {
                state.into_turn().map_err(Failure::Fatal)
            }
            Some(_) => {
                let terminal = match self.wire {
                    Wire::Anthropic => "message_stop",
                    Wire::Responses => "response.completed",
                    Wire::Chat(_) => "data: [DONE]",
                };
                Err(Failure::Fatal(ProviderError::Interrupted {
                    provider,
                    reason: format!("the stream ended before {terminal}"),
                }))
            }
            None => Err(self.protocol("the turn was already taken".into())),
        }
    }

    fn protocol(&self, message: String) -> Failure {
        Failure::Fatal(ProviderError::Protocol {
            provider: self.provider,
            message,
        })
    }
}

/// Decodes a whole body at once (for tests and fuzzing): the turn, or how
/// the attempt would have ended.
pub fn decode_body(
    wire: Wire,
    kind: ProviderKind,
    body: &[u8],
    emit: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<AssistantTurn, Failure> {
    let mut decoder = StreamDecoder::new(wire, kind);
    match decoder.push(body, emit)? {
        Some(turn) => Ok(turn),
        None => decoder.finish(),
    }
}
