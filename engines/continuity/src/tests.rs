//! Engine tests: each numbered rule of the continuity spec, simulated the way
//! the host drives an engine (materialize, persist the view's entries, append
//! the model's reply and tool events).

use std::collections::BTreeSet;

use latch_engine_sdk::estimate::{message_image_tokens, message_tokens};
use latch_engine_sdk::{
    Assembled, Engine, MemorySession, SessionView, ViewAssembler, estimate, image_tokens,
};

use crate::testkit::{self, Host, IndexedSession, Script};
use crate::*;

const P: EstimatorProfile = EstimatorProfile::Anthropic;

fn model() -> ModelProfile {
    ModelProfile::with_defaults("anthropic", "test-model")
}

fn request(window: u64, recent: u64, query: &str) -> ContextRequest {
    ContextRequest {
        system_prompt: "You are a coding agent.".into(),
        session_context: SessionContext {
            workspace: "/w".into(),
            repository_instructions: "Run the tests.".into(),
            mode: "run".into(),
        },
        budget: ContextBudget {
            context_window_tokens: window,
            reserve_tokens: window / 10,
            recent_tokens: recent,
            tools_tokens: 50,
            extension_tokens: 0,
        },
        query: query.into(),
        extensions: vec![],
    }
}

/// An engine driven as the host drives it: views come back whole.
fn engine() -> Assembled<ContinuityEngine> {
    Assembled::new(ContinuityEngine::new(model()))
}

fn session() -> MemorySession {
    MemorySession::new("s", model())
}

/// A copy of `m` without persistence details: the same message whether just
/// returned or read back from the log.
fn normalized(m: &Message) -> Message {
    let mut m = m.clone();
    if let Some(k) = &mut m.kernel {
        k.seq = None;
        m.source_seqs.clear();
    }
    m
}

/// Every check the host makes, and the report's arithmetic.
fn check_view(view: &ContextView, req: &ContextRequest) {
    let r = &view.report;
    let p = P;
    assert_eq!(view.system, req.system_prompt);
    let first = &view.messages[0];
    assert!(
        first.kernel.is_none() && first.role == Role::User,
        "session context comes first"
    );
    let sum: u64 = view.messages.iter().map(|m| message_tokens(p, m)).sum();
    let host_total = estimate(p, &view.system) as u64 + sum + req.budget.tools_tokens;
    assert_eq!(r.total_tokens, host_total, "total is what the host checks");
    assert!(
        host_total <= req.budget.limit_tokens(),
        "hard budget: {host_total} > {}",
        req.budget.limit_tokens()
    );
    assert_eq!(
        r.total_tokens,
        r.instructions_tokens
            + r.state_tokens
            + r.recent_tokens
            + r.recall_tokens
            + r.tools_tokens
            + r.extension_tokens,
        "components sum exactly"
    );
    assert!(r.episode_tokens <= r.recall_tokens);
    assert_eq!(r.headroom_tokens, r.limit_tokens - r.total_tokens);
    let conv: Vec<&Message> = view.messages[1..]
        .iter()
        .filter(|m| m.kernel.is_none())
        .collect();
    assert_eq!(
        r.recent_tokens,
        conv.iter().map(|m| message_tokens(p, m)).sum::<u64>()
    );
    let (ic, it) = conv.iter().fold((0, 0), |(c, t), m| {
        let (a, b) = message_image_tokens(m);
        (c + a, t + b)
    });
    assert_eq!((r.image_count, r.image_tokens), (ic, it));
    assert_eq!(
        r.first_retained_seq,
        conv.first().and_then(|m| m.source_seqs.first().copied())
    );
    assert!(r.episodes_shown <= 16);
    assert!(r.common_prefix_tokens <= r.request_tokens);
    assert_eq!(r.request_tokens, r.total_tokens);
    assert!(r.provider_prefix_utilization.is_none() && r.measured_hit_rate.is_none());
    // Protocol safety: every call answered by the next user messages, no orphans.
    let mut open: BTreeSet<String> = BTreeSet::new();
    for m in &view.messages {
        let results: Vec<&ToolResult> = m
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolResult(r) => Some(r),
                _ => None,
            })
            .collect();
        if !results.is_empty() {
            for res in results {
                assert!(
                    open.remove(&res.call_id),
                    "orphan tool result {}",
                    res.call_id
                );
            }
            continue;
        }
        assert!(
            open.is_empty(),
            "a tool call was not answered before the next message"
        );
        for p in &m.parts {
            if let Part::ToolCall(c) = p {
                open.insert(c.id.clone());
            }
        }
    }
    assert!(open.is_empty(), "the view ends with an unanswered call");
    // The new entries are exactly the unpersisted kernel messages, in order.
    let unpersisted: Vec<&Message> = view
        .messages
        .iter()
        .filter(|m| m.kernel.as_ref().is_some_and(|k| k.seq.is_none()))
        .collect();
    assert_eq!(unpersisted.len(), view.persist.len());
    for (m, e) in unpersisted.iter().zip(&view.persist) {
        assert_eq!(m.parts, vec![Part::Text(e.text.clone())]);
        let k = m
            .kernel
            .as_ref()
            .map(|k| (k.generation, k.revision, k.kind));
        assert_eq!(k, Some((e.generation, e.revision, e.kind)));
        assert_eq!(Some(e.generation), r.epoch_generation);
    }
    // Kernel messages of one generation, revisions strictly increasing in the
    // order they were persisted.
    let revs: Vec<u64> = view
        .messages
        .iter()
        .filter_map(|m| m.kernel.as_ref())
        .map(|k| k.revision)
        .collect();
    let gens: BTreeSet<u64> = view
        .messages
        .iter()
        .filter_map(|m| m.kernel.as_ref())
        .map(|k| k.generation)
        .collect();
    assert!(gens.len() <= 1, "older generations are excluded: {gens:?}");
    let mut sorted = revs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), revs.len(), "no revision twice");
}

