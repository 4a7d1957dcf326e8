//! The replay's report: what the recorded session sent, then one column
//! per engine with what it would have sent and kept, as a text table or
//! JSON, and each request's figures for whoever wants them.

use super::kept::{Kept, Reuse, Standing, Standings};
use super::pricing::Priced;
use serde::Serialize;

/// The sentence every replay prints: the model's answers are the recorded
/// ones, whatever each engine would have shown it.
pub const APPROXIMATION: &str = "The model's recorded responses are replayed as they were; \
each engine's view is what it would have sent, but the model would have seen a different view, \
so later turns are an approximation.";

/// The sentence a replay of a redacted source adds.
pub const REDACTED_NOTE: &str = "Redacted: output is placeholders, so `recall` cannot find \
it by its words and re-referenced results it would recall count as lost.";

/// What became of one request of the session for one engine.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// The engine returned a view the host accepts.
    Viewed {
        /// Its price.
        priced: Priced,
        /// Its price in dollars, where the model is priced.
        dollars: Option<f64>,
        /// The epoch generation it reported.
        generation: Option<u64>,
        /// What it kept.
        kept: Kept,
    },
    /// The host's view checks refused the view.
    Refused {
        /// The refusal, as the host words it.
        error: String,
    },
    /// The engine failed (an error of its own, a trap, a timeout).
    Failed {
        /// The failure.
        error: String,
    },
}

/// A model request an engine made of its own (a summary).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ExtraRequest {
    /// Its price.
    pub priced: Priced,
    /// In dollars, where the model is priced.
    pub dollars: Option<f64>,
}

/// One recorded request, replayed through one engine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayedRequest {
    /// The session (index into [`ReplayReport::sessions`]).
    pub session: usize,
    /// The request's index in its session.
    pub request: usize,
    /// What the engine did.
    pub outcome: Outcome,
    /// Requests the engine made of its own while building this view.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<ExtraRequest>,
}

/// Where one re-referenced result stood for one engine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RereferenceOutcome {
    /// The session (index into [`ReplayReport::sessions`]).
    pub session: usize,
    /// The request whose response came back to the result.
    pub request: usize,
    /// The result's sequence number in the recorded log.
    pub result_seq: u64,
    /// How the model came back to it.
    pub how: Reuse,
    /// Where it stood.
    pub standing: Standing,
}

/// One engine's replay of every session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineReplay {
    /// The engine as given.
    pub engine: String,
    /// Every request, in session order.
    pub requests: Vec<ReplayedRequest>,
    /// Every re-reference, in order.
    pub rereferences: Vec<RereferenceOutcome>,
    /// Wall-clock seconds of the replay (engine calls and the host's
    /// checks).
    pub seconds: f64,
}

/// What the provider reported for a recorded request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProviderReport {
    /// Input tokens, cached or not.
    pub input_tokens: Option<u64>,
    /// Of those, read from the prompt cache.
    pub cache_read_tokens: Option<u64>,
    /// Written to the prompt cache.
    pub cache_creation_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
}

impl ProviderReport {
    /// Uncached + 0.1 × cache reads, from the provider's counts.
    pub fn cost_units(&self) -> Option<f64> {
        let input = self.input_tokens?;
        let read = self.cache_read_tokens.unwrap_or(0);
        Some(input.saturating_sub(read) as f64 + 0.1 * read as f64)
    }
}

/// One request as it was recorded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecordedRequest {
    /// The session (index into [`ReplayReport::sessions`]).
    pub session: usize,
    /// The request's index in its session.
    pub request: usize,
    /// The engine that served it.
    pub engine: String,
    /// The recorded engine's own estimate of the request (its report's
    /// total), when recorded.
    pub estimated_tokens: Option<u64>,
    /// What the provider reported, when it answered.
    pub provider: Option<ProviderReport>,
    /// What it cost in dollars by the provider's counts, where priced.
    pub dollars: Option<f64>,
}

