//! [`GroupMember`]: one member's [`Delegation`] — its own delegation plus
//! the group tools, and the delivery of its pending group messages at its
//! safe boundaries (through [`GroupPort::deliver`]: the recipient's event
//! in its local session and the root's marker in one transaction). The
//! port is the local store unless [`GroupMember::with_port`] gives a
//! shared one; the member's own session and its agent tree always come
//! from its local store.

use super::schemas::{self, GroupCall};
use super::{LEAD, LiveGroup, ensure_group, reconcile};
use crate::agent::{AgentError, Delegation};
use crate::supervisor::children::ChildRuntime;
use latch_engine_sdk::types::{ToolCall, ToolResult};
use latch_kernel::agents::AgentTree;
use latch_kernel::group::{ALL, GroupError, GroupEvent, GroupPort, TaskStatus, present};
use latch_kernel::{EventKind, SessionRecord, Store};
use latch_provider::ToolSchema;
use std::sync::Arc;

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
    /// The role of a member that joined a group whose lead runs elsewhere
    /// (`latch group join`); `None` for the root and its children.
    joined: Option<String>,
    /// Such a member's id once it ran here (joined at a tool call or a safe
    /// boundary): it leaves when this value goes, as nobody else
    /// reconciles it.
    ran_as: Option<String>,
}

fn store_error(e: GroupError) -> Result<(), AgentError> {
    match e {
        GroupError::Store(e) => Err(AgentError::Store(e)),
        // A shared store that is away: the session goes on, the next
        // reconciliation tries again.
        e @ GroupError::Unavailable { .. } => {
            tracing::warn!("group reconciliation: {e}");
            Ok(())
        }
        // Membership changes are refused only when the log already moved
        // on (another process reconciled first): nothing to do.
        GroupError::Refused(r) => {
            tracing::debug!("group reconciliation: {r}");
            Ok(())
        }
    }
}

impl GroupMember {
    /// The root's membership: `inner` is its own delegation (the agent
    /// tools over `children`).
    pub fn for_root(
        inner: Box<dyn Delegation>,
        store: Arc<Store>,
        root: &str,
        children: Arc<ChildRuntime>,
    ) -> GroupMember {
        GroupMember {
            inner: Some(inner),
            live: LiveGroup::new(store.clone(), root),
            port: store.clone(),
            store,
            children: Some((children, AgentTree::default())),
            joined: None,
            ran_as: None,
        }
    }

    /// A child's membership in its parent's (`root`'s) group; `inner` is
    /// its link to the parent.
    pub fn for_child(inner: Box<dyn Delegation>, store: Arc<Store>, root: &str) -> GroupMember {
        GroupMember {
            inner: Some(inner),
            live: LiveGroup::new(store.clone(), root),
            port: store.clone(),
            store,
            children: None,
            joined: None,
            ran_as: None,
        }
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
        GroupMember {
            inner: None,
            live: LiveGroup::new(port.clone(), root),
            port,
            store,
            children: None,
            joined: Some(role.to_string()),
            ran_as: None,
        }
    }

