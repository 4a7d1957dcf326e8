//! The task list as a plan: the task state's actions as a checklist every
//! surface shows (the terminal's sidebar, the page, ACP `plan` updates,
//! `latch run --json`). The canonical task state forgets an action once it
//! is completed; the checklist keeps it, ticked, until a new list starts:
//! an action added when every step is done begins the next list.
//!
//! A pure reducer over a session's events ([`Checklist::replay`] equals
//! folding them one by one).

use crate::event::{EventKind, StateOp};
use serde::{Deserialize, Serialize};

/// Most steps kept; the oldest ticked ones go first.
pub const MAX_STEPS: usize = 100;

/// Where a step stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not done yet.
    Pending,
    /// Done (`complete_action`).
    Completed,
}

/// One step of the checklist.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// The action's text.
    pub text: String,
    /// Done or not.
    pub status: StepStatus,
}

/// The checklist of one session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checklist {
    steps: Vec<Step>,
}

impl Checklist {
    /// Fold `events` (a session's, ascending).
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a EventKind>) -> Checklist {
        let mut list = Checklist::default();
        for e in events {
            list.apply(e);
        }
        list
    }

    /// Fold one more event; true when the checklist changed.
    pub fn apply(&mut self, event: &EventKind) -> bool {
        match event {
            EventKind::StateUpdate(StateOp::AddAction { text }) => self.add(text.trim()),
            EventKind::StateUpdate(StateOp::CompleteAction { text }) => self.complete(text.trim()),
            _ => false,
        }
    }

    fn add(&mut self, text: &str) -> bool {
        if text.is_empty()
            || self
                .steps
                .iter()
                .any(|s| s.text == text && s.status == StepStatus::Pending)
        {
            return false;
        }
        if self.is_done() {
            self.steps.clear();
        }
        self.steps.retain(|s| s.text != text);
        self.steps.push(Step {
            text: text.to_string(),
            status: StepStatus::Pending,
        });
        while self.steps.len() > MAX_STEPS {
            match self
                .steps
                .iter()
                .position(|s| s.status == StepStatus::Completed)
            {
                Some(i) => self.steps.remove(i),
                None => self.steps.remove(0),
            };
        }
        true
    }

    fn complete(&mut self, text: &str) -> bool {
        match self
            .steps
            .iter_mut()
            .find(|s| s.text == text && s.status == StepStatus::Pending)
        {
            Some(step) => {
                step.status = StepStatus::Completed;
                true
            }
            None => false,
        }
    }

    /// True when `event` may change a session's checklist: an action added
    /// or completed, or the result of a task tool that does so (the task
    /// tools commit their state updates themselves, so a surface that sees
    /// only what the loop commits learns of them from the result).
    pub fn may_change(event: &EventKind) -> bool {
        match event {
            EventKind::StateUpdate(StateOp::AddAction { .. } | StateOp::CompleteAction { .. }) => {
                true
            }
            EventKind::ToolResult(r) => {
                !r.is_error && matches!(r.name.as_str(), "add_action" | "complete_action")
            }
            _ => false,
        }
    }

    /// The steps, in the order they were added.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// True when there are steps and every one is done.
    pub fn is_done(&self) -> bool {
        !self.steps.is_empty() && self.steps.iter().all(|s| s.status == StepStatus::Completed)
    }

    /// True when there is no step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(t: &str) -> EventKind {
        EventKind::StateUpdate(StateOp::AddAction { text: t.into() })
    }
    fn done(t: &str) -> EventKind {
        EventKind::StateUpdate(StateOp::CompleteAction { text: t.into() })
    }

    #[test]
    fn completed_steps_stay_ticked_until_a_new_list_starts() {
        let events = [
            add("read"),
            add("fix"),
            add("fix"),
            done("read"),
            done("unknown"),
            done("fix"),
            add("release"),
        ];
        let mut list = Checklist::default();
        let mut changed = Vec::new();
        for (i, e) in events.iter().enumerate() {
            changed.push(list.apply(e));
            assert_eq!(list, Checklist::replay(&events[..=i]), "prefix {i}");
            if i == 5 {
                let shown: Vec<(&str, StepStatus)> = list
                    .steps()
                    .iter()
                    .map(|s| (s.text.as_str(), s.status))
                    .collect();
                assert_eq!(
                    shown,
                    [
                        ("read", StepStatus::Completed),
                        ("fix", StepStatus::Completed)
                    ]
                );
                assert!(list.is_done());
            }
        }
        assert_eq!(changed, [true, true, false, true, false, true, true]);
        assert_eq!(list.steps().len(), 1, "a new list started: {list:?}");
        assert_eq!(list.steps()[0].text, "release");
    }
}
