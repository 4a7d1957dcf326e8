//! Generated sessions for tests and benchmarks, shared with the host's tests.
//!
//! [`run`] plays a deterministic scripted session against a [`Host`]: user
//! turns (some with images), assistant tool-call rounds with results (some
//! failing, some with images), kernel notes (mutations, validations,
//! failures, re-ground), canonical state changes, notifications, extension
//! changes and optional `/compact`s. Before every model request it asks the
//! host for a view and persists the view's kernel-context entries, exactly as
//! the real host does, then appends the model's reply.
//!
//! [`IndexedSession`] is an in-memory session with an inverted index, so
//! search follows [`latch_engine_sdk::MemorySession`]'s rules at the cost a real full-text
//! index has, and large generated sessions stay fast.

use latch_engine_sdk::types::*;
use latch_engine_sdk::{Assembled, Engine, SessionView};

/// The session the generated scripts drive: the SDK's word-indexed
/// in-memory session, so search costs what a real full-text index costs.
pub use latch_engine_sdk::IndexedSession;

/// What the scripted session looks like.
#[derive(Clone, Debug)]
pub struct Script {
    /// Seed of the deterministic generator.
    pub seed: u64,
    /// User turns to play.
    pub turns: usize,
    /// Budget of every request.
    pub budget: ContextBudget,
    /// Turns before which the user runs `/compact`.
    pub compact_at: Vec<usize>,
    /// Turn at which the extension sources change.
    pub extension_change_at: Option<usize>,
    /// Most characters of one tool result.
    pub max_result_chars: usize,
    /// Stop at the first turn boundary with at least this many events.
    pub max_events: Option<usize>,
}

impl Script {
    /// A script of `turns` user turns with a small working memory (so that
    /// epochs rotate) in a 64k window.
    pub fn new(seed: u64, turns: usize) -> Self {
        Script {
            seed,
            turns,
            budget: ContextBudget {
                context_window_tokens: 64_000,
                reserve_tokens: 4_000,
                recent_tokens: 12_000,
                tools_tokens: 1_500,
                extension_tokens: 0,
            },
            compact_at: Vec::new(),
            extension_change_at: Some(turns / 2),
            max_result_chars: 1_600,
            max_events: None,
        }
    }

    /// A script of `turns` user turns with Latch's default budget: a 256k
    /// window, a 16k reserve, 64k of working memory and 8k of tool schemas.
    pub fn realistic(seed: u64, turns: usize) -> Self {
        Script {
            budget: ContextBudget {
                context_window_tokens: 256_000,
                reserve_tokens: 16_000,
                recent_tokens: 64_000,
                tools_tokens: 8_000,
                extension_tokens: 0,
            },
            ..Script::new(seed, turns)
        }
    }

    /// The request of a turn.
    pub fn request(&self, turn: usize, query: &str) -> ContextRequest {
        let extensions = if self.extension_change_at.is_some_and(|t| turn >= t) {
            vec![
                ExtensionSource {
                    name: "skills".into(),
                    text: "load_skill: rust-debugging, release-notes".into(),
                },
                ExtensionSource {
                    name: "mcp".into(),
                    text: "server tracker: issues, comments".into(),
                },
            ]
        } else {
            vec![ExtensionSource {
                name: "skills".into(),
                text: "load_skill: rust-debugging".into(),
            }]
        };
        let ext_tokens: u64 = extensions.iter().map(|e| 8 + e.text.len() as u64 / 2).sum();
        ContextRequest {
            system_prompt: "You are Latch, a careful coding agent. Use tools; keep changes small."
                .into(),
            session_context: SessionContext {
                workspace: "/workspace".into(),
                repository_instructions:
                    "Run `cargo test` before finishing. Never edit files under gen/.".into(),
                mode: "interactive".into(),
            },
            budget: ContextBudget {
                extension_tokens: ext_tokens,
                ..self.budget
            },
            query: query.to_string(),
            extensions,
        }
    }
}

/// The benchmarks' generated session: about `events` events of the
/// realistic script (Latch's default budget), played against a
/// ContinuityEngine, with the engine that lived through it.
#[derive(Clone)]
pub struct BenchSession {
    /// The script (its requests are the benchmark's requests).
    pub script: Script,
    /// The generated log.
    pub session: IndexedSession,
    /// The engine that materialized every view of it.
    pub engine: Assembled<crate::ContinuityEngine>,
}

