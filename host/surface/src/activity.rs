//! Lifecycle phases (durable) and activity (transient).
//!
//! The [`Phase`] of a session is reduced from its durable run, request and
//! tool events: no run, a request in flight, tools running, ended, or
//! interrupted. [`Delta`]s are the transient signals a live provider sends
//! (streamed text, "reasoning reported" — never its text —, a retry with the
//! provider's reason); they are presentation only and never change a
//! committed item. [`Activity`] combines the two for a status line.
//!
//! Silence establishes nothing: there is no timer here, so a quiet provider
//! is shown as "waiting", never as progress, failure or completion. A phase
//! that is open in the log but was not started by the live process (found on
//! resume) is shown as interrupted, never as live.

/// A transient signal from a live provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delta {
    /// Streamed assistant text, before the message commits.
    Text(String),
    /// The provider reported reasoning (its text is never shown).
    Reasoning,
    /// The provider is being retried.
    Retrying {
        /// The attempt about to be made.
        attempt: u32,
        /// The provider's reason.
        reason: String,
    },
}

/// The durable lifecycle phase of a session.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Phase {
    /// No run is open: none started yet, or the last one finished.
    #[default]
    Idle,
    /// A run is open and a model request is due or in flight.
    Requesting {
        /// Sequence number of the run's `run_started`.
        run: u64,
    },
    /// A run is open and tool calls have no result yet.
    Tools {
        /// Sequence number of the run's `run_started`.
        run: u64,
        /// The tools still running, in call order.
        names: Vec<String>,
    },
    /// The last run ended interrupted.
    Interrupted {
        /// Why.
        reason: String,
    },
}

impl Phase {
    /// The sequence number of the open run, if one is open.
    pub fn open_run(&self) -> Option<u64> {
        match self {
            Phase::Requesting { run } | Phase::Tools { run, .. } => Some(*run),
            _ => None,
        }
    }
}

/// What a status line says a session is doing now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Activity {
    /// Nothing runs.
    Idle,
    /// A request is in flight and the provider has reported nothing yet.
    Waiting,
    /// The provider streams text.
    Streaming,
    /// The provider reported reasoning.
    Reasoning,
    /// The provider is being retried.
    Retrying {
        /// The attempt.
        attempt: u32,
        /// The provider's reason.
        reason: String,
    },
    /// Tools run.
    RunningTools(Vec<String>),
    /// A tool waits for the user's permission.
    AwaitingPermission(String),
    /// The last run was interrupted, or a phase found open in the log has
    /// no live process behind it.
    Interrupted(String),
}

impl Activity {
    /// A short label for a status line.
    pub fn label(&self) -> String {
        match self {
            Activity::Idle => "ready".into(),
            Activity::Waiting => "waiting for the model".into(),
            Activity::Streaming => "streaming".into(),
            Activity::Reasoning => "reasoning reported".into(),
            Activity::Retrying { attempt, reason } => {
                format!("retrying (attempt {attempt}): {reason}")
            }
            Activity::RunningTools(names) => format!("running {}", names.join(", ")),
            Activity::AwaitingPermission(tool) => format!("waiting for permission: {tool}"),
            Activity::Interrupted(reason) => format!("interrupted: {reason}"),
        }
    }
}

/// The transient part of a surface: what a live provider said since the
/// last committed assistant message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transient {
    /// Streamed text not yet committed.
    pub streaming: String,
    /// The provider reported reasoning.
    pub reasoning: bool,
    /// The last retry announced.
    pub retry: Option<(u32, String)>,
}

impl Transient {
    /// Apply a delta.
    pub fn delta(&mut self, d: Delta) {
        match d {
            Delta::Text(t) => {
                self.streaming.push_str(&t);
                self.retry = None;
            }
            Delta::Reasoning => {
                self.reasoning = true;
                self.retry = None;
            }
            Delta::Retrying { attempt, reason } => {
                self.retry = Some((attempt, reason));
                self.streaming.clear();
            }
        }
    }
}
