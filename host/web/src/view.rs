//! The reducers' state as JSON: what a snapshot carries and what the page
//! renders. A pure function of an [`Observed`] session; the shape is documented in
//! the README's "Web surface" section.

use crate::log::Observed;
use latch_surface::{
    Activity, DiffLine, DividerKind, Durable, Item, Phase, PriceTable, SessionCost, ToolRow,
    ToolStatus,
};
use serde_json::{Value, json};

/// The whole state of an observed session: its durable part, what it is
/// doing now, streamed text not committed yet, the last `/context` report
/// and the permission request waiting for an answer (with the `call_id`
/// the answer names), and the images of the user messages by their seq
/// (`GET /api/sessions/{id}/images/{sha256}` serves their bytes).
pub fn state(o: &Observed, prices: &PriceTable) -> Value {
    let s = &o.surface;
    json!({
        "durable": durable(s.durable(), prices),
        "activity": activity(&s.activity()),
        "streaming": s.streaming(),
        "report": s.report(),
        "permission": o.permission,
        "images": crate::server::images::images_json(&o.images),
    })
}

/// The durable part: equal for a live and a replayed surface at one seq;
/// its usage carries the session's cost under `prices`.
pub fn durable(d: &Durable, prices: &PriceTable) -> Value {
    let usage = &d.usage;
    let (input, output) = usage.totals();
    json!({
        "session": d.session,
        "seq": d.watermark,
        "own_events": d.own_events,
        "generation": d.generation,
        "transcript": d.transcript.items().iter().map(item).collect::<Vec<_>>(),
        "task": d.task,
        "usage": {
            "input_tokens": input,
            "output_tokens": output,
            "hit_rate": usage.hit_rate(),
            "cost": SessionCost::of(usage, prices).json(),
            "requests": usage.requests().iter().map(|r| json!({
                "seq": r.seq,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
                "cache_read_tokens": r.cache_read_tokens,
                "cache_creation_tokens": r.cache_creation_tokens,
                "cache_miss_tokens": r.cache_miss_tokens,
                "estimated_prefix_tokens": r.estimated_prefix_tokens,
                "prefix_utilization": r.prefix_utilization(),
            })).collect::<Vec<_>>(),
        },
        "phase": phase(&d.phase),
        "open_calls": d.open_calls.iter().map(|(id, tool)| json!({"call_id": id, "tool": tool})).collect::<Vec<_>>(),
        "children": d.children.all().iter().map(|c| json!({
            "id": c.id,
            "role": c.role,
            "task": c.task,
            "status": format!("{:?}", c.status).to_lowercase(),
            "started_seq": c.started_seq,
            "last_report": c.last_report,
        })).collect::<Vec<_>>(),
        "group": d.group.as_ref().map(|g| json!({"title": g.title, "lines": g.lines})),
        "mode": d.mode,
        "checklist": d.checklist.steps().iter().map(|s| json!({
            "text": s.text,
            "done": s.status == latch_kernel::StepStatus::Completed,
        })).collect::<Vec<_>>(),
        "permission": d.permission.as_ref().map(|p| json!({
            "tool": p.tool, "subject": p.subject, "detail": p.detail, "reason": p.reason,
            "call_id": p.call_id, "seq": p.seq, "action": p.action,
        })),
    })
}

fn item(i: &Item) -> Value {
    match i {
        Item::User { seq, text } => json!({"kind": "user", "seq": seq, "text": text}),
        Item::Assistant { seq, text } => json!({"kind": "assistant", "seq": seq, "text": text}),
        Item::Tool(t) => tool(t),
        Item::Notification { seq, source, text } => {
            json!({"kind": "notification", "seq": seq, "source": source, "text": text})
        }
        Item::Denied { seq, tool, reason } => {
            json!({"kind": "denied", "seq": seq, "tool": tool, "reason": reason})
        }
        Item::Validation {
            seq,
            command,
            passed,
            requirements,
        } => json!({
            "kind": "validation", "seq": seq, "command": command,
            "passed": passed, "requirements": requirements,
        }),
        Item::Certification {
            seq,
            certified,
            blockers,
        } => json!({
            "kind": "certification", "seq": seq, "certified": certified, "blockers": blockers,
        }),
        Item::Reground { seq, text } => json!({"kind": "reground", "seq": seq, "text": text}),
        Item::Child {
            seq,
            child,
            role,
            task,
        } => json!({"kind": "child", "seq": seq, "child": child, "role": role, "task": task}),
        Item::Divider { seq, kind } => {
            let (what, detail) = match kind {
                DividerKind::Compact => ("compact", Value::Null),
                DividerKind::Epoch { generation } => ("epoch", json!(generation)),
                DividerKind::Interrupted { reason } => ("interrupted", json!(reason)),
            };
            json!({"kind": "divider", "seq": seq, "divider": what, "detail": detail})
        }
    }
}

fn tool(t: &ToolRow) -> Value {
    let status = match t.status {
        ToolStatus::Pending => "pending",
        ToolStatus::Done => "done",
        ToolStatus::Failed => "failed",
        ToolStatus::Interrupted => "interrupted",
    };
    let diff: Vec<Value> = t
        .diff
        .iter()
        .map(|l| match l {
            DiffLine::Header(s) => json!(["header", s]),
            DiffLine::Removed(s) => json!(["removed", s]),
            DiffLine::Added(s) => json!(["added", s]),
        })
        .collect();
    json!({
        "kind": "tool", "seq": t.seq, "call_id": t.call_id, "name": t.name,
        "summary": t.summary, "diff": diff, "status": status, "output": t.output,
    })
}

fn phase(p: &Phase) -> Value {
    match p {
        Phase::Idle => json!({"phase": "idle"}),
        Phase::Requesting { run } => json!({"phase": "requesting", "run": run}),
        Phase::Tools { run, names } => json!({"phase": "tools", "run": run, "tools": names}),
        Phase::Interrupted { reason } => json!({"phase": "interrupted", "reason": reason}),
    }
}

fn activity(a: &Activity) -> Value {
    let kind = match a {
        Activity::Idle => "idle",
        Activity::Waiting => "waiting",
        Activity::Streaming => "streaming",
        Activity::Reasoning => "reasoning",
        Activity::Retrying { .. } => "retrying",
        Activity::RunningTools(_) => "tools",
        Activity::AwaitingPermission(_) => "permission",
        Activity::Interrupted(_) => "interrupted",
    };
    json!({"kind": kind, "label": a.label()})
}