/// Generate the [`BenchSession`] of about `events` events for `model`.
pub fn bench_session(events: usize, model: ModelProfile) -> BenchSession {
    let mut script = Script::realistic(1, usize::MAX);
    script.max_events = Some(events);
    script.extension_change_at = Some(events / 16);
    let mut host = EngineHost::new(crate::ContinuityEngine::new(model));
    let session = run(&script, &mut host);
    BenchSession {
        script,
        session,
        engine: host.0,
    }
}

/// The median time of `runs` cold materializations: each on a fresh
/// ContinuityEngine for `model`, over `session`.
pub fn cold_median(
    session: &IndexedSession,
    request: &ContextRequest,
    model: &ModelProfile,
    runs: usize,
) -> std::time::Duration {
    let mut times: Vec<std::time::Duration> = (0..runs.max(1))
        .map(|_| {
            let mut engine = crate::ContinuityEngine::new(model.clone());
            let t = std::time::Instant::now();
            let view = engine.materialize(session, request);
            let elapsed = t.elapsed();
            if let Err(e) = view {
                panic!("cold materialize failed: {e:?}");
            }
            elapsed
        })
        .collect();
    times.sort_unstable();
    times[times.len() / 2]
}

/// One warm benchmark step: append user turn `n` (a question about the
/// scheduler) with one tool exchange to `session`; returns its request.
/// Answer it with [`bench_reply`].
pub fn bench_turn(script: &Script, session: &mut IndexedSession, n: u64) -> ContextRequest {
    let text = format!("step {n}: check the scheduler timeout handling in src/sched.rs");
    session.push(EventBody::UserMessage(vec![Part::Text(text.clone())]));
    session.push(EventBody::AssistantMessage(vec![Part::ToolCall(
        ToolCall {
            id: format!("bench_{n}"),
            name: "read_file".into(),
            arguments_json: "{\"path\":\"src/sched.rs\"}".into(),
        },
    )]));
    session.push(EventBody::ToolResult(ToolResult {
        call_id: format!("bench_{n}"),
        name: "read_file".into(),
        content: "fn timeout(&self) -> Duration { self.deadline - self.now }\n".repeat(8),
        is_error: false,
        images: vec![],
    }));
    script.request(usize::MAX, &text)
}

/// Persist a benchmark step's view entries and the model's reply.
pub fn bench_reply(session: &mut IndexedSession, view: &ContextView) {
    session.persist(&view.persist);
    session.push(EventBody::AssistantMessage(vec![Part::Text("ok".into())]));
}

/// The host side of a scripted session.
pub trait Host {
    /// Materialize the view for a request; its `persist` entries are appended
    /// to the log before the model's reply.
    fn materialize(&mut self, session: &IndexedSession, request: &ContextRequest) -> ContextView;
    /// `/compact`: the entries to persist after the `manual-compact` event.
    fn manual_compact(&mut self, session: &IndexedSession) -> Vec<KernelContextEntry>;
}

/// A [`Host`] that drives one engine and checks nothing; views are
/// assembled whole as the host assembles them.
pub struct EngineHost<E: Engine>(pub Assembled<E>);

impl<E: Engine> EngineHost<E> {
    /// Drive `engine`, an instance that has returned no view yet.
    pub fn new(engine: E) -> Self {
        EngineHost(Assembled::new(engine))
    }
}

impl<E: Engine> Host for EngineHost<E> {
    fn materialize(&mut self, session: &IndexedSession, request: &ContextRequest) -> ContextView {
        match self.0.materialize(session, request) {
            Ok(v) => v,
            Err(e) => panic!("materialize failed: {e:?}"),
        }
    }
    fn manual_compact(&mut self, session: &IndexedSession) -> Vec<KernelContextEntry> {
        match self.0.manual_compact(session) {
            Ok(v) => v,
            Err(e) => panic!("manual compact failed: {e:?}"),
        }
    }
}

/// The exact early diagnostic the script plants in turn 2.
pub const EARLY_DIAGNOSTIC: &str =
    "error[E0425]: cannot find value `frobnicate_widget` in this scope --> src/widget.rs:42:9";