/// One replayed session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionLine {
    /// Its id.
    pub id: String,
    /// Its parent, for a child agent.
    pub parent: Option<String>,
    /// The model it talked to.
    pub model: String,
    /// Its recorded model requests.
    pub requests: usize,
    /// The context window of its first request.
    pub window_tokens: u64,
    /// The reserve of its first request.
    pub reserve_tokens: u64,
}

/// The whole replay.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayReport {
    /// What was replayed (`store PATH` or `trace FILE`).
    pub source: String,
    /// True when the source was redacted (file contents and command output
    /// replaced by same-length placeholders).
    pub redacted: bool,
    /// [`APPROXIMATION`].
    pub note: &'static str,
    /// The sessions, the root first.
    pub sessions: Vec<SessionLine>,
    /// Every recorded request, in the engines' order.
    pub recorded: Vec<RecordedRequest>,
    /// Re-references found in the recorded log.
    pub rereferences: usize,
    /// One replay per engine, in the order given.
    pub engines: Vec<EngineReplay>,
}

/// An engine's replay summed up.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EngineSummary {
    /// Requests with a view.
    pub viewed: usize,
    /// Views the host refused.
    pub refused: usize,
    /// Requests the engine failed.
    pub failed: usize,
    /// Model requests the engine made of its own.
    pub extra_calls: usize,
    /// Mean canonical tokens of a viewed request.
    pub mean_tokens: f64,
    /// The largest request (extra requests included).
    pub peak_tokens: u64,
    /// Cached share of all tokens sent (extra requests included).
    pub cached_share: f64,
    /// Uncached tokens per recorded request (extra requests included).
    pub uncached_per_request: f64,
    /// Cost units per recorded request (extra requests included).
    pub cost_units_per_request: f64,
    /// Dollars in all, when every request is priced.
    pub dollars: Option<f64>,
    /// How often the epoch generation changed between views.
    pub rotations: usize,
    /// What the views kept, summed over requests.
    pub kept: Kept,
    /// Where the re-referenced results stood.
    pub standings: Standings,
    /// Milliseconds per request.
    pub ms_per_request: f64,
}

impl EngineReplay {
    /// The replay summed up.
    pub fn summary(&self) -> EngineSummary {
        let mut s = EngineSummary::default();
        let (mut tokens, mut prefix, mut uncached, mut units) = (0u64, 0u64, 0u64, 0f64);
        let mut viewed_tokens = 0u64;
        let mut dollars = Some(0.0);
        let mut last_generation: Option<(usize, u64)> = None;
        let mut add = |p: &Priced, d: Option<f64>, s: &mut EngineSummary| {
            tokens += p.tokens;
            prefix += p.prefix_tokens;
            uncached += p.uncached();
            units += p.cost_units();
            s.peak_tokens = s.peak_tokens.max(p.tokens);
            dollars = dollars.zip(d).map(|(a, b)| a + b);
        };
        for r in &self.requests {
            s.extra_calls += r.extra.len();
            for x in &r.extra {
                add(&x.priced, x.dollars, &mut s);
            }
            match &r.outcome {
                Outcome::Viewed {
                    priced,
                    dollars: d,
                    generation,
                    kept,
                } => {
                    s.viewed += 1;
                    viewed_tokens += priced.tokens;
                    add(priced, *d, &mut s);
                    s.kept.add(kept);
                    if let Some(g) = generation {
                        if matches!(last_generation, Some((session, last)) if session == r.session && last != *g)
                        {
                            s.rotations += 1;
                        }
                        last_generation = Some((r.session, *g));
                    }
                }
                Outcome::Refused { .. } => s.refused += 1,
                Outcome::Failed { .. } => s.failed += 1,
            }
        }
        let n = self.requests.len().max(1) as f64;
        s.mean_tokens = viewed_tokens as f64 / s.viewed.max(1) as f64;
        s.cached_share = if tokens == 0 {
            0.0
        } else {
            prefix as f64 / tokens as f64
        };
        s.uncached_per_request = uncached as f64 / n;
        s.cost_units_per_request = units / n;
        s.dollars = dollars;
        for r in &self.rereferences {
            s.standings.add(r.standing);
        }
        s.ms_per_request = self.seconds * 1000.0 / n;
        s
    }
}