/// A host that checks every view, and optionally resume equivalence and
/// append-only epochs.
struct Checker {
    engine: Assembled<ContinuityEngine>,
    config: Option<String>,
    resume: bool,
    resume_every: usize,
    prev: Option<ContextView>,
    views: usize,
    rotations: usize,
    generations: BTreeSet<u64>,
    noop_after_noop: usize,
    cacheable: (u64, u64),
    /// Every event any request saw, as it was then (see
    /// [`Checker::record`]).
    seen: Option<Vec<Event>>,
}

impl Checker {
    fn new(config: Option<&str>, resume: bool) -> Self {
        let mut engine = engine();
        if let Some(c) = config {
            engine.set_config(c).expect("config");
        }
        Checker {
            engine,
            config: config.map(str::to_string),
            resume,
            resume_every: 1,
            prev: None,
            views: 0,
            rotations: 0,
            generations: BTreeSet::new(),
            noop_after_noop: 0,
            cacheable: (0, 0),
            seen: None,
        }
    }

    /// Keep a copy of every event each request saw, to compare with the
    /// final log.
    fn record(mut self) -> Self {
        self.seen = Some(Vec::new());
        self
    }

    fn fresh(&self) -> Assembled<ContinuityEngine> {
        let mut e = engine();
        if let Some(c) = &self.config {
            e.set_config(c).expect("config");
        }
        e
    }
}

impl Host for Checker {
    fn materialize(&mut self, session: &IndexedSession, req: &ContextRequest) -> ContextView {
        if let Some(seen) = &mut self.seen {
            let events = &session.memory().events;
            seen.extend(events[seen.len().min(events.len())..].iter().cloned());
        }
        let view = self.engine.materialize(session, req).expect("materialize");
        check_view(&view, req);
        unseen::assert_unseen_shown(session.memory(), &view);
        if self.resume && self.views.is_multiple_of(self.resume_every) {
            let cold = self
                .fresh()
                .materialize(session, req)
                .expect("fresh materialize");
            let warm_json = serde_json::to_string(&view).expect("json");
            let cold_json = serde_json::to_string(&cold).expect("json");
            assert!(
                warm_json == cold_json,
                "resume equivalence broken at view {}",
                self.views
            );
        }
        if let Some(prev) = &self.prev {
            let g = view.report.epoch_generation;
            if g == prev.report.epoch_generation {
                let a: Vec<Message> = prev.messages.iter().map(normalized).collect();
                let b: Vec<Message> = view.messages.iter().map(normalized).collect();
                assert!(
                    b.len() >= a.len() && b[..a.len()] == a[..],
                    "append-only within generation {g:?}"
                );
                assert_eq!(view.report.status, "ok");
            } else {
                self.rotations += 1;
                assert!(g > prev.report.epoch_generation);
                assert!(
                    matches!(view.report.status.as_str(), "rotated" | "compacted"),
                    "{}",
                    view.report.status
                );
            }
        }
        self.generations.extend(view.report.epoch_generation);
        self.cacheable.0 += view.report.common_prefix_tokens;
        self.cacheable.1 += view.report.request_tokens;
        self.views += 1;
        // Materializing again on the persisted log appends nothing and
        // returns the same messages.
        if self.views.is_multiple_of(17) {
            let mut s2 = session.clone();
            s2.persist(&view.persist);
            let again = self.engine.clone().materialize(&s2, req).expect("again");
            assert!(
                again.persist.is_empty(),
                "a no-op request appends nothing: {:?}",
                again.persist
            );
            let a: Vec<Message> = view.messages.iter().map(normalized).collect();
            let b: Vec<Message> = again.messages.iter().map(normalized).collect();
            assert_eq!(a, b);
            self.noop_after_noop += 1;
        }
        self.prev = Some(view.clone());
        view
    }

    fn manual_compact(&mut self, session: &IndexedSession) -> Vec<KernelContextEntry> {
        self.engine.manual_compact(session).expect("compact")
    }
}

#[test]
fn generated_session_resume_equivalence_and_invariants() {
    let mut script = Script::new(7, 260);
    script.compact_at = vec![200];
    let mut host = Checker::new(None, true);
    let s = testkit::run(&script, &mut host);
    let events = s.memory().events.len();
    assert!(events >= 2_000, "generated {events} events");
    assert!(host.rotations >= 3, "rotations: {}", host.rotations);
    let has_images = s.memory().events.iter().any(|e| match &e.body {
        EventBody::UserMessage(p) => p.iter().any(|p| matches!(p, Part::Image(_))),
        _ => false,
    });
    assert!(has_images);
    assert!(host.noop_after_noop > 10);
    let ratio = host.cacheable.0 as f64 / host.cacheable.1 as f64;
    assert!(ratio > 0.8, "estimated cacheability {ratio}");
}

