//! The terminal UI's approval prompt: a [`DecisionPort`] that waits for the
//! answer the user gives in the screen's permission modal (`y` allow once,
//! `a` always for this session, `n` deny, `r` deny with a reason). The
//! modal itself is reduced from the durable `permission_requested` event,
//! which commits before the port is asked, so the screen shows exactly what
//! the log holds. An answer names its call: one meant for an earlier
//! request is ignored. An interrupt (Ctrl-C, or leaving the screen) while
//! the port waits denies the request, so a turn never hangs on a closed
//! screen.

use crate::agent::{Decision, DecisionPort, TurnControl};
use latch_kernel::PermissionRequest;
use latch_tui::PermissionAnswer;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

/// How often a waiting request looks at the interrupt flag.
const POLL: Duration = Duration::from_millis(20);

/// What the model reads when the user stopped the turn instead of answering.
pub const INTERRUPTED_ANSWER: &str = "the user interrupted the turn instead of answering";

/// What the model reads when the screen closed before an answer.
pub const CLOSED_ANSWER: &str = "no answer: the terminal UI closed";

/// An answer from the screen: the call it is about, and the answer.
pub type Answer = (String, PermissionAnswer);

/// Waits for the modal's answer (see the module docs).
pub struct TuiApprover {
    answers: Mutex<Receiver<Answer>>,
    control: TurnControl,
}

impl TuiApprover {
    /// An approver for the agent `control` belongs to, and the sender the
    /// screen's answers go to.
    pub fn new(control: TurnControl) -> (TuiApprover, Sender<Answer>) {
        let (tx, rx) = channel();
        (
            TuiApprover {
                answers: Mutex::new(rx),
                control,
            },
            tx,
        )
    }
}

/// The agent's decision for a modal answer.
pub fn decision(answer: PermissionAnswer) -> Decision {
    match answer {
        PermissionAnswer::Allow => Decision::Once,
        PermissionAnswer::Always => Decision::Session,
        PermissionAnswer::Deny(reason) => Decision::Deny(reason),
        PermissionAnswer::Approve(mode) => match mode.parse() {
            Ok(mode) => Decision::Approve(mode),
            Err(e) => Decision::Deny(Some(format!("the screen answered with {e}"))),
        },
    }
}

impl DecisionPort for TuiApprover {
    fn decide(&self, request: &PermissionRequest) -> Decision {
        // One request at a time; a poisoned lock still holds the receiver.
        let answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if self.control.is_interrupted() {
                return Decision::Deny(Some(INTERRUPTED_ANSWER.into()));
            }
            match answers.recv_timeout(POLL) {
                Ok((call, answer)) if call == request.call_id => return decision(answer),
                // Meant for a request that is no longer waiting.
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Decision::Deny(Some(CLOSED_ANSWER.into()));
                }
            }
        }
    }
}
