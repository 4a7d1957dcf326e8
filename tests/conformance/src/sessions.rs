//! The suite's library of generated sessions and budgets.
//!
//! A [`Scenario`] is a script of steps: events to append, canonical state
//! changes, `/compact`, foreign sequence numbers (other sessions' events in a
//! shared store) and model requests. The suite plays it against an engine as
//! the host would: at every request it asks for a view and appends the view's
//! kernel-context entries to the session before anything else happens.
//!
//! Every generator is deterministic (a fixed-seed xorshift), so a failure
//! names a scenario, a budget and a request index that reproduce exactly.
//!
//! What an engine could use to tell a check from a real session — session
//! ids, workspace, mode, model, clock, system prompt, repository
//! instructions, extension sources, tool-schema tokens — comes from a
//! [`Persona`] drawn afresh for every run from real time (its seed is in the
//! report, and [`crate::Options::seed`] replays it): sessions look like real
//! Latch sessions, so an engine that behaves only while checked is checked
//! behaving as it does in a session.

use latch_engine_sdk::types::*;
use latch_engine_sdk::{IndexedSession, estimate};

/// A generated session: the SDK's [`IndexedSession`], whose word index gives
/// search the cost a real full-text index has.
pub type GenSession = IndexedSession;

/// One step of a scenario.
#[derive(Clone, Debug)]
pub enum Step {
    /// Append an event.
    Event(EventBody),
    /// The kernel's canonical state changes (a state-update note is appended).
    State(Box<CanonicalState>),
    /// The user runs `/compact`: a `manual-compact` event, then the engine's
    /// entries are persisted.
    Compact,
    /// Other sessions append this many events.
    Foreign(u64),
    /// A model request with this recall query.
    Request(String),
}

/// A generated session.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Stable name used in evidence.
    pub name: &'static str,
    /// The model (and so the estimator profile the views are checked under).
    pub model: ModelProfile,
    /// The script.
    pub steps: Vec<Step>,
}

impl Scenario {
    /// Model requests in the script.
    pub fn requests(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Request(_)))
            .count()
    }
}

/// A named budget.
#[derive(Clone, Debug)]
pub struct NamedBudget {
    /// Stable name used in evidence.
    pub name: &'static str,
    /// The budget (extension tokens are filled per request).
    pub budget: ContextBudget,
    /// True for a budget every legal view fits easily: an engine may not
    /// refuse it.
    pub generous: bool,
}

/// The budgets the suite checks: Latch's default, a medium and a small one
/// where working memory rotates, and a tiny one where little fits at all.
pub fn budgets() -> Vec<NamedBudget> {
    let b = |window, reserve, recent, tools| ContextBudget {
        context_window_tokens: window,
        reserve_tokens: reserve,
        recent_tokens: recent,
        tools_tokens: tools,
        extension_tokens: 0,
    };
    vec![
        NamedBudget {
            name: "default",
            budget: b(256_000, 16_000, 64_000, 8_000),
            generous: true,
        },
        NamedBudget {
            name: "medium",
            budget: b(32_000, 4_000, 6_000, 1_000),
            generous: false,
        },
        NamedBudget {
            name: "small",
            budget: b(8_000, 1_000, 2_000, 400),
            generous: false,
        },
        NamedBudget {
            name: "tiny",
            budget: b(1_500, 300, 400, 100),
            generous: false,
        },
    ]
}

/// The budget named `name`.
pub fn budget(name: &str) -> NamedBudget {
    budgets()
        .into_iter()
        .find(|b| b.name == name)
        .expect("a known budget name")
}

/// How one run's sessions look from inside an engine.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Persona {
    /// The seed everything below was drawn from.
    pub seed: u64,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// Absolute workspace path.
    pub workspace: String,
    /// Interaction mode (`run` or `interactive`, as real sessions have).
    pub mode: String,
    /// Repository instructions (often none).
    pub instructions: String,
    /// The system prompt (the host's real one when it supplies it).
    pub system_prompt: String,
    /// Whether requests carry an extension source.
    pub extensions: bool,
    /// Wall-clock time of the first event, ms since the Unix epoch: now.
    pub clock_ms: u64,
    /// Added to every budget's tool-schema tokens.
    pub tools_jitter: u64,
}

/// The system prompt used when the host does not supply its own.
pub const DEFAULT_SYSTEM_PROMPT: &str =
    "You are a careful coding agent. Use the tools; keep changes small.";

