//! Agent groups at run time: the root agent and its children share a task
//! list and message each other. [`GroupMember`] is a member's
//! [`crate::agent::Delegation`]: it wraps the member's own delegation
//! (the root's agent tools, a child's link to its parent), adds the group
//! tools and delivers pending group messages at the member's safe
//! boundaries. [`LiveGroup`] is the live group state a surface presents.
//!
//! Everything durable goes through a [`GroupPort`]: the local SQLite store
//! (the group's events are events of the root session) or, with `[group]
//! store = "postgres://…"`, a shared store that members on several hosts
//! reach (`latch_group_pg::PgGroup`); each member's own session stays in
//! its local store either way. This module only decides when to join,
//! leave and deliver. A member that
//! stops running leaves with a durable event that releases its claims: a
//! child when its report is committed ([`member_ended`]), any member the
//! root finds interrupted (a child no process runs: not this one, and no
//! lease says another does) when it reconciles. On a shared store every
//! member that runs holds a lease, renewed by its process's heartbeat; a
//! member whose process dies is removed by the commit path once its lease
//! expires.

mod hold;
mod member;
pub mod schemas;
mod team;

pub use member::GroupMember;

use crate::config::GroupConfig;
use latch_group_pg::{PgGroup, PgGroupError};
use latch_kernel::agents::{AgentTree, ChildState};
use latch_kernel::group::{
    GroupError, GroupEvent, GroupPort, GroupState, MemberLease, Membership, present,
};
use latch_kernel::{ReportOutcome, Store};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The role of the root session in its group.
pub const LEAD: &str = "lead";

/// A group's state as one process sees it, caught up incrementally from
/// the log (the live side of `/group`; a resumed session replays the same
/// events and presents the same text).
pub struct LiveGroup {
    port: Arc<dyn GroupPort>,
    root: String,
    state: Mutex<GroupState>,
}

impl LiveGroup {
    /// The live state of `root`'s group on `port`, empty until caught up.
    pub fn new(port: Arc<dyn GroupPort>, root: &str) -> Arc<LiveGroup> {
        Arc::new(LiveGroup {
            port,
            root: root.to_string(),
            state: Mutex::new(GroupState::default()),
        })
    }

    /// The root session.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// Catch up with the log and run `f` on the state.
    pub fn with<R>(&self, f: impl FnOnce(&GroupState) -> R) -> Result<R, GroupError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for e in self.port.group_log(&self.root, state.watermark())? {
            state.apply(&e);
        }
        Ok(f(&state))
    }

    /// The `/group` text.
    pub fn render(&self) -> Result<String, GroupError> {
        self.with(present::render)
    }
}

/// The group port `[group] store` names: the local `store` when unset, else
/// the shared PostgreSQL store at that URL (with `store` as the local store
/// deliveries append to, and `[group] lease_ttl_secs` for the leases its
/// members take). Every session of this process that opens one URL shares
/// one connection pool, one LISTEN connection and one heartbeat
/// ([`PgGroup::open`]), so `latch serve` with many sessions holds one pool
/// per store. Unreachable is an error naming the URL, password left out.
/// Safe to call on a thread that runs an async runtime.
pub fn open_port(
    config: &GroupConfig,
    store: Arc<Store>,
) -> Result<Arc<dyn GroupPort>, PgGroupError> {
    let Some(url) = config.store.as_deref() else {
        return Ok(store);
    };
    Ok(open_pg(url, store, config.lease_ttl())?)
}

/// The shared PostgreSQL group store at `url`, on this process's pool for
/// it (see [`open_port`]); its members take leases of `lease_ttl` (default
/// [`latch_group_pg::DEFAULT_LEASE_TTL`]).
pub fn open_pg(
    url: &str,
    store: Arc<Store>,
    lease_ttl: Option<Duration>,
) -> Result<Arc<PgGroup>, PgGroupError> {
    let connect = || PgGroup::open(url, store.clone());
    let pg = if tokio::runtime::Handle::try_current().is_ok() {
        // Connecting blocks on a runtime of its own, which may not start
        // inside another one.
        std::thread::scope(|s| s.spawn(connect).join())
            .map_err(|_| PgGroupError::Runtime("the connecting thread panicked".into()))??
    } else {
        connect()?
    };
    let pg = match lease_ttl {
        Some(ttl) => pg.with_lease_ttl(ttl),
        None => pg,
    };
    Ok(Arc::new(pg))
}

