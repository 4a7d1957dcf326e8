//! The projection equals `GroupState::replay` at every step of generated
//! group histories, and both equal an independent model: a plain
//! statement of the rules, written here without the store's SQL or the
//! reducer's code, which also predicts which operations are refused.

use super::common::*;
use latch_kernel::group::{
    ALL, GroupEvent, GroupPort, GroupRefusal, GroupSnapshot, GroupState, Pending, Task, TaskStatus,
};
use std::collections::BTreeMap;

/// The rules, stated plainly.
#[derive(Default)]
struct Model {
    members: BTreeMap<String, (String, bool)>,
    tasks: BTreeMap<u64, Task>,
    /// (recipient, message) → (from, text)
    pending: BTreeMap<(String, u64), (String, String)>,
    delivered: u64,
}

/// What the model expects: `Ok(fresh)` or the refusal's name.
type Expect = Result<bool, &'static str>;

fn name(r: &GroupRefusal) -> &'static str {
    match r {
        GroupRefusal::NoGroup { .. } => "no-group",
        GroupRefusal::NotMember { .. } => "not-member",
        GroupRefusal::UnknownTask { .. } => "unknown-task",
        GroupRefusal::Held { .. } => "held",
        GroupRefusal::Closed { .. } => "closed",
        GroupRefusal::Blocked { .. } => "blocked",
        GroupRefusal::NotHolder { .. } => "not-holder",
        GroupRefusal::UnknownDependency { .. } => "unknown-dependency",
        GroupRefusal::NobodyElse => "nobody-else",
        GroupRefusal::Invalid(_) => "invalid",
        GroupRefusal::Fenced { .. } => "fenced",
        GroupRefusal::NotClaimed { .. } => "not-claimed",
    }
}

impl Model {
    fn active(&self, who: &str) -> bool {
        self.members.get(who).is_some_and(|m| m.1)
    }

    fn snapshot(&self) -> GroupSnapshot {
        GroupSnapshot {
            created: true,
            members: self.members.clone(),
            tasks: self.tasks.clone(),
            pending: self
                .pending
                .iter()
                .map(|((to, message), (from, text))| Pending {
                    to: to.clone(),
                    message: *message,
                    from: from.clone(),
                    text: text.clone(),
                })
                .collect(),
            delivered: self.delivered,
        }
    }

    fn holder_check(&self, task: u64, by: &str) -> Expect {
        match self.tasks.get(&task) {
            None => Err("unknown-task"),
            Some(t) if t.status == TaskStatus::Claimed && t.owner.as_deref() == Some(by) => {
                Ok(true)
            }
            Some(_) => Err("not-holder"),
        }
    }

    fn expect(&self, op: &GroupEvent) -> Expect {
        match op {
            GroupEvent::TaskCreated {
                depends_on,
                key,
                by,
                ..
            } => {
                if !self.active(by) {
                    return Err("not-member");
                }
                if key.is_some() && self.tasks.values().any(|t| &t.key == key) {
                    return Ok(false);
                }
                if depends_on.iter().any(|d| !self.tasks.contains_key(d)) {
                    return Err("unknown-dependency");
                }
                Ok(true)
            }
            GroupEvent::TaskClaimed { task, by, .. } => {
                if !self.active(by) {
                    return Err("not-member");
                }
                let Some(t) = self.tasks.get(task) else {
                    return Err("unknown-task");
                };
                match t.status {
                    TaskStatus::Claimed if t.owner.as_deref() == Some(by) => Ok(false),
                    TaskStatus::Claimed => Err("held"),
                    TaskStatus::Completed | TaskStatus::Failed => Err("closed"),
                    TaskStatus::Open => {
                        let blocked = t
                            .depends_on
                            .iter()
                            .any(|d| self.tasks[d].status != TaskStatus::Completed);
                        if blocked { Err("blocked") } else { Ok(true) }
                    }
                }
            }
            GroupEvent::TaskReleased { task, by, .. } => self.holder_check(*task, by),
            GroupEvent::TaskCompleted { task, by, .. } => self.holder_check(*task, by),
            GroupEvent::MessageQueued { from, to, .. } => {
                if !self.active(from) {
                    return Err("not-member");
                }
                if to == ALL {
                    let others = self.members.iter().any(|(id, m)| m.1 && id != from);
                    if others { Ok(true) } else { Err("nobody-else") }
                } else if self.members.contains_key(to) {
                    Ok(true)
                } else {
                    Err("not-member")
                }
            }
            GroupEvent::MemberLeft { member, .. } => Ok(self.active(member)),
            GroupEvent::MemberJoined { member, role } => {
                Ok(self.members.get(member) != Some(&(role.clone(), true)))
            }
            _ => unreachable!(),
        }
    }