impl Persona {
    /// A persona drawn from `seed`, with `system_prompt` (or the default).
    pub fn draw(seed: u64, system_prompt: Option<&str>) -> Persona {
        let mut rng = Rng::new(seed | 1);
        const MODELS: [(&str, &str); 5] = [
            ("anthropic", "claude-sonnet-4-5"),
            ("anthropic", "claude-opus-4-1"),
            ("openai", "gpt-4.1"),
            ("openai", "gpt-5-mini"),
            ("openai-compatible", "qwen2.5-coder"),
        ];
        let (provider, model) = MODELS[rng.below(MODELS.len() as u64) as usize];
        let user = rng.pick(&["alex", "sam", "dev", "jo", "maria", "kim"]);
        let project = rng.pick(&["api-server", "billing", "cli", "webapp", "parser", "infra"]);
        let workspace = match rng.below(3) {
            0 => format!("/home/{user}/src/{project}"),
            1 => format!("/Users/{user}/code/{project}"),
            _ => format!("/home/{user}/work/{project}-{}", rng.below(9) + 1),
        };
        let instructions = match rng.below(3) {
            0 => String::new(),
            1 => "## AGENTS.md\nRun the test suite before finishing.".to_string(),
            _ => format!("## CLAUDE.md\nKeep the {project} changes small; no new dependencies."),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Persona {
            seed,
            provider: provider.to_string(),
            model: model.to_string(),
            workspace,
            mode: rng.pick(&["run", "interactive"]).to_string(),
            instructions,
            system_prompt: system_prompt.unwrap_or(DEFAULT_SYSTEM_PROMPT).to_string(),
            extensions: rng.below(4) == 0,
            clock_ms: now.saturating_sub(rng.below(3_600_000)),
            tools_jitter: rng.below(600),
        }
    }

    /// The persona's model, priced under `estimator`.
    pub fn model_profile(&self, estimator: Option<EstimatorProfile>) -> ModelProfile {
        let mut m = ModelProfile::with_defaults(&self.provider, &self.model);
        if let Some(e) = estimator {
            m.estimator = e;
        }
        m
    }

    /// A real-looking session id for the session labelled `label`.
    pub fn session_id(&self, label: &str) -> String {
        const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
        let h = label
            .bytes()
            .fold(self.seed ^ 0xcbf2_9ce4_8422_2325, |h, b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            });
        let time = self.clock_ms + (h % 600_000);
        let mut id = String::with_capacity(14);
        for i in (0..10).rev() {
            id.push(ALPHABET[((time >> (i * 5)) & 31) as usize] as char);
        }
        for i in 0..4 {
            id.push(ALPHABET[((h >> (i * 5)) & 31) as usize] as char);
        }
        id
    }
}

thread_local! {
    static PERSONA: std::cell::RefCell<Persona> =
        std::cell::RefCell::new(Persona::draw(1, None));
}

/// The persona of the run in progress on this thread.
pub fn persona() -> Persona {
    PERSONA.with(|p| p.borrow().clone())
}

/// Make `persona` the one this thread's sessions and requests use.
pub fn set_persona(persona: Persona) {
    PERSONA.with(|p| *p.borrow_mut() = persona);
}

/// A new generated session labelled `label` (the label stays out of
/// everything the engine sees), placed in the persona's workspace and time.
pub fn new_session(label: &str, model: ModelProfile) -> GenSession {
    let p = persona();
    let mut s = GenSession::new(&p.session_id(label), model);
    s.set_origin(&p.workspace, p.clock_ms);
    s
}

/// The request the suite sends: the persona's system prompt and session
/// context, sometimes an extension source (counted in `extension_tokens`),
/// `budget` (tool tokens varied a little), `query`.
pub fn request(profile: EstimatorProfile, budget: &ContextBudget, query: &str) -> ContextRequest {
    let p = persona();
    let extensions = if p.extensions {
        vec![ExtensionSource {
            name: "skills".into(),
            text: "load_skill: rust-debugging, release-notes".into(),
        }]
    } else {
        vec![]
    };
    let extension_tokens = extensions
        .iter()
        .map(|e| estimate(profile, &e.name) as u64 + estimate(profile, &e.text) as u64 + 8)
        .sum();
    let tools_tokens = if budget.tools_tokens > 0 {
        budget.tools_tokens + p.tools_jitter * budget.tools_tokens / 8_000
    } else {
        0
    };
    ContextRequest {
        system_prompt: p.system_prompt.clone(),
        session_context: SessionContext {
            workspace: p.workspace.clone(),
            repository_instructions: p.instructions.clone(),
            mode: p.mode.clone(),
        },
        budget: ContextBudget {
            extension_tokens,
            tools_tokens,
            ..*budget
        },
        query: query.to_string(),
        extensions,
    }
}

