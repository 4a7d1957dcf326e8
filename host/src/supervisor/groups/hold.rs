//! [`Hold`]: one member's hold on its group membership, between the group
//! tools and the port. It joins (with a lease, on a store that keeps them)
//! and remembers the membership's epoch, which every commit carries; when
//! the lease is lost or a commit is refused as fenced, it cancels the
//! running turn with the reason and refuses group commits until the
//! member's next turn, where it rejoins with a new epoch. Each commit
//! carries an id; a commit whose outcome is unknown (a lost reply, an
//! interrupt) keeps its id, and the same request made again reuses it, so
//! the store answers with the first result instead of applying it twice.
//! Every wait on the port is interruptible.

use crate::agent::TurnControl;
use latch_kernel::group::{
    Commit, Committed, GroupError, GroupEvent, GroupPort, GroupRefusal, Membership, new_commit_id,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a wait on the port looks at the interrupt.
const INTERRUPT_POLL: Duration = Duration::from_millis(25);

/// One member's membership (see the module documentation).
pub(crate) struct Hold {
    port: Arc<dyn GroupPort>,
    root: String,
    membership: Option<Membership>,
    /// Why the membership ended while the member runs, until it rejoins.
    fenced: Arc<Mutex<Option<String>>>,
    control: Option<TurnControl>,
    /// The request whose outcome is unknown: its fingerprint and id.
    uncertain: Option<(String, String)>,
}

impl Hold {
    pub(crate) fn new(port: Arc<dyn GroupPort>, root: &str) -> Hold {
        Hold {
            port,
            root: root.to_string(),
            membership: None,
            fenced: Arc::default(),
            control: None,
            uncertain: None,
        }
    }

    /// The same hold on another port (nothing joined yet).
    pub(crate) fn on(&self, port: Arc<dyn GroupPort>) -> Hold {
        let mut hold = Hold::new(port, &self.root);
        hold.control = self.control.clone();
        hold
    }

    pub(crate) fn use_control(&mut self, control: TurnControl) {
        self.control = Some(control);
    }

    /// The member's epoch while it holds a membership that was not lost.
    pub(crate) fn epoch(&self) -> Option<u64> {
        if self.fenced().is_some() {
            return None;
        }
        self.membership.as_ref().map(|m| m.epoch)
    }

    /// True when the member holds a lease (a store with leases).
    pub(crate) fn leased(&self) -> bool {
        self.membership.as_ref().is_some_and(|m| m.lease.is_some())
    }

    fn fenced(&self) -> Option<String> {
        self.fenced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// True while the turn that was stopped for the lost membership has
    /// not ended (a new turn clears the interrupt).
    fn same_turn(&self) -> bool {
        self.control.as_ref().is_some_and(|c| c.is_interrupted())
    }

    /// Stop the running turn: the membership ended for `reason`.
    fn fence(fenced: &Mutex<Option<String>>, control: Option<&TurnControl>, reason: &str) {
        {
            let mut f = fenced.lock().unwrap_or_else(|p| p.into_inner());
            if f.is_some() {
                return;
            }
            *f = Some(reason.to_string());
        }
        tracing::warn!("group membership lost: {reason}");
        if let Some(c) = control {
            c.cancel(format!(
                "this agent's membership of its group ended ({reason}); its claims were \
                 released and its group requests are refused until it rejoins at its next turn"
            ));
        }
    }

    /// Make sure `me` is a member: its epoch. Joins (with `role`) when it
    /// holds no membership; after a lost membership, refuses while the
    /// stopped turn lasts and rejoins at the next one.
    pub(crate) fn ensure(
        &mut self,
        me: &str,
        role: impl FnOnce() -> Result<String, GroupError>,
    ) -> Result<u64, String> {
        if let Some(reason) = self.fenced() {
            if self.same_turn() {
                return Err(format!(
                    "{me}'s membership of this group ended ({reason}): its group requests are \
                     refused and nothing was applied; it rejoins at its next turn"
                ));
            }
            *self.fenced.lock().unwrap_or_else(|p| p.into_inner()) = None;
            self.membership = None;
        }
        if let Some(m) = &self.membership {
            return Ok(m.epoch);
        }
        let role = role().map_err(|e| e.to_string())?;
        let (port, root, who) = (self.port.clone(), self.root.clone(), me.to_string());
        let membership = self
            .wait(move || port.join(&root, &who, &role), None)
            .map_err(|e| e.to_string())?;
        if let Some(lease) = &membership.lease {
            let (fenced, control) = (self.fenced.clone(), self.control.clone());
            lease.on_lost(move |reason| Hold::fence(&fenced, control.as_ref(), reason));
        }
        let epoch = membership.epoch;
        self.membership = Some(membership);
        Ok(epoch)
    }

    /// Commit `event` as the member (its epoch, an id), waiting
    /// interruptibly. A fenced refusal ends the membership here too.
    pub(crate) fn submit(&mut self, event: GroupEvent) -> Result<Committed, GroupError> {
        let fingerprint = serde_json::to_string(&event).unwrap_or_default();
        let id = match &self.uncertain {
            Some((f, id)) if *f == fingerprint => id.clone(),
            _ => new_commit_id(),
        };
        let mut commit = Commit::new(event).with_id(id.clone());
        commit.epoch = self.epoch();
        let (port, root) = (self.port.clone(), self.root.clone());
        let out = self.wait(move || port.submit(&root, commit), Some(id.clone()));
        match &out {
            Err(e) if e.uncertain() => self.uncertain = Some((fingerprint, id)),
            _ => {
                if self
                    .uncertain
                    .as_ref()
                    .is_some_and(|(f, _)| *f == fingerprint)
                {
                    self.uncertain = None;
                }
            }
        }
        if let Err(GroupError::Refused(r @ GroupRefusal::Fenced { .. })) = &out {
            Hold::fence(&self.fenced, self.control.as_ref(), &r.to_string());
        }
        out
    }

    /// Run `f` (a call of the port) and wait for it, unless the turn is
    /// interrupted first: then [`GroupError::Interrupted`] (naming
    /// `commit`, which may still be applied) and `f` finishes on its own.
    pub(crate) fn wait<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T, GroupError> + Send + 'static,
        commit: Option<String>,
    ) -> Result<T, GroupError> {
        let Some(control) = self.control.clone() else {
            return f();
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("latch-group-call".into())
            .spawn(move || {
                let _ = tx.send(f());
            })
            .map_err(|e| GroupError::Unavailable {
                store: "the group store".into(),
                detail: format!("cannot start a thread: {e}"),
            })?;
        loop {
            match rx.recv_timeout(INTERRUPT_POLL) {
                Ok(out) => return out,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if control.is_interrupted() {
                        return Err(GroupError::Interrupted { commit });
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(GroupError::Unavailable {
                        store: "the group store".into(),
                        detail: "the call ended without an answer".into(),
                    });
                }
            }
        }
    }

    /// `me` leaves for `reason` when it holds a membership (its epoch: a
    /// membership that already ended leaves nothing); its claims are
    /// released with the same commit. Not interruptible: it runs as the
    /// member stops. A store away answers within its deadline, and the
    /// lease then expires instead.
    pub(crate) fn leave(&mut self, me: &str, reason: &str) -> Result<(), GroupError> {
        let Some(m) = self.membership.take() else {
            return Ok(());
        };
        let mut commit = Commit::new(GroupEvent::MemberLeft {
            member: me.to_string(),
            reason: reason.to_string(),
            forced_by: None,
        });
        commit.epoch = Some(m.epoch);
        self.port.submit(&self.root, commit).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_kernel::event::{EventKind, StoredEvent};
    use latch_kernel::group::{GroupSnapshot, PendingMessage};
    use std::time::Instant;

    /// A store that answers each commit as `answer` says, after `delay`,
    /// remembering the ids it was given.
    struct Slow {
        delay: Duration,
        ids: Mutex<Vec<String>>,
        uncertain_first: bool,
    }

    impl GroupPort for Slow {
        fn submit(&self, _: &str, commit: Commit) -> Result<Committed, GroupError> {
            std::thread::sleep(self.delay);
            let mut ids = self.ids.lock().unwrap();
            ids.push(commit.id.clone().unwrap_or_default());
            if self.uncertain_first && ids.len() == 1 {
                return Err(GroupError::Uncertain {
                    store: "db".into(),
                    detail: "no answer".into(),
                    commit: commit.id.unwrap_or_default(),
                });
            }
            Ok(Committed {
                seq: 7,
                fresh: true,
            })
        }
        fn deliver(&self, _: &str, _: &str) -> Result<Vec<(u64, EventKind)>, GroupError> {
            Ok(Vec::new())
        }
        fn pending(&self, _: &str, _: &str) -> Result<Vec<PendingMessage>, GroupError> {
            Ok(Vec::new())
        }
        fn group_log(&self, _: &str, _: u64) -> Result<Vec<StoredEvent>, GroupError> {
            Ok(Vec::new())
        }
        fn projection(&self, _: &str) -> Result<GroupSnapshot, GroupError> {
            Ok(GroupSnapshot::default())
        }
    }

    fn message() -> GroupEvent {
        GroupEvent::MessageQueued {
            from: "m".into(),
            to: "lead".into(),
            recipients: vec![],
            text: "done".into(),
        }
    }

    #[test]
    fn a_wait_on_the_store_ends_when_the_turn_is_interrupted() {
        let port = Arc::new(Slow {
            delay: Duration::from_secs(5),
            ids: Mutex::default(),
            uncertain_first: false,
        });
        let mut hold = Hold::new(port.clone(), "lead");
        let control = TurnControl::default();
        hold.use_control(control.clone());
        let stop = control.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            stop.interrupt();
        });
        let t0 = Instant::now();
        let err = hold.submit(message()).unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        let GroupError::Interrupted { commit: Some(id) } = &err else {
            panic!("{err:?}")
        };
        assert!(
            err.to_string().contains("repeating the same call is safe"),
            "{err}"
        );
        // The same request made again goes out under the same id.
        assert_eq!(hold.uncertain.as_ref().map(|(_, i)| i), Some(id));
    }

    #[test]
    fn a_request_whose_outcome_is_unknown_is_repeated_under_its_id() {
        let port = Arc::new(Slow {
            delay: Duration::ZERO,
            ids: Mutex::default(),
            uncertain_first: true,
        });
        let mut hold = Hold::new(port.clone(), "lead");
        let err = hold.submit(message()).unwrap_err();
        assert!(err.uncertain(), "{err:?}");
        assert!(
            err.to_string().contains("may or may not have been applied"),
            "{err}"
        );
        hold.submit(message()).unwrap();
        // Another request gets an id of its own.
        hold.submit(GroupEvent::Created {
            lead: "lead".into(),
        })
        .unwrap();
        let ids = port.ids.lock().unwrap().clone();
        assert_eq!(ids.len(), 3);
        assert_eq!(ids[0], ids[1], "retried under the first id");
        assert_ne!(ids[1], ids[2]);
    }
}