    /// Apply an accepted, fresh operation committed at `seq`.
    fn apply(&mut self, op: &GroupEvent, seq: u64) {
        match op {
            GroupEvent::TaskCreated {
                title,
                description,
                depends_on,
                key,
                ..
            } => {
                let mut deps = depends_on.clone();
                deps.sort();
                deps.dedup();
                self.tasks.insert(
                    seq,
                    Task {
                        id: seq,
                        title: title.clone(),
                        description: description.clone(),
                        depends_on: deps,
                        key: key.clone(),
                        status: TaskStatus::Open,
                        owner: None,
                        result: None,
                    },
                );
            }
            GroupEvent::TaskClaimed { task, by, .. } => {
                let t = self.tasks.get_mut(task).unwrap();
                t.status = TaskStatus::Claimed;
                t.owner = Some(by.clone());
            }
            GroupEvent::TaskReleased { task, .. } => {
                let t = self.tasks.get_mut(task).unwrap();
                t.status = TaskStatus::Open;
                t.owner = None;
            }
            GroupEvent::TaskCompleted {
                task, ok, result, ..
            } => {
                let t = self.tasks.get_mut(task).unwrap();
                t.status = if *ok {
                    TaskStatus::Completed
                } else {
                    TaskStatus::Failed
                };
                t.result = Some(result.clone());
            }
            GroupEvent::MessageQueued { from, to, text, .. } => {
                let recipients: Vec<String> = if to == ALL {
                    self.members
                        .iter()
                        .filter(|(id, m)| m.1 && *id != from)
                        .map(|(id, _)| id.clone())
                        .collect()
                } else {
                    vec![to.clone()]
                };
                for r in recipients {
                    self.pending.insert((r, seq), (from.clone(), text.clone()));
                }
            }
            GroupEvent::MemberLeft { member, .. } => {
                self.members.get_mut(member).unwrap().1 = false;
                for t in self.tasks.values_mut() {
                    if t.status == TaskStatus::Claimed && t.owner.as_deref() == Some(member) {
                        t.status = TaskStatus::Open;
                        t.owner = None;
                    }
                }
            }
            GroupEvent::MemberJoined { member, role } => {
                self.members.insert(member.clone(), (role.clone(), true));
            }
            _ => unreachable!(),
        }
    }

    /// Deliver to `to`: the message ids, FIFO.
    fn deliver(&mut self, to: &str) -> Vec<u64> {
        let ids: Vec<u64> = self
            .pending
            .keys()
            .filter(|(r, _)| r == to)
            .map(|(_, m)| *m)
            .collect();
        for m in &ids {
            self.pending.remove(&(to.to_string(), *m));
        }
        self.delivered += ids.len() as u64;
        ids
    }
}

fn generate(rng: &mut Rng, model: &Model, everyone: &[String], root: &str) -> GroupEvent {
    let ids: Vec<u64> = model.tasks.keys().copied().collect();
    let task = |rng: &mut Rng| {
        if ids.is_empty() || rng.below(10) == 0 {
            1_000_000 + rng.below(3)
        } else {
            *rng.pick(&ids)
        }
    };
    let who = rng.pick(everyone).clone();
    match rng.below(16) {
        0..=2 => GroupEvent::TaskCreated {
            title: format!("task {}", rng.below(100)),
            description: if rng.below(2) == 0 {
                String::new()
            } else {
                "details".into()
            },
            depends_on: (0..rng.below(3)).map(|_| task(rng)).collect(),
            key: (rng.below(3) == 0).then(|| format!("k{}", rng.below(6))),
            by: who,
        },
        3..=6 => GroupEvent::TaskClaimed {
            task: task(rng),
            by: who,
            epoch: None,
        },
        7 => GroupEvent::TaskReleased {
            task: task(rng),
            by: who,
            reason: "changed plans".into(),
            forced_by: None,
        },
        8..=10 => GroupEvent::TaskCompleted {
            task: task(rng),
            by: who,
            ok: rng.below(4) != 0,
            result: format!("result {}", rng.below(100)),
        },
        11..=12 => GroupEvent::MessageQueued {
            from: who,
            to: match rng.below(5) {
                0 => ALL.to_string(),
                1 => "nobody".to_string(),
                _ => rng.pick(everyone).clone(),
            },
            recipients: vec![],
            text: format!("note {}", rng.below(1000)),
        },
        13 if who != root => GroupEvent::MemberLeft {
            member: who,
            reason: "finished".into(),
            forced_by: None,
        },
        _ => GroupEvent::MemberJoined {
            role: format!("worker-{who}").chars().take(12).collect(),
            member: if who == root {
                everyone[1].clone()
            } else {
                who
            },
        },
    }
}