/// Drives the raw engine the way the host does: each answer may continue
/// the previous view, and the host restores the whole view.
struct Continuing {
    engine: ContinuityEngine,
    views: ViewAssembler,
    prev: Option<ContextView>,
    sent: usize,
    whole: usize,
    continued: usize,
    /// Messages built by continued views, and their whole views' messages.
    built: (usize, usize),
}

impl Host for Continuing {
    fn materialize(&mut self, session: &IndexedSession, req: &ContextRequest) -> ContextView {
        let raw = self.engine.materialize(session, req).expect("materialize");
        let kept = raw.kept_messages as usize;
        self.sent += raw.messages.len();
        let whole = self
            .views
            .assemble(raw)
            .expect("a warm view keeps only messages the previous view had");
        self.whole += whole.messages.len();
        let fresh = engine().materialize(session, req).expect("fresh");
        assert_eq!(
            serde_json::to_string(&whole).ok(),
            serde_json::to_string(&fresh).ok(),
            "the continued view equals a fresh instance's whole view"
        );
        if let Some(prev) = &self.prev
            && prev.report.epoch_generation == whole.report.epoch_generation
        {
            // Everything the previous view showed from the log is kept.
            let first_unpersisted = prev
                .messages
                .iter()
                .position(|m| m.kernel.as_ref().is_some_and(|k| k.seq.is_none()))
                .unwrap_or(prev.messages.len());
            assert!(
                kept >= first_unpersisted,
                "kept {kept} of a previous view whose first {first_unpersisted} messages were durable"
            );
            self.continued += 1;
            self.built.0 += self.engine.last_built();
            self.built.1 += whole.messages.len();
        } else {
            assert!(kept <= 1, "a new epoch keeps at most the session context");
        }
        self.prev = Some(whole.clone());
        whole
    }
    fn manual_compact(&mut self, session: &IndexedSession) -> Vec<KernelContextEntry> {
        self.engine.manual_compact(session).expect("compact")
    }
}

#[test]
fn warm_views_send_only_what_is_new() {
    let mut script = Script::new(5, 120);
    script.compact_at = vec![90];
    let mut host = Continuing {
        engine: ContinuityEngine::new(model()),
        views: ViewAssembler::new(),
        prev: None,
        sent: 0,
        whole: 0,
        continued: 0,
        built: (0, 0),
    };
    testkit::run(&script, &mut host);
    assert!(host.continued > 100, "continued views: {}", host.continued);
    // A warm view builds what follows the part it knows unchanged, not the
    // whole epoch.
    assert!(
        host.built.0 * 5 < host.built.1,
        "continued views built {} of {} messages",
        host.built.0,
        host.built.1
    );
    assert!(
        host.sent * 5 < host.whole,
        "messages sent {} vs whole views {}",
        host.sent,
        host.whole
    );
}

#[test]
fn hard_budget_holds_for_several_budgets() {
    for (window, recent) in [
        (256_000, 64_000),
        (20_000, 8_000),
        (6_000, 3_000),
        // The smallest this session fits once the kernel-context frames
        // count toward the hard budget.
        (2_700, 1_500),
    ] {
        let mut script = Script::new(11, 40);
        script.budget = ContextBudget {
            context_window_tokens: window,
            reserve_tokens: window / 8,
            recent_tokens: recent,
            tools_tokens: 100,
            extension_tokens: 0,
        };
        script.max_result_chars = 600;
        let mut host = Checker::new(None, false);
        testkit::run(&script, &mut host);
        assert!(host.views > 40);
    }
}

#[test]
fn incremental_episodes_equal_a_full_rebuild_at_every_prefix() {
    let mut host = testkit::EngineHost(engine());
    let s = testkit::run(&Script::new(3, 40), &mut host);
    let events = &s.memory().events;
    for cap in [300, 8_000] {
        let mut inc = episodes::EpisodeBuilder::new(cap);
        let mut count = episodes::Segmenter::new(cap);
        for (i, e) in events.iter().enumerate() {
            inc.push(e, episodes::event_volume(P, e));
            count.push(e, episodes::event_volume(P, e));
            let full = episodes::build(P, &events[..=i], cap);
            let got: Vec<episodes::Episode> = inc.episodes().cloned().collect();
            assert_eq!(got, full, "prefix {i} (cap {cap})");
            assert_eq!(count.len(), full.len(), "episodes counted at prefix {i}");
        }
        assert!(inc.len() > 40);
    }
}

/// One episode as the plain oracle sees it: range, intent, part, volume,
/// event count, tools and whether it holds a failure.
type PlainEpisode = (u64, u64, String, u32, u64, u32, BTreeSet<String>, bool);