/// A tiny deterministic generator (xorshift64*).
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const VERBS: &[&str] = &[
    "fix", "refactor", "explain", "test", "speed up", "document", "review", "port",
];
const NOUNS: &[&str] = &[
    "parser",
    "lexer",
    "cache",
    "scheduler",
    "config loader",
    "http client",
    "widget",
    "renderer",
    "index",
];
const MODULES: &[&str] = &[
    "parser", "lexer", "cache", "sched", "config", "http", "widget", "render", "index",
];
const WORDS: &[&str] = &[
    "fn", "let", "match", "struct", "impl", "return", "value", "error", "buffer", "token",
    "offset", "line", "column", "state", "result", "option", "vector", "iterator", "borrow",
    "lifetime", "trait", "module",
];

fn filler_between(rng: &mut Rng, base: usize, spread: u64) -> String {
    let n = base + rng.below(spread) as usize;
    filler(rng, n)
}

fn filler(rng: &mut Rng, chars: usize) -> String {
    let mut s = String::with_capacity(chars + 16);
    while s.len() < chars {
        s.push_str(rng.pick(WORDS));
        s.push(if rng.below(9) == 0 { '\n' } else { ' ' });
    }
    s
}

fn image(rng: &mut Rng, known: bool) -> MediaRef {
    let n = rng.next();
    MediaRef {
        sha256: format!("{n:016x}{n:016x}{n:016x}{n:016x}"),
        mime_type: "image/png".into(),
        byte_len: 40_000 + rng.below(200_000),
        width: known.then_some(640 + rng.below(1400) as u32),
        height: known.then_some(480 + rng.below(900) as u32),
    }
}

fn entry(text: String, seq: u64) -> StateEntry {
    StateEntry { text, seq }
}

/// Play `script` against `host`; returns the final session.
pub fn run(script: &Script, host: &mut dyn Host) -> IndexedSession {
    let mut s = IndexedSession::new(
        "generated",
        ModelProfile::with_defaults("anthropic", "test-model"),
    );
    let mut rng = Rng(script.seed.max(1));
    let mut call = 0u64;
    for turn in 0..script.turns {
        if script
            .max_events
            .is_some_and(|m| s.memory().events.len() >= m)
        {
            break;
        }
        if script.compact_at.contains(&turn) {
            s.push(EventBody::ManualCompact);
            let entries = host.manual_compact(&s);
            s.persist(&entries);
        }
        change_state(&mut s, &mut rng, turn);
        if turn % 13 == 12 {
            s.push(EventBody::Notification(format!(
                "Agent report (reviewer): {} looks fine; {}",
                rng.pick(NOUNS),
                filler(&mut rng, 120)
            )));
        }
        let module = rng.pick(MODULES);
        let text = format!(
            "turn {turn}: please {} the {} in src/{module}.rs — {}",
            rng.pick(VERBS),
            rng.pick(NOUNS),
            filler_between(&mut rng, 60, 240)
        );
        let mut parts = vec![Part::Text(text.clone())];
        if turn % 7 == 3 {
            parts.push(Part::Image(image(&mut rng, turn % 21 != 10)));
        }
        s.push(EventBody::UserMessage(parts));
        let request = script.request(turn, &text);
        let rounds = if turn == 2 { 1 } else { rng.below(4) };
        for round in 0..rounds {
            let view = host.materialize(&s, &request);
            s.persist(&view.persist);
            let calls = 1 + u64::from(rng.below(4) == 0);
            let mut assistant = Vec::new();
            if rng.below(2) == 0 {
                assistant.push(Part::Text(format!(
                    "Looking at src/{module}.rs. {}",
                    filler(&mut rng, 80)
                )));
            }
            let mut ids = Vec::new();
            for _ in 0..calls {
                call += 1;
                let tool = ["read_file", "edit_file", "shell", "cargo_test", "search"]
                    [rng.below(5) as usize];
                let id = format!("call_{call}");
                assistant.push(Part::ToolCall(ToolCall {
                    id: id.clone(),
                    name: tool.into(),
                    arguments_json: format!(
                        "{{\"path\":\"src/{module}.rs\",\"n\":{}}}",
                        rng.below(500)
                    ),
                }));
                ids.push((id, tool));
            }
            s.push(EventBody::AssistantMessage(assistant));
            for (id, tool) in ids {
                let planted = turn == 2 && round == 0;
                let content = if planted {
                    format!("{EARLY_DIAGNOSTIC}\n{}", filler(&mut rng, 200))
                } else {
                    filler_between(&mut rng, 80, script.max_result_chars as u64)
                };
                let is_error = planted || rng.below(6) == 0;
                let images = if rng.below(11) == 0 {
                    vec![image(&mut rng, true)]
                } else {
                    vec![]
                };
                s.push(EventBody::ToolResult(ToolResult {
                    call_id: id,
                    name: tool.into(),
                    content,
                    is_error,
                    images,
                }));
                let files = vec![format!("src/{module}.rs")];
                match tool {
                    "edit_file" => {
                        s.push(EventBody::Kernel(KernelNote {
                            kind: KernelNoteKind::Mutation,
                            summary: format!("edited src/{module}.rs"),
                            files,
                        }));
                    }
                    "cargo_test" => {
                        let kind = if is_error {
                            KernelNoteKind::ValidationFailed
                        } else {
                            KernelNoteKind::ValidationPassed
                        };
                        s.push(EventBody::Kernel(KernelNote {
                            kind,
                            summary: "cargo test".into(),
                            files,
                        }));
                    }
                    _ if is_error => {
                        s.push(EventBody::Kernel(KernelNote {
                            kind: KernelNoteKind::Failure,
                            summary: format!("{tool} failed"),
                            files,
                        }));
                    }
                    _ => {}
                }
            }
        }
        if turn % 40 == 39 {
            s.push(EventBody::Kernel(KernelNote {
                kind: KernelNoteKind::Reground,
                summary: format!("the same failure repeated three times in src/{module}.rs"),
                files: vec![],
            }));
        }
        let view = host.materialize(&s, &request);
        s.persist(&view.persist);
        s.push(EventBody::AssistantMessage(vec![Part::Text(format!(
            "Done with turn {turn}. {}",
            filler_between(&mut rng, 40, 200)
        ))]));
    }
    s
}

