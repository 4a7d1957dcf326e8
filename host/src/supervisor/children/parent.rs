//! [`ParentAgents`]: a parent agent's [`Delegation`] — the agent tools, and
//! the delivery of finished children's reports at the parent's safe
//! boundaries, exactly once across restarts (the delivered event is the
//! durable marker; the [`AgentTree`] of the log says what is undelivered).
//!
//! Waiting for children — `wait_agents` and the end-of-turn wait — returns
//! at once when the user interrupts the parent's turn: the children keep
//! running (their reports arrive at a later safe boundary) unless
//! `[agents] on_interrupt = "cancel"` cancels them with the turn.

use super::schemas::{self, AgentCall};
use super::{ChildRuntime, Waited, worker};
use crate::agent::{AgentError, Delegation};
use latch_engine_sdk::types::{ToolCall, ToolResult};
use latch_kernel::agents::{AgentTree, ChildEntry, ChildState, notification_text};
use latch_kernel::{EventKind, SessionRecord};
use latch_provider::ToolSchema;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A parent agent's child agents.
pub struct ParentAgents {
    rt: Arc<ChildRuntime>,
    tree: AgentTree,
    /// The parent's interrupt signal (see [`Delegation::use_interrupt`]).
    interrupt: Option<latch_tools::Cancel>,
}

/// What the model reads when the user interrupted `wait_agents` (the
/// `interrupted:` prefix marks the call interrupted on every surface).
const WAIT_INTERRUPTED: &str = "interrupted: the user stopped the turn while wait_agents waited";

impl ParentAgents {
    /// The delegation of a parent whose children run on `rt`.
    pub fn new(rt: Arc<ChildRuntime>) -> ParentAgents {
        ParentAgents {
            rt,
            tree: AgentTree::default(),
            interrupt: None,
        }
    }

    /// True while the user interrupts the parent's turn.
    fn interrupted(&self) -> bool {
        self.interrupt.as_ref().is_some_and(|i| i.is_cancelled())
    }

    /// Catch the tree up with the log.
    fn refresh(&mut self, parent: &str) -> Result<(), latch_kernel::StoreError> {
        for e in self.rt.store.agent_log(parent, self.tree.watermark())? {
            self.tree.apply(&e);
        }
        Ok(())
    }

