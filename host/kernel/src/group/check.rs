//! The one check of a group commit, shared by every [`super::GroupPort`]
//! backend: a backend loads the [`Facts`] that [`needs`] asks for (in the
//! transaction that will append the event, under its locks) and [`check`]
//! decides — append, already said, or a [`GroupRefusal`] — without touching
//! storage, so the rules and the refusals' wording cannot drift between the
//! SQLite store and a shared store. The same goes for what a member's
//! leaving appends ([`leaving`]) and for removing the members whose leases
//! a store found expired ([`expire`]).

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
    /// The membership of the acting member ([`Facts::actor`]): its epoch
    /// fences the request.
    pub actor: Option<String>,
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

/// A member's row as the commit check needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberRow {
    /// True while it is a member.
    pub active: bool,
    /// Its epoch: the sequence number of its latest join.
    pub epoch: u64,
    /// Why it left, while it is away.
    pub left_reason: Option<String>,
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
    /// The acting member's row, if it ever joined.
    pub actor: Option<MemberRow>,
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

/// The member an event is the act of, when a request carrying an epoch
/// is fenced by it.
fn actor(event: &GroupEvent) -> Option<&str> {
    match event {
        GroupEvent::TaskCreated { by, .. }
        | GroupEvent::TaskClaimed { by, .. }
        | GroupEvent::TaskCompleted { by, .. }
        | GroupEvent::TaskReleased {
            by,
            forced_by: None,
            ..
        } => Some(by),
        GroupEvent::MessageQueued { from, .. } => Some(from),
        GroupEvent::MemberLeft { member, .. } => Some(member),
        _ => None,
    }
}