/// A tiny deterministic generator (xorshift64*).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A value below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "fn", "let", "match", "struct", "impl", "return", "value", "error", "buffer", "token",
    "offset", "line", "column", "state", "result", "option", "vector", "iterator", "borrow",
    "lifetime", "trait", "module",
];
const MODULES: &[&str] = &["parser", "lexer", "cache", "sched", "config", "http"];
const TOOLS: &[&str] = &["read_file", "edit_file", "shell", "validate", "grep"];
const CJK: &[&str] = &[
    "修正",
    "测试",
    "缓存",
    "解析器",
    "错误",
    "函数",
    "モジュール",
    "テスト",
    "설정",
    "로그",
    "失敗",
    "成功",
    "🙂",
];

/// Filler text of at least `chars` characters.
pub fn filler(rng: &mut Rng, chars: usize) -> String {
    let mut s = String::with_capacity(chars + 16);
    while s.len() < chars {
        s.push_str(rng.pick(WORDS));
        s.push(if rng.below(9) == 0 { '\n' } else { ' ' });
    }
    s
}

fn cjk_filler(rng: &mut Rng, chars: usize) -> String {
    let mut s = String::new();
    while s.chars().count() < chars {
        s.push_str(rng.pick(CJK));
        if rng.below(4) == 0 {
            s.push_str(rng.pick(WORDS));
            s.push(' ');
        }
    }
    s
}

fn image(rng: &mut Rng, known: bool) -> MediaRef {
    let n = rng.next_u64();
    MediaRef {
        sha256: format!("{n:016x}{n:016x}{n:016x}{n:016x}"),
        mime_type: "image/png".into(),
        byte_len: 40_000 + rng.below(200_000),
        width: known.then_some(320 + rng.below(3000) as u32),
        height: known.then_some(240 + rng.below(2000) as u32),
    }
}

/// A script under construction.
struct Script {
    steps: Vec<Step>,
    rng: Rng,
    calls: u64,
    state: CanonicalState,
}

impl Script {
    fn new(seed: u64) -> Self {
        Script {
            steps: Vec::new(),
            rng: Rng::new(seed),
            calls: 0,
            state: CanonicalState::empty(),
        }
    }

    fn user(&mut self, parts: Vec<Part>) {
        let query = parts
            .iter()
            .find_map(|p| match p {
                Part::Text(t) => Some(t.clone()),
                _ => None,
            })
            .unwrap_or_default();
        self.steps
            .push(Step::Event(EventBody::UserMessage(parts.clone())));
        self.steps.push(Step::Request(query));
    }

    fn user_text(&mut self, text: String) {
        self.user(vec![Part::Text(text)]);
    }

    fn assistant(&mut self, text: String) {
        self.steps
            .push(Step::Event(EventBody::AssistantMessage(vec![Part::Text(
                text,
            )])));
    }

    /// One assistant tool round: `calls` calls, their results, kernel notes,
    /// then a request.
    fn round(&mut self, calls: usize, result_chars: usize, images: bool, query: &str) {
        let mut parts = Vec::new();
        if self.rng.below(2) == 0 {
            let t = format!("Looking into it. {}", filler(&mut self.rng, 60));
            parts.push(Part::Text(t));
        }
        let mut made = Vec::new();
        for _ in 0..calls {
            self.calls += 1;
            let tool = self.rng.pick(TOOLS);
            let id = format!("call_{}", self.calls);
            let module = self.rng.pick(MODULES);
            parts.push(Part::ToolCall(ToolCall {
                id: id.clone(),
                name: tool.into(),
                arguments_json: format!("{{\"path\":\"src/{module}.rs\"}}"),
            }));
            made.push((id, tool, module));
        }
        self.steps
            .push(Step::Event(EventBody::AssistantMessage(parts)));
        for (id, tool, module) in made {
            let is_error = self.rng.below(5) == 0;
            let spread = (result_chars as u64 / 2).max(1);
            let n = result_chars / 2 + self.rng.below(spread) as usize;
            let content = filler(&mut self.rng, n);
            let imgs = if images {
                let known = self.rng.below(2) == 0;
                vec![image(&mut self.rng, known)]
            } else {
                vec![]
            };
            self.steps
                .push(Step::Event(EventBody::ToolResult(ToolResult {
                    call_id: id,
                    name: tool.into(),
                    content,
                    is_error,
                    images: imgs,
                })));
            let note = match (tool, is_error) {
                ("edit_file", _) => Some(KernelNoteKind::Mutation),
                ("validate", true) => Some(KernelNoteKind::ValidationFailed),
                ("validate", false) => Some(KernelNoteKind::ValidationPassed),
                (_, true) => Some(KernelNoteKind::Failure),
                _ => None,
            };
            if let Some(kind) = note {
                self.steps.push(Step::Event(EventBody::Kernel(KernelNote {
                    kind,
                    summary: format!("{tool} on src/{module}.rs"),
                    files: vec![format!("src/{module}.rs")],
                })));
            }
        }
        self.steps.push(Step::Request(query.to_string()));
    }