    /// The group on `port` instead of the local store (`[group] store`).
    pub fn with_port(mut self, port: Arc<dyn GroupPort>) -> GroupMember {
        self.live = LiveGroup::new(port.clone(), self.live.root());
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
    /// membership with it.
    fn sync(&mut self) -> Result<(), GroupError> {
        let Some((rt, tree)) = self.children.as_mut() else {
            return Ok(());
        };
        for e in self.store.agent_log(self.live.root(), tree.watermark())? {
            tree.apply(&e);
        }
        reconcile(&*self.port, &self.live, tree, |id| rt.is_live(id))
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

    /// Join `me` unless it is an active member already.
    fn join(&self, me: &str) -> Result<(), GroupError> {
        if self.live.with(|s| s.member(me).is_some_and(|m| m.active))? {
            return Ok(());
        }
        self.port.commit(
            self.root(),
            GroupEvent::MemberJoined {
                member: me.to_string(),
                role: self.role_of(me)?,
            },
        )?;
        Ok(())
    }

    /// `me` runs here: a joined member leaves when this value goes.
    fn ran(&mut self, me: &str) {
        if self.joined.is_some() && self.ran_as.is_none() {
            self.ran_as = Some(me.to_string());
        }
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
            .live
            .with(|s| {
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

    fn call(&mut self, me: &str, call: GroupCall) -> Result<String, String> {
        let text = |e: GroupError| e.to_string();
        if self.joined.is_none() {
            ensure_group(&*self.port, self.root()).map_err(text)?;
        }
        self.sync().map_err(text)?;
        self.join(me).map_err(text)?;
        self.ran(me);
        let root = self.root().to_string();
        match call {
            GroupCall::Create {
                title,
                description,
                depends_on,
                key,
            } => {
                let c = self
                    .port
                    .commit(
                        &root,
                        GroupEvent::TaskCreated {
                            title: title.clone(),
                            description,
                            depends_on,
                            key: key.clone(),
                            by: me.to_string(),
                        },
                    )
                    .map_err(text)?;
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
            GroupCall::List => self.live.with(list_text).map_err(text),
            GroupCall::Claim { id } => {
                let c = self.port.claim(&root, id, me).map_err(text)?;
                let title = self
                    .live
                    .with(|s| s.task(id).map(|t| t.title.clone()).unwrap_or_default())
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
                self.port
                    .commit(
                        &root,
                        GroupEvent::TaskCompleted {
                            task: id,
                            by: me.to_string(),
                            ok: !failed,
                            result,
                        },
                    )
                    .map_err(text)?;
                Ok(format!(
                    "Task #{id} is {}.",
                    if failed { "marked failed" } else { "completed" }
                ))
            }
            GroupCall::Release { id, reason } => {
                self.port
                    .commit(
                        &root,
                        GroupEvent::TaskReleased {
                            task: id,
                            by: me.to_string(),
                            reason: reason.unwrap_or_else(|| "released by its holder".into()),
                        },
                    )
                    .map_err(text)?;
                Ok(format!("Released task #{id}; it is open again."))
            }
            GroupCall::Message { to, text: body } => {
                let to = self.recipient(&to)?;
                self.port
                    .commit(
                        &root,
                        GroupEvent::MessageQueued {
                            from: me.to_string(),
                            to: to.clone(),
                            recipients: vec![],
                            text: body,
                        },
                    )
                    .map_err(text)?;
                Ok(format!(
                    "Queued for {to}; it arrives at the recipient's next safe boundary while it \
                     runs (an idle agent is not woken by it)."
                ))
            }
        }
    }

    /// Deliver what waits for `me` at this safe boundary.
    fn deliver(&mut self, me: &str) -> Result<(), GroupError> {
        let exists = self.live.with(|s| s.exists())?;
        if !exists {
            return Ok(());
        }
        self.sync()?;
        self.join(me)?;
        self.ran(me);
        if !self.port.pending(self.root(), me)?.is_empty() {
            self.port.deliver(self.root(), me)?;
        }
        Ok(())
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
    /// A member that joined from this host and ran here leaves when its
    /// session stops running here (`latch resume` ends), its claims
    /// released; the lead's process never reconciles it.
    fn drop(&mut self) {
        if let Some(me) = self.ran_as.take()
            && let Err(e) = super::leave(&*self.port, self.root(), &me, "stopped running")
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

    /// The wrapped delegation decides whether the turn waits (a parent for
    /// its children's reports); group messages are information only and
    /// never keep a turn going.
    fn settle(&mut self, session: &SessionRecord) -> Result<Vec<EventKind>, AgentError> {
        match self.inner.as_mut() {
            Some(d) => d.settle(session),
            None => Ok(Vec::new()),
        }
    }

    fn use_interrupt(&mut self, interrupt: latch_tools::Cancel) {
        if let Some(d) = self.inner.as_mut() {
            d.use_interrupt(interrupt);
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
