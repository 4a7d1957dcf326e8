//! The one check of a group commit, shared by every [`super::GroupPort`]
//! backend: a backend loads the [`Facts`] that [`needs`] asks for (in the
//! transaction that will append the event, under its locks) and [`check`]
//! decides — append, already said, or a [`GroupRefusal`] — without touching
//! storage, so the rules and the refusals' wording cannot drift between the
//! SQLite store and a shared store.

use super::{ALL, Committed, GroupEvent, GroupRefusal, TaskStatus};

/// What a backend must load to check an event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Whether the group exists ([`Facts::created`]).
    pub group: bool,
    /// Every member with its state ([`Facts::members`]).
    pub members: bool,
    /// The row of this member ([`Facts::joining`], [`Facts::belongs`]).
    pub member: Option<String>,
    /// The status and holder of this task ([`Facts::task`]); a backend
    /// that allows concurrent commits locks its row.
    pub task: Option<u64>,
    /// Every task id ([`Facts::task_ids`]); also needed whenever
    /// [`Needs::task`] names a task that does not exist.
    pub task_ids: bool,
    /// The task created with this idempotency key ([`Facts::keyed`]).
    pub key: Option<String>,
    /// The dependencies of this task that are not completed
    /// ([`Facts::waiting`]).
    pub waiting: Option<u64>,
}

impl Needs {
    /// True when the task ids must be loaded, given what was found of the
    /// named task.
    pub fn task_ids_given(&self, task_found: bool) -> bool {
        self.task_ids || (self.task.is_some() && !task_found)
    }
}

/// What the backend found, as [`needs`] asked: fields not asked for keep
/// their defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The sequence number of the group's `Created` event, if it exists.
    pub created: Option<u64>,
    /// Every member, `(id, active)`, ordered by id.
    pub members: Vec<(String, bool)>,
    /// The member's current row: `(role, active, joined_seq)`.
    pub joining: Option<(String, bool, u64)>,
    /// Whether the session may be a member of this group at all (the
    /// SQLite store knows the sessions: the root and its children; a shared
    /// store cannot know other hosts' sessions and admits any id).
    pub belongs: bool,
    /// The named task: `(status, holder)`.
    pub task: Option<(TaskStatus, Option<String>)>,
    /// Every task id, ascending.
    pub task_ids: Vec<u64>,
    /// The task with the event's idempotency key.
    pub keyed: Option<u64>,
    /// The named task's dependencies not completed, with their status,
    /// ascending.
    pub waiting: Vec<(u64, TaskStatus)>,
}

/// What checking `event` needs loaded.
pub fn needs(event: &GroupEvent) -> Needs {
    let mut n = Needs::default();
    match event {
        GroupEvent::Created { .. } => n.group = true,
        GroupEvent::MemberJoined { member, .. } => {
            n.group = true;
            n.member = Some(member.clone());
        }
        GroupEvent::MemberLeft { .. } => {
            n.group = true;
            n.members = true;
        }
        GroupEvent::TaskCreated {
            depends_on, key, ..
        } => {
            n.group = true;
            n.members = true;
            n.key = key.clone();
            n.task_ids = !depends_on.is_empty();
        }
        GroupEvent::TaskClaimed { task, .. } => {
            n.members = true;
            n.task = Some(*task);
            n.waiting = Some(*task);
        }
        GroupEvent::TaskReleased { task, .. } | GroupEvent::TaskCompleted { task, .. } => {
            n.task = Some(*task);
        }
        GroupEvent::MessageQueued { .. } => {
            n.group = true;
            n.members = true;
        }
        GroupEvent::MessageDelivered { .. } => {}
    }
    n
}