/// A second, deliberately plain segmentation written from the rule, not from
/// the builder: walk the whole log; kernel context and `/compact` belong to no
/// episode; a user message opens a new intent; an assistant message or a
/// notification when the open episode reached the cap opens the intent's
/// next part; anything before the first user message opens "(session start)".
/// Shares only the text helpers (`one_line`) and the price (`event_volume`).
fn plain_episodes(events: &[Event], cap: u64) -> Vec<PlainEpisode> {
    let mut out: Vec<PlainEpisode> = Vec::new();
    let mut open = false;
    for e in events {
        let volume = episodes::event_volume(P, e);
        let starts = match &e.body {
            EventBody::KernelContext(_) | EventBody::ManualCompact => continue,
            EventBody::UserMessage(parts) => {
                let text: Vec<&str> = parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Text(t) => Some(t.as_str()),
                        _ => None,
                    })
                    .collect();
                let topic = render::one_line(&text.join("\n"), 80);
                Some((
                    if topic.is_empty() {
                        "(image)".into()
                    } else {
                        topic
                    },
                    0,
                ))
            }
            EventBody::AssistantMessage(_) | EventBody::Notification(_)
                if open && out.last().is_some_and(|ep| ep.4 >= cap) =>
            {
                let last = out.last().unwrap();
                Some((last.2.clone(), last.3 + 1))
            }
            _ if !open => Some(("(session start)".to_string(), 0)),
            _ => None,
        };
        if let Some((topic, part)) = starts {
            out.push((e.seq, e.seq, topic, part, 0, 0, BTreeSet::new(), false));
            open = true;
        }
        let ep = out.last_mut().unwrap();
        ep.1 = e.seq;
        ep.4 += volume;
        ep.5 += 1;
        match &e.body {
            EventBody::AssistantMessage(parts) => {
                for p in parts {
                    if let Part::ToolCall(c) = p {
                        ep.6.insert(render::one_line(&c.name, 60));
                    }
                }
            }
            EventBody::ToolResult(r) if r.is_error => ep.7 = true,
            EventBody::Kernel(n) if n.kind == KernelNoteKind::Failure => ep.7 = true,
            _ => {}
        }
    }
    out
}

fn as_plain(ep: &episodes::Episode) -> PlainEpisode {
    (
        ep.first_seq,
        ep.last_seq,
        ep.topic.clone(),
        ep.part,
        ep.volume,
        ep.events,
        ep.tools.clone(),
        ep.markers.contains(&episodes::Marker::Failure),
    )
}

#[test]
fn incremental_episodes_agree_with_a_plain_oracle_at_every_prefix() {
    let mut host = testkit::EngineHost(engine());
    let s = testkit::run(&Script::new(3, 40), &mut host);
    let events = &s.memory().events;
    for cap in [300, 8_000] {
        let mut inc = episodes::EpisodeBuilder::new(cap);
        let mut splits = 0;
        for (i, e) in events.iter().enumerate() {
            inc.push(e, episodes::event_volume(P, e));
            let got: Vec<PlainEpisode> = inc.episodes().map(as_plain).collect();
            let expected = plain_episodes(&events[..=i], cap);
            assert_eq!(got, expected, "prefix {i} (cap {cap})");
            splits = expected.iter().filter(|ep| ep.3 > 0).count();
        }
        if cap == 300 {
            assert!(splits > 5, "the small cap exercised volume splits");
        }
    }
}

#[test]
fn the_episode_oracle_catches_a_builder_that_drops_an_event() {
    // The pin can fail: feeding the builder all but one event (as a buggy
    // incremental step would) disagrees with the oracle on the full log.
    let mut host = testkit::EngineHost(engine());
    let s = testkit::run(&Script::new(3, 40), &mut host);
    let events = &s.memory().events;
    let expected = plain_episodes(events, 300);
    let mut caught = 0;
    for victim in (0..events.len()).step_by(7) {
        let mut broken = episodes::EpisodeBuilder::new(300);
        for (i, e) in events.iter().enumerate() {
            if i != victim {
                broken.push(e, episodes::event_volume(P, e));
            }
        }
        let got: Vec<PlainEpisode> = broken.episodes().map(as_plain).collect();
        caught += (got != expected) as usize;
    }
    let tried = events.len().div_ceil(7);
    // Dropping kernel context (in no episode) is invisible by design.
    let invisible = (0..events.len())
        .step_by(7)
        .filter(|&i| {
            matches!(
                events[i].body,
                EventBody::KernelContext(_) | EventBody::ManualCompact
            )
        })
        .count();
    assert_eq!(caught, tried - invisible);
}

/// Plays `n` plain user/assistant turns of about `size` characters each,
/// materializing before each reply.
fn chat(
    e: &mut Assembled<ContinuityEngine>,
    s: &mut MemorySession,
    req: &ContextRequest,
    n: usize,
    size: usize,
) -> Vec<ContextView> {
    let mut views = Vec::new();
    for i in 0..n {
        s.user(&format!(
            "question {i} {}",
            "lorem ipsum ".repeat(size / 12)
        ));
        let v = e.materialize(s, req).expect("materialize");
        check_view(&v, req);
        s.persist(&v.persist);
        s.assistant(&format!("answer {i}"));
        views.push(v);
    }
    views
}

