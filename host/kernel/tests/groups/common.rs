//! Shared fixtures: a store with a root session and its children, a tiny
//! deterministic generator, and the log checks every test applies.

use latch_engine_sdk::types::ModelProfile;
use latch_kernel::group::{GroupEvent, GroupPort, GroupState};
use latch_kernel::{EventKind, Store};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A root session and `children` child sessions in a fresh store file.
pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub store: Store,
    pub root: String,
    pub children: Vec<String>,
}

impl Fixture {
    pub fn new(children: usize) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latch.db");
        let store = Store::open(&path).unwrap();
        let model = ModelProfile::with_defaults("openai-compatible", "m");
        let root = store.create_session("/ws", None, &model).unwrap().id;
        let children = (0..children)
            .map(|_| store.create_session("/ws", Some(&root), &model).unwrap().id)
            .collect();
        Fixture {
            _dir: dir,
            path,
            store,
            root,
            children,
        }
    }

    /// Create the group and join the root (`lead`) and every child
    /// (`worker<i>`).
    pub fn form_group(&self) {
        self.store
            .commit(
                &self.root,
                GroupEvent::Created {
                    lead: self.root.clone(),
                },
            )
            .unwrap();
        join(&self.store, &self.root, &self.root, "lead");
        for (i, c) in self.children.iter().enumerate() {
            join(&self.store, &self.root, c, &format!("worker{i}"));
        }
    }
}

pub fn join(store: &Store, root: &str, member: &str, role: &str) {
    store
        .commit(
            root,
            GroupEvent::MemberJoined {
                member: member.into(),
                role: role.into(),
            },
        )
        .unwrap();
}

/// xorshift64*: deterministic, seedable, good enough to pick operations.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// A `(recipient, message)` pair.
pub type Delivery = (String, u64);

/// The strict reading of a log: every claim of an open task whose
/// dependencies are completed, every release and completion by the holder,
/// every delivery marker of a pending message and exactly once. Panics with
/// the offending event otherwise. Returns the delivered `(to, message)`
/// pairs in log order and the queued pairs not delivered yet.
pub fn check_log(store: &Store, root: &str) -> (Vec<Delivery>, BTreeSet<Delivery>) {
    let log = store.group_log(root, 0).unwrap();
    let mut status: BTreeMap<u64, (&str, Option<String>, Vec<u64>)> = BTreeMap::new();
    let mut queued: BTreeSet<(String, u64)> = BTreeSet::new();
    let mut delivered = Vec::new();
    for e in &log {
        let EventKind::Group(g) = &e.kind else {
            unreachable!()
        };
        match g {
            GroupEvent::TaskCreated { depends_on, .. } => {
                status.insert(e.seq, ("open", None, depends_on.clone()));
            }
            GroupEvent::TaskClaimed { task, by, .. } => {
                let deps_done = status[task].2.iter().all(|d| status[d].0 == "completed");
                let t = status.get_mut(task).unwrap();
                assert!(
                    t.0 == "open" && deps_done,
                    "event {}: {by} claimed #{task} which was {} ({:?})",
                    e.seq,
                    t.0,
                    t.1
                );
                *t = ("claimed", Some(by.clone()), t.2.clone());
            }
            GroupEvent::TaskReleased { task, by, .. } => {
                let t = status.get_mut(task).unwrap();
                assert_eq!(
                    (t.0, t.1.as_deref()),
                    ("claimed", Some(by.as_str())),
                    "event {}",
                    e.seq
                );
                *t = ("open", None, t.2.clone());
            }
            GroupEvent::TaskCompleted { task, by, ok, .. } => {
                let t = status.get_mut(task).unwrap();
                assert_eq!(
                    (t.0, t.1.as_deref()),
                    ("claimed", Some(by.as_str())),
                    "event {}",
                    e.seq
                );
                t.0 = if *ok { "completed" } else { "failed" };
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
    (delivered, queued)
}

/// The recipient-side deliveries of `member`'s session, in log order.
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

/// Projection, replay and a projection rebuilt by a fresh open all agree.
pub fn assert_projection_is_replay(path: &Path, root: &str) {
    let store = Store::open(path).unwrap();
    let replay = GroupState::replay(&store.group_log(root, 0).unwrap()).snapshot();
    assert_eq!(store.projection(root).unwrap(), replay);
}