    fn revise(&mut self, turn: usize) {
        let seq = 0;
        let st = &mut self.state;
        st.revision += 1;
        match turn % 5 {
            0 => {
                st.goal = Some(StateEntry {
                    text: format!("goal revision {turn}: make the {} pass", MODULES[turn % 6]),
                    seq,
                })
            }
            1 => st.decisions.push(StateEntry {
                text: format!("decision {turn}: keep the {} small", MODULES[turn % 6]),
                seq,
            }),
            2 => st.constraints.push(StateEntry {
                text: format!("constraint {turn}: never edit gen/"),
                seq,
            }),
            3 => st.hypotheses.push(Hypothesis {
                text: format!("hypothesis {turn}: the cache races"),
                seq,
                status: if turn.is_multiple_of(2) {
                    HypothesisStatus::Rejected
                } else {
                    HypothesisStatus::Active
                },
                reason: turn
                    .is_multiple_of(2)
                    .then(|| "one thread only".to_string()),
            }),
            _ => st.notes.push(StateEntry {
                text: format!("note {turn}: {}", filler(&mut self.rng, 40)),
                seq,
            }),
        }
        self.steps.push(Step::State(Box::new(self.state.clone())));
    }

    fn finish(self, name: &'static str, model: ModelProfile) -> Scenario {
        Scenario {
            name,
            model,
            steps: self.steps,
        }
    }
}

fn openai() -> ModelProfile {
    persona().model_profile(Some(EstimatorProfile::Openai))
}

/// Three requests of plain conversation with one tool call.
pub fn short() -> Scenario {
    let mut s = Script::new(1);
    s.user_text("Fix the failing test in src/lib.rs".into());
    s.round(1, 200, false, "failing test");
    s.assistant("The add function subtracts; fixed.".into());
    s.user_text("Thanks. Now run the whole test suite.".into());
    s.finish("short", openai())
}

/// A long session of tool loops: several rounds per turn, parallel calls,
/// failing results, kernel notes, notifications and foreign events.
pub fn tool_loops(turns: usize) -> Scenario {
    let mut s = Script::new(7);
    for turn in 0..turns {
        if turn % 7 == 6 {
            let text = format!(
                "Agent report (reviewer): looks fine; {}",
                filler(&mut s.rng, 80)
            );
            s.steps.push(Step::Event(EventBody::Notification(text)));
        }
        if turn % 5 == 4 {
            s.steps.push(Step::Foreign(3));
        }
        let module = s.rng.pick(MODULES);
        let n = 80 + s.rng.below(300) as usize;
        let text = format!("turn {turn}: fix the {module} — {}", filler(&mut s.rng, n));
        s.user_text(text);
        let rounds = s.rng.below(4) as usize;
        for _ in 0..rounds {
            let calls = 1 + usize::from(s.rng.below(4) == 0);
            s.round(calls, 900, false, module);
        }
        let n = 40 + s.rng.below(160) as usize;
        let text = format!("Done with turn {turn}. {}", filler(&mut s.rng, n));
        s.assistant(text);
    }
    s.finish("tool-loops", openai())
}

