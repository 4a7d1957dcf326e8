//! Permission answers from the page to the agent that waits for them.
//!
//! A web session's agent asks through the binary's decision port, which
//! calls [`Approvals::wait`] once the `permission_requested` event is
//! durable; `POST /api/sessions/{id}/permissions/{call_id}` calls
//! [`Approvals::answer`]. The agent, not this registry, commits the
//! decision (`permission_granted` / `permission_denied`), so what is
//! durable is decided in one place. An answer may arrive between the
//! request's commit and the port's wait; it is kept for that wait. Nothing
//! here is durable: a restart loses only answers nobody waited for yet,
//! and resume denies their requests as interrupted.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// How often a waiting port looks at its stop condition.
const POLL: Duration = Duration::from_millis(20);

/// The user's answer to a permission request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Run this call.
    Allow,
    /// Run this call and every later one with the same command (or path)
    /// in this session.
    Always,
    /// Do not run it; the optional reason is for the model.
    Deny(Option<String>),
    /// Approve the proposed plan and act under this approval mode from
    /// now on (its name: `edits`, `on-request`, `untrusted`, `never`).
    Approve(String),
}

impl Answer {
    /// Parse the `decision` of an answer (`allow`, `deny`, `always`) with
    /// the optional reason a denial carries.
    pub fn parse(decision: &str, reason: Option<String>) -> Result<Answer, String> {
        Answer::parse_with_mode(decision, reason, None)
    }

    /// [`Answer::parse`], and `approve` with the approval mode the
    /// approved plan runs under (`mode`).
    pub fn parse_with_mode(
        decision: &str,
        reason: Option<String>,
        mode: Option<String>,
    ) -> Result<Answer, String> {
        match decision.trim().to_ascii_lowercase().as_str() {
            "approve" => match mode.map(|m| m.trim().to_string()).filter(|m| !m.is_empty()) {
                Some(mode) => Ok(Answer::Approve(mode)),
                None => Err(
                    "decision `approve` needs `mode`: the approval mode the plan runs under \
                     (`edits`, `on-request`, `untrusted` or `never`)"
                        .into(),
                ),
            },
            "allow" => Ok(Answer::Allow),
            "always" => Ok(Answer::Always),
            "deny" => Ok(Answer::Deny(
                reason
                    .map(|r| r.trim().to_string())
                    .filter(|r| !r.is_empty()),
            )),
            other => Err(format!(
                "decision must be `allow`, `deny`, `always` or `approve` (a plan, with `mode`), \
                 not `{other}`"
            )),
        }
    }
}

/// Requests waited on and answers not taken yet, by (session, call id).
#[derive(Default)]
pub struct Approvals {
    slots: Mutex<HashMap<(String, String), Slot>>,
    changed: Condvar,
}

#[derive(Default)]
struct Slot {
    waiting: bool,
    answer: Option<Answer>,
}

impl Approvals {
    /// An empty registry.
    pub fn new() -> Approvals {
        Approvals::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for the answer to `call_id` of `session`; None once `stop`
    /// says so first (the turn was interrupted). Blocking.
    pub fn wait(&self, session: &str, call_id: &str, stop: impl Fn() -> bool) -> Option<Answer> {
        let key = (session.to_string(), call_id.to_string());
        let mut slots = self.lock();
        slots.entry(key.clone()).or_default().waiting = true;
        loop {
            if let Some(answer) = slots.get_mut(&key).and_then(|s| s.answer.take()) {
                slots.remove(&key);
                return Some(answer);
            }
            if stop() {
                slots.remove(&key);
                return None;
            }
            slots = self
                .changed
                .wait_timeout(slots, POLL)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// True when a port waits on `call_id` of `session` now.
    pub fn is_waiting(&self, session: &str, call_id: &str) -> bool {
        self.lock()
            .get(&(session.to_string(), call_id.to_string()))
            .is_some_and(|s| s.waiting)
    }

    /// Answer `call_id` of `session`. The caller checked that the request
    /// is pending in the session's live run; a port that has not started
    /// waiting yet takes the answer when it does. A second answer before
    /// the first is taken replaces it.
    pub fn answer(&self, session: &str, call_id: &str, answer: Answer) {
        let key = (session.to_string(), call_id.to_string());
        self.lock().entry(key).or_default().answer = Some(answer);
        self.changed.notify_all();
    }

    /// Drop answers nobody took for `session` (its turn ended).
    pub fn forget(&self, session: &str) {
        self.lock()
            .retain(|(s, _), slot| s != session || slot.waiting);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn decisions_parse_and_bad_ones_say_what_is_allowed() {
        assert_eq!(Answer::parse("allow", None), Ok(Answer::Allow));
        assert_eq!(Answer::parse(" Always ", None), Ok(Answer::Always));
        assert_eq!(
            Answer::parse("deny", Some(" use make ".into())),
            Ok(Answer::Deny(Some("use make".into())))
        );
        assert_eq!(
            Answer::parse("deny", Some("  ".into())),
            Ok(Answer::Deny(None))
        );
        let err = Answer::parse("maybe", None).unwrap_err();
        assert!(err.contains("`allow`, `deny`, `always` or `approve`") && err.contains("maybe"));
        assert_eq!(
            Answer::parse_with_mode("approve", None, Some(" edits ".into())),
            Ok(Answer::Approve("edits".into()))
        );
        let err = Answer::parse_with_mode("approve", None, None).unwrap_err();
        assert!(err.contains("needs `mode`"), "{err}");
    }

    #[test]
    fn a_waiting_port_gets_the_answer_and_an_early_answer_is_kept() {
        let a = Arc::new(Approvals::new());
        let waiter = {
            let a = a.clone();
            std::thread::spawn(move || a.wait("s", "c1", || false))
        };
        while !a.is_waiting("s", "c1") {
            std::thread::sleep(Duration::from_millis(5));
        }
        a.answer("s", "c1", Answer::Always);
        assert_eq!(waiter.join().unwrap(), Some(Answer::Always));
        assert!(!a.is_waiting("s", "c1"));

        // Answered before the port waits: the wait takes it at once.
        a.answer("s", "c2", Answer::Deny(Some("no".into())));
        assert_eq!(
            a.wait("s", "c2", || true),
            Some(Answer::Deny(Some("no".into())))
        );
        // Another session's answer is not this one's.
        a.answer("t", "c3", Answer::Allow);
        assert_eq!(a.wait("s", "c3", || true), None);
        a.forget("t");
        assert_eq!(a.wait("t", "c3", || true), None);
    }

    #[test]
    fn an_interrupt_ends_the_wait_without_an_answer() {
        let a = Arc::new(Approvals::new());
        let stop = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (a, stop) = (a.clone(), stop.clone());
            std::thread::spawn(move || a.wait("s", "c", || stop.load(Ordering::SeqCst)))
        };
        while !a.is_waiting("s", "c") {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::SeqCst);
        assert_eq!(waiter.join().unwrap(), None);
        assert!(!a.is_waiting("s", "c"));
    }
}
