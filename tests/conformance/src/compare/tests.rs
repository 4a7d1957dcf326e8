//! Unit tests of the figures (on hand-built captured requests) and of the
//! baseline's compaction (on in-memory sessions).

use super::baseline::{SUMMARY_PROMPT, SummarizeEngine, Summarizer, SummaryRequest};
use super::facts::{FactId, Survival};
use super::metrics::*;
use super::wire::segments;
use latch_engine_sdk::types::*;
use latch_engine_sdk::validate::check_view;
use latch_engine_sdk::{Engine, MemorySession, SessionView};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

const P: EstimatorProfile = EstimatorProfile::Anthropic;

fn body(texts: &[&str]) -> Value {
    let messages: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            json!({"role": if i % 2 == 0 { "user" } else { "assistant" },
                   "content": [{"type": "text", "text": t}]})
        })
        .collect();
    json!({
        "tools": [{"name": "shell", "description": "run", "input_schema": {"type": "object"}}],
        "system": [{"type": "text", "text": "You are Latch.", "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
    })
}

fn tokens_of(b: &Value, first: usize) -> u64 {
    segments(P, b).iter().take(first).map(|(_, t)| t).sum()
}

#[test]
fn both_pricing_styles_weigh_reads_and_writes_as_documented() {
    let c = cost(&Usage {
        input_tokens: 100,
        cache_read_tokens: 1000,
        cache_creation_tokens: 200,
    });
    assert_eq!(c.openai_style, 100.0 + 200.0 + 100.0);
    assert_eq!(c.anthropic_style, 100.0 + 100.0 + 250.0);
}

#[test]
fn prefix_ratio_counts_the_shared_prefix_of_consecutive_requests() {
    let a = body(&["task", "ok"]);
    let appended = body(&["task", "ok", "more"]);
    let rewritten = body(&["TASK", "ok", "more"]);
    let ratios = prefix_ratios(P, &[&a, &appended, &rewritten]);
    let total = request_tokens(P, &appended);
    assert_eq!(ratios[0], request_tokens(P, &a) as f64 / total as f64);
    assert_eq!(
        ratios[1],
        tokens_of(&rewritten, 2) as f64 / total as f64,
        "only tools and system are shared after a rewrite"
    );
    assert!(ratios[0] > 0.5 && ratios[1] < ratios[0]);
    assert_eq!(mean(&[1.0, 0.5]), 0.75);
    let ten: Vec<f64> = (1..=10).map(|i| i as f64 / 10.0).collect();
    assert_eq!(percentile(&ten, 10.0), 0.1);
    assert_eq!(percentile(&ten, 50.0), 0.5);
    assert_eq!(percentile(&[], 10.0), 0.0);
}

#[test]
fn figures_come_from_the_captured_requests() {
    let first = body(&["task"]);
    let mut summary = body(&["task", "step", SUMMARY_PROMPT]);
    summary["messages"][2]["content"][0]["text"] = json!(SUMMARY_PROMPT);
    let mut asked = body(&["task", "step", "the question"]);
    asked["messages"][0]["content"][0]["text"] = json!("the code word is TANGERINE-7731");
    let mut answered = asked.clone();
    answered["messages"].as_array_mut().unwrap().extend([
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "r1", "name": "recall", "input": {"query": "checksum mismatch block"}},
            {"type": "tool_use", "id": "r2", "name": "recall", "input": {"query": "vendor zlib pinned"}}]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "r1", "content": "ERROR ledger: checksum mismatch in block 0x5eed at offset 4096"},
            {"type": "tool_result", "tool_use_id": "r2", "content": "unknown tool `recall`", "is_error": true}]}),
    ]);
    let u = |input, read, write| Usage {
        input_tokens: input,
        cache_read_tokens: read,
        cache_creation_tokens: write,
    };
    let run = RunRecord {
        profile: P,
        exchanges: vec![
            Exchange {
                body: first.clone(),
                usage: u(0, 0, 400),
            },
            Exchange {
                body: summary.clone(),
                usage: u(0, 400, 100),
            },
            Exchange {
                body: asked.clone(),
                usage: u(10, 100, 300),
            },
            Exchange {
                body: answered.clone(),
                usage: u(0, 410, 90),
            },
        ],
        agent_requests: 3,
        request_tokens: vec![100, 300, 200, 250],
        generations: vec![Some(0), Some(1), Some(1)],
        tool_errors: 1,
        question_at: Some(1),
        seconds: 1.5,
        error: None,
    };
    let f = figures(&run);
    assert_eq!(f.requests, 4);
    assert_eq!(f.extra_model_calls, 1);
    let total_openai: f64 = run
        .exchanges
        .iter()
        .map(|e| cost(&e.usage).openai_style)
        .sum();
    assert_eq!(f.cost_per_step.openai_style, total_openai / 3.0);
    let total_anthropic: f64 = run
        .exchanges
        .iter()
        .map(|e| cost(&e.usage).anthropic_style)
        .sum();
    assert_eq!(f.cost_per_step.anthropic_style, total_anthropic / 3.0);
    assert_eq!(f.peak_request_tokens, 300);
    let ratios = prefix_ratios(P, &[&first, &summary, &asked, &answered]);
    assert_eq!(f.prefix_ratio_mean, mean(&ratios));
    assert_eq!(f.prefix_ratio_p10, percentile(&ratios, 10.0));
    assert_eq!(f.rotations, 1);
    assert_eq!(f.tool_errors, 1);
    assert_eq!(
        f.facts,
        vec![
            (FactId::Constraint, Survival::Lost),
            (FactId::CodeWord, Survival::Visible),
            (FactId::Diagnostic, Survival::Recalled),
            (FactId::RejectedHypothesis, Survival::Lost),
        ],
        "the summary request is skipped: the question's request is the next one"
    );
    let unasked = RunRecord {
        question_at: None,
        ..run
    };
    assert!(
        figures(&unasked)
            .facts
            .iter()
            .all(|(_, s)| *s == Survival::Lost)
    );
}

