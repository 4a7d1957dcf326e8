//! The figures of one compared run, computed from what the provider was
//! sent and what it reported: request counts, cost per step in two pricing
//! styles, how much of each request repeats the previous one's prefix, the
//! peak request size, rotations and the planted facts' survival.

use super::baseline::is_summary_request;
use super::facts::{FACTS, FactId, Survival, grade};
use super::wire::{request_text, segments, tool_exchanges};
use latch_engine_sdk::types::EstimatorProfile;
use serde::Serialize;
use serde_json::Value;

/// Provider-reported input usage of one request, in Anthropic's categories:
/// uncached input, cache reads and cache writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Uncached input tokens (not read from and not written to the cache).
    pub input_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_tokens: u64,
}

/// One request the provider received, with the usage it reported.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    /// The JSON body as sent.
    pub body: Value,
    /// What the provider reported for it.
    pub usage: Usage,
}

/// Input cost in uncached-token equivalents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Cost {
    /// OpenAI-style: uncached input + 0.1 × cached input. Cache writes are
    /// not billed extra, so they count as uncached input.
    pub openai_style: f64,
    /// Anthropic-style: uncached input + 0.1 × cache reads + 1.25 × cache
    /// writes.
    pub anthropic_style: f64,
}

/// Price of cached input relative to uncached input.
pub const CACHED_INPUT_PRICE: f64 = 0.1;
/// Price of a cache write relative to uncached input (Anthropic).
pub const CACHE_WRITE_PRICE: f64 = 1.25;

/// What one request costs in both pricing styles.
pub fn cost(u: &Usage) -> Cost {
    let (input, read, write) = (
        u.input_tokens as f64,
        u.cache_read_tokens as f64,
        u.cache_creation_tokens as f64,
    );
    Cost {
        openai_style: input + write + CACHED_INPUT_PRICE * read,
        anthropic_style: input + CACHED_INPUT_PRICE * read + CACHE_WRITE_PRICE * write,
    }
}

/// For every request after the first: the share of its canonical tokens
/// that repeats the previous request's prefix, in whole segments (see
/// [`segments`]).
pub fn prefix_ratios(profile: EstimatorProfile, bodies: &[&Value]) -> Vec<f64> {
    let segs: Vec<Vec<(String, u64)>> = bodies.iter().map(|b| segments(profile, b)).collect();
    segs.windows(2)
        .map(|pair| {
            let (prev, next) = (&pair[0], &pair[1]);
            let total: u64 = next.iter().map(|(_, t)| t).sum();
            let common: u64 = next
                .iter()
                .zip(prev)
                .take_while(|(a, b)| a.0 == b.0)
                .map(|(a, _)| a.1)
                .sum();
            if total == 0 {
                1.0
            } else {
                common as f64 / total as f64
            }
        })
        .collect()
}

/// Canonical tokens of a whole request (tools, system and messages).
pub fn request_tokens(profile: EstimatorProfile, body: &Value) -> u64 {
    segments(profile, body).iter().map(|(_, t)| t).sum()
}

/// The nearest-rank percentile `p` (0–100) of `values`; 0 when empty.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// Mean of `values`; 0 when empty.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Everything a run left behind that its figures are computed from.
#[derive(Clone, Debug)]
pub struct RunRecord {
    /// The estimator the session's model uses.
    pub profile: EstimatorProfile,
    /// Every request the provider received, in order.
    pub exchanges: Vec<Exchange>,
    /// Requests the agent loop made (one per step); the rest were made by
    /// the engine (summaries).
    pub agent_requests: usize,
    /// The size of every request (summaries included) under the host's
    /// canonical estimator: system prompt, messages and tool schemas, as the
    /// hard budget counts them.
    pub request_tokens: Vec<u64>,
    /// The epoch generation each view reported, one per agent request.
    pub generations: Vec<Option<u64>>,
    /// Tool results that reported an error (a `recall` the engine cannot
    /// answer counts too).
    pub tool_errors: usize,
    /// Index in `exchanges` of the first request after the final question
    /// was asked, when the run got that far.
    pub question_at: Option<usize>,
    /// Wall-clock seconds the run took.
    pub seconds: f64,
    /// Why the run stopped early, if it did.
    pub error: Option<String>,
}