/// The URL to reach the group store a member recorded (`recorded`, without
/// its password) with: the configured one (`--store` or `[group] store`)
/// when it names the same store, as it carries the password; else the
/// recorded one; else, when the record is not a usable URL, the configured
/// one. `None` when there is none to use.
pub fn joined_store(configured: Option<&str>, recorded: &str) -> Option<String> {
    let configured = configured.filter(|c| !c.trim().is_empty());
    if let Some(c) = configured
        && latch_group_pg::without_password(c) == latch_group_pg::without_password(recorded)
    {
        return Some(c.to_string());
    }
    if latch_group_pg::usable_url(recorded) {
        return Some(recorded.to_string());
    }
    configured.map(str::to_string)
}

/// The root of `session`'s group: the session itself, or its parent.
pub fn root_of(session: &latch_kernel::SessionRecord) -> &str {
    session.parent.as_deref().unwrap_or(&session.id)
}

/// Create the group of `root` on `port` if it does not exist, with the
/// root as its lead.
pub fn ensure_group(port: &dyn GroupPort, root: &str) -> Result<(), GroupError> {
    port.commit(
        root,
        GroupEvent::Created {
            lead: root.to_string(),
        },
    )?;
    port.commit(
        root,
        GroupEvent::MemberJoined {
            member: root.to_string(),
            role: LEAD.to_string(),
        },
    )?;
    Ok(())
}

/// Bring membership in line with the root's children: a child this
/// process runs joins (taking a lease on a store that keeps them, held in
/// `holds` while it runs), a child that finished, failed or is no longer
/// run by any process leaves, its claims released in the same commit. A
/// child runs when this process runs it (`is_live`), when its lease on the
/// group store holds, or when another process of this host drives its
/// session (`driven_elsewhere`: the user resumed it). No-op until the
/// group exists.
pub fn reconcile(
    port: &dyn GroupPort,
    live: &LiveGroup,
    tree: &AgentTree,
    is_live: impl Fn(&str) -> bool,
    driven_elsewhere: impl Fn(&str) -> bool,
    holds: &mut BTreeMap<String, Membership>,
) -> Result<(), GroupError> {
    let (exists, active): (bool, Vec<(String, bool)>) = live.with(|s| {
        (
            s.exists(),
            s.members().map(|m| (m.id.clone(), m.active)).collect(),
        )
    })?;
    if !exists {
        return Ok(());
    }
    let is_active = |id: &str| active.iter().any(|(m, a)| m == id && *a);
    let mut leases: Option<Option<Vec<MemberLease>>> = None;
    for c in tree.children() {
        let leave = match c.state {
            ChildState::Unfinished if is_live(&c.id) => {
                if !is_active(&c.id) || !holds.contains_key(&c.id) {
                    let m = port.join(live.root(), &c.id, &c.role)?;
                    holds.insert(c.id.clone(), m);
                }
                None
            }
            ChildState::Unfinished => {
                holds.remove(&c.id);
                let leases = match &leases {
                    Some(l) => l,
                    None => leases.insert(port.leases(live.root())?),
                };
                let leased = leases
                    .iter()
                    .flatten()
                    .any(|l| l.member == c.id && !l.expired());
                if leased || driven_elsewhere(&c.id) {
                    None
                } else {
                    Some("was interrupted")
                }
            }
            // Finished or failed: the outcome of its report, as the
            // worker's own leave says it.
            ChildState::Finished | ChildState::Failed => {
                holds.remove(&c.id);
                Some(
                    c.latest_report()
                        .map(|(_, r)| r.outcome.label())
                        .unwrap_or("finished"),
                )
            }
        };
        if let Some(reason) = leave
            && is_active(&c.id)
        {
            port.commit(
                live.root(),
                GroupEvent::MemberLeft {
                    member: c.id.clone(),
                    reason: reason.to_string(),
                    forced_by: None,
                },
            )?;
        }
    }
    Ok(())
}

/// A child's run ended (its report is committed): it leaves its parent's
/// group on `port`, if it is an active member, and its claims are released
/// with the same commit. `store` is the local store holding the child.
pub fn member_ended(
    store: &Store,
    port: &dyn GroupPort,
    child: &str,
    outcome: ReportOutcome,
) -> Result<(), GroupError> {
    let record = store.session(child)?;
    let Some(root) = record.parent.as_deref() else {
        return Ok(());
    };
    leave(port, root, child, outcome.label())
}