#[test]
fn rotations_count_changes_of_known_generations() {
    assert_eq!(rotations(&[None, None]), 0);
    assert_eq!(rotations(&[Some(0), Some(0), Some(1), Some(1), Some(2)]), 2);
}

/// A summarizer that records what it was asked and answers a fixed text.
#[derive(Clone, Default)]
struct Recording(Arc<Mutex<Vec<SummaryRequest>>>);

impl Summarizer for Recording {
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, String> {
        self.0.lock().unwrap().push(request.clone());
        Ok("the work so far".into())
    }
}

fn request(window: u64) -> ContextRequest {
    ContextRequest {
        system_prompt: "You are a coding agent.".into(),
        session_context: SessionContext {
            workspace: "/w".into(),
            repository_instructions: String::new(),
            mode: "run".into(),
        },
        budget: ContextBudget {
            context_window_tokens: window,
            reserve_tokens: window / 4,
            recent_tokens: 64_000,
            tools_tokens: 100,
            extension_tokens: 0,
        },
        query: String::new(),
        extensions: vec![],
    }
}

fn engine(calls: &Recording) -> SummarizeEngine {
    SummarizeEngine::with_summarizer(
        ModelProfile::with_defaults("anthropic", "m"),
        Box::new(calls.clone()),
    )
}

fn texts(view: &ContextView) -> Vec<String> {
    view.messages
        .iter()
        .map(|m| latch_engine_sdk::render_part_text(&m.parts[0]))
        .collect()
}