/// The figures of one run, as the table shows them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunFigures {
    /// Requests the provider received.
    pub requests: usize,
    /// Requests the agent loop made.
    pub agent_requests: usize,
    /// Model calls beyond the agent's own (e.g. summaries).
    pub extra_model_calls: usize,
    /// Input cost of every request (extra calls included) per agent step.
    pub cost_per_step: Cost,
    /// Mean share of a request that repeats the previous request's prefix.
    pub prefix_ratio_mean: f64,
    /// Its 10th percentile.
    pub prefix_ratio_p10: f64,
    /// The largest request under the host's canonical estimator.
    pub peak_request_tokens: u64,
    /// How often the epoch generation changed between consecutive views.
    pub rotations: usize,
    /// Tool results that reported an error.
    pub tool_errors: usize,
    /// Each planted fact's survival, in [`FACTS`] order.
    pub facts: Vec<(FactId, Survival)>,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Why the run stopped early, if it did.
    pub error: Option<String>,
}

/// How often consecutive known generations differ.
pub fn rotations(generations: &[Option<u64>]) -> usize {
    let known: Vec<u64> = generations.iter().flatten().copied().collect();
    known.windows(2).filter(|w| w[0] != w[1]).count()
}

/// Grade every fact: the request that carries the final question (the first
/// agent request from `question_at` on) and what `recall` returned for each
/// fact's query afterwards.
pub fn grade_facts(exchanges: &[Exchange], question_at: Option<usize>) -> Vec<(FactId, Survival)> {
    let Some(at) = question_at else {
        return FACTS.iter().map(|f| (f.id, Survival::Lost)).collect();
    };
    let later = exchanges.get(at..).unwrap_or_default();
    let asked = later.iter().find(|e| !is_summary_request(&e.body));
    let text = asked.map(|e| request_text(&e.body)).unwrap_or_default();
    let recalls: Vec<(String, String)> = later
        .iter()
        .flat_map(|e| tool_exchanges(&e.body))
        .filter(|x| x.name == "recall")
        .filter_map(|x| {
            let query = x.input["query"].as_str()?.to_string();
            Some((query, x.result?))
        })
        .collect();
    FACTS
        .iter()
        .map(|f| {
            let result = recalls
                .iter()
                .rev()
                .find(|(q, _)| q == f.query)
                .map(|(_, r)| r.as_str());
            (f.id, grade(f, &text, result))
        })
        .collect()
}

/// The figures of a run.
pub fn figures(run: &RunRecord) -> RunFigures {
    let bodies: Vec<&Value> = run.exchanges.iter().map(|e| &e.body).collect();
    let ratios = prefix_ratios(run.profile, &bodies);
    let total = run
        .exchanges
        .iter()
        .map(|e| cost(&e.usage))
        .fold(Cost::default(), |acc, c| Cost {
            openai_style: acc.openai_style + c.openai_style,
            anthropic_style: acc.anthropic_style + c.anthropic_style,
        });
    let steps = run.agent_requests.max(1) as f64;
    RunFigures {
        requests: run.exchanges.len(),
        agent_requests: run.agent_requests,
        extra_model_calls: run.exchanges.len().saturating_sub(run.agent_requests),
        cost_per_step: Cost {
            openai_style: total.openai_style / steps,
            anthropic_style: total.anthropic_style / steps,
        },
        prefix_ratio_mean: mean(&ratios),
        prefix_ratio_p10: percentile(&ratios, 10.0),
        peak_request_tokens: run.request_tokens.iter().copied().max().unwrap_or(0),
        rotations: rotations(&run.generations),
        tool_errors: run.tool_errors,
        facts: grade_facts(&run.exchanges, run.question_at),
        seconds: run.seconds,
        error: run.error.clone(),
    }
}
