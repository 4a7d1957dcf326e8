//! The scripted model of a compared session: it answers every request the
//! provider receives, in order, from the session's plan.
//!
//! * A summary request (see [`is_summary_request`]) gets a summary written
//!   from what the request shows: the last tool calls, and every planted
//!   fact the request shows, verbatim. The summarizer is deliberately
//!   generous: a real model may well drop an exact diagnostic, so the
//!   baseline's facts are graded at their best.
//! * Any other request takes the plan's next step; after a turn's last
//!   step the closing text ends the turn.
//! * After the turns, the final question: the model looks for each fact in
//!   its request first and calls `recall {query}` for every fact it does
//!   not see; with the results in, it answers.

use super::baseline::is_summary_request;
use super::facts::{FACTS, FactId, shows};
use super::sessions::{Call, SessionPlan};
use super::wire::{request_text, tool_exchanges};
use serde_json::{Value, json};

/// What the model answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Move {
    /// Call these tools.
    Calls(Vec<Call>),
    /// Say this and end the turn.
    Text(String),
}

/// Most events the model asks `recall` for.
pub const RECALL_LIMIT: u64 = 5;

/// The scripted model of one run.
#[derive(Clone, Debug)]
pub struct ScriptedModel {
    plan: SessionPlan,
    turn: usize,
    step: usize,
    asked: bool,
    summaries: usize,
}

impl ScriptedModel {
    /// A model that plays `plan` from its start.
    pub fn new(plan: SessionPlan) -> Self {
        ScriptedModel {
            plan,
            turn: 0,
            step: 0,
            asked: false,
            summaries: 0,
        }
    }

    /// Summary requests answered so far.
    pub fn summaries(&self) -> usize {
        self.summaries
    }

    /// The answer to the request `body`.
    pub fn respond(&mut self, body: &Value) -> Move {
        if is_summary_request(body) {
            self.summaries += 1;
            return Move::Text(scripted_summary(body));
        }
        if let Some(turn) = self.plan.turns.get(self.turn) {
            if let Some(calls) = turn.steps.get(self.step) {
                self.step += 1;
                return Move::Calls(calls.clone());
            }
            let closing = turn.closing.clone();
            self.turn += 1;
            self.step = 0;
            return Move::Text(closing);
        }
        if !self.asked {
            self.asked = true;
            let text = request_text(body);
            let missing: Vec<Call> = FACTS
                .iter()
                .filter(|f| shows(f, &text) != Some(true))
                .map(|f| Call {
                    name: "recall".into(),
                    args: json!({ "query": f.query, "limit": RECALL_LIMIT }).to_string(),
                })
                .collect();
            if !missing.is_empty() {
                return Move::Calls(missing);
            }
        }
        Move::Text(answer(body))
    }
}

