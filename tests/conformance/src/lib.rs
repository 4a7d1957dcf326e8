//! `latch-conformance`: the suite any Latch context engine can be held to.
//!
//! The suite talks to the engine under test through two small traits:
//! [`Candidate`] (what is being checked: its name, its declared world, and a
//! way to make fresh, configured instances) and [`Instance`] (one live engine:
//! the contract's calls, each failing with a typed [`Failure`]). The host
//! implements them over its sandboxed component runtime, so
//! `latch engine check` runs exactly this suite; tests implement them over
//! natively linked engines as well.
//!
//! The suite simulates the host: it plays generated sessions, asks for a view
//! before every model request, persists the view's kernel-context entries into
//! the session as the agent loop does, and checks every view with the same
//! rules the host applies ([`latch_engine_sdk::validate`]) under the canonical
//! estimator.
//!
//! Cases, in order (each a named pass / fail / skip line with evidence):
//!
//! | case | required | what it holds the engine to |
//! | --- | --- | --- |
//! | `contract` | yes | exports `latch:context/engine@0.1.x`; imports nothing beyond the contract and the WASI interfaces the host grants ([`GRANTED_IMPORTS`]) |
//! | `budget` | yes | every view fits `window - reserve` under the canonical estimator, over a library of sessions and several budgets down to a tiny one |
//! | `protocol` | yes | whole units, every result after its call, no orphan, kernel-context revisions monotone, persisted entries well formed |
//! | `provenance` | yes | the host's run-time rules ([`latch_engine_sdk::validate::ViewChecker`]): `system` is the request's prompt; the session-context message is canonical; every conversation message is the canonical rendering (or the elided form) of the events of this session it cites, cited events rising; engine text only as kernel context matching what was persisted or is listed to persist; persisted entries rise above the log, keep the generation and fit the size limits |
//! | `determinism` | yes | same log and request give the same bytes: repeated calls, a fresh instance, and a fresh instance at every resume point |
//! | `epochs` | no | for engines reporting an epoch generation: within a generation each view extends the previous one; a new generation says why |
//! | `recall` | yes | newest matches selected, chronological order, nothing outside the session (foreign and tombstoned events) |
//! | `config` | yes | unknown keys refused with `unknown-key`, non-objects with `malformed`, a refusal changes nothing, `config` round-trips |
//! | `sandbox` | yes | odd but legal sessions and calls never trap, time out, run out of memory or panic |
//! | `performance` | yes | materialize on a 10k-event session within the deadline; p50 and the memory high-water mark |

mod cases;
pub mod compare;
pub mod sessions;

use latch_engine_sdk::SessionView;
use latch_engine_sdk::types::*;
use serde::Serialize;
use std::time::Instant;

/// How an engine call failed, as the suite sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// The call ran past its deadline and was stopped.
    Timeout(String),
    /// The instance tried to grow its memory past its cap.
    OutOfMemory(String),
    /// The engine panicked.
    Panic(String),
    /// The engine trapped for another reason.
    Trap(String),
    /// An instance could not be created.
    Instantiate(String),
    /// The engine returned a typed error of its own.
    Engine(EngineError),
    /// The engine refused a configuration.
    Config(ConfigError),
}

impl Failure {
    /// A short, stable name: `timeout`, `out-of-memory`, `panic`, `trap`,
    /// `instantiate`, `engine-error`, `config-error`.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Timeout(_) => "timeout",
            Failure::OutOfMemory(_) => "out-of-memory",
            Failure::Panic(_) => "panic",
            Failure::Trap(_) => "trap",
            Failure::Instantiate(_) => "instantiate",
            Failure::Engine(_) => "engine-error",
            Failure::Config(_) => "config-error",
        }
    }

    /// True when the sandbox ended the call (the engine did not answer).
    pub fn is_sandbox(&self) -> bool {
        !matches!(self, Failure::Engine(_) | Failure::Config(_))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout(m)
            | Failure::OutOfMemory(m)
            | Failure::Panic(m)
            | Failure::Trap(m)
            | Failure::Instantiate(m) => write!(f, "{}: {m}", self.kind()),
            Failure::Engine(e) => write!(f, "engine-error: {}", engine_error_text(e)),
            Failure::Config(e) => write!(f, "config-error: {}", config_error_text(e)),
        }
    }
}