    /// A child's state for the model: the durable state, refined by what
    /// this process runs.
    fn state(&self, c: &ChildEntry) -> &'static str {
        match c.state {
            ChildState::Finished => "finished",
            ChildState::Failed => "failed",
            ChildState::Unfinished if self.rt.is_running(&c.id) => "running",
            ChildState::Unfinished if self.rt.is_live(&c.id) => "queued",
            ChildState::Unfinished => "interrupted",
        }
    }

    fn call(&mut self, parent: &SessionRecord, call: AgentCall) -> Result<Answer, String> {
        self.refresh(&parent.id).map_err(|e| e.to_string())?;
        match call {
            AgentCall::Spawn {
                role,
                task,
                context,
                model,
                agent,
            } => {
                let id = worker::spawn(
                    &self.rt,
                    parent,
                    worker::Spawn {
                        role: &role,
                        task: &task,
                        context: context.as_deref(),
                        model: model.as_deref(),
                        agent: agent.as_deref(),
                    },
                )?;
                Ok(Answer::text(format!(
                    "Spawned child agent {id} ({role}). It works concurrently; its report \
                     reaches you when it finishes, or call wait_agents."
                )))
            }
            AgentCall::Wait { ids, timeout_s } => self.wait(parent, ids, timeout_s),
            AgentCall::Message { id, text } => {
                let entry = self.known(&id)?.clone();
                self.rt
                    .store
                    .append(
                        &parent.id,
                        EventKind::AgentMessageQueued {
                            child: id.clone(),
                            text,
                        },
                    )
                    .map_err(|e| e.to_string())?;
                self.rt.notify_mail(&id);
                Ok(Answer::text(match self.state(&entry) {
                    "interrupted" => match worker::resume(&self.rt, parent, &entry) {
                        Ok(()) => format!(
                            "Child {id} was interrupted; it is resumed and gets the message at \
                             its first boundary."
                        ),
                        // Another process drives it (the user resumed it):
                        // the message reaches it there.
                        Err(worker::ResumeError::InUse(holder)) => format!(
                            "Queued for child {id}, which {holder} drives now; it gets the \
                             message at its next safe boundary there."
                        ),
                        Err(worker::ResumeError::Failed(e)) => return Err(e),
                    },
                    "running" | "queued" => {
                        format!("Queued for child {id}; it arrives at its next safe boundary.")
                    }
                    state => format!(
                        "Queued for child {id}, which is {state}: it arrives only if the child \
                         runs again."
                    ),
                }))
            }
            AgentCall::List => {
                let lines: Vec<String> = self
                    .tree
                    .children()
                    .map(|c| {
                        let first = c
                            .latest_report()
                            .map(|(_, r)| r.summary.lines().next().unwrap_or("").to_string())
                            .unwrap_or_default();
                        format!("{}  {}  {}  {}", c.id, c.role, self.state(c), first)
                            .trim_end()
                            .to_string()
                    })
                    .collect();
                Ok(Answer::text(if lines.is_empty() {
                    "No child agents yet.".to_string()
                } else {
                    lines.join("\n")
                }))
            }
            AgentCall::Cancel { id } => {
                let entry = self.known(&id)?;
                if self.rt.cancel(&id) {
                    Ok(Answer::text(format!(
                        "Cancelling child {id} at its next safe boundary; its report follows."
                    )))
                } else {
                    Err(format!(
                        "child {id} is not running (it is {}); nothing to cancel",
                        self.state(entry)
                    ))
                }
            }
        }
    }

    fn known(&self, id: &str) -> Result<&ChildEntry, String> {
        self.tree.child(id).ok_or_else(|| {
            let ids: Vec<&str> = self.tree.children().map(|c| c.id.as_str()).collect();
            format!(
                "no child agent `{id}` in this session (children: {}); list_agents shows them",
                if ids.is_empty() {
                    "none".to_string()
                } else {
                    ids.join(", ")
                }
            )
        })
    }

    /// `wait_agents`: block until one of `ids` (all when empty) has an
    /// undelivered report, then hand over every undelivered report of them.
    fn wait(
        &mut self,
        parent: &SessionRecord,
        ids: Vec<String>,
        timeout_s: u64,
    ) -> Result<Answer, String> {
        for id in &ids {
            self.known(id)?;
        }
        let wanted = |id: &str| ids.is_empty() || ids.iter().any(|i| i == id);
        let deadline = Instant::now() + Duration::from_secs(timeout_s);
        let rt = self.rt.clone();
        let mut tree = std::mem::take(&mut self.tree);
        let mut failure = None;
        let interrupt = self.interrupt.clone();
        let stop = move || interrupt.as_ref().is_some_and(|i| i.is_cancelled());
        let waited = rt.wait_until(deadline, &stop, || {
            if let Err(e) = catch_up(&rt, &parent.id, &mut tree) {
                failure = Some(e.to_string());
                return true;
            }
            let any_report = tree.undelivered().iter().any(|(c, _, _)| wanted(&c.id));
            let any_live = tree.children().any(|c| wanted(&c.id) && rt.is_live(&c.id));
            any_report || !any_live
        });
        self.tree = tree;
        if let Some(e) = failure {
            return Err(e);
        }
        if waited == Waited::Interrupted {
            // Nothing is handed over: what arrived is delivered at a later
            // safe boundary. The children keep running unless the turn's
            // end cancels them.
            let still: Vec<String> = self
                .tree
                .children()
                .filter(|c| wanted(&c.id) && self.rt.is_live(&c.id))
                .map(|c| format!("{} ({})", c.id, c.role))
                .collect();
            return Err(if still.is_empty() {
                format!("{WAIT_INTERRUPTED}.")
            } else {
                format!(
                    "{WAIT_INTERRUPTED}; still running: {}. Their reports reach you at a later \
                     turn.",
                    still.join(", ")
                )
            });
        }
        let ready = waited == Waited::Done;
        let reports: Vec<(String, u64, String)> = self
            .tree
            .undelivered()
            .into_iter()
            .filter(|(c, _, _)| wanted(&c.id))
            .map(|(c, seq, r)| (c.id.clone(), seq, notification_text(&c.id, r)))
            .collect();
        let still: Vec<String> = self
            .tree
            .children()
            .filter(|c| wanted(&c.id) && self.rt.is_live(&c.id))
            .map(|c| format!("{} ({})", c.id, c.role))
            .collect();
        let mut text = reports
            .iter()
            .map(|(_, _, t)| t.clone())
            .collect::<Vec<_>>()
            .join("\n\n");
        if reports.is_empty() {
            text = if ready {
                "No child is running and no report waits.".to_string()
            } else {
                format!("Timed out after {timeout_s} s with no new report.")
            };
        }
        if !still.is_empty() {
            text.push_str(&format!("\n\nStill running: {}", still.join(", ")));
        }
        Ok(Answer {
            text,
            markers: reports
                .into_iter()
                .map(|(child, report_seq, _)| EventKind::AgentReportReceived { child, report_seq })
                .collect(),
        })
    }
}

