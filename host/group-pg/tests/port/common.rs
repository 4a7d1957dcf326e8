//! Fixtures of both backends: a local store with a root session and its
//! children, and the group port over it (the store itself, or PostgreSQL
//! with that store as the members' local store).

use latch_engine_sdk::types::ModelProfile;
use latch_group_pg::PgGroup;
use latch_kernel::group::{GroupEvent, GroupPort, GroupState};
use latch_kernel::{EventKind, Store};
use std::path::PathBuf;
use std::sync::Arc;

/// Which store the port runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The test database's URL, or `None` (with the reason printed) when it is
/// not configured; a failure when `LATCH_PG_TEST_REQUIRED=1`.
pub fn pg_url() -> Option<String> {
    match std::env::var("LATCH_PG_TEST_URL") {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var("LATCH_PG_TEST_REQUIRED").as_deref() != Ok("1"),
                "LATCH_PG_TEST_REQUIRED=1 but LATCH_PG_TEST_URL is not set"
            );
            eprintln!(
                "skipped: no PostgreSQL for the group store tests (set LATCH_PG_TEST_URL; .ci/run \
                 starts a throwaway cluster)"
            );
            None
        }
    }
}

/// A root session, its children and the port.
pub struct Env {
    pub _dir: tempfile::TempDir,
    pub _path: PathBuf,
    pub local: Arc<Store>,
    pub port: Arc<dyn GroupPort>,
    pub pg: Option<Arc<PgGroup>>,
    pub root: String,
    pub children: Vec<String>,
}

impl Env {
    /// `None` when the backend is PostgreSQL and none is configured.
    pub fn new(backend: Backend, children: usize) -> Option<Env> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latch.db");
        let local = Arc::new(Store::open(&path).unwrap());
        let model = ModelProfile::with_defaults("openai-compatible", "m");
        let root = local.create_session("/ws", None, &model).unwrap().id;
        let children = (0..children)
            .map(|_| local.create_session("/ws", Some(&root), &model).unwrap().id)
            .collect();
        let (port, pg): (Arc<dyn GroupPort>, _) = match backend {
            Backend::Sqlite => (local.clone(), None),
            Backend::Postgres => {
                let pg = Arc::new(PgGroup::connect(&pg_url()?, local.clone()).unwrap());
                (pg.clone(), Some(pg))
            }
        };
        Some(Env {
            _dir: dir,
            _path: path,
            local,
            port,
            pg,
            root,
            children,
        })
    }

    /// Create the group and join the root (`lead`) and every child
    /// (`worker<i>`).
    pub fn form_group(&self) {
        self.port
            .commit(
                &self.root,
                GroupEvent::Created {
                    lead: self.root.clone(),
                },
            )
            .unwrap();
        self.join(&self.root, "lead");
        for (i, c) in self.children.iter().enumerate() {
            self.join(c, &format!("worker{i}"));
        }
    }

    pub fn join(&self, member: &str, role: &str) {
        self.port
            .commit(
                &self.root,
                GroupEvent::MemberJoined {
                    member: member.into(),
                    role: role.into(),
                },
            )
            .unwrap();
    }

    /// Create an open task; returns its id.
    pub fn task(&self, title: &str, deps: Vec<u64>) -> u64 {
        self.port
            .commit(
                &self.root,
                GroupEvent::TaskCreated {
                    title: title.into(),
                    description: String::new(),
                    depends_on: deps,
                    key: None,
                    by: self.root.clone(),
                },
            )
            .unwrap()
            .seq
    }

    /// The log replays to the projection.
    pub fn assert_replay(&self) {
        let replay = GroupState::replay(&self.port.group_log(&self.root, 0).unwrap()).snapshot();
        assert_eq!(self.port.projection(&self.root).unwrap(), replay);
    }
}

/// The recipient-side deliveries in `member`'s local session, in order.
pub fn received(store: &Store, member: &str) -> Vec<u64> {
    store
        .all_events(member)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::GroupMessageDelivered { message_seq, .. } => Some(message_seq),
            _ => None,
        })
        .collect()
}

/// Claims, completions and deliveries read from the log: every task is
/// claimed by one member at a time and every message delivered at most
/// once (panics naming the event otherwise). Returns the deliveries.
pub fn check_log(port: &dyn GroupPort, root: &str) -> Vec<(String, u64)> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut holder: BTreeMap<u64, Option<String>> = BTreeMap::new();
    let mut queued = BTreeSet::new();
    let mut delivered = Vec::new();
    for e in port.group_log(root, 0).unwrap() {
        let EventKind::Group(g) = &e.kind else {
            unreachable!()
        };
        match g {
            GroupEvent::TaskCreated { .. } => {
                holder.insert(e.seq, None);
            }
            GroupEvent::TaskClaimed { task, by, .. } => {
                let h = holder.get_mut(task).unwrap();
                assert!(
                    h.is_none(),
                    "event {}: {by} claimed #{task} held by {h:?}",
                    e.seq
                );
                *h = Some(by.clone());
            }
            GroupEvent::TaskReleased { task, .. } => {
                holder.insert(*task, None);
            }
            GroupEvent::TaskCompleted { task, by, .. } => {
                assert_eq!(
                    holder[task].as_deref(),
                    Some(by.as_str()),
                    "event {}",
                    e.seq
                );
                holder.insert(*task, Some(format!("done:{by}")));
            }
            GroupEvent::MessageQueued { recipients, .. } => {
                for r in recipients {
                    queued.insert((r.clone(), e.seq));
                }
            }
            GroupEvent::MessageDelivered { message, to } => {
                assert!(
                    queued.remove(&(to.clone(), *message)),
                    "event {}: message #{message} delivered to {to} twice or never queued",
                    e.seq
                );
                delivered.push((to.clone(), *message));
            }
            _ => {}
        }
    }
    delivered
}