/// `variant(message)` of an engine error.
pub fn engine_error_text(e: &EngineError) -> String {
    match e {
        EngineError::InvalidRequest(m) => format!("invalid-request({m})"),
        EngineError::BudgetExceeded(m) => format!("budget-exceeded({m})"),
        EngineError::Session(m) => format!("session({m})"),
        EngineError::Unsupported(m) => format!("unsupported({m})"),
        EngineError::Internal(m) => format!("internal({m})"),
    }
}

/// `variant(message)` of a config error.
pub fn config_error_text(e: &ConfigError) -> String {
    match e {
        ConfigError::UnknownKey(k) => format!("unknown-key({k})"),
        ConfigError::InvalidValue((k, r)) => format!("invalid-value({k}: {r})"),
        ConfigError::Malformed(m) => format!("malformed({m})"),
    }
}

/// The world a component declares.
#[derive(Clone, Debug, Default, Serialize)]
pub struct World {
    /// Every export name, e.g. `latch:context/engine@0.1.0`.
    pub exports: Vec<String>,
    /// Every import name, e.g. `wasi:io/streams@0.2.6`.
    pub imports: Vec<String>,
}

/// The engine under test.
pub trait Candidate {
    /// What is being checked, e.g. `builtin:continuity` or a path.
    fn name(&self) -> String;
    /// The component's declared world; `None` for an engine linked natively
    /// (the `contract` case is then skipped).
    fn world(&self) -> Option<World>;
    /// A fresh instance for `model`, configured as the check was asked to
    /// configure it.
    fn fresh(&self, model: &ModelProfile) -> Result<Box<dyn Instance>, Failure>;
}

/// One live engine instance.
pub trait Instance {
    /// Materialize the whole view for a request, a continuation restored as
    /// the host restores it (unchecked: the suite checks it).
    fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, Failure>;
    /// The current configuration as a JSON object.
    fn config(&mut self) -> Result<String, Failure>;
    /// Apply configuration keys.
    fn set_config(&mut self, json: &str) -> Result<(), Failure>;
    /// `/compact`: the entries starting a fresh epoch.
    fn manual_compact(
        &mut self,
        session: &dyn SessionView,
    ) -> Result<Vec<KernelContextEntry>, Failure>;
    /// Recall original events for a query.
    fn recall(
        &mut self,
        session: &dyn SessionView,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Event>, Failure>;
    /// The largest linear memory the instance was granted, when known.
    fn peak_memory_bytes(&self) -> Option<u64>;
}

/// How the suite runs.
#[derive(Clone, Debug, Serialize)]
pub struct Options {
    /// The per-call deadline the candidate runs under, in milliseconds (the
    /// performance envelope is held to it).
    pub deadline_ms: u64,
    /// Events of the performance session.
    pub perf_events: usize,
    /// Warm requests timed by the performance case.
    pub perf_requests: usize,
    /// The engine configuration the candidate applies, for the report.
    pub config_json: Option<String>,
    /// The seed of the run's [`sessions::Persona`]; `None` draws one from
    /// the clock (the report names the one used, to replay a failure).
    pub seed: Option<u64>,
    /// The system prompt requests carry (the host passes its real one).
    pub system_prompt: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            deadline_ms: 5_000,
            perf_events: 10_000,
            perf_requests: 5,
            config_json: None,
            seed: None,
            system_prompt: None,
        }
    }
}

/// The outcome of one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The engine meets the case.
    Pass,
    /// The engine breaks the case; the evidence says how.
    Fail,
    /// The case did not apply (or could not run); the summary says why.
    Skip,
}

/// One case's line of the report.
#[derive(Clone, Debug, Serialize)]
pub struct CaseReport {
    /// Stable case name (`budget`, `protocol`, ...).
    pub case: String,
    /// What the case holds the engine to.
    pub title: String,
    /// A failed required case fails the check.
    pub required: bool,
    /// Pass, fail or skip.
    pub status: Status,
    /// Wall time of the case in milliseconds.
    pub ms: u64,
    /// One line: figures on a pass, the first violation on a failure, the
    /// reason on a skip.
    pub summary: String,
    /// The failure's evidence, one item a line (empty on a pass).
    pub evidence: Vec<String>,
    /// The kind of the engine failure that failed the case, if any
    /// (`timeout`, `out-of-memory`, `panic`, ...).
    pub failure: Option<String>,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The candidate's name.
    pub engine: String,
    /// True when every required case passed.
    pub passed: bool,
    /// The options the suite ran with.
    pub options: Options,
    /// Every case in order.
    pub cases: Vec<CaseReport>,
    /// Wall time of the whole suite in milliseconds.
    pub ms: u64,
}

