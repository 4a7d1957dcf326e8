//! [`GroupMember`]: one member's [`Delegation`] — its own delegation plus
//! the group tools, and the delivery of its pending group messages at its
//! safe boundaries (through [`GroupPort::deliver`]: the recipient's event
//! in its local session and the root's marker in one transaction). The
//! port is the local store unless [`GroupMember::with_port`] gives a
//! shared one; the member's own session and its agent tree always come
//! from its local store.
//!
//! Its membership is a [`Hold`]: joined with a lease on a shared store,
//! every commit carrying the membership's epoch and an id, its turn
//! cancelled when the lease is lost. On a shared store the member also
//! waits for its team at the end of a turn ([`super::team`]) and leaves
//! when it stops running here.

use super::hold::Hold;
use super::schemas::{self, GroupCall};
use super::{LEAD, LiveGroup, ensure_group, reconcile, team};
use crate::agent::{AgentError, Delegation, TurnControl};
use crate::supervisor::children::ChildRuntime;
use latch_engine_sdk::types::{ToolCall, ToolResult};
use latch_kernel::agents::AgentTree;
use latch_kernel::group::{
    ALL, GroupError, GroupEvent, GroupPort, Membership, TaskStatus, present,
};
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_provider::ToolSchema;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a member waiting for its team commits, so that members whose
/// leases expired are removed even when nobody else commits.
const SWEEP_EVERY: Duration = Duration::from_secs(3);

/// A member of a group: the root (with its children's runtime, so it can
/// reconcile membership) or a child.
pub struct GroupMember {
    inner: Option<Box<dyn Delegation>>,
    /// The local store: the member's session, the root's agent tree.
    store: Arc<Store>,
    /// Where the group lives: `store` itself, or a shared store.
    port: Arc<dyn GroupPort>,
    live: Arc<LiveGroup>,
    /// The root's children and its view of their log; `None` for a child.
    children: Option<(Arc<ChildRuntime>, AgentTree)>,
    /// The memberships the root took for the children this process runs
    /// (their leases live while these do).
    child_holds: BTreeMap<String, Membership>,
    /// The role of a member that joined a group whose lead runs elsewhere
    /// (`latch group join`); `None` for the root and its children.
    joined: Option<String>,
    /// This member's membership.
    hold: Hold,
    /// The member's id once it ran here: it leaves when this value goes if
    /// it joined from this host or holds a lease, as nobody else
    /// reconciles it.
    ran_as: Option<String>,
    control: Option<TurnControl>,
}

fn store_error(e: GroupError) -> Result<(), AgentError> {
    match e {
        GroupError::Store(e) => Err(AgentError::Store(e)),
        // Membership changes are refused only when the log already moved
        // on (another process reconciled first): nothing to do.
        GroupError::Refused(r) => {
            tracing::debug!("group reconciliation: {r}");
            Ok(())
        }
        // A shared store that is away: the session goes on, the next
        // reconciliation tries again.
        e => {
            tracing::warn!("group reconciliation: {e}");
            Ok(())
        }
    }
}

impl GroupMember {
    fn new(
        inner: Option<Box<dyn Delegation>>,
        store: Arc<Store>,
        port: Arc<dyn GroupPort>,
        root: &str,
    ) -> GroupMember {
        GroupMember {
            inner,
            live: LiveGroup::new(port.clone(), root),
            hold: Hold::new(port.clone(), root),
            port,
            store,
            children: None,
            child_holds: BTreeMap::new(),
            joined: None,
            ran_as: None,
            control: None,
        }
    }

    /// The root's membership: `inner` is its own delegation (the agent
    /// tools over `children`).
    pub fn for_root(
        inner: Box<dyn Delegation>,
        store: Arc<Store>,
        root: &str,
        children: Arc<ChildRuntime>,
    ) -> GroupMember {
        let mut m = GroupMember::new(Some(inner), store.clone(), store, root);
        m.children = Some((children, AgentTree::default()));
        m
    }