#[test]
fn rotation_is_hysteretic() {
    // The spec's policy: rotate at the threshold, keep about three quarters.
    let mut e = engine();
    e.set_config(r#"{"rotation": "threshold", "retain_percent": 75}"#)
        .expect("config");
    let mut s = session();
    let req = request(100_000, 2_000, "");
    let views = chat(&mut e, &mut s, &req, 60, 200);
    let rotated: Vec<usize> = views
        .iter()
        .enumerate()
        .filter(|(_, v)| v.report.status == "rotated")
        .map(|(i, _)| i)
        .collect();
    assert!(rotated.len() >= 3, "{rotated:?}");
    for w in rotated.windows(2) {
        assert!(
            w[1] - w[0] > 3,
            "rotation is occasional, not per turn: {rotated:?}"
        );
    }
    // Every unit here is one message: a rotation keeps the newest units up
    // to three quarters, so it keeps more than three quarters less one unit.
    let largest_unit = s
        .events
        .iter()
        .map(|e| latch_engine_sdk::estimate::event_tokens(P, &e.body))
        .max()
        .unwrap_or(0);
    assert!(largest_unit > 0 && largest_unit < 200, "{largest_unit}");
    for &i in &rotated {
        let v = &views[i];
        assert!(
            v.report.recent_tokens <= 2_000 * 3 / 4,
            "keeps at most three quarters: {}",
            v.report.recent_tokens
        );
        assert!(
            v.report.recent_tokens + largest_unit > 2_000 * 3 / 4,
            "keeps about three quarters, not less: {} (units up to {largest_unit})",
            v.report.recent_tokens
        );
        assert!(v.report.evicted_tokens > 0);
        assert!(
            v.report
                .rotation_reason
                .as_deref()
                .is_some_and(|r| r.contains("exceeded"))
        );
        assert_eq!(
            v.report.retained_after_rotation_tokens,
            v.report.recent_tokens
        );
        let Some(next) = views.get(i + 1) else {
            continue;
        };
        assert_eq!(
            next.report.status, "ok",
            "no second rotation on the next turn"
        );
        assert_eq!(next.report.epoch_generation, v.report.epoch_generation);
        assert_eq!(next.report.evicted_tokens, 0);
        assert_eq!(next.report.rotation_reason, v.report.rotation_reason);
    }
    assert_eq!(views[0].report.status, "started");
    // Older generations never show.
    let last = views.last().expect("views");
    let old = views[rotated[0]].report.epoch_generation;
    assert!(
        last.messages
            .iter()
            .filter_map(|m| m.kernel.as_ref())
            .all(|k| Some(k.generation) != old)
    );
}

#[test]
fn an_oversized_unit_is_kept_whole_and_tool_units_never_split() {
    let mut e = engine();
    let mut s = session();
    let req = request(200_000, 1_500, "");
    s.user("read the big file");
    let v = e.materialize(&s, &req).expect("view");
    s.persist(&v.persist);
    s.push(EventBody::AssistantMessage(vec![
        Part::Text("reading".into()),
        Part::ToolCall(ToolCall {
            id: "a".into(),
            name: "read_file".into(),
            arguments_json: "{}".into(),
        }),
        Part::ToolCall(ToolCall {
            id: "b".into(),
            name: "read_file".into(),
            arguments_json: "{}".into(),
        }),
    ]));
    let big = "data ".repeat(4_000);
    for id in ["a", "b"] {
        s.push(EventBody::ToolResult(ToolResult {
            call_id: id.into(),
            name: "read_file".into(),
            content: big.clone(),
            is_error: false,
            images: vec![],
        }));
    }
    let v = e.materialize(&s, &req).expect("view");
    check_view(&v, &req);
    assert_eq!(v.report.status, "rotated");
    assert!(
        v.report.recent_tokens > 1_500,
        "the oversized unit is kept whole"
    );
    let texts: Vec<&Message> = v
        .messages
        .iter()
        .filter(|m| m.kernel.is_none())
        .skip(1)
        .collect();
    assert_eq!(texts.len(), 3, "call and both results");
    s.persist(&v.persist);
    let again = e.materialize(&s, &req).expect("view");
    assert!(
        again.persist.is_empty(),
        "no rotation loop on an oversized unit"
    );
    assert_eq!(again.report.epoch_generation, v.report.epoch_generation);
    s.assistant("done");
    // Once a newer unit exists, the oversized one can leave working memory.
    let v2 = e.materialize(&s, &req).expect("view");
    check_view(&v2, &req);
    assert_eq!(v2.report.status, "rotated");
    assert!(v2.report.recent_tokens <= 1_500 && v2.report.evicted_tokens > 4_000);
    s.persist(&v2.persist);
    s.assistant("reply");
    s.user("next");
    let v3 = e.materialize(&s, &req).expect("view");
    assert_eq!(v3.report.status, "ok");
    // The unit is still whole at every budget.
    for recent in [10, 100, 500, 5_000] {
        let v = engine()
            .materialize(&s, &request(200_000, recent, ""))
            .expect("view");
        check_view(&v, &request(200_000, recent, ""));
    }
}

#[test]
fn deltas_only_on_real_change() {
    let mut e = engine();
    let mut s = session();
    let req = request(100_000, 50_000, "");
    s.state.revision = 1;
    s.state.goal = Some(StateEntry {
        text: "ship it".into(),
        seq: 1,
    });
    s.user("hello");
    let v = e.materialize(&s, &req).expect("view");
    assert_eq!(v.persist.len(), 1);
    assert_eq!(v.persist[0].kind, KernelContextKind::Snapshot);
    s.persist(&v.persist);
    s.assistant("hi");
    // A no-op turn appends nothing.
    s.user("again");
    let v = e.materialize(&s, &req).expect("view");
    assert!(v.persist.is_empty());
    s.assistant("ok");
    // A real state change appends one full state update at a higher revision.
    s.state.revision = 2;
    s.state.constraints.push(StateEntry {
        text: "no network".into(),
        seq: 9,
    });
    s.user("constraint added");
    let v = e.materialize(&s, &req).expect("view");
    assert_eq!(v.persist.len(), 1);
    let upd = &v.persist[0];
    assert_eq!(upd.kind, KernelContextKind::StateUpdate);
    assert!(
        upd.text.contains("ship it") && upd.text.contains("no network"),
        "the update is complete"
    );
    let snap_rev = v.messages[1]
        .kernel
        .as_ref()
        .map(|k| k.revision)
        .unwrap_or(0);
    assert!(upd.revision > snap_rev);
    s.persist(&v.persist);
    s.assistant("noted");
    let v = e.materialize(&s, &req).expect("view");
    assert!(v.persist.is_empty(), "same revision: nothing to append");
    // Extension sources changes append one extension entry.
    let mut req2 = req.clone();
    req2.extensions = vec![ExtensionSource {
        name: "skills".into(),
        text: "pdf".into(),
    }];
    let v = e.materialize(&s, &req2).expect("view");
    assert_eq!(
        v.persist.iter().map(|e| e.kind).collect::<Vec<_>>(),
        vec![KernelContextKind::Extension]
    );
    s.persist(&v.persist);
    assert!(e.materialize(&s, &req2).expect("view").persist.is_empty());
    // A re-ground note appends one instruction, once.
    s.push(EventBody::Kernel(KernelNote {
        kind: KernelNoteKind::Reground,
        summary: "loop".into(),
        files: vec![],
    }));
    let v = e.materialize(&s, &req2).expect("view");
    assert_eq!(
        v.persist.iter().map(|e| e.kind).collect::<Vec<_>>(),
        vec![KernelContextKind::Reground]
    );
    s.persist(&v.persist);
    assert!(e.materialize(&s, &req2).expect("view").persist.is_empty());
}

#[test]
fn older_and_stale_revisions_are_excluded() {
    let mut e = engine();
    let mut s = session();
    let req = request(100_000, 50_000, "");
    s.user("hello");
    let v = e.materialize(&s, &req).expect("view");
    s.persist(&v.persist);
    let gen1 = v.persist[0].generation;
    // A foreign entry of an older generation and one with a stale revision.
    s.push(EventBody::KernelContext(KernelContextEntry {
        generation: gen1.saturating_sub(1),
        revision: 99,
        kind: KernelContextKind::StateUpdate,
        epoch_start: None,
        text: "old generation".into(),
    }));
    s.push(EventBody::KernelContext(KernelContextEntry {
        generation: gen1,
        revision: 0,
        kind: KernelContextKind::StateUpdate,
        epoch_start: None,
        text: "stale revision".into(),
    }));
    s.assistant("hi");
    let v = e.materialize(&s, &req).expect("view");
    check_view(&v, &req);
    let all = serde_json::to_string(&v.messages).expect("json");
    assert!(!all.contains("old generation") && !all.contains("stale revision"));
    // New entries get revisions above every revision in the log.
    s.state.revision = 5;
    let v = e.materialize(&s, &req).expect("view");
    assert!(v.persist.iter().all(|e| e.revision > 99));
}

#[test]
fn manual_compact_starts_a_new_generation() {
    let mut e = engine();
    let mut s = session();
    let req = request(100_000, 50_000, "");
    let views = chat(&mut e, &mut s, &req, 5, 100);
    let g = views[4].report.epoch_generation.unwrap_or(0);
    s.push(EventBody::ManualCompact);
    let entries = e.manual_compact(&s).expect("compact");
    assert_eq!(entries[0].kind, KernelContextKind::Snapshot);
    assert!(entries.iter().all(|x| x.generation == g + 1));
    s.persist(&entries);
    s.user("after compact");
    let v = e.materialize(&s, &req).expect("view");
    check_view(&v, &req);
    assert_eq!(v.report.epoch_generation, Some(g + 1));
    assert_eq!(v.report.status, "compacted");
    assert_eq!(v.report.rotation_reason.as_deref(), Some("manual compact"));
    assert!(v.report.evicted_tokens > 0);
    assert_eq!(v.report.epoch_user_turns, 1, "working memory was reset");
    assert!(v.report.episodes_shown > 0, "the archive is indexed");
    let fresh = engine().materialize(&s, &req).expect("fresh");
    assert_eq!(
        serde_json::to_string(&fresh).ok(),
        serde_json::to_string(&v).ok()
    );
    // A compact event whose snapshot was never persisted is still honoured.
    let mut s2 = s.clone();
    s2.persist(&v.persist);
    s2.assistant("ok");
    s2.push(EventBody::ManualCompact);
    s2.user("next");
    let v2 = engine().materialize(&s2, &req).expect("view");
    assert_eq!(v2.report.status, "compacted");
    assert_eq!(v2.report.epoch_user_turns, 1);
    // No automatic compact: the engine never asks for one.
    let compacts = s
        .events
        .iter()
        .filter(|e| matches!(e.body, EventBody::ManualCompact))
        .count();
    assert_eq!(compacts, 1);
}

#[test]
fn images_are_priced_from_dimensions() {
    let mut e = engine();
    let mut s = session();
    let req = request(100_000, 50_000, "");
    let img = |w: Option<u32>, h: Option<u32>, len: u64| MediaRef {
        sha256: "ab".repeat(32),
        mime_type: "image/png".into(),
        byte_len: len,
        width: w,
        height: h,
    };
    s.push(EventBody::UserMessage(vec![
        Part::Text("look".into()),
        Part::Image(img(Some(1000), Some(750), 10)),
        Part::Image(img(None, None, 10_000_000)),
    ]));
    let v = e.materialize(&s, &req).expect("view");
    check_view(&v, &req);
    assert_eq!(v.report.image_count, 2);
    let expected = image_tokens(Some(1000), Some(750)) as u64 + image_tokens(None, None) as u64;
    assert_eq!(
        v.report.image_tokens, expected,
        "from dimensions, fallback for unknown, never bytes"
    );
    assert!(v.report.image_tokens <= v.report.recent_tokens);
}

#[test]
fn early_diagnostic_is_recalled_from_the_archive() {
    let mut script = Script::new(5, 120);
    script.budget.recent_tokens = 6_000;
    let mut host = Checker::new(None, false);
    let s = testkit::run(&script, &mut host);
    let req = script.request(999, "why did frobnicate_widget fail with E0425");
    let v = engine().materialize(&s, &req).expect("view");
    check_view(&v, &req);
    let recalled: Vec<&KernelContextEntry> = v
        .persist
        .iter()
        .filter(|e| e.kind == KernelContextKind::Recall)
        .collect();
    assert!(
        !recalled.is_empty(),
        "{:?}",
        v.persist.iter().map(|e| e.kind).collect::<Vec<_>>()
    );
    assert!(
        recalled
            .iter()
            .any(|e| e.text.contains(testkit::EARLY_DIAGNOSTIC))
    );
    assert!(v.report.recall_tokens > 0);
    let start = v.report.first_retained_seq.unwrap_or(0);
    for e in &recalled {
        let seq = render::parse_recall(&e.text).unwrap_or(u64::MAX);
        assert!(seq < start, "recall only reaches the archive");
    }
    // Exact recall through the port.
    let events = engine()
        .recall(&s, "frobnicate_widget E0425", 3)
        .expect("recall");
    assert!(events.iter().any(|e| matches!(&e.body, EventBody::ToolResult(r) if r.content.starts_with(testkit::EARLY_DIAGNOSTIC))));
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "chronological order");
}