/// `member` leaves `root`'s group on `port` for `reason`, if it is an
/// active member; its claims are released with the same commit.
pub fn leave(
    port: &dyn GroupPort,
    root: &str,
    member: &str,
    reason: &str,
) -> Result<(), GroupError> {
    let state = port.replay(root)?;
    if !state.member(member).is_some_and(|m| m.active) {
        return Ok(());
    }
    port.commit(
        root,
        GroupEvent::MemberLeft {
            member: member.to_string(),
            reason: reason.to_string(),
            forced_by: None,
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::ModelProfile;
    use latch_kernel::EventKind;
    use latch_kernel::event::StoredEvent;
    use latch_kernel::group::{Commit, Committed, GroupSnapshot, PendingMessage, TaskStatus};

    /// The local store, reporting the leases a shared store would.
    struct Leased {
        store: Arc<Store>,
        leases: Mutex<Option<Vec<MemberLease>>>,
    }

    impl GroupPort for Leased {
        fn submit(&self, root: &str, commit: Commit) -> Result<Committed, GroupError> {
            self.store.submit(root, commit)
        }
        fn deliver(&self, root: &str, to: &str) -> Result<Vec<(u64, EventKind)>, GroupError> {
            self.store.deliver(root, to)
        }
        fn pending(&self, root: &str, to: &str) -> Result<Vec<PendingMessage>, GroupError> {
            self.store.pending(root, to)
        }
        fn group_log(&self, root: &str, after: u64) -> Result<Vec<StoredEvent>, GroupError> {
            self.store.group_log(root, after)
        }
        fn projection(&self, root: &str) -> Result<GroupSnapshot, GroupError> {
            self.store.projection(root)
        }
        fn leases(&self, _: &str) -> Result<Option<Vec<MemberLease>>, GroupError> {
            Ok(self.leases.lock().unwrap().clone())
        }
    }

    fn lease(member: &str, expires_in_ms: i64) -> MemberLease {
        MemberLease {
            member: member.into(),
            epoch: 0,
            host: "host-b".into(),
            pid: 9,
            ttl_ms: 15_000,
            expires_in_ms,
        }
    }

    /// A child this process does not run is left alone while its lease
    /// holds (or another process of this host drives its session), and
    /// leaves — its claim released — once neither says it runs.
    #[test]
    fn reconciliation_reads_leases_before_it_evicts() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path().join("s.db")).unwrap());
        let model = ModelProfile::with_defaults("openai", "m");
        let root = store.create_session("/w", None, &model).unwrap().id;
        let child = store.create_session("/w", Some(&root), &model).unwrap().id;
        store
            .append(
                &root,
                EventKind::ChildSpawned {
                    child: child.clone(),
                    role: "fixer".into(),
                    task: "fix".into(),
                    model: "m".into(),
                    engine: String::new(),
                    engine_config: String::new(),
                },
            )
            .unwrap();
        let port = Arc::new(Leased {
            store: store.clone(),
            leases: Mutex::new(Some(vec![lease(&child, 9_000)])),
        });
        ensure_group(&*port, &root).unwrap();
        port.join(&root, &child, "fixer").unwrap();
        let task = port
            .commit(
                &root,
                GroupEvent::TaskCreated {
                    title: "fix".into(),
                    description: String::new(),
                    depends_on: vec![],
                    key: None,
                    by: root.clone(),
                },
            )
            .unwrap()
            .seq;
        port.claim(&root, task, &child).unwrap();
        let tree = store.agent_tree(&root).unwrap();
        let live = LiveGroup::new(port.clone(), &root);
        let mut holds = BTreeMap::new();
        let held = |port: &Leased| port.projection(&root).unwrap().tasks[&task].status;

        // Driven on another host: its lease holds.
        reconcile(&*port, &live, &tree, |_| false, |_| false, &mut holds).unwrap();
        assert_eq!(held(&port), TaskStatus::Claimed);
        // No lease, but another process of this host drives its session.
        *port.leases.lock().unwrap() = None;
        reconcile(&*port, &live, &tree, |_| false, |_| true, &mut holds).unwrap();
        assert_eq!(held(&port), TaskStatus::Claimed);
        // Its lease expired and nobody drives it: it leaves.
        *port.leases.lock().unwrap() = Some(vec![lease(&child, -1)]);
        reconcile(&*port, &live, &tree, |_| false, |_| false, &mut holds).unwrap();
        assert_eq!(held(&port), TaskStatus::Open);
        let state = live.with(|s| s.member(&child).map(|m| (m.active, m.left_reason.clone())));
        assert_eq!(
            state.unwrap(),
            Some((false, Some("was interrupted".to_string())))
        );
    }
}