/// What checking `event` (carrying `epoch`) needs loaded.
pub fn needs(event: &GroupEvent, epoch: Option<u64>) -> Needs {
    let mut n = Needs::default();
    match event {
        GroupEvent::Created { .. } => n.group = true,
        GroupEvent::MemberJoined { member, .. } => {
            n.group = true;
            n.member = Some(member.clone());
        }
        GroupEvent::MemberLeft { member, .. } => {
            n.group = true;
            n.members = true;
            n.actor = Some(member.clone());
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
    if epoch.is_some()
        && let Some(who) = actor(event)
    {
        n.actor = Some(who.to_string());
    }
    n
}

/// Check `event`, made by a member at `epoch` (when given), against
/// `facts` for the group of `root`: `Ok(None)` to append it, `Ok(Some(c))`
/// when the log already says it (nothing to append), or the refusal.
/// Normalizes the event on the way: a task's dependencies sorted and
/// deduplicated, a message's recipients resolved, a claim's epoch and a
/// forced release's holder filled in.
pub fn check(
    root: &str,
    event: &mut GroupEvent,
    epoch: Option<u64>,
    facts: &Facts,
) -> Result<Option<Committed>, GroupRefusal> {
    let same = |seq: u64| Some(Committed { seq, fresh: false });
    if let Some(epoch) = epoch {
        let current = facts.actor.as_ref().filter(|a| a.active).map(|a| a.epoch);
        if let GroupEvent::MemberLeft {
            forced_by: None, ..
        } = event
        {
            // A leave from a membership that is over (its lease expired, it
            // was evicted, another process rejoined it) leaves nothing: the
            // member the group has now is not this one.
            if current != Some(epoch) {
                return Ok(same(0));
            }
        } else if let Some(who) = actor(event)
            && current != Some(epoch)
        {
            return Err(GroupRefusal::Fenced {
                member: who.to_string(),
                epoch,
                current,
                reason: facts.actor.as_ref().and_then(|a| a.left_reason.clone()),
            });
        }
    }
    let require_group = || match facts.created {
        Some(_) => Ok(()),
        None => Err(GroupRefusal::NoGroup { root: root.into() }),
    };
    let active_members = || -> Vec<String> {
        facts
            .members
            .iter()
            .filter(|(_, a)| *a)
            .map(|(id, _)| id.clone())
            .collect()
    };
    let require_active = |who: &str| {
        if facts.members.iter().any(|(id, a)| id == who && *a) {
            return Ok(());
        }
        Err(GroupRefusal::NotMember {
            who: who.into(),
            members: active_members(),
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
        GroupEvent::MemberLeft {
            member, forced_by, ..
        } => {
            require_group()?;
            let active = facts.members.iter().any(|(id, a)| id == member && *a);
            if forced_by.is_some() && !active {
                return Err(GroupRefusal::NotMember {
                    who: member.clone(),
                    members: active_members(),
                });
            }
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
        GroupEvent::TaskClaimed {
            task: id,
            by,
            epoch: claimed_in,
        } => {
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
            if epoch.is_some() {
                *claimed_in = epoch;
            }
            Ok(None)
        }
        GroupEvent::TaskReleased {
            task: id,
            by,
            forced_by: Some(_),
            ..
        } => match task(*id)? {
            (TaskStatus::Claimed, Some(holder)) => {
                *by = holder;
                Ok(None)
            }
            (status, _) => Err(GroupRefusal::NotClaimed { task: *id, status }),
        },
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

/// What a checked `MemberLeft` appends after itself: the release of every
/// task the member holds (`held`, ascending), each saying why.
pub fn leaving(left: &GroupEvent, held: &[u64]) -> Vec<GroupEvent> {
    let GroupEvent::MemberLeft {
        member,
        reason,
        forced_by,
    } = left
    else {
        return Vec::new();
    };
    let why = match forced_by {
        Some(who) => format!("its holder was evicted by {who}: {reason}"),
        None => format!("its holder {reason}"),
    };
    held.iter()
        .map(|task| GroupEvent::TaskReleased {
            task: *task,
            by: member.clone(),
            reason: why.clone(),
            forced_by: None,
        })
        .collect()
}

/// A member lease a store found expired on its own clock, under the group
/// lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpiredLease {
    /// The member.
    pub member: String,
    /// The epoch the lease was taken for.
    pub epoch: u64,
    /// The host that renewed it.
    pub host: String,
    /// The process that renewed it.
    pub pid: u32,
    /// Its time to live (ms).
    pub ttl_ms: u64,
}

/// The events that remove the members whose leases expired, before the
/// commit that found them: for each member still active in the lease's
/// epoch (`members`: `(id, active, epoch)`), a `MemberLeft` saying so and
/// the release of every task it holds (`held`: `(task, holder)`,
/// ascending). A lease of an epoch that is over removes nothing.
pub fn expire(
    expired: &[ExpiredLease],
    members: &[(String, bool, u64)],
    held: &[(u64, String)],
) -> Vec<GroupEvent> {
    let mut out = Vec::new();
    for lease in expired {
        let current = members
            .iter()
            .any(|(id, active, epoch)| *id == lease.member && *active && *epoch == lease.epoch);
        if !current {
            continue;
        }
        let left = GroupEvent::MemberLeft {
            member: lease.member.clone(),
            reason: format!(
                "lost its lease: no renewal from {} pid {} within its {} s TTL",
                lease.host,
                lease.pid,
                lease.ttl_ms.div_ceil(1000)
            ),
            forced_by: None,
        };
        let tasks: Vec<u64> = held
            .iter()
            .filter(|(_, holder)| *holder == lease.member)
            .map(|(t, _)| *t)
            .collect();
        let releases = leaving(&left, &tasks);
        out.push(left);
        out.extend(releases);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(task: u64, by: &str) -> GroupEvent {
        GroupEvent::TaskClaimed {
            task,
            by: by.into(),
            epoch: None,
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
        let n = needs(&claim(3, "a"), None);
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
        assert_eq!(check("r", &mut claim(3, "a"), None, &f), Ok(None));
        f.task = Some((TaskStatus::Claimed, Some("a".into())));
        assert_eq!(
            check("r", &mut claim(3, "a"), None, &f),
            Ok(Some(Committed {
                seq: 3,
                fresh: false
            }))
        );
        let held = check("r", &mut claim(3, "b"), None, &f).unwrap_err();
        assert_eq!(
            held.to_string(),
            "task #3 is already claimed by a; pick another open task (task_list) or message a"
        );
        f.task = None;
        let unknown = check("r", &mut claim(9, "b"), None, &f).unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "there is no task #9 (tasks: #3, #4); task_list shows them"
        );
        let outsider = check("r", &mut claim(3, "c"), None, &f).unwrap_err();
        assert_eq!(
            outsider.to_string(),
            "`c` is not a member of this group (members: a, b)"
        );
        f.task = Some((TaskStatus::Open, None));
        f.waiting = vec![(4, TaskStatus::Claimed)];
        let blocked = check("r", &mut claim(3, "a"), None, &f).unwrap_err();
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
        assert_eq!(check("r", &mut e, None, &member_facts()), Ok(None));
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
        let refused = check("root", &mut e, None, &f).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("session x cannot join the group of root"),
            "{refused}"
        );
        f.created = None;
        assert_eq!(
            check("root", &mut e, None, &f),
            Err(GroupRefusal::NoGroup {
                root: "root".into()
            })
        );
    }

    fn actor(active: bool, epoch: u64, reason: Option<&str>) -> Option<MemberRow> {
        Some(MemberRow {
            active,
            epoch,
            left_reason: reason.map(str::to_string),
        })
    }

    #[test]
    fn a_request_from_a_stale_epoch_is_fenced_with_the_reason() {
        let mut f = member_facts();
        f.task = Some((TaskStatus::Claimed, Some("a".into())));
        let done = || GroupEvent::TaskCompleted {
            task: 3,
            by: "a".into(),
            ok: true,
            result: "built".into(),
        };
        assert_eq!(
            needs(&done(), Some(7)).actor.as_deref(),
            Some("a"),
            "an epoch asks for the actor's membership"
        );
        assert_eq!(needs(&done(), None).actor, None);
        f.actor = actor(true, 7, None);
        assert_eq!(check("r", &mut done(), Some(7), &f), Ok(None));
        // Rejoined since: the old membership cannot finish what it held.
        f.actor = actor(true, 9, None);
        let stale = check("r", &mut done(), Some(7), &f).unwrap_err();
        assert_eq!(
            stale,
            GroupRefusal::Fenced {
                member: "a".into(),
                epoch: 7,
                current: Some(9),
                reason: None
            }
        );
        assert!(stale.to_string().contains("rejoined"), "{stale}");
        // Removed: its lease expired.
        f.actor = actor(false, 7, Some("lost its lease: no renewal"));
        let gone = check("r", &mut claim(4, "a"), Some(7), &f).unwrap_err();
        let text = gone.to_string();
        assert!(
            text.contains("no longer a member")
                && text.contains("lost its lease")
                && text.contains("nothing was applied"),
            "{text}"
        );
        // Without an epoch nothing is fenced (the supervisor's own commits).
        f.actor = None;
        f.task = Some((TaskStatus::Claimed, Some("a".into())));
        assert_eq!(check("r", &mut done(), None, &f), Ok(None));
        let mut msg = GroupEvent::MessageQueued {
            from: "a".into(),
            to: "b".into(),
            recipients: vec![],
            text: "late".into(),
        };
        assert!(matches!(
            check("r", &mut msg, Some(1), &f),
            Err(GroupRefusal::Fenced { current: None, .. })
        ));
    }

    #[test]
    fn a_claim_records_its_epoch_and_a_stale_leave_leaves_nothing() {
        let mut f = member_facts();
        f.task = Some((TaskStatus::Open, None));
        f.actor = actor(true, 5, None);
        let mut e = claim(3, "a");
        assert_eq!(check("r", &mut e, Some(5), &f), Ok(None));
        assert!(matches!(e, GroupEvent::TaskClaimed { epoch: Some(5), .. }));
        let mut leave = GroupEvent::MemberLeft {
            member: "a".into(),
            reason: "stopped running".into(),
            forced_by: None,
        };
        assert_eq!(check("r", &mut leave.clone(), Some(5), &f), Ok(None));
        f.actor = actor(true, 8, None);
        assert_eq!(
            check("r", &mut leave, Some(5), &f),
            Ok(Some(Committed {
                seq: 0,
                fresh: false
            })),
            "another membership of `a` is not ended by the old one's leave"
        );
    }

    #[test]
    fn the_operator_releases_any_claim_and_evicts_only_active_members() {
        let mut f = member_facts();
        f.task = Some((TaskStatus::Claimed, Some("b".into())));
        let mut release = GroupEvent::TaskReleased {
            task: 3,
            by: String::new(),
            reason: "b is stuck".into(),
            forced_by: Some("alice on host-a".into()),
        };
        assert_eq!(check("r", &mut release, None, &f), Ok(None));
        assert!(
            matches!(&release, GroupEvent::TaskReleased { by, .. } if by == "b"),
            "the holder is filled in: {release:?}"
        );
        f.task = Some((TaskStatus::Open, None));
        let refused = check("r", &mut release, None, &f).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "task #3 is open: there is no claim to release"
        );
        let evict = |who: &str| GroupEvent::MemberLeft {
            member: who.into(),
            reason: "hung".into(),
            forced_by: Some("alice on host-a".into()),
        };
        assert_eq!(check("r", &mut evict("b"), None, &f), Ok(None));
        let refused = check("r", &mut evict("c"), None, &f).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "`c` is not a member of this group (members: a, b)"
        );
        let released = leaving(&evict("b"), &[3, 4]);
        assert_eq!(released.len(), 2);
        assert!(
            matches!(&released[0], GroupEvent::TaskReleased { task: 3, by, reason, forced_by: None }
                if by == "b" && reason == "its holder was evicted by alice on host-a: hung"),
            "{released:?}"
        );
    }

    #[test]
    fn expired_leases_remove_their_current_members_and_release_their_claims() {
        let lease = |m: &str, epoch: u64| ExpiredLease {
            member: m.into(),
            epoch,
            host: "host-b".into(),
            pid: 77,
            ttl_ms: 2_500,
        };
        let members = vec![
            ("a".to_string(), true, 4),
            ("b".to_string(), true, 6),
            ("c".to_string(), false, 2),
        ];
        let held = vec![
            (10, "a".to_string()),
            (11, "b".to_string()),
            (12, "a".to_string()),
        ];
        // `b`'s lease is from an epoch that is over; `c` left already.
        let events = expire(
            &[lease("a", 4), lease("b", 5), lease("c", 2)],
            &members,
            &held,
        );
        assert_eq!(events.len(), 3, "{events:?}");
        let GroupEvent::MemberLeft { member, reason, .. } = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(member, "a");
        assert_eq!(
            reason,
            "lost its lease: no renewal from host-b pid 77 within its 3 s TTL"
        );
        let released: Vec<u64> = events[1..]
            .iter()
            .map(|e| match e {
                GroupEvent::TaskReleased { task, by, .. } if by == "a" => *task,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(released, [10, 12]);
    }
}