    /// A child's membership in its parent's (`root`'s) group; `inner` is
    /// its link to the parent.
    pub fn for_child(inner: Box<dyn Delegation>, store: Arc<Store>, root: &str) -> GroupMember {
        GroupMember::new(Some(inner), store.clone(), store, root)
    }

    /// A session of this host that joined `root`'s group on the shared
    /// `port` as `role` (`latch group join`): the lead and the group live
    /// elsewhere, so it never creates the group and has no children.
    pub fn for_joined(
        store: Arc<Store>,
        port: Arc<dyn GroupPort>,
        root: &str,
        role: &str,
    ) -> GroupMember {
        let mut m = GroupMember::new(None, store, port, root);
        m.joined = Some(role.to_string());
        m
    }

    /// The group on `port` instead of the local store (`[group] store`).
    pub fn with_port(mut self, port: Arc<dyn GroupPort>) -> GroupMember {
        self.live = LiveGroup::new(port.clone(), self.live.root());
        self.hold = self.hold.on(port.clone());
        self.port = port;
        self
    }

    /// The live group state this member keeps (for `/group` and the
    /// sidebar GROUP block).
    pub fn live(&self) -> Arc<LiveGroup> {
        self.live.clone()
    }

    fn root(&self) -> &str {
        self.live.root()
    }

    /// The root only: catch its children's log up and reconcile
    /// membership with it (a child another process drives — its lease
    /// says so — is left alone).
    fn sync(&mut self) -> Result<(), GroupError> {
        let Some((rt, tree)) = self.children.as_mut() else {
            return Ok(());
        };
        for e in self.store.agent_log(self.live.root(), tree.watermark())? {
            tree.apply(&e);
        }
        let store = self.store.clone();
        let elsewhere = move |id: &str| {
            store
                .lease_holder(id)
                .ok()
                .flatten()
                .is_some_and(|h| !h.this_process)
        };
        let rt = rt.clone();
        reconcile(
            &*self.port,
            &self.live,
            tree,
            |id| rt.is_live(id),
            elsewhere,
            &mut self.child_holds,
        )
    }

    /// `me`'s role: `lead` for the root, its spawn role for a child.
    fn role_of(&self, me: &str) -> Result<String, GroupError> {
        if me == self.root() {
            return Ok(LEAD.to_string());
        }
        if let Some(role) = &self.joined {
            return Ok(role.clone());
        }
        let tree = self.store.agent_tree(self.root())?;
        Ok(tree
            .child(me)
            .map(|c| c.role.clone())
            .unwrap_or_else(|| "child".to_string()))
    }

    /// Join `me` unless its membership holds; its epoch, or why its group
    /// requests are refused.
    fn join(&mut self, me: &str) -> Result<u64, String> {
        let role = self.role_of(me);
        let epoch = self.hold.ensure(me, move || role)?;
        // A member that holds a lease (a shared store) or joined from this
        // host leaves when it stops running here.
        if (self.joined.is_some() || self.hold.leased()) && self.ran_as.is_none() {
            self.ran_as = Some(me.to_string());
        }
        Ok(epoch)
    }