/// Single units larger than working memory and than the smaller budgets: a
/// huge tool result, a huge user message, then ordinary turns.
pub fn oversized() -> Scenario {
    let mut s = Script::new(11);
    s.user_text("Read the generated parser and summarize it.".into());
    s.round(1, 60_000, false, "generated parser");
    s.assistant("It is a table-driven parser.".into());
    let huge = format!("Here is the full log: {}", filler(&mut s.rng, 120_000));
    s.user_text(huge);
    s.assistant("The log shows one failing test.".into());
    for turn in 0..3 {
        let text = format!("follow-up {turn}: {}", filler(&mut s.rng, 200));
        s.user_text(text);
        s.round(1, 300, false, "follow-up");
        s.assistant("ok".into());
    }
    s.finish("oversized", openai())
}

/// Images in user messages and tool results, with and without dimensions.
pub fn images() -> Scenario {
    let mut s = Script::new(13);
    for turn in 0..6 {
        let known = turn % 2 == 0;
        let text = format!("screenshot {turn}: the layout is broken");
        let img = image(&mut s.rng, known);
        s.user(vec![Part::Text(text), Part::Image(img)]);
        s.round(1, 200, true, "layout");
        s.assistant(format!("Fixed the layout in step {turn}."));
    }
    s.finish("images", openai())
}

/// CJK and emoji text under `profile`.
pub fn cjk(name: &'static str, profile: EstimatorProfile) -> Scenario {
    let mut s = Script::new(17);
    for turn in 0..8 {
        let text = format!("{turn}: {}", cjk_filler(&mut s.rng, 80));
        s.user_text(text);
        s.round(1, 300, false, "テスト");
        let reply = cjk_filler(&mut s.rng, 60);
        s.assistant(reply);
    }
    let mut model = openai();
    model.estimator = profile;
    s.finish(name, model)
}

/// Many canonical-state revisions (so many kernel-context revisions), a
/// `/compact`, extension events the contract does not type, and a request
/// after every change.
pub fn revisions(n: usize) -> Scenario {
    let mut s = Script::new(19);
    s.user_text("Plan the refactor of the scheduler.".into());
    for turn in 0..n {
        s.revise(turn);
        if turn % 3 == 0 {
            s.steps
                .push(Step::Event(EventBody::Extension(ExtensionEvent {
                    kind: "run_started".into(),
                    json: "{\"mode\":\"check\"}".into(),
                })));
        }
        if turn == n / 2 {
            s.steps.push(Step::Compact);
        }
        if turn % 4 == 3 {
            let text = format!("step {turn}: {}", filler(&mut s.rng, 120));
            s.user_text(text);
        } else {
            s.steps.push(Step::Request("scheduler".into()));
        }
        if turn % 4 == 1 {
            s.round(1, 300, false, "scheduler");
            s.assistant(format!("revision {turn} applied"));
        }
    }
    s.finish("revisions", openai())
}

/// The whole library, in a fixed order.
pub fn library() -> Vec<Scenario> {
    vec![
        short(),
        tool_loops(18),
        oversized(),
        images(),
        cjk("cjk", EstimatorProfile::Anthropic),
        cjk("cjk-optimized", EstimatorProfile::CjkOptimized),
        revisions(30),
    ]
}

/// A session of about `events` events of tool loops, built without any
/// engine call (as a long history looks to a freshly started instance).
pub fn long_session(events: usize) -> GenSession {
    let mut s = new_session("performance", openai());
    let mut rng = Rng::new(23);
    let mut call = 0u64;
    let mut turn = 0usize;
    while s.memory().events.len() < events {
        let module = rng.pick(MODULES);
        let n = 60 + rng.below(200) as usize;
        s.push(EventBody::UserMessage(vec![Part::Text(format!(
            "turn {turn}: fix the {module} — {}",
            filler(&mut rng, n)
        ))]));
        for _ in 0..rng.below(4) {
            call += 1;
            let id = format!("call_{call}");
            let tool = rng.pick(TOOLS);
            s.push(EventBody::AssistantMessage(vec![Part::ToolCall(
                ToolCall {
                    id: id.clone(),
                    name: tool.into(),
                    arguments_json: format!("{{\"path\":\"src/{module}.rs\"}}"),
                },
            )]));
            let n = 80 + rng.below(800) as usize;
            s.push(EventBody::ToolResult(ToolResult {
                call_id: id,
                name: tool.into(),
                content: filler(&mut rng, n),
                is_error: rng.below(6) == 0,
                images: vec![],
            }));
        }
        let n = 40 + rng.below(120) as usize;
        s.push(EventBody::AssistantMessage(vec![Part::Text(format!(
            "Done with turn {turn}. {}",
            filler(&mut rng, n)
        ))]));
        turn += 1;
    }
    s
}