fn run_history(seed: u64, steps: usize) {
    let f = Fixture::new(3);
    f.form_group();
    let mut everyone = vec![f.root.clone()];
    everyone.extend(f.children.iter().cloned());
    let mut model = Model::default();
    model.members.insert(f.root.clone(), ("lead".into(), true));
    for (i, c) in f.children.iter().enumerate() {
        model
            .members
            .insert(c.clone(), (format!("worker{i}"), true));
    }
    let mut store = f.store;
    let mut rng = Rng(seed);
    let mut live = GroupState::replay(&store.group_log(&f.root, 0).unwrap());
    for step in 0..steps {
        let at = format!("seed {seed}, step {step}");
        if rng.below(6) == 0 {
            // A safe boundary of a random member.
            let to = rng.pick(&everyone).clone();
            let got: Vec<u64> = store
                .deliver(&f.root, &to)
                .unwrap()
                .into_iter()
                .map(|(_, e)| match e {
                    latch_kernel::EventKind::GroupMessageDelivered { message_seq, .. } => {
                        message_seq
                    }
                    other => panic!("{at}: delivered {other:?}"),
                })
                .collect();
            assert_eq!(got, model.deliver(&to), "{at}: deliveries to {to}");
        } else {
            let op = generate(&mut rng, &model, &everyone, &f.root);
            let expected = model.expect(&op);
            let got = store.commit(&f.root, op.clone());
            let got_kind = match &got {
                Ok(c) => Ok(c.fresh),
                Err(e) => Err(name(e.refusal().unwrap_or_else(|| panic!("{at}: {e}")))),
            };
            assert_eq!(got_kind, expected, "{at}: {op:?} → {got:?}");
            if let Ok(c) = got
                && c.fresh
            {
                model.apply(&op, c.seq);
            }
        }
        // Every step: the incremental projection, the incremental reducer,
        // a full replay and the model agree.
        for e in store.group_log(&f.root, live.watermark()).unwrap() {
            live.apply(&e);
        }
        let log = store.group_log(&f.root, 0).unwrap();
        let replay = GroupState::replay(&log);
        assert_eq!(live, replay, "{at}: incremental reducer");
        assert_eq!(replay.snapshot(), model.snapshot(), "{at}: replay vs model");
        assert_eq!(
            store.projection(&f.root).unwrap(),
            model.snapshot(),
            "{at}: projection"
        );
        if step % 60 == 59 {
            // The projection rebuilt at open is the same cache.
            drop(store);
            store = latch_kernel::Store::open(&f.path).unwrap();
            assert_eq!(
                store.projection(&f.root).unwrap(),
                model.snapshot(),
                "{at}: rebuilt"
            );
        }
    }
    let (_, waiting) = check_log(&store, &f.root);
    assert_eq!(waiting.len(), model.pending.len(), "seed {seed}");
    // The generated history exercised the rules, refusals included.
    assert!(
        model.tasks.len() >= 5,
        "seed {seed}: too few tasks to mean much"
    );
}

#[test]
fn projection_equals_replay_and_the_model_at_every_step() {
    for seed in [1, 7, 42, 2026] {
        run_history(seed, 250);
    }
}

#[test]
#[ignore = "local stress tier: many long histories"]
fn projection_equals_replay_and_the_model_on_many_histories() {
    for seed in 100..140 {
        run_history(seed, 600);
    }
}

#[test]
fn every_prefix_of_a_log_rebuilds_to_its_replay() {
    // A store holding only the first k group events of a history (copied
    // row by row) rebuilds at open to the replay of those k events.
    let f = Fixture::new(3);
    f.form_group();
    let mut rng = Rng(99);
    let mut everyone = vec![f.root.clone()];
    everyone.extend(f.children.iter().cloned());
    let mut model = Model::default();
    for m in &everyone {
        model.members.insert(m.clone(), ("x".into(), true));
    }
    for _ in 0..120 {
        let op = generate(&mut rng, &model, &everyone, &f.root);
        if let Ok(c) = f.store.commit(&f.root, op.clone())
            && c.fresh
        {
            model.apply(&op, c.seq);
        }
        if rng.below(5) == 0 {
            let to = rng.pick(&everyone).clone();
            f.store.deliver(&f.root, &to).unwrap();
            model.deliver(&to);
        }
    }
    let log = f.store.group_log(&f.root, 0).unwrap();
    let conn = rusqlite::Connection::open(&f.path).unwrap();
    let rows: Vec<(i64, String, String, String, i64)> = conn
        .prepare("SELECT seq, session, kind, body, time_ms FROM events WHERE kind = 'group' ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), log.len());
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = copy_dir.path().join("prefix.db");
    // Build the copy once with every session, then add group rows one by
    // one, reopening (and so rebuilding) at each prefix.
    {
        drop(latch_kernel::Store::open(&copy).unwrap());
        let c = rusqlite::Connection::open(&copy).unwrap();
        c.execute("ATTACH DATABASE ?1 AS src", [f.path.to_str().unwrap()])
            .unwrap();
        c.execute_batch("INSERT INTO sessions SELECT * FROM src.sessions; DETACH DATABASE src;")
            .unwrap();
    }
    for k in 0..=rows.len() {
        if k > 0 {
            let (seq, session, kind, body, time) = &rows[k - 1];
            let c = rusqlite::Connection::open(&copy).unwrap();
            c.execute(
                "INSERT INTO events (seq, session, kind, body, time_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                rusqlite::params![seq, session, kind, body, time],
            )
            .unwrap();
        }
        let reopened = latch_kernel::Store::open(&copy).unwrap();
        assert_eq!(
            reopened.projection(&f.root).unwrap(),
            GroupState::replay(&log[..k]).snapshot(),
            "prefix {k}"
        );
    }
}