impl Report {
    /// The report line of a case by name.
    pub fn case(&self, name: &str) -> Option<&CaseReport> {
        self.cases.iter().find(|c| c.case == name)
    }

    /// Names of the cases that failed.
    pub fn failed(&self) -> Vec<&str> {
        self.cases
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.case.as_str())
            .collect()
    }

    /// The human-readable table: case, result, time, summary, and evidence
    /// under a failed case.
    pub fn table(&self) -> String {
        self.table_with(str::to_string)
    }

    /// [`Report::table`] with every engine-influenced string (the engine's
    /// name, summaries, evidence) passed through `clean` first, e.g. to
    /// escape control characters before a terminal sees them.
    pub fn table_with(&self, clean: impl Fn(&str) -> String) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "engine check: {} (sessions drawn from seed {})\n",
            clean(&self.engine),
            self.options.seed.unwrap_or(0)
        ));
        out.push_str(&format!(
            "{:<12} {:<5} {:>8}  {}\n",
            "case", "result", "time", "detail"
        ));
        for c in &self.cases {
            let result = match (c.status, c.required) {
                (Status::Pass, _) => "pass",
                (Status::Fail, true) => "FAIL",
                (Status::Fail, false) => "fail",
                (Status::Skip, _) => "skip",
            };
            out.push_str(&format!(
                "{:<12} {:<6} {:>6}ms  {}\n",
                c.case,
                result,
                c.ms,
                clean(&c.summary)
            ));
            for e in &c.evidence {
                out.push_str(&format!("{:<29}- {}\n", "", clean(e)));
            }
        }
        let failed = self.failed();
        out.push_str(&format!(
            "{}: {} in {} ms\n",
            clean(&self.engine),
            if self.passed {
                "every required case passed".to_string()
            } else {
                format!("FAILED ({})", failed.join(", "))
            },
            self.ms
        ));
        out
    }
}

/// The cases, in the order they run.
pub const CASES: &[(&str, &str, bool)] = &[
    (
        "contract",
        "implements latch:context@0.1.x; imports only what the host grants",
        true,
    ),
    (
        "budget",
        "every view obeys the hard budget under the canonical estimator",
        true,
    ),
    (
        "protocol",
        "whole units, results after calls, no orphans, monotone kernel revisions",
        true,
    ),
    (
        "provenance",
        "system prompt, session context, every message the rendering of the events it cites, kernel context bounded",
        true,
    ),
    (
        "determinism",
        "same log and request give the same bytes, warm or fresh",
        true,
    ),
    (
        "epochs",
        "within a generation each view extends the previous one",
        false,
    ),
    (
        "recall",
        "newest matches, chronological order, nothing outside the session",
        true,
    ),
    (
        "config",
        "unknown keys refused with a typed error; config round-trips",
        true,
    ),
    (
        "sandbox",
        "odd but legal input never traps, times out, exhausts memory or panics",
        true,
    ),
    (
        "performance",
        "materialize on a 10k-event session within the deadline",
        true,
    ),
];

/// What a case concluded.
pub(crate) enum Outcome {
    Pass(String),
    Fail {
        summary: String,
        evidence: Vec<String>,
        failure: Option<Failure>,
    },
    Skip(String),
}

impl Outcome {
    pub(crate) fn fail(summary: impl Into<String>, evidence: Vec<String>) -> Outcome {
        Outcome::Fail {
            summary: summary.into(),
            evidence,
            failure: None,
        }
    }

    /// A case ended by an engine failure during `during`.
    pub(crate) fn engine(during: impl Into<String>, failure: Failure) -> Outcome {
        let during = during.into();
        Outcome::Fail {
            summary: format!("{} during {during}", failure.kind()),
            evidence: vec![format!("{during}: {failure}")],
            failure: Some(failure),
        }
    }
}