#[test]
fn the_baseline_compacts_once_at_the_limit_then_shows_summary_users_and_new_turns() {
    let calls = Recording::default();
    let mut e = engine(&calls);
    let req = request(24_000);
    let limit = e.compaction_limit(&req.budget);
    assert_eq!(limit, 18_000, "90% of 24k is above the hard budget of 18k");
    let mut s = MemorySession::new("s", ModelProfile::with_defaults("anthropic", "m"));
    s.user("first task: keep vendor/ untouched");
    let mut n = 0;
    let compacting = loop {
        let view = e.materialize(&s, &req).unwrap();
        check_view(P, &req, &view).unwrap();
        if !view.persist.is_empty() {
            break view;
        }
        assert_eq!(view.report.epoch_generation, Some(0));
        assert_eq!(
            view.messages.len(),
            s.events_from(0).len() + 1,
            "whole history"
        );
        assert!(
            calls.0.lock().unwrap().is_empty(),
            "no summary below the limit"
        );
        n += 1;
        s.tool_exchange(&format!("c{n}"), "shell", "{}", &"log line\n".repeat(180));
        if n == 3 {
            s.user("a follow-up");
        }
        assert!(n < 100, "never compacted");
    };
    assert_eq!(
        calls.0.lock().unwrap().len(),
        1,
        "exactly one extra request"
    );
    let asked = calls.0.lock().unwrap()[0].clone();
    assert_eq!(
        latch_engine_sdk::render_part_text(&asked.messages.last().unwrap().parts[0]),
        SUMMARY_PROMPT
    );
    assert_eq!(
        asked.messages.len(),
        s.events_from(0).len() + 2,
        "the whole history goes to the summarizer, between the context and the prompt"
    );
    // The compacting view: context, both user messages, the summary.
    let t = texts(&compacting);
    assert_eq!(t.len(), 4);
    assert!(t[1].starts_with("first task") && t[2] == "a follow-up");
    assert!(t[3].ends_with("the work so far"));
    let entry = &compacting.persist[0];
    assert_eq!(entry.kind, KernelContextKind::Snapshot);
    assert_eq!(entry.generation, 1);
    assert_eq!(entry.epoch_start, Some(s.latest_seq() + 1));
    assert_eq!(compacting.report.epoch_generation, Some(1));
    assert!(compacting.report.rotation_reason.is_some());
    // The host persists the summary; new turns follow it, no new request.
    s.persist(&compacting.persist);
    s.tool_exchange("after", "shell", "{}", "fresh output");
    let next = e.materialize(&s, &req).unwrap();
    check_view(P, &req, &next).unwrap();
    assert!(next.persist.is_empty());
    assert_eq!(calls.0.lock().unwrap().len(), 1, "no second summary");
    let t = texts(&next);
    assert_eq!(t.len(), 6, "context, 2 users, summary, call, result");
    assert!(t[5].ends_with("fresh output"), "{}", t[5]);
    assert_eq!(
        next.messages[3].kernel.as_ref().unwrap().seq,
        Some(s.latest_seq() - 2)
    );
    // A fresh instance on the same log gives the same view without asking.
    let calls3 = Recording::default();
    let resumed = engine(&calls3).materialize(&s, &req).unwrap();
    assert_eq!(resumed.messages, next.messages);
    assert!(calls3.0.lock().unwrap().is_empty());
}

#[test]
fn after_compaction_user_messages_are_kept_newest_first_up_to_20k_in_order() {
    let calls = Recording::default();
    let mut e = engine(&calls);
    e.set_config(r#"{"compact_percent": 25}"#).unwrap();
    let req = request(256_000);
    let mut s = MemorySession::new("s", ModelProfile::with_defaults("anthropic", "m"));
    // 30 user messages of ≈1,000 tokens each: only the newest ≈20 fit.
    for i in 0..30 {
        s.user(&format!("message {i:02} {}", "word ".repeat(800)));
        s.tool_exchange(&format!("c{i}"), "shell", "{}", &"x".repeat(8_000));
    }
    let view = e.materialize(&s, &req).unwrap();
    check_view(P, &req, &view).unwrap();
    assert_eq!(view.persist.len(), 1);
    let users: Vec<String> = texts(&view)[1..view.messages.len() - 1].to_vec();
    let kept: u64 = view.messages[1..view.messages.len() - 1]
        .iter()
        .map(|m| latch_engine_sdk::estimate::message_tokens(P, m))
        .sum();
    assert!(kept <= 20_000, "{kept}");
    assert!(users.len() >= 15 && users.len() < 30, "{}", users.len());
    let numbers: Vec<u32> = users.iter().map(|u| u[8..10].parse().unwrap()).collect();
    let expected: Vec<u32> = (30 - users.len() as u32..30).collect();
    assert_eq!(numbers, expected, "the newest, in chronological order");
}

#[test]
fn the_baseline_has_no_recall_and_needs_a_summarizer_to_compact() {
    let mut e = SummarizeEngine::new(ModelProfile::with_defaults("anthropic", "m"));
    let mut s = MemorySession::new("s", ModelProfile::with_defaults("anthropic", "m"));
    s.user("hello");
    assert!(matches!(
        e.recall(&s, "hello", 5),
        Err(EngineError::Unsupported(_))
    ));
    let req = request(4_000);
    assert!(
        e.materialize(&s, &req).is_ok(),
        "below the limit no model is needed"
    );
    s.tool_exchange("c", "shell", "{}", &"y".repeat(20_000));
    match e.materialize(&s, &req) {
        Err(EngineError::Unsupported(m)) => assert!(m.contains("summarizer"), "{m}"),
        other => panic!("expected unsupported, got {other:?}"),
    }
    assert!(matches!(
        e.set_config(r#"{"compact_percnt": 5}"#),
        Err(ConfigError::UnknownKey(k)) if k == "compact_percnt"
    ));
}