    /// A member id for what the model wrote: `all`, an id, `lead`, or a
    /// role held by exactly one member.
    fn recipient(&self, to: &str) -> Result<String, String> {
        let to = to.trim();
        if to == ALL {
            return Ok(ALL.to_string());
        }
        if to == LEAD {
            return Ok(self.root().to_string());
        }
        let members: Vec<(String, String)> = self
            .read(|s| {
                s.members()
                    .map(|m| (m.id.clone(), m.role.clone()))
                    .collect()
            })
            .map_err(|e| e.to_string())?;
        if members.iter().any(|(id, _)| id == to) {
            return Ok(to.to_string());
        }
        let by_role: Vec<&String> = members
            .iter()
            .filter(|(_, r)| r == to)
            .map(|(id, _)| id)
            .collect();
        match by_role.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Ok(to.to_string()), // the port refuses it, listing the members
            many => Err(format!(
                "several members have the role `{to}` ({}); address one by its session id",
                many.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// Catch the live state up (interruptibly) and run `f` on it.
    fn read<R: Send + 'static>(
        &self,
        f: impl FnOnce(&latch_kernel::GroupState) -> R + Send + 'static,
    ) -> Result<R, GroupError> {
        let live = self.live.clone();
        self.hold.wait(move || live.with(f), None)
    }

    fn commit(&mut self, event: GroupEvent) -> Result<latch_kernel::group::Committed, String> {
        self.hold.submit(event).map_err(|e| e.to_string())
    }

    fn call(&mut self, me: &str, call: GroupCall) -> Result<String, String> {
        let text = |e: GroupError| e.to_string();
        if self.joined.is_none() {
            let (port, root) = (self.port.clone(), self.root().to_string());
            self.hold
                .wait(move || ensure_group(&*port, &root), None)
                .map_err(text)?;
        }
        self.sync().map_err(text)?;
        self.join(me)?;
        let me_owned = me.to_string();
        match call {
            GroupCall::Create {
                title,
                description,
                depends_on,
                key,
            } => {
                let c = self.commit(GroupEvent::TaskCreated {
                    title: title.clone(),
                    description,
                    depends_on,
                    key: key.clone(),
                    by: me_owned,
                })?;
                Ok(if c.fresh {
                    format!("Created task #{}: {title}", c.seq)
                } else {
                    format!(
                        "Task #{} already exists with key `{}`; nothing new was created.",
                        c.seq,
                        key.unwrap_or_default()
                    )
                })
            }
            GroupCall::List => self.read(list_text).map_err(text),
            GroupCall::Claim { id } => {
                let c = self.commit(GroupEvent::TaskClaimed {
                    task: id,
                    by: me_owned,
                    epoch: None,
                })?;
                let title = self
                    .read(move |s| s.task(id).map(|t| t.title.clone()).unwrap_or_default())
                    .map_err(text)?;
                Ok(if c.fresh {
                    format!(
                        "You hold task #{id}: {title}. Finish it with task_complete, or give it \
                         up with task_release."
                    )
                } else {
                    format!("You already hold task #{id}: {title}.")
                })
            }
            GroupCall::Complete { id, result, failed } => {
                self.commit(GroupEvent::TaskCompleted {
                    task: id,
                    by: me_owned,
                    ok: !failed,
                    result,
                })?;
                Ok(format!(
                    "Task #{id} is {}.",
                    if failed { "marked failed" } else { "completed" }
                ))
            }
            GroupCall::Release { id, reason } => {
                self.commit(GroupEvent::TaskReleased {
                    task: id,
                    by: me_owned,
                    reason: reason.unwrap_or_else(|| "released by its holder".into()),
                    forced_by: None,
                })?;
                Ok(format!("Released task #{id}; it is open again."))
            }
            GroupCall::Message { to, text: body } => {
                let to = self.recipient(&to)?;
                self.commit(GroupEvent::MessageQueued {
                    from: me_owned,
                    to: to.clone(),
                    recipients: vec![],
                    text: body,
                })?;
                Ok(format!(
                    "Queued for {to}; it arrives at the recipient's next safe boundary while it \
                     runs (an idle agent is not woken by it)."
                ))
            }
        }
    }

    /// Deliver what waits for `me` at this safe boundary (nothing while its
    /// membership is lost: its turn is ending).
    fn deliver(&mut self, me: &str) -> Result<Vec<(u64, EventKind)>, GroupError> {
        if !self.read(|s| s.exists())? {
            return Ok(Vec::new());
        }
        self.sync()?;
        if self.join(me).is_err() {
            return Ok(Vec::new());
        }
        let (port, root, who) = (self.port.clone(), self.root().to_string(), me.to_string());
        self.hold.wait(
            move || {
                if port.pending(&root, &who)?.is_empty() {
                    return Ok(Vec::new());
                }
                port.deliver(&root, &who)
            },
            None,
        )
    }

    /// The end of a turn on a shared store: wait for the team (see
    /// [`super::team`]), woken by the store's notifications; the events
    /// that continue the turn, or none.
    fn wait_for_team(&mut self, me: &str) -> Result<Vec<EventKind>, GroupError> {
        if self.hold.epoch().is_none() || !self.hold.leased() {
            return Ok(Vec::new());
        }
        let lead = self.joined.is_none() && me == self.root();
        let (port, root) = (self.port.clone(), self.root().to_string());
        let leases = |port: &Arc<dyn GroupPort>| -> Result<Vec<_>, GroupError> {
            Ok(port.leases(&root)?.unwrap_or_default())
        };
        let me_owned = me.to_string();
        let first = leases(&port)?;
        let (waiting, before) =
            self.read(move |s| (team::waits(s, &me_owned, lead, &first), team::statuses(s)))?;
        if !waiting {
            return Ok(Vec::new());
        }
        let interrupted = {
            let control = self.control.clone();
            move || control.as_ref().is_some_and(|c| c.is_interrupted())
        };
        let mut swept = Instant::now();
        loop {
            let watermark = self.read(|s| s.watermark())?;
            let (p, r, stop) = (port.clone(), root.clone(), interrupted.clone());
            self.hold.wait(
                move || p.wait_for_log(&r, watermark, SWEEP_EVERY, &stop),
                None,
            )?;
            if interrupted() || self.hold.epoch().is_none() {
                return Ok(Vec::new());
            }
            if swept.elapsed() >= SWEEP_EVERY {
                // Idempotent: appends nothing itself, but the commit path
                // removes members whose leases expired.
                swept = Instant::now();
                let _ = self.hold.submit(GroupEvent::Created { lead: root.clone() });
            }
            let now = leases(&port)?;
            let me_owned = me.to_string();
            let before_now = before.clone();
            let (still, moved, note) = self.read(move |s| {
                (
                    team::waits(s, &me_owned, lead, &now),
                    team::closed_since(&before_now, s),
                    team::note(&before_now, s),
                )
            })?;
            if still && !moved {
                continue;
            }
            // The messages that wait are delivered (committed by the
            // port); the note continues the turn with what changed.
            self.deliver(me)?;
            return Ok(vec![EventKind::NotificationDelivered {
                source: "group".into(),
                text: note,
            }]);
        }
    }
}

/// The `task_list` text: the tasks and which open ones are ready.
fn list_text(state: &latch_kernel::GroupState) -> String {
    let view = present::view(state);
    if view.tasks.is_empty() {
        return "The task list is empty; task_create adds one.".to_string();
    }
    let mut out = String::new();
    for t in &view.tasks {
        out.push_str(&format!(
            "#{} {} {}{} — {}{}\n",
            t.id,
            t.status.label(),
            t.owner
                .as_deref()
                .map(|o| format!("by {o} "))
                .unwrap_or_default(),
            if t.depends_on.is_empty() {
                String::new()
            } else {
                format!(
                    "(after {}) ",
                    t.depends_on
                        .iter()
                        .map(|d| format!("#{d}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            t.title,
            t.result
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ));
    }
    let ready: Vec<String> = state
        .tasks()
        .filter(|t| {
            t.status == TaskStatus::Open
                && t.depends_on.iter().all(|d| {
                    state
                        .task(*d)
                        .is_some_and(|d| d.status == TaskStatus::Completed)
                })
        })
        .map(|t| format!("#{}", t.id))
        .collect();
    out.push_str(&if ready.is_empty() {
        "No open task is ready to claim.".to_string()
    } else {
        format!("Ready to claim: {}", ready.join(", "))
    });
    out
}

impl Drop for GroupMember {
    /// A member that joined from this host, or holds a lease on a shared
    /// store, leaves when its session stops running here (`latch run` or
    /// `latch resume` ends, a signal stops it), its claims released; a
    /// leave that fails is left to the lease's expiry.
    fn drop(&mut self) {
        if let Some(me) = self.ran_as.take()
            && let Err(e) = self.hold.leave(&me, "stopped running")
        {
            tracing::warn!("{me} could not leave group {}: {e}", self.root());
        }
    }
}

impl Delegation for GroupMember {
    fn schemas(&self) -> Vec<ToolSchema> {
        let mut all = self.inner.as_ref().map(|d| d.schemas()).unwrap_or_default();
        all.extend(schemas::schemas());
        all
    }

    fn execute(&mut self, session: &SessionRecord, call: &ToolCall) -> Option<Vec<EventKind>> {
        if let Some(parsed) = schemas::parse(&call.name, &call.arguments_json) {
            let (content, is_error) = match parsed.and_then(|c| self.call(&session.id, c)) {
                Ok(text) => (text, false),
                Err(text) => (text, true),
            };
            return Some(vec![EventKind::ToolResult(ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
                images: vec![],
            })]);
        }
        let events = self.inner.as_mut()?.execute(session, call);
        if events.is_some()
            && let Err(e) = self.sync()
        {
            // A spawned child joins at the next sync at the latest.
            tracing::warn!("group membership not reconciled: {e}");
        }
        events
    }

    fn at_safe_boundary(&mut self, session: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
        let events = match self.inner.as_mut() {
            Some(d) => d.at_safe_boundary(session)?,
            None => Vec::new(),
        };
        if let Err(e) = self.deliver(&session.id) {
            store_error(e)?;
        }
        Ok(events)
    }

    /// The wrapped delegation decides first whether the turn waits (a
    /// parent for its children's reports); then, on a shared store, the
    /// member waits for its team ([`super::team`]). A group message alone
    /// never keeps a turn going.
    fn settle(&mut self, session: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
        let events = match self.inner.as_mut() {
            Some(d) => d.settle(session)?,
            None => Vec::new(),
        };
        if !events.is_empty() {
            return Ok(events);
        }
        match self.wait_for_team(&session.id) {
            Ok(events) => Ok(events),
            Err(e) => store_error(e).map(|_| Vec::new()),
        }
    }

    fn use_interrupt(&mut self, interrupt: latch_tools::Cancel) {
        if let Some(d) = self.inner.as_mut() {
            d.use_interrupt(interrupt);
        }
    }

    fn use_control(&mut self, control: TurnControl) {
        self.hold.use_control(control.clone());
        self.control = Some(control.clone());
        if let Some(d) = self.inner.as_mut() {
            d.use_control(control);
        }
    }

    fn on_interrupted(&mut self) {
        if let Some(d) = self.inner.as_mut() {
            d.on_interrupted();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::ModelProfile;

    /// Settles by returning one marker note.
    struct Waits;

    impl Delegation for Waits {
        fn schemas(&self) -> Vec<ToolSchema> {
            Vec::new()
        }
        fn execute(&mut self, _: &SessionRecord, _: &ToolCall) -> Option<Vec<EventKind>> {
            None
        }
        fn at_safe_boundary(&mut self, _: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
            Ok(Vec::new())
        }
        fn settle(&mut self, _: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
            Ok(vec![EventKind::NotificationDelivered {
                source: "test".into(),
                text: "a report arrived".into(),
            }])
        }
    }

    /// Group membership wraps a parent's (or a user-resumed child's)
    /// delegation: the turn still settles on what the wrapped delegation
    /// waits for, so a parent continues on its children's reports.
    #[test]
    fn membership_keeps_the_wrapped_delegation_settling() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path().join("s.db")).unwrap());
        let model = ModelProfile::with_defaults("openai", "m");
        let root = store.create_session("/w", None, &model).unwrap();
        let mut member = GroupMember::for_child(Box::new(Waits), store.clone(), &root.id);
        let settled = member.settle(&root).unwrap();
        assert_eq!(settled.len(), 1, "{settled:?}");
    }
}