fn change_state(s: &mut IndexedSession, rng: &mut Rng, turn: usize) {
    let seq = s.latest_seq() + 1;
    let st = s.state_mut();
    let before = st.clone();
    match turn {
        0 => {
            st.goal = Some(entry(
                "make the widget pipeline pass `cargo test` without regressions".into(),
                seq,
            ))
        }
        1 => st
            .constraints
            .push(entry("never edit generated files under gen/".into(), seq)),
        3 => st.decisions.push(entry(
            "keep the parser recursive-descent; no parser generator".into(),
            seq,
        )),
        4 => st.hypotheses.push(Hypothesis {
            text: "the cache races under concurrent load".into(),
            seq,
            status: HypothesisStatus::Active,
            reason: None,
        }),
        6 => {
            if let Some(h) = st.hypotheses.first_mut() {
                h.status = HypothesisStatus::Rejected;
                h.reason = Some("the cache is only touched from one thread".into());
                h.seq = seq;
            }
            st.validations.push(entry("cargo test".into(), seq));
        }
        _ if turn % 9 == 8 => {
            let n = rng.below(1000);
            match (turn / 9) % 4 {
                0 => st.notes.push(entry(
                    format!("note {n}: the {} is slow on big inputs", rng.pick(NOUNS)),
                    seq,
                )),
                1 => st.decisions.push(entry(
                    format!("decision {n}: keep {} behind a trait", rng.pick(NOUNS)),
                    seq,
                )),
                2 => {
                    st.evidence = vec![Evidence {
                        requirement: "cargo test".into(),
                        command: "cargo test --workspace".into(),
                        outcome: if n.is_multiple_of(3) {
                            ValidationOutcome::Failed
                        } else {
                            ValidationOutcome::Passed
                        },
                        generation: turn as u64,
                        stale: n.is_multiple_of(2),
                        seq,
                    }];
                }
                _ => st.files.push(FileState {
                    path: format!("src/{}.rs", rng.pick(MODULES)),
                    sha256: Some(format!("{n:064x}")),
                    size: 1000 + n,
                    seq,
                }),
            }
        }
        _ => {}
    }
    if *st != before {
        st.revision += 1;
        let revision = st.revision;
        s.push(EventBody::Kernel(KernelNote {
            kind: KernelNoteKind::StateUpdate,
            summary: format!("task state revision {revision}"),
            files: vec![],
        }));
    }
}