fn catch_up(
    rt: &ChildRuntime,
    parent: &str,
    tree: &mut AgentTree,
) -> Result<(), latch_kernel::StoreError> {
    for e in rt.store.agent_log(parent, tree.watermark())? {
        tree.apply(&e);
    }
    Ok(())
}

impl ParentAgents {
    /// One notification per report not delivered yet, oldest first.
    fn notifications(&self) -> Vec<EventKind> {
        self.tree
            .undelivered()
            .into_iter()
            .map(|(c, report_seq, r)| EventKind::AgentNotificationDelivered {
                child: c.id.clone(),
                report_seq,
                text: notification_text(&c.id, r),
            })
            .collect()
    }
}

/// A tool answer: its text and the markers committed with it.
struct Answer {
    text: String,
    markers: Vec<EventKind>,
}

impl Answer {
    fn text(text: String) -> Answer {
        Answer {
            text,
            markers: Vec::new(),
        }
    }
}

impl Delegation for ParentAgents {
    fn schemas(&self) -> Vec<ToolSchema> {
        let agents: Vec<(&str, &str)> = self
            .rt
            .agents
            .agents()
            .map(|a| (a.name.as_str(), a.description.as_str()))
            .collect();
        schemas::schemas_with(&agents)
    }

    fn execute(&mut self, session: &SessionRecord, call: &ToolCall) -> Option<Vec<EventKind>> {
        let parsed = schemas::parse(&call.name, &call.arguments_json)?;
        let result = |content: String, is_error: bool| {
            EventKind::ToolResult(ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
                images: vec![],
            })
        };
        Some(match parsed.and_then(|c| self.call(session, c)) {
            Ok(answer) => {
                let mut events = answer.markers;
                events.push(result(answer.text, false));
                events
            }
            Err(message) => vec![result(message, true)],
        })
    }

    fn at_safe_boundary(&mut self, session: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
        if !self.rt.take_finished() {
            return Ok(Vec::new());
        }
        self.refresh(&session.id)?;
        Ok(self.notifications())
    }

    /// The parent ended its turn while children this process runs are not
    /// done: wait (at most [`schemas::MAX_WAIT_S`]) until one of their
    /// reports waits, then deliver every waiting report so the parent
    /// continues on them. A report that arrived during the parent's last
    /// request is delivered at once.
    fn settle(&mut self, session: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
        let rt = self.rt.clone();
        let deadline = Instant::now() + Duration::from_secs(schemas::MAX_WAIT_S);
        let mut tree = std::mem::take(&mut self.tree);
        let mut failure = None;
        let interrupt = self.interrupt.clone();
        let stop = move || interrupt.as_ref().is_some_and(|i| i.is_cancelled());
        let waited = rt.wait_until(deadline, &stop, || {
            if let Err(e) = catch_up(&rt, &session.id, &mut tree) {
                failure = Some(e);
                return true;
            }
            !tree.undelivered().is_empty() || rt.live_count() == 0
        });
        self.tree = tree;
        if let Some(e) = failure {
            return Err(e.into());
        }
        if waited == Waited::Interrupted || self.interrupted() {
            return Err(AgentError::Interrupted);
        }
        Ok(self.notifications())
    }

    fn use_interrupt(&mut self, interrupt: latch_tools::Cancel) {
        self.interrupt = Some(interrupt);
    }

    fn on_interrupted(&mut self) {
        if self.rt.cancels_on_interrupt() {
            self.rt.cancel_all();
        }
    }
}
