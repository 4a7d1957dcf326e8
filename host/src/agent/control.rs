//! What a surface can do to a running turn: interrupt it at once, or queue
//! the next message (steering) for the turn's next safe boundary.
//!
//! A [`TurnControl`] is a cheap handle shared between the agent (which runs
//! the turn on its own thread) and a surface. An interrupt drops the
//! provider stream in flight, kills the process group of a command a tool
//! call runs in the foreground (through the tools' [`latch_tools::Cancel`],
//! which the interrupt sets; the call answers as interrupted) and stops
//! before the next tool call; the turn
//! then answers every call left without a result as interrupted and commits
//! `RunInterrupted`, so the history stays protocol-safe. A steering message
//! is appended as the user's message at the next safe boundary, where every
//! earlier call has its result.
//!
//! A surface that answers permission requests its own way (the terminal
//! UI's modal) installs its [`super::DecisionPort`] with
//! [`Agent::set_decision_port`].

use super::repair::INTERRUPTED_RESULT;
use super::{Agent, AgentError, AgentEvent};
use latch_engine_sdk::types::{Part, ToolResult};
use latch_kernel::EventKind;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

/// Why a turn is cancelled when its lease is found lost.
const LEASE_LOST_REASON: &str = "the session was taken over by another process";

/// How often an in-flight request looks at the interrupt flag.
const INTERRUPT_POLL: Duration = Duration::from_millis(10);

#[derive(Debug, Default)]
struct Shared {
    /// The interrupt request; the tools' cancel signal is this same flag.
    interrupt: latch_tools::Cancel,
    /// Why the turn is stopped when it is cancelled rather than interrupted
    /// by the user (e.g. the parent cancelled this child).
    cancelled: Mutex<Option<String>>,
    steering: Mutex<VecDeque<String>>,
}

/// A handle on an agent's turns: interrupt and steer from another thread.
#[derive(Clone, Debug, Default)]
pub struct TurnControl {
    shared: Arc<Shared>,
}

impl TurnControl {
    /// Stop the running turn at once (no effect when none runs: the next
    /// turn clears the request when it starts).
    pub fn interrupt(&self) {
        self.shared.interrupt.cancel();
    }

    /// Stop the running turn at once as [`TurnControl::interrupt`] does,
    /// but as a cancellation: the turn ends with
    /// [`AgentError::Cancelled`] and `reason` in its `run_interrupted`.
    pub fn cancel(&self, reason: impl Into<String>) {
        *self
            .shared
            .cancelled
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(reason.into());
        self.shared.interrupt.cancel();
    }

    /// The error a stopped turn ends with: a cancellation with its reason,
    /// or the user's interrupt.
    fn stopped(&self) -> AgentError {
        match self
            .shared
            .cancelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            Some(reason) => AgentError::Cancelled(reason),
            None => AgentError::Interrupted,
        }
    }

    /// True when an interrupt was requested for the running turn.
    pub fn is_interrupted(&self) -> bool {
        self.shared.interrupt.is_cancelled()
    }

    /// Queue `text` as the user's next message, delivered at the running
    /// turn's next safe boundary.
    pub fn steer(&self, text: impl Into<String>) {
        self.queue().push_back(text.into());
    }

    /// Take every queued message that was not delivered yet, oldest first.
    pub fn take_steering(&self) -> Vec<String> {
        self.queue().drain(..).collect()
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<String>> {
        // A poisoned queue still holds plain strings: keep using it.
        self.shared
            .steering
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn clear_interrupt(&self) {
        *self
            .shared
            .cancelled
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        self.shared.interrupt.reset();
    }

    /// The signal that kills the tools' foreground commands: set by
    /// [`TurnControl::interrupt`], cleared when the next turn starts.
    pub(crate) fn tool_cancel(&self) -> latch_tools::Cancel {
        self.shared.interrupt.clone()
    }

    /// Resolves once an interrupt is requested.
    async fn interrupted(&self) {
        while !self.is_interrupted() {
            tokio::time::sleep(INTERRUPT_POLL).await;
        }
    }
}

impl Agent {
    /// The handle that interrupts and steers this agent's turns.
    pub fn control(&self) -> TurnControl {
        self.control.clone()
    }

    /// A new turn starts: an interrupt meant for an earlier one is void.
    pub(crate) fn start_controlled_turn(&self) {
        self.control.clear_interrupt();
    }

    /// An error when the user interrupted the turn, or when this process
    /// lost the session's lease (another process drives it now: nothing
    /// more runs here, see [`Agent::stop_when_lost`]).
    pub(crate) fn check_interrupt(&self) -> Result<(), AgentError> {
        if self.control.is_interrupted() {
            return Err(self.control.stopped());
        }
        self.store.check_lease(&self.session.id)?;
        Ok(())
    }

    /// Interrupt the running turn at once when `lease` is found lost: the
    /// session was taken over while this process was stopped or asleep.
    /// The turn then ends with [`latch_kernel::StoreError::LeaseLost`]
    /// naming the new holder, and writes nothing (every append of a
    /// holder that lost its lease is refused).
    pub fn stop_when_lost(&self, lease: &latch_kernel::SessionLease) {
        let control = self.control.clone();
        lease.on_lost(move || control.cancel(LEASE_LOST_REASON));
    }

    /// Run `fut` (a provider request) to its end unless the user interrupts
    /// first; then the future — and with it the stream — is dropped.
    pub(crate) fn interruptible<F: Future>(&self, fut: F) -> Result<F::Output, AgentError> {
        let control = self.control.clone();
        self.runtime.block_on(async move {
            let mut fut = std::pin::pin!(fut);
            let mut stop = std::pin::pin!(control.interrupted());
            std::future::poll_fn(|cx| {
                if let Poll::Ready(out) = fut.as_mut().poll(cx) {
                    return Poll::Ready(Ok(out));
                }
                if stop.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(control.stopped()));
                }
                Poll::Pending
            })
            .await
        })
    }

    /// At a safe boundary: append the messages the user typed while the
    /// turn ran, as the user's own messages.
    pub(crate) fn deliver_steering(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<(), AgentError> {
        let queued = self.control.take_steering();
        if queued.is_empty() {
            return Ok(());
        }
        self.append_batch(
            queued
                .into_iter()
                .map(|text| EventKind::UserMessage {
                    parts: vec![Part::Text(text)],
                })
                .collect(),
            observer,
        )
    }

    /// Answer every tool call of the latest assistant message that has no
    /// result as interrupted, so the history stays a valid continuation.
    pub(crate) fn answer_open_calls(
        &mut self,
        observer: &mut (dyn FnMut(AgentEvent) + Send),
    ) -> Result<usize, AgentError> {
        let open = self
            .store
            .with_kernel(&self.session.id, |k| k.unfinished().open_calls.clone())?;
        let n = open.len();
        if n == 0 {
            return Ok(0);
        }
        self.append_batch(
            open.into_iter()
                .map(|c| {
                    EventKind::ToolResult(ToolResult {
                        call_id: c.id,
                        name: c.name,
                        content: INTERRUPTED_RESULT.into(),
                        is_error: true,
                        images: vec![],
                    })
                })
                .collect(),
            observer,
        )?;
        Ok(n)
    }
}
