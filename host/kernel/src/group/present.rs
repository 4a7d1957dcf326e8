//! The presentation reducer of a group: what `/group`, `latch group` and
//! the sidebar GROUP block show, reduced from [`GroupState`] (no terminal
//! code, no clock), so a live session and a resumed one present the same
//! thing; on a shared store, with each member's lease as the store reports
//! it ([`view_with_leases`]).

use super::{GroupState, MemberLease, TaskStatus};

/// One member row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRow {
    /// Session id.
    pub id: String,
    /// Role.
    pub role: String,
    /// `active`, or `left (<reason>)`.
    pub state: String,
    /// Messages waiting for it.
    pub pending: usize,
    /// Tasks it holds.
    pub holding: Vec<u64>,
    /// Its latest group activity (ms since the epoch).
    pub last_activity_ms: u64,
}

/// One task row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRow {
    /// Id.
    pub id: u64,
    /// Title.
    pub title: String,
    /// Status.
    pub status: TaskStatus,
    /// Holder, or who closed it.
    pub owner: Option<String>,
    /// Dependencies.
    pub depends_on: Vec<u64>,
    /// The result of a closed task.
    pub result: Option<String>,
}

/// What a surface shows of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupView {
    /// The root session (empty when there is no group).
    pub lead: String,
    /// Members, by id.
    pub members: Vec<MemberRow>,
    /// Tasks, in creation order.
    pub tasks: Vec<TaskRow>,
    /// Messages waiting in all.
    pub pending: usize,
    /// Messages delivered so far.
    pub delivered: u64,
    /// The latest group activity (ms since the epoch).
    pub last_activity_ms: u64,
}

/// Reduce a group state to its view.
pub fn view(state: &GroupState) -> GroupView {
    let members = state
        .members()
        .map(|m| MemberRow {
            id: m.id.clone(),
            role: m.role.clone(),
            state: match (&m.left_reason, m.active) {
                (_, true) => "active".to_string(),
                (Some(r), false) => format!("left ({r})"),
                (None, false) => "left".to_string(),
            },
            pending: state.pending_for(&m.id).len(),
            holding: state
                .tasks()
                .filter(|t| t.status == TaskStatus::Claimed && t.owner.as_deref() == Some(&m.id))
                .map(|t| t.id)
                .collect(),
            last_activity_ms: m.last_activity_ms,
        })
        .collect();
    let tasks = state
        .tasks()
        .map(|t| TaskRow {
            id: t.id,
            title: t.title.clone(),
            status: t.status,
            owner: t.owner.clone(),
            depends_on: t.depends_on.clone(),
            result: t.result.clone(),
        })
        .collect();
    let pending = state
        .members()
        .map(|m| state.pending_for(&m.id).len())
        .sum();
    GroupView {
        lead: state.lead().unwrap_or_default().to_string(),
        members,
        tasks,
        pending,
        delivered: state.delivered(),
        last_activity_ms: state.last_activity_ms(),
    }
}

/// [`view`], each active member's state followed by its lease (`active ·
/// lease 12 s left (host-a pid 41)`) when `leases` has one for its epoch.
pub fn view_with_leases(state: &GroupState, leases: &[MemberLease]) -> GroupView {
    let mut v = view(state);
    for m in &mut v.members {
        let epoch = state.member(&m.id).map(|x| x.epoch);
        if let Some(l) = leases
            .iter()
            .find(|l| l.member == m.id && Some(l.epoch) == epoch)
            && m.state == "active"
        {
            m.state = format!("active · {}", l.describe());
        }
    }
    v
}

/// `HH:MM:SS` (UTC) of a time in ms since the epoch.
fn clock(ms: u64) -> String {
    let s = ms / 1000 % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn ids(v: &[u64]) -> String {
    v.iter()
        .map(|i| format!("#{i}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The view as plain text lines (the `/group` block).
pub fn text(view: &GroupView) -> String {
    if view.lead.is_empty() {
        return "no agent group in this session yet\n".to_string();
    }
    let mut out = format!(
        "GROUP of {} · {} members · {} tasks · {} pending · {} delivered · last activity {} UTC\n",
        view.lead,
        view.members.len(),
        view.tasks.len(),
        view.pending,
        view.delivered,
        clock(view.last_activity_ms)
    );
    out.push_str("members\n");
    for m in &view.members {
        out.push_str(&format!(
            "  {}  {}  {}  pending {}{}  last {}\n",
            m.id,
            m.role,
            m.state,
            m.pending,
            if m.holding.is_empty() {
                String::new()
            } else {
                format!("  holds {}", ids(&m.holding))
            },
            clock(m.last_activity_ms)
        ));
    }
    out.push_str("tasks\n");
    if view.tasks.is_empty() {
        out.push_str("  none\n");
    }
    for t in &view.tasks {
        out.push_str(&format!(
            "  #{}  {:<9}  {}  {}{}{}\n",
            t.id,
            t.status.label(),
            t.owner.as_deref().unwrap_or("-"),
            t.title,
            if t.depends_on.is_empty() {
                String::new()
            } else {
                format!("  after {}", ids(&t.depends_on))
            },
            t.result
                .as_deref()
                .map(|r| format!("  → {}", r.lines().next().unwrap_or("")))
                .unwrap_or_default()
        ));
    }
    out
}

/// `/group`: the text of a group state.
pub fn render(state: &GroupState) -> String {
    text(&view(state))
}