/// The final answer: for each fact, whether the model has it.
fn answer(body: &Value) -> String {
    let mut text = request_text(body);
    for x in tool_exchanges(body) {
        if x.name == "recall"
            && let Some(r) = x.result
        {
            text.push('\n');
            text.push_str(&r);
        }
    }
    FACTS
        .iter()
        .map(|f| {
            let found = if shows(f, &text) == Some(true) {
                "found"
            } else {
                "not found"
            };
            format!("{}: {found}", f.label)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The summary the scripted model writes for a summary request: the last
/// tool calls it made, and every planted fact the request shows (the
/// constraint, the code word and the diagnostic as the lines that state
/// them; the hypothesis with its status).
pub fn scripted_summary(body: &Value) -> String {
    let text = request_text(body);
    let mut out = String::from("## Progress\n");
    let calls: Vec<String> = tool_exchanges(body)
        .into_iter()
        .map(|x| {
            let line = format!("{} {}", x.name, x.input);
            line.chars().take(160).collect()
        })
        .collect();
    out.push_str(&format!(
        "{} tool calls in the summarized history; the latest:\n",
        calls.len()
    ));
    for c in calls.iter().rev().take(20).rev() {
        out.push_str(&format!("- {c}\n"));
    }
    out.push_str("\n## To keep\n");
    for f in &FACTS {
        match (f.id, shows(f, &text)) {
            (FactId::RejectedHypothesis, Some(true)) => out.push_str(&format!(
                "- Rejected hypothesis (do not pursue): {}\n",
                f.marker
            )),
            (FactId::RejectedHypothesis, Some(false)) => {
                out.push_str(&format!("- Active hypothesis: {}\n", f.marker))
            }
            (_, Some(_)) => {
                let line = text
                    .lines()
                    .find(|l| l.contains(f.marker))
                    .unwrap_or(f.marker);
                let line: String = line.trim().chars().take(300).collect();
                out.push_str(&format!("- {line}\n"));
            }
            (_, None) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::baseline::SUMMARY_PROMPT;
    use crate::compare::facts::{DIAGNOSTIC_LINE, HYPOTHESIS, first_task_facts};
    use crate::compare::sessions::{SessionKind, plan};

    fn user(text: &str) -> Value {
        json!({"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]})
    }

    #[test]
    fn the_model_plays_the_plan_then_recalls_what_it_does_not_see() {
        let p = plan(SessionKind::Steps80, Some(6)).unwrap();
        let mut m = ScriptedModel::new(p.clone());
        for turn in &p.turns {
            for step in &turn.steps {
                assert_eq!(m.respond(&user("go")), Move::Calls(step.clone()));
            }
            assert_eq!(m.respond(&user("go")), Move::Text(turn.closing.clone()));
        }
        // The question: the first task is in view, the rest is not.
        let Move::Calls(calls) = m.respond(&user(&first_task_facts())) else {
            panic!("expected recall calls");
        };
        let queries: Vec<String> = calls
            .iter()
            .map(|c| {
                assert_eq!(c.name, "recall");
                let args: Value = serde_json::from_str(&c.args).unwrap();
                assert_eq!(args["limit"], RECALL_LIMIT);
                args["query"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(
            queries,
            ["checksum mismatch block", "CSV parser quoted newlines"]
        );
        let Move::Text(answer) = m.respond(&user(&first_task_facts())) else {
            panic!("expected the answer");
        };
        assert!(answer.contains("code word: found") && answer.contains("diagnostic: not found"));
        assert_eq!(m.summaries(), 0);

        // A hypothesis shown only as active is not taken as known.
        let mut m = ScriptedModel::new(plan(SessionKind::Steps80, Some(6)).unwrap());
        while matches!(m.respond(&user("go")), Move::Calls(_)) || m.turn < 2 {}
        let active = format!("{}\n{DIAGNOSTIC_LINE}\n- {HYPOTHESIS}", first_task_facts());
        let Move::Calls(calls) = m.respond(&user(&active)) else {
            panic!("expected a recall of the hypothesis");
        };
        assert_eq!(calls.len(), 1);
        assert!(calls[0].args.contains("CSV parser quoted newlines"));
    }

    #[test]
    fn a_summary_request_is_answered_with_the_facts_it_shows() {
        let mut m = ScriptedModel::new(plan(SessionKind::Steps80, Some(6)).unwrap());
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": first_task_facts()}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "a", "name": "add_hypothesis", "input": {"text": HYPOTHESIS}},
                {"type": "tool_use", "id": "b", "name": "shell", "input": {"command": "cat logs/step-003.log"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "recorded"},
                {"type": "tool_result", "tool_use_id": "b", "content": DIAGNOSTIC_LINE},
                {"type": "text", "text": SUMMARY_PROMPT}]}
        ]});
        let Move::Text(summary) = m.respond(&body) else {
            panic!("expected a summary");
        };
        assert_eq!(m.summaries(), 1);
        assert!(summary.contains("TANGERINE-7731"));
        assert!(summary.contains(DIAGNOSTIC_LINE));
        assert!(summary.contains(&format!("Active hypothesis: {HYPOTHESIS}")));
        assert!(summary.contains("shell {\"command\":\"cat logs/step-003.log\"}"));
        // The plan did not advance.
        let first = plan(SessionKind::Steps80, Some(6)).unwrap().turns[0].steps[0].clone();
        assert_eq!(m.respond(&user("go")), Move::Calls(first));
    }
}