/// Run every case against `candidate`.
pub fn run(candidate: &dyn Candidate, options: &Options) -> Report {
    let started = Instant::now();
    let seed = options.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    sessions::set_persona(sessions::Persona::draw(
        seed,
        options.system_prompt.as_deref(),
    ));
    let mut options = options.clone();
    options.seed = Some(seed);
    let options = &options;
    let mut cases = Vec::new();
    // After a timeout, later cases that would call materialize again are not
    // run: each would only wait out the deadline once more.
    let mut stalled: Option<String> = None;
    for (name, title, required) in CASES {
        let t = Instant::now();
        let needs_materialize = *name != "contract" && *name != "config";
        let outcome = match (&stalled, needs_materialize) {
            (Some(first), true) => Outcome::Skip(format!(
                "not run: materialize already timed out in `{first}`"
            )),
            _ => cases::run_case(name, candidate, options),
        };
        let ms = t.elapsed().as_millis() as u64;
        let report = match outcome {
            Outcome::Pass(summary) => CaseReport {
                case: name.to_string(),
                title: title.to_string(),
                required: *required,
                status: Status::Pass,
                ms,
                summary,
                evidence: vec![],
                failure: None,
            },
            Outcome::Skip(summary) => CaseReport {
                case: name.to_string(),
                title: title.to_string(),
                required: *required,
                status: Status::Skip,
                ms,
                summary,
                evidence: vec![],
                failure: None,
            },
            Outcome::Fail {
                summary,
                evidence,
                failure,
            } => {
                if matches!(failure, Some(Failure::Timeout(_))) && stalled.is_none() {
                    stalled = Some(name.to_string());
                }
                CaseReport {
                    case: name.to_string(),
                    title: title.to_string(),
                    required: *required,
                    status: Status::Fail,
                    ms,
                    summary,
                    evidence,
                    failure: failure.map(|f| f.kind().to_string()),
                }
            }
        };
        cases.push(report);
    }
    // A skipped required case (other than for not applying) cannot vouch for
    // the engine either.
    let passed = cases.iter().all(|c| {
        !c.required
            || c.status == Status::Pass
            || (c.status == Status::Skip && !c.summary.starts_with("not run"))
    });
    Report {
        engine: candidate.name(),
        passed,
        options: options.clone(),
        cases,
        ms: started.elapsed().as_millis() as u64,
    }
}

/// Interfaces an engine component may import: the contract's own
/// (`latch:context/...@0.1.x`) and the WASI interfaces a Rust `wasm32-wasip2`
/// component imports whose capabilities the host grants in a sandboxed form
/// (`wasi:...@0.2.x`): captured stdio, an empty environment, exit, streams,
/// deterministic clocks and seeded randomness.
///
/// Anything else fails the `contract` case with the import named. The host
/// links the rest of WASI 0.2 but grants no preopened directory and no
/// network, so an engine importing `wasi:filesystem/*` or `wasi:sockets/*`
/// asks for capabilities it will never get: a red flag for an engine that is
/// meant to be pure.
pub const GRANTED_IMPORTS: &[&str] = &[
    "latch:context/types",
    "latch:context/session",
    "latch:context/estimator",
    "wasi:io/poll",
    "wasi:io/error",
    "wasi:io/streams",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
];

/// Why an import is not granted, or `None` when it is.
pub fn import_verdict(import: &str) -> Option<String> {
    let (name, version) = match import.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (import, None),
    };
    if !GRANTED_IMPORTS.contains(&name) {
        let why = if name.starts_with("wasi:sockets/") {
            "the sandbox grants no network"
        } else if name.starts_with("wasi:filesystem/") {
            "the sandbox grants no file system (no preopened directory)"
        } else if name.starts_with("wasi:http/") {
            "the sandbox grants no HTTP"
        } else {
            "the host does not grant it"
        };
        return Some(format!("imports `{import}`: {why}"));
    }
    let want = if name.starts_with("latch:") {
        "0.1."
    } else {
        "0.2."
    };
    match version {
        Some(v) if v.starts_with(want) => None,
        Some(v) => Some(format!(
            "imports `{import}`: version {v} is not the granted {want}x"
        )),
        None => Some(format!("imports `{import}` without a version")),
    }
}