#[test]
fn rejected_hypothesis_never_renders_active_in_views() {
    let mut host = Checker::new(None, false);
    let s = testkit::run(&Script::new(9, 30), &mut host);
    let req = Script::new(9, 30).request(30, "cache race");
    let v = engine().materialize(&s, &req).expect("view");
    const HYPOTHESIS: &str = "the cache races under concurrent load";
    let mut rejected_shown = false;
    for m in v.messages.iter().filter(|m| m.kernel.is_some()) {
        let Part::Text(t) = &m.parts[0] else { continue };
        for section in t.split("## ").skip(1) {
            let (title, body) = section.split_once('\n').unwrap_or((section, ""));
            if title.starts_with("Rejected hypotheses") {
                rejected_shown |= body.lines().any(|l| {
                    l.contains(HYPOTHESIS) && l.contains("rejected: the cache is only touched")
                });
            } else {
                assert!(
                    !body.contains(HYPOTHESIS),
                    "the rejected hypothesis appears under `{title}`"
                );
            }
        }
    }
    assert!(
        rejected_shown,
        "the snapshot shows the hypothesis in its Rejected hypotheses section"
    );
}

#[test]
fn config_round_trips_through_the_engine() {
    let mut e = engine();
    let cfg = r#"{"recent_tokens": 4000, "episode_volume_tokens": 1000, "max_index_entries": 8, "recall_limit": 4}"#;
    e.set_config(cfg).expect("valid");
    let out = e.config();
    let mut e2 = engine();
    e2.set_config(&out).expect("round trip");
    assert_eq!(e2.config(), out);
    assert_eq!(
        e.set_config(r#"{"bogus": 1}"#),
        Err(ConfigError::UnknownKey("bogus".into()))
    );
    assert!(matches!(
        e.set_config(r#"{"max_index_entries": 99}"#),
        Err(ConfigError::InvalidValue(_))
    ));
    assert_eq!(e.config(), out, "a refused config changes nothing");
    // The recent_tokens override governs rotation.
    let mut s = session();
    let views = chat(&mut e, &mut s, &request(100_000, 64_000, ""), 40, 400);
    assert!(views.iter().any(|v| v.report.status == "rotated"));
}

#[test]
fn report_explains_the_epoch() {
    let mut e = engine();
    let mut s = session();
    let req = request(100_000, 3_000, "");
    s.skip_seqs(1_000);
    let views = chat(&mut e, &mut s, &req, 60, 300);
    let last = views.last().expect("views");
    assert!(last.report.first_retained_seq.is_some_and(|f| f > 1_000));
    assert!(last.report.epoch_user_turns > 0);
    assert_eq!(
        last.report.event_count,
        s.info().event_count - 1,
        "counted before the reply"
    );
    assert!(last.report.episode_count >= 30);
    assert!(last.report.common_prefix_tokens > 0);
    assert!(last.report.engine.starts_with("continuity "));
    let rotated = views
        .iter()
        .find(|v| v.report.status == "rotated")
        .expect("a rotation");
    assert!(rotated.report.episodes_shown > 0 && rotated.report.episode_tokens > 0);
}

#[test]
fn estimator_profile_changes_prices() {
    let mut e = engine();
    let mut s = session();
    s.user("日本語のテキスト");
    let req = request(100_000, 50_000, "");
    let a = e.materialize(&s, &req).expect("view").report.recent_tokens;
    e.set_estimator(EstimatorProfile::CjkOptimized);
    let b = e.materialize(&s, &req).expect("view").report.recent_tokens;
    assert!(b < a);
}

/// The stress tier: thousands of events. Local only (`cargo test -- --ignored`).
#[test]
#[ignore]
fn stress_thousands_of_events() {
    let mut script = Script::new(42, 1_500);
    script.budget.recent_tokens = 10_000;
    let mut host = Checker::new(None, false).record();
    host.resume = true;
    host.resume_every = 97;
    let s = testkit::run(&script, &mut host);
    let events = &s.memory().events;
    assert!(events.len() > 10_000, "{}", events.len());
    // Full raw event retention: every event a request saw is still in the
    // log, unchanged and in place, and only the final reply came after.
    let seen = host.seen.take().expect("recorded");
    assert!(seen.len() > 10_000);
    assert!(events.len() > seen.len(), "events vanished");
    let (last, after) = events[seen.len()..].split_last().expect("the final reply");
    assert!(matches!(last.body, EventBody::AssistantMessage(_)));
    assert!(
        after
            .iter()
            .all(|e| matches!(e.body, EventBody::KernelContext(_))),
        "only the last view's entries came after the last request"
    );
    for (i, (now, then)) in events.iter().zip(&seen).enumerate() {
        assert!(
            now == then,
            "event {i} changed or moved: {now:?} was {then:?}"
        );
    }
    assert!(host.rotations > 10);
    let req = script.request(1_500, "frobnicate_widget E0425");
    let v = engine().materialize(&s, &req).expect("view");
    check_view(&v, &req);
    let text = serde_json::to_string(&v).expect("json");
    assert!(
        text.contains("never edit generated files under gen/"),
        "constraints survive"
    );
    assert!(
        text.contains("keep the parser recursive-descent"),
        "decisions survive"
    );
    assert!(
        text.contains(
            &serde_json::to_string(testkit::EARLY_DIAGNOSTIC)
                .expect("json")
                .trim_matches('"')
                .to_string()
        )
    );
    assert!(v.report.episodes_shown <= 16);
    let recalled = engine()
        .recall(&s, "frobnicate_widget", 1_000)
        .expect("recall");
    assert!(recalled.iter().any(|e| matches!(&e.body, EventBody::ToolResult(r) if r.content.starts_with(testkit::EARLY_DIAGNOSTIC))));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e.body, EventBody::ManualCompact))
            .count(),
        0,
        "no automatic compact"
    );
    // Recent verbatim text: the newest conversation events end the view's
    // conversation exactly as they were logged.
    let newest: Vec<Message> = events
        .iter()
        .filter_map(Event::to_message)
        .rev()
        .take(12)
        .collect();
    let shown: Vec<&Message> = v
        .messages
        .iter()
        .filter(|m| m.kernel.is_none())
        .rev()
        .take(12)
        .collect();
    assert_eq!(shown.len(), 12);
    for (i, (shown, logged)) in shown.iter().zip(&newest).enumerate() {
        assert!(
            *shown == logged,
            "newest message {i} (0 is the newest) is not verbatim: {shown:?} for {logged:?}"
        );
    }
}

#[test]
fn conversation_prices_match_the_canonical_message_price() {
    let mut host = testkit::EngineHost(engine());
    let s = testkit::run(&Script::new(13, 30), &mut host);
    for e in &s.memory().events {
        let expected = e.to_message().map(|m| message_tokens(P, &m)).unwrap_or(0);
        assert_eq!(
            latch_engine_sdk::estimate::event_tokens(P, &e.body),
            expected,
            "event {}",
            e.seq
        );
        assert_eq!(episodes::event_volume(P, e), expected);
    }
}

mod allocation;
mod intents;
mod streaming;
mod unseen;