/// Check `event` against `facts` for the group of `root`: `Ok(None)` to
/// append it, `Ok(Some(c))` when the log already says it (nothing to
/// append), or the refusal. Normalizes the event on the way: a task's
/// dependencies sorted and deduplicated, a message's recipients resolved.
pub fn check(
    root: &str,
    event: &mut GroupEvent,
    facts: &Facts,
) -> Result<Option<Committed>, GroupRefusal> {
    let same = |seq: u64| Some(Committed { seq, fresh: false });
    let require_group = || match facts.created {
        Some(_) => Ok(()),
        None => Err(GroupRefusal::NoGroup { root: root.into() }),
    };
    let require_active = |who: &str| {
        if facts.members.iter().any(|(id, a)| id == who && *a) {
            return Ok(());
        }
        Err(GroupRefusal::NotMember {
            who: who.into(),
            members: facts
                .members
                .iter()
                .filter(|(_, a)| *a)
                .map(|(id, _)| id.clone())
                .collect(),
        })
    };
    let task = |id: u64| {
        facts.task.clone().ok_or_else(|| GroupRefusal::UnknownTask {
            task: id,
            known: facts.task_ids.clone(),
        })
    };
    let require_holder = |id: u64, by: &str| match task(id)? {
        (TaskStatus::Claimed, Some(holder)) if holder == by => Ok(()),
        (TaskStatus::Claimed, holder) => Err(GroupRefusal::NotHolder { task: id, holder }),
        _ => Err(GroupRefusal::NotHolder {
            task: id,
            holder: None,
        }),
    };
    match event {
        GroupEvent::Created { lead } => {
            if lead != root {
                return Err(GroupRefusal::Invalid(format!(
                    "a group is created in its lead's own session: {lead} is not {root}"
                )));
            }
            Ok(facts.created.and_then(same))
        }
        GroupEvent::MemberJoined { member, role } => {
            require_group()?;
            if member.trim().is_empty() {
                return Err(GroupRefusal::Invalid("a member needs a session id".into()));
            }
            if !facts.belongs {
                return Err(GroupRefusal::Invalid(format!(
                    "session {member} cannot join the group of {root}: members are the root \
                     session and its child agents"
                )));
            }
            Ok(match &facts.joining {
                Some((r, true, seq)) if r == role => same(*seq),
                _ => None,
            })
        }
        GroupEvent::MemberLeft { member, .. } => {
            require_group()?;
            let active = facts.members.iter().any(|(id, a)| id == member && *a);
            Ok(if active { None } else { same(0) })
        }
        GroupEvent::TaskCreated {
            title,
            depends_on,
            by,
            ..
        } => {
            require_group()?;
            require_active(by)?;
            if title.trim().is_empty() {
                return Err(GroupRefusal::Invalid(
                    "a task needs a non-empty title".into(),
                ));
            }
            if let Some(id) = facts.keyed {
                return Ok(same(id));
            }
            depends_on.sort_unstable();
            depends_on.dedup();
            if let Some(dep) = depends_on.iter().find(|d| !facts.task_ids.contains(d)) {
                return Err(GroupRefusal::UnknownDependency {
                    dep: *dep,
                    known: facts.task_ids.clone(),
                });
            }
            Ok(None)
        }
        GroupEvent::TaskClaimed { task: id, by } => {
            require_active(by)?;
            let id = *id;
            match task(id)? {
                (TaskStatus::Claimed, Some(holder)) if holder == *by => return Ok(same(id)),
                (TaskStatus::Claimed, holder) => {
                    return Err(GroupRefusal::Held {
                        task: id,
                        holder: holder.unwrap_or_default(),
                    });
                }
                (status @ (TaskStatus::Completed | TaskStatus::Failed), owner) => {
                    return Err(GroupRefusal::Closed {
                        task: id,
                        status,
                        by: owner.unwrap_or_default(),
                    });
                }
                (TaskStatus::Open, _) => {}
            }
            if !facts.waiting.is_empty() {
                return Err(GroupRefusal::Blocked {
                    task: id,
                    waiting: facts.waiting.clone(),
                });
            }
            Ok(None)
        }
        GroupEvent::TaskReleased { task: id, by, .. } => {
            require_holder(*id, by)?;
            Ok(None)
        }
        GroupEvent::TaskCompleted {
            task: id,
            by,
            result,
            ..
        } => {
            require_holder(*id, by)?;
            if result.trim().is_empty() {
                return Err(GroupRefusal::Invalid(
                    "say in `result` what was done (or why it failed)".into(),
                ));
            }
            Ok(None)
        }
        GroupEvent::MessageQueued {
            from,
            to,
            recipients,
            text,
        } => {
            require_group()?;
            require_active(from)?;
            if text.trim().is_empty() {
                return Err(GroupRefusal::Invalid("a message needs text".into()));
            }
            *recipients = if to == ALL {
                let others: Vec<String> = facts
                    .members
                    .iter()
                    .filter(|(id, active)| *active && id != from)
                    .map(|(id, _)| id.clone())
                    .collect();
                if others.is_empty() {
                    return Err(GroupRefusal::NobodyElse);
                }
                others
            } else if facts.members.iter().any(|(id, _)| id == to) {
                vec![to.clone()]
            } else {
                return Err(GroupRefusal::NotMember {
                    who: to.clone(),
                    members: facts.members.iter().map(|(id, _)| id.clone()).collect(),
                });
            };
            Ok(None)
        }
        GroupEvent::MessageDelivered { .. } => Err(GroupRefusal::Invalid(
            "deliveries are made at the recipient's safe boundary, not committed directly".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(task: u64, by: &str) -> GroupEvent {
        GroupEvent::TaskClaimed {
            task,
            by: by.into(),
        }
    }

    fn member_facts() -> Facts {
        Facts {
            created: Some(1),
            members: vec![("a".into(), true), ("b".into(), true), ("c".into(), false)],
            belongs: true,
            task_ids: vec![3, 4],
            ..Facts::default()
        }
    }

    #[test]
    fn a_claim_needs_the_members_its_task_and_its_waiting_dependencies() {
        let n = needs(&claim(3, "a"));
        assert_eq!(
            (n.members, n.task, n.waiting, n.group),
            (true, Some(3), Some(3), false)
        );
        assert!(!n.task_ids_given(true) && n.task_ids_given(false));
    }

    #[test]
    fn claims_are_decided_from_the_facts_alone() {
        let mut f = member_facts();
        f.task = Some((TaskStatus::Open, None));
        assert_eq!(check("r", &mut claim(3, "a"), &f), Ok(None));
        f.task = Some((TaskStatus::Claimed, Some("a".into())));
        assert_eq!(
            check("r", &mut claim(3, "a"), &f),
            Ok(Some(Committed {
                seq: 3,
                fresh: false
            }))
        );
        let held = check("r", &mut claim(3, "b"), &f).unwrap_err();
        assert_eq!(
            held.to_string(),
            "task #3 is already claimed by a; pick another open task (task_list) or message a"
        );
        f.task = None;
        let unknown = check("r", &mut claim(9, "b"), &f).unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "there is no task #9 (tasks: #3, #4); task_list shows them"
        );
        let outsider = check("r", &mut claim(3, "c"), &f).unwrap_err();
        assert_eq!(
            outsider.to_string(),
            "`c` is not a member of this group (members: a, b)"
        );
        f.task = Some((TaskStatus::Open, None));
        f.waiting = vec![(4, TaskStatus::Claimed)];
        let blocked = check("r", &mut claim(3, "a"), &f).unwrap_err();
        assert_eq!(
            blocked.to_string(),
            "task #3 waits for #4 (claimed): claim it once they are completed"
        );
    }

    #[test]
    fn a_message_to_all_is_resolved_to_the_other_active_members() {
        let mut e = GroupEvent::MessageQueued {
            from: "a".into(),
            to: ALL.into(),
            recipients: vec![],
            text: "hi".into(),
        };
        assert_eq!(check("r", &mut e, &member_facts()), Ok(None));
        let GroupEvent::MessageQueued { recipients, .. } = e else {
            unreachable!()
        };
        assert_eq!(recipients, ["b"]);
    }

    #[test]
    fn a_session_that_does_not_belong_cannot_join() {
        let mut f = member_facts();
        f.belongs = false;
        let mut e = GroupEvent::MemberJoined {
            member: "x".into(),
            role: "r".into(),
        };
        let refused = check("root", &mut e, &f).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("session x cannot join the group of root"),
            "{refused}"
        );
        f.created = None;
        assert_eq!(
            check("root", &mut e, &f),
            Err(GroupRefusal::NoGroup {
                root: "root".into()
            })
        );
    }
}
