//! The cases of the suite. Each returns an [`Outcome`]; the first violation
//! ends a case, with the scenario, budget and request index that reproduce it.

use crate::sessions::{self, GenSession, NamedBudget, Scenario, Step};
use crate::{Candidate, Failure, Instance, Options, Outcome, engine_error_text, import_verdict};
use latch_engine_sdk::SessionView;
use latch_engine_sdk::types::*;
use latch_engine_sdk::validate::{
    KernelContextLimits, ViewChecker, check_entries, check_protocol, check_recall, request_tokens,
};
use std::collections::BTreeMap;
use std::time::Instant;

pub(crate) fn run_case(name: &str, candidate: &dyn Candidate, options: &Options) -> Outcome {
    match name {
        "contract" => contract(candidate),
        "budget" => budget(candidate),
        "protocol" => protocol(candidate),
        "provenance" => provenance(candidate),
        "determinism" => determinism(candidate),
        "epochs" => epochs(candidate),
        "recall" => recall(candidate),
        "config" => config(candidate),
        "sandbox" => sandbox(candidate),
        "performance" => performance(candidate, options),
        other => Outcome::fail(format!("unknown case `{other}`"), vec![]),
    }
}

/// One model request of a played scenario, as a visitor sees it.
struct Visit<'a> {
    /// `scenario/budget request N`.
    at: String,
    session: &'a GenSession,
    request: &'a ContextRequest,
    view: &'a ContextView,
}

/// What a visitor does with a typed engine error at a request.
type RefusalPolicy<'a> = &'a mut dyn FnMut(&str, &NamedBudget, &EngineError) -> Result<(), Outcome>;

/// Play `scenario` as the host would: append events, ask for a view at every
/// request, persist the view's entries. Visitors may end the play with an
/// outcome; a sandbox failure always does.
fn play(
    scenario: &Scenario,
    budget: &NamedBudget,
    instance: &mut dyn Instance,
    visit: &mut dyn FnMut(&Visit, &mut dyn Instance) -> Result<(), Outcome>,
    refusal: RefusalPolicy,
) -> Result<GenSession, Outcome> {
    let mut session = sessions::new_session(
        &format!("{}-{}", scenario.name, budget.name),
        scenario.model.clone(),
    );
    let profile = scenario.model.estimator;
    let mut index = 0usize;
    for step in &scenario.steps {
        match step {
            Step::Event(body) => {
                session.push(body.clone());
            }
            Step::State(state) => {
                *session.state_mut() = (**state).clone();
                let revision = state.revision;
                session.push(EventBody::Kernel(KernelNote {
                    kind: KernelNoteKind::StateUpdate,
                    summary: format!("task state revision {revision}"),
                    files: vec![],
                }));
            }
            Step::Foreign(n) => session.skip_seqs(*n),
            Step::Compact => {
                session.push(EventBody::ManualCompact);
                match instance.manual_compact(&session) {
                    Ok(entries) => {
                        // The host refuses what it would refuse in a session.
                        if let Err((rule, detail)) = check_entries(
                            &session.info(),
                            &entries,
                            &KernelContextLimits::default(),
                        ) {
                            let at = format!("{}/{} manual_compact", scenario.name, budget.name);
                            return Err(Outcome::fail(
                                format!("{rule} at {at}"),
                                vec![format!("{at}: {detail}")],
                            ));
                        }
                        session.persist(&entries)
                    }
                    Err(f) if f.is_sandbox() => {
                        return Err(Outcome::engine(
                            format!("{}/{} manual_compact", scenario.name, budget.name),
                            f,
                        ));
                    }
                    Err(_) => {}
                }
            }
            Step::Request(query) => {
                let at = format!("{}/{} request {index}", scenario.name, budget.name);
                index += 1;
                let request = sessions::request(profile, &budget.budget, query);
                match instance.materialize(&session, &request) {
                    Ok(view) => {
                        visit(
                            &Visit {
                                at: at.clone(),
                                session: &session,
                                request: &request,
                                view: &view,
                            },
                            instance,
                        )?;
                        // The host persists nothing it would refuse.
                        if let Err((rule, detail)) = check_entries(
                            &session.info(),
                            &view.persist,
                            &KernelContextLimits::default(),
                        ) {
                            return Err(Outcome::fail(
                                format!("{rule} at {at}"),
                                vec![format!("{at}: {detail}")],
                            ));
                        }
                        session.persist(&view.persist);
                    }
                    Err(Failure::Engine(e)) => refusal(&at, budget, &e)?,
                    Err(f) => return Err(Outcome::engine(at, f)),
                }
            }
        }
    }
    Ok(session)
}

fn fresh(candidate: &dyn Candidate, model: &ModelProfile) -> Result<Box<dyn Instance>, Outcome> {
    candidate
        .fresh(model)
        .map_err(|f| Outcome::engine("creating an instance", f))
}

/// A refusal policy that fails on any typed engine error.
fn no_refusals(at: &str, _: &NamedBudget, e: &EngineError) -> Result<(), Outcome> {
    Err(Outcome::fail(
        format!("materialize refused at {at}"),
        vec![format!("{at}: {}", engine_error_text(e))],
    ))
}

/// The engine's own budget refusal is accepted on a budget that is not
/// generous (nothing over budget is ever sent); anything else fails.
fn budget_refusals_allowed<'a>(
    counts: &'a mut BTreeMap<&'static str, usize>,
) -> impl FnMut(&str, &NamedBudget, &EngineError) -> Result<(), Outcome> + 'a {
    move |at, budget, e| match e {
        EngineError::BudgetExceeded(_) | EngineError::InvalidRequest(_) if !budget.generous => {
            *counts.entry(budget.name).or_default() += 1;
            Ok(())
        }
        _ => no_refusals(at, budget, e),
    }
}

fn contract(candidate: &dyn Candidate) -> Outcome {
    let Some(world) = candidate.world() else {
        return Outcome::Skip("linked natively: there is no component world to inspect".into());
    };
    let export = world
        .exports
        .iter()
        .find(|e| e.starts_with("latch:context/engine@"));
    let version = match export {
        None => {
            return Outcome::fail(
                "does not export latch:context/engine@0.1.x",
                vec![format!("exports: {}", world.exports.join(", "))],
            );
        }
        Some(e) => e.trim_start_matches("latch:context/engine@").to_string(),
    };
    if !version.starts_with("0.1.") {
        return Outcome::fail(
            format!("implements latch:context@{version}, not 0.1.x"),
            vec![],
        );
    }
    let refused: Vec<String> = world
        .imports
        .iter()
        .filter_map(|i| import_verdict(i))
        .collect();
    if !refused.is_empty() {
        return Outcome::fail(
            format!(
                "{} import(s) beyond what the host grants, first `{}`",
                refused.len(),
                refused[0]
                    .trim_start_matches("imports `")
                    .split('`')
                    .next()
                    .unwrap_or("")
            ),
            refused,
        );
    }
    if let Err(o) = fresh(candidate, &sessions::persona().model_profile(None)) {
        return o;
    }
    Outcome::Pass(format!(
        "exports latch:context/engine@{version}; {} imports, all granted",
        world.imports.len()
    ))
}

fn budget(candidate: &dyn Candidate) -> Outcome {
    let library = sessions::library();
    let budgets = sessions::budgets();
    let mut views = 0usize;
    let mut refusals: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut tightest: Option<(u64, String)> = None;
    for scenario in &library {
        for b in &budgets {
            let mut instance = match fresh(candidate, &scenario.model) {
                Ok(i) => i,
                Err(o) => return o,
            };
            let profile = scenario.model.estimator;
            let mut visit = |v: &Visit, _: &mut dyn Instance| {
                views += 1;
                let limit = v.request.budget.limit_tokens();
                let total = request_tokens(profile, v.view, v.request.budget.tools_tokens);
                if total > limit {
                    return Err(Outcome::fail(
                        format!("over budget at {}", v.at),
                        vec![format!(
                            "{}: the request costs ≈{total} tokens (system + {} messages + {} for tools) but the limit is {limit} (window {} - reserve {}); the engine reported {}",
                            v.at,
                            v.view.messages.len(),
                            v.request.budget.tools_tokens,
                            v.request.budget.context_window_tokens,
                            v.request.budget.reserve_tokens,
                            v.view.report.total_tokens,
                        )],
                    ));
                }
                // Calibration reduces the provider's count against the
                // host's own count of the view, never the engine's report;
                // a report that differs misleads `/context` and every
                // reader of it.
                if v.view.report.total_tokens != total {
                    return Err(Outcome::fail(
                        format!("report total at {}", v.at),
                        vec![format!(
                            "{}: the engine reported a total of {} tokens but the request costs ≈{total} (system + {} messages + {} for tools, the canonical estimator)",
                            v.at,
                            v.view.report.total_tokens,
                            v.view.messages.len(),
                            v.request.budget.tools_tokens,
                        )],
                    ));
                }
                let headroom = limit - total;
                if tightest.as_ref().is_none_or(|(h, _)| headroom < *h) {
                    tightest = Some((headroom, v.at.clone()));
                }
                Ok(())
            };
            let mut refuse = budget_refusals_allowed(&mut refusals);
            if let Err(o) = play(scenario, b, instance.as_mut(), &mut visit, &mut refuse) {
                return o;
            }
        }
    }
    let refused: usize = refusals.values().sum();
    let refused_text = if refused == 0 {
        "no refusals".to_string()
    } else {
        format!(
            "{refused} typed budget refusal(s) ({})",
            refusals
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Outcome::Pass(format!(
        "{views} views over {} sessions × {} budgets, none over its limit; {refused_text}; least headroom ≈{} tokens",
        library.len(),
        budgets.len(),
        tightest.map(|t| t.0).unwrap_or(0)
    ))
}

/// Protocol safety and well-formed kernel context for one view.
fn check_view_protocol(v: &Visit, max_revision: u64, max_generation: u64) -> Result<(), Outcome> {
    let fail = |what: String| {
        Err(Outcome::fail(
            format!(
                "{} at {}",
                what.split(':').next().unwrap_or("violation"),
                v.at
            ),
            vec![format!("{}: {what}", v.at)],
        ))
    };
    if v.view.messages.is_empty() {
        return fail("empty view: the view has no messages".into());
    }
    if let Err((rule, detail)) = check_protocol(&v.view.messages) {
        return fail(format!("{rule}: {detail}"));
    }
    for (i, m) in v.view.messages.iter().enumerate() {
        for s in &m.source_seqs {
            if v.session.event(*s).is_none() {
                return fail(format!(
                    "foreign source: message {i} renders seq {s}, which is not an event of this session"
                ));
            }
        }
        if let Some(tag) = &m.kernel {
            match tag.seq {
                Some(seq) => match v.session.event(seq).map(|e| &e.body) {
                    Some(EventBody::KernelContext(entry))
                        if entry.generation == tag.generation
                            && entry.revision == tag.revision
                            && entry.kind == tag.kind => {}
                    other => {
                        return fail(format!(
                            "kernel tag: message {i} claims persisted kernel context at seq {seq} (generation {}, revision {}), but the log holds {}",
                            tag.generation,
                            tag.revision,
                            match other {
                                Some(EventBody::KernelContext(e)) =>
                                    format!("generation {}, revision {}", e.generation, e.revision),
                                Some(_) => "another kind of event".into(),
                                None => "nothing".into(),
                            }
                        ));
                    }
                },
                None => {
                    if !v.view.persist.iter().any(|e| {
                        e.generation == tag.generation
                            && e.revision == tag.revision
                            && e.kind == tag.kind
                    }) {
                        return fail(format!(
                            "kernel tag: message {i} is unpersisted kernel context (generation {}, revision {}) that is not in the view's persist list",
                            tag.generation, tag.revision
                        ));
                    }
                }
            }
        }
    }
    let mut last = max_revision;
    let mut first = true;
    for e in &v.view.persist {
        if e.text.trim().is_empty() {
            return fail(format!(
                "kernel context: entry at revision {} has no text",
                e.revision
            ));
        }
        if (!first || max_revision > 0) && e.revision <= last {
            return fail(format!(
                "kernel context: revision {} does not rise above revision {last} already in the log or the view",
                e.revision
            ));
        }
        if e.generation < max_generation {
            return fail(format!(
                "kernel context: generation {} goes back behind generation {max_generation} already in the log",
                e.generation
            ));
        }
        first = false;
        last = e.revision;
    }
    Ok(())
}

/// The highest revision and generation of the session's kernel context.
fn kernel_maxima(session: &GenSession) -> (u64, u64) {
    let info = session.info();
    (info.kernel_context_revision, info.kernel_context_generation)
}

fn protocol(candidate: &dyn Candidate) -> Outcome {
    let library = sessions::library();
    let budgets = [sessions::budget("medium"), sessions::budget("small")];
    let mut views = 0usize;
    let mut persisted = 0usize;
    let mut refusals = BTreeMap::new();
    for scenario in &library {
        for b in &budgets {
            let mut instance = match fresh(candidate, &scenario.model) {
                Ok(i) => i,
                Err(o) => return o,
            };
            let mut visit = |v: &Visit, _: &mut dyn Instance| {
                views += 1;
                persisted += v.view.persist.len();
                let (rev, generation) = kernel_maxima(v.session);
                check_view_protocol(v, rev, generation)
            };
            let mut refuse = budget_refusals_allowed(&mut refusals);
            if let Err(o) = play(scenario, b, instance.as_mut(), &mut visit, &mut refuse) {
                return o;
            }
        }
    }
    Outcome::Pass(format!(
        "{views} views over {} sessions × {} budgets: whole units, no orphans, {persisted} persisted entries with rising revisions",
        library.len(),
        budgets.len()
    ))
}

/// Where two views first differ, for evidence.
pub(crate) fn first_difference(a: &ContextView, b: &ContextView) -> String {
    if a.system != b.system {
        return "the system prompt differs".into();
    }
    if a.messages.len() != b.messages.len() {
        return format!("{} messages against {}", a.messages.len(), b.messages.len());
    }
    for (i, (x, y)) in a.messages.iter().zip(&b.messages).enumerate() {
        if x != y {
            return format!(
                "message {i} differs: {} against {}",
                excerpt(&serde_json::to_string(x).unwrap_or_default()),
                excerpt(&serde_json::to_string(y).unwrap_or_default())
            );
        }
    }
    if a.persist != b.persist {
        return "the persist lists differ".into();
    }
    let ra = serde_json::to_value(&a.report).unwrap_or_default();
    let rb = serde_json::to_value(&b.report).unwrap_or_default();
    if let (Some(ma), Some(mb)) = (ra.as_object(), rb.as_object()) {
        for (k, va) in ma {
            if mb.get(k) != Some(va) {
                return format!(
                    "report.{k} differs: {va} against {}",
                    mb.get(k).cloned().unwrap_or_default()
                );
            }
        }
    }
    "the serialized bytes differ".into()
}

/// The host's run-time rules, applied exactly as the host applies them: one
/// [`ViewChecker`] per instance, over every view of the library at the
/// default and small budgets.
fn provenance(candidate: &dyn Candidate) -> Outcome {
    let library = sessions::library();
    let budgets = [sessions::budget("default"), sessions::budget("small")];
    let mut views = 0usize;
    for scenario in &library {
        for b in &budgets {
            let mut instance = match fresh(candidate, &scenario.model) {
                Ok(i) => i,
                Err(o) => return o,
            };
            let mut checker =
                ViewChecker::new(scenario.model.estimator, KernelContextLimits::default());
            let mut visit = |v: &Visit, _: &mut dyn Instance| {
                views += 1;
                checker.check(v.session, v.request, v.view).map_err(|(rule, detail)| {
                    Outcome::fail(
                        format!("{rule} at {}", v.at),
                        vec![
                            format!("{}: {detail}", v.at),
                            format!(
                                "the view: {} messages, system prompt {} bytes, {} entries to persist",
                                v.view.messages.len(),
                                v.view.system.len(),
                                v.view.persist.len()
                            ),
                        ],
                    )
                })
            };
            let mut counts = BTreeMap::new();
            let mut refuse = budget_refusals_allowed(&mut counts);
            if let Err(o) = play(scenario, b, instance.as_mut(), &mut visit, &mut refuse) {
                return o;
            }
        }
    }
    Outcome::Pass(format!(
        "{views} views over {} sessions × {} budgets: every message from the log it cites, engine text only as kernel context",
        library.len(),
        budgets.len()
    ))
}

fn excerpt(s: &str) -> String {
    if s.chars().count() <= 120 {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(120).collect::<String>())
    }
}

fn bytes(view: &ContextView) -> Vec<u8> {
    serde_json::to_vec(view).unwrap_or_default()
}

fn determinism(candidate: &dyn Candidate) -> Outcome {
    let scenarios = [
        sessions::tool_loops(10),
        sessions::revisions(14),
        sessions::images(),
    ];
    let b = sessions::budget("medium");
    let mut compared = 0usize;
    for scenario in &scenarios {
        let mut instance = match fresh(candidate, &scenario.model) {
            Ok(i) => i,
            Err(o) => return o,
        };
        let mut n = 0usize;
        let mut visit = |v: &Visit, warm: &mut dyn Instance| -> Result<(), Outcome> {
            n += 1;
            let first = bytes(v.view);
            // Same instance, same log, same request.
            let again = warm
                .materialize(v.session, v.request)
                .map_err(|f| Outcome::engine(format!("{} (repeated call)", v.at), f))?;
            if bytes(&again) != first {
                return Err(Outcome::fail(
                    format!("a repeated call gave different bytes at {}", v.at),
                    vec![format!(
                        "{}: same instance, log and request; {}",
                        v.at,
                        first_difference(v.view, &again)
                    )],
                ));
            }
            compared += 1;
            // A fresh instance on the same log (resume) at every third request.
            if n % 3 == 1 {
                let mut cold = fresh(candidate, &v.session.info().model)?;
                let resumed = cold
                    .materialize(v.session, v.request)
                    .map_err(|f| Outcome::engine(format!("{} (fresh instance)", v.at), f))?;
                if bytes(&resumed) != first {
                    return Err(Outcome::fail(
                        format!("a fresh instance gave different bytes at {}", v.at),
                        vec![format!(
                            "{}: warm instance against a fresh one on the same log; {}",
                            v.at,
                            first_difference(v.view, &resumed)
                        )],
                    ));
                }
                compared += 1;
            }
            Ok(())
        };
        let mut refusals = BTreeMap::new();
        let mut refuse = budget_refusals_allowed(&mut refusals);
        let session = match play(scenario, &b, instance.as_mut(), &mut visit, &mut refuse) {
            Ok(s) => s,
            Err(o) => return o,
        };
        // The end of the session: warm twice, then fresh.
        let request = sessions::request(scenario.model.estimator, &b.budget, "final");
        let at = format!("{}/{} final request", scenario.name, b.name);
        let warm = match instance.materialize(&session, &request) {
            Ok(v) => v,
            Err(Failure::Engine(_)) => continue,
            Err(f) => return Outcome::engine(at, f),
        };
        let mut cold = match fresh(candidate, &scenario.model) {
            Ok(i) => i,
            Err(o) => return o,
        };
        match cold.materialize(&session, &request) {
            Ok(v) if bytes(&v) == bytes(&warm) => compared += 1,
            Ok(v) => {
                return Outcome::fail(
                    format!("a fresh instance gave different bytes at {at}"),
                    vec![format!("{at}: {}", first_difference(&warm, &v))],
                );
            }
            Err(f) => return Outcome::engine(format!("{at} (fresh instance)"), f),
        }
    }
    Outcome::Pass(format!(
        "{compared} byte comparisons over {} sessions: repeated calls and fresh instances agree",
        scenarios.len()
    ))
}

/// A message as the provider sees it across requests: the persisted sequence
/// number of kernel context is bookkeeping, not content.
fn normalized(m: &Message) -> Message {
    let mut m = m.clone();
    if let Some(tag) = &mut m.kernel {
        tag.seq = None;
        m.source_seqs.clear();
    }
    m
}

fn epochs(candidate: &dyn Candidate) -> Outcome {
    let scenarios = [sessions::tool_loops(18), sessions::revisions(30)];
    let b = sessions::budget("medium");
    let mut views = 0usize;
    let mut rotations = 0usize;
    let mut generations = 0usize;
    for scenario in &scenarios {
        let mut instance = match fresh(candidate, &scenario.model) {
            Ok(i) => i,
            Err(o) => return o,
        };
        let mut prev: Option<(String, u64, Vec<Message>)> = None;
        let mut no_epochs = false;
        let mut visit = |v: &Visit, _: &mut dyn Instance| -> Result<(), Outcome> {
            views += 1;
            let Some(generation) = v.view.report.epoch_generation else {
                if prev.is_none() {
                    no_epochs = true;
                    return Err(Outcome::Skip(String::new()));
                }
                return Err(Outcome::fail(
                    format!("epoch generation disappeared at {}", v.at),
                    vec![format!(
                        "{}: report.epoch_generation is none after earlier views had one",
                        v.at
                    )],
                ));
            };
            let messages: Vec<Message> = v.view.messages.iter().map(normalized).collect();
            if let Some((prev_at, prev_gen, prev_messages)) = &prev {
                if generation < *prev_gen {
                    return Err(Outcome::fail(
                        format!("generation went back at {}", v.at),
                        vec![format!(
                            "{}: generation {generation} after {prev_gen} at {prev_at}",
                            v.at
                        )],
                    ));
                }
                if generation == *prev_gen {
                    let extends = prev_messages.len() <= messages.len()
                        && prev_messages.iter().zip(&messages).all(|(a, b)| a == b);
                    if !extends {
                        let at = prev_messages
                            .iter()
                            .zip(&messages)
                            .position(|(a, b)| a != b)
                            .unwrap_or(messages.len());
                        return Err(Outcome::fail(
                            format!("generation {generation} rewrote its prefix at {}", v.at),
                            vec![format!(
                                "{}: within generation {generation} the view does not extend the one at {prev_at}: message {at} of {} changed or vanished ({} messages now)",
                                v.at,
                                prev_messages.len(),
                                messages.len()
                            )],
                        ));
                    }
                } else {
                    rotations += 1;
                    if v.view
                        .report
                        .rotation_reason
                        .as_deref()
                        .is_none_or(|r| r.trim().is_empty())
                    {
                        return Err(Outcome::fail(
                            format!(
                                "generation {generation} started without a reason at {}",
                                v.at
                            ),
                            vec![format!(
                                "{}: generation {prev_gen} → {generation} but report.rotation_reason is empty",
                                v.at
                            )],
                        ));
                    }
                }
            }
            if prev.as_ref().is_none_or(|p| p.1 != generation) {
                generations += 1;
            }
            prev = Some((v.at.clone(), generation, messages));
            Ok(())
        };
        let mut refusals = BTreeMap::new();
        let mut refuse = budget_refusals_allowed(&mut refusals);
        let result = play(scenario, &b, instance.as_mut(), &mut visit, &mut refuse);
        if no_epochs {
            return Outcome::Skip(
                "the engine reports no epoch generation (report.epoch_generation is none)".into(),
            );
        }
        if let Err(o) = result {
            return o;
        }
    }
    Outcome::Pass(format!(
        "{views} views, {generations} generations, {rotations} rotations each with a reason; every in-generation view extends the previous one"
    ))
}

fn recall(candidate: &dyn Candidate) -> Outcome {
    let model = sessions::persona().model_profile(None);
    let mut s = sessions::new_session("recall", model.clone());
    let mut rng = sessions::Rng::new(29);
    for i in 0..36u64 {
        let marker = if i % 3 == 0 { " zebrafish" } else { "" };
        s.push(EventBody::UserMessage(vec![Part::Text(format!(
            "step {i}{marker}: {}",
            sessions::filler(&mut rng, 60)
        ))]));
        if i % 4 == 1 {
            let id = format!("call_{i}");
            s.push(EventBody::AssistantMessage(vec![Part::ToolCall(
                ToolCall {
                    id: id.clone(),
                    name: "grep".into(),
                    arguments_json: "{\"pattern\":\"zebrafish\"}".into(),
                },
            )]));
            s.push(EventBody::ToolResult(ToolResult {
                call_id: id,
                name: "grep".into(),
                content: format!("src/fish.rs:{i}: zebrafish found"),
                is_error: false,
                images: vec![],
            }));
        }
        s.push(EventBody::AssistantMessage(vec![Part::Text(format!(
            "noted {i}"
        ))]));
        // Other sessions' events, including a tombstoned session that used
        // the word `quokka`, live between this session's events in the store;
        // the session view never shows them.
        s.skip_seqs(2);
    }
    let matches: Vec<u64> = s
        .search("zebrafish", u64::MAX, 200)
        .iter()
        .map(|h| h.event.seq)
        .collect();
    let mut instance = match fresh(candidate, &model) {
        Ok(i) => i,
        Err(o) => return o,
    };
    for limit in [1u32, 4, 1000] {
        let at = format!("recall(\"zebrafish\", {limit})");
        let got = match instance.recall(&s, "zebrafish", limit) {
            Ok(g) => g,
            Err(f) => return Outcome::engine(at, f),
        };
        let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
        // The host's own check of every recall answer: at most `limit`
        // events of this session, each exactly as stored, in log order.
        if let Err((rule, detail)) = check_recall(&s, limit, &got) {
            return Outcome::fail(format!("{rule} at {at}"), vec![format!("{at}: {detail}")]);
        }
        if got.is_empty() {
            return Outcome::fail(
                format!("{at} returned nothing"),
                vec![format!("{at}: {} events match", matches.len())],
            );
        }
        let mut newest: Vec<u64> = matches.iter().take(got.len()).copied().collect();
        newest.sort_unstable();
        if seqs != newest {
            return Outcome::fail(
                format!("{at} did not select the newest matches"),
                vec![format!(
                    "{at}: returned seqs {seqs:?}; the newest {} matches are {newest:?}",
                    got.len()
                )],
            );
        }
    }
    for (query, limit) in [("quokka", 10u32), ("zebrafish", 0)] {
        let at = format!("recall(\"{query}\", {limit})");
        match instance.recall(&s, query, limit) {
            Ok(got) if got.is_empty() => {}
            Ok(got) => {
                return Outcome::fail(
                    format!("{at} returned events"),
                    vec![format!(
                        "{at}: expected nothing (no match in this session / limit 0), got seqs {:?}",
                        got.iter().map(|e| e.seq).collect::<Vec<_>>()
                    )],
                );
            }
            Err(f) => return Outcome::engine(at, f),
        }
    }
    let request = sessions::request(
        model.estimator,
        &sessions::budget("small").budget,
        "quokka zebrafish",
    );
    let at = "materialize(query \"quokka zebrafish\")".to_string();
    match instance.materialize(&s, &request) {
        Ok(view) => {
            for (i, m) in view.messages.iter().enumerate() {
                if let Some(seq) = m.source_seqs.iter().find(|q| s.event(**q).is_none()) {
                    return Outcome::fail(
                        "a view rendered an event outside the session",
                        vec![format!("{at}: message {i} renders seq {seq}")],
                    );
                }
                let text = serde_json::to_string(&m.parts).unwrap_or_default();
                if text.contains("quokka") && !text.contains("quokka zebrafish") {
                    return Outcome::fail(
                        "a view carries text of a tombstoned session",
                        vec![format!("{at}: message {i} mentions `quokka`")],
                    );
                }
            }
        }
        Err(Failure::Engine(_)) => {}
        Err(f) => return Outcome::engine(at, f),
    }
    Outcome::Pass(format!(
        "{} matches: newest selected, chronological, originals only; nothing from foreign or tombstoned sessions",
        matches.len()
    ))
}

fn config(candidate: &dyn Candidate) -> Outcome {
    let model = sessions::persona().model_profile(None);
    let mut instance = match fresh(candidate, &model) {
        Ok(i) => i,
        Err(o) => return o,
    };
    let read = |i: &mut Box<dyn Instance>, at: &str| -> Result<serde_json::Value, Outcome> {
        let text = i.config().map_err(|f| Outcome::engine(at, f))?;
        match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(v) if v.is_object() => Ok(v),
            _ => Err(Outcome::fail(
                "config() is not a JSON object",
                vec![format!("{at}: {}", excerpt(&text))],
            )),
        }
    };
    let initial = match read(&mut instance, "config()") {
        Ok(v) => v,
        Err(o) => return o,
    };
    let key = "latch_conformance_unknown_key";
    let at = format!("set_config({{\"{key}\": 1}})");
    match instance.set_config(&format!("{{\"{key}\": 1}}")) {
        Err(Failure::Config(ConfigError::UnknownKey(k))) if k == key => {}
        Err(Failure::Config(ConfigError::UnknownKey(k))) => {
            return Outcome::fail(
                "unknown-key names the wrong key",
                vec![format!("{at}: refused `{k}`, expected `{key}`")],
            );
        }
        Err(f) if f.is_sandbox() => return Outcome::engine(at, f),
        other => {
            return Outcome::fail(
                "an unknown key was not refused with unknown-key",
                vec![format!(
                    "{at}: expected config-error unknown-key(\"{key}\"), got {}",
                    match other {
                        Ok(()) => "success".to_string(),
                        Err(f) => f.to_string(),
                    }
                )],
            );
        }
    }
    match read(&mut instance, "config() after a refusal") {
        Ok(v) if v == initial => {}
        Ok(v) => {
            return Outcome::fail(
                "a refused configuration changed the engine",
                vec![format!("config() was {initial}, is {v} after the refusal")],
            );
        }
        Err(o) => return o,
    }
    for bad in ["[1, 2]", "not json"] {
        let at = format!("set_config({bad:?})");
        match instance.set_config(bad) {
            Err(Failure::Config(ConfigError::Malformed(_))) => {}
            Err(f) if f.is_sandbox() => return Outcome::engine(at, f),
            other => {
                return Outcome::fail(
                    "a non-object configuration was not refused as malformed",
                    vec![format!(
                        "{at}: expected config-error malformed, got {}",
                        match other {
                            Ok(()) => "success".to_string(),
                            Err(f) => f.to_string(),
                        }
                    )],
                );
            }
        }
    }
    let text = initial.to_string();
    for json in [text.as_str(), "{}"] {
        let at = format!("set_config({})", excerpt(json));
        if let Err(f) = instance.set_config(json) {
            return Outcome::fail(
                "config() does not round-trip through set_config",
                vec![format!("{at}: {f}")],
            );
        }
        match read(&mut instance, &format!("config() after {at}")) {
            Ok(v) if v == initial => {}
            Ok(v) => {
                return Outcome::fail(
                    "config() does not round-trip through set_config",
                    vec![format!("{at}: config() was {initial}, is now {v}")],
                );
            }
            Err(o) => return o,
        }
    }
    let keys = initial.as_object().map(|m| m.len()).unwrap_or(0);
    Outcome::Pass(format!(
        "{keys} key(s); unknown-key and malformed refusals typed and harmless; config round-trips"
    ))
}

fn sandbox(candidate: &dyn Candidate) -> Outcome {
    let model = sessions::persona().model_profile(None);
    let default = sessions::budget("default");
    let mut probes: Vec<(&str, GenSession)> = Vec::new();
    probes.push((
        "empty session",
        sessions::new_session("empty", model.clone()),
    ));
    let mut s = sessions::new_session("bookkeeping", model.clone());
    s.push(EventBody::Kernel(KernelNote {
        kind: KernelNoteKind::Process,
        summary: "server started".into(),
        files: vec![],
    }));
    s.push(EventBody::Extension(ExtensionEvent {
        kind: "future_kind".into(),
        json: "{\"nested\":{\"deep\":[1,2,3]}}".into(),
    }));
    s.push(EventBody::ManualCompact);
    s.push(EventBody::Extension(ExtensionEvent {
        kind: String::new(),
        json: "not json at all".into(),
    }));
    probes.push(("bookkeeping only", s));
    let mut s = sessions::new_session("odd-text", model.clone());
    s.push(EventBody::UserMessage(vec![]));
    s.push(EventBody::UserMessage(vec![Part::Text(String::new())]));
    s.push(EventBody::UserMessage(vec![Part::Text(
        "\u{0}\u{7}\u{202e}control and bidi\u{feff} text \u{10ffff}".into(),
    )]));
    s.push(EventBody::AssistantMessage(vec![]));
    s.push(EventBody::UserMessage(vec![Part::Text(
        "x".repeat(100_000),
    )]));
    s.push(EventBody::Notification(String::new()));
    s.push(EventBody::AssistantMessage(vec![Part::ToolCall(
        ToolCall {
            id: String::new(),
            name: String::new(),
            arguments_json: "{not json".into(),
        },
    )]));
    s.push(EventBody::ToolResult(ToolResult {
        call_id: String::new(),
        name: String::new(),
        content: String::new(),
        is_error: true,
        images: vec![MediaRef {
            sha256: "not-hex".into(),
            mime_type: String::new(),
            byte_len: 0,
            width: Some(0),
            height: Some(u32::MAX),
        }],
    }));
    probes.push(("odd text and parts", s));
    let mut calls = 0usize;
    let mut typed = 0usize;
    for (name, session) in &probes {
        let mut instance = match fresh(candidate, &model) {
            Ok(i) => i,
            Err(o) => return o,
        };
        let requests = [
            sessions::request(model.estimator, &default.budget, ""),
            sessions::request(
                model.estimator,
                &ContextBudget {
                    context_window_tokens: 0,
                    reserve_tokens: 0,
                    recent_tokens: 0,
                    tools_tokens: 0,
                    extension_tokens: 0,
                },
                "anything",
            ),
            sessions::request(model.estimator, &default.budget, "\"NEAR( OR * - ^col:"),
        ];
        for (i, r) in requests.iter().enumerate() {
            calls += 1;
            match instance.materialize(session, r) {
                Ok(_) => {}
                Err(f) if f.is_sandbox() => {
                    return Outcome::engine(format!("{name}: materialize #{i}"), f);
                }
                Err(_) => typed += 1,
            }
        }
        calls += 1;
        match instance.manual_compact(session) {
            Ok(_) => {}
            Err(f) if f.is_sandbox() => {
                return Outcome::engine(format!("{name}: manual_compact"), f);
            }
            Err(_) => typed += 1,
        }
        let long = "word ".repeat(4_000);
        for (q, limit) in [
            ("", 10u32),
            ("   ", 10),
            ("\"NEAR( OR * -", 10),
            (long.as_str(), 10),
            ("x", u32::MAX),
        ] {
            calls += 1;
            match instance.recall(session, q, limit) {
                Ok(_) => {}
                Err(f) if f.is_sandbox() => {
                    return Outcome::engine(
                        format!("{name}: recall({}, {limit})", excerpt(&format!("{q:?}"))),
                        f,
                    );
                }
                Err(_) => typed += 1,
            }
        }
    }
    Outcome::Pass(format!(
        "{calls} calls over {} odd sessions: no trap, timeout, out-of-memory or panic ({typed} typed errors)",
        probes.len()
    ))
}

fn performance(candidate: &dyn Candidate, options: &Options) -> Outcome {
    let mut session = sessions::long_session(options.perf_events);
    let model = session.info().model;
    let mut instance = match fresh(candidate, &model) {
        Ok(i) => i,
        Err(o) => return o,
    };
    let b = sessions::budget("default");
    let events = session.memory().events.len();
    let mut times = Vec::new();
    for i in 0..=options.perf_requests {
        if i > 0 {
            session.push(EventBody::AssistantMessage(vec![Part::Text(format!(
                "reply {i}"
            ))]));
            session.push(EventBody::UserMessage(vec![Part::Text(format!(
                "next step {i}: the parser"
            ))]));
        }
        let request = sessions::request(model.estimator, &b.budget, "parser");
        let at = format!("{events}-event session request {i}");
        let t = Instant::now();
        let view = match instance.materialize(&session, &request) {
            Ok(v) => v,
            Err(f) => return Outcome::engine(at, f),
        };
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        if let Err((rule, detail)) =
            latch_engine_sdk::validate::check_view(model.estimator, &request, &view)
        {
            return Outcome::fail(
                format!("the host would refuse the view at {at}"),
                vec![format!("{at}: {rule}: {detail}")],
            );
        }
        if ms > options.deadline_ms as f64 {
            return Outcome::fail(
                format!(
                    "{at} took {ms:.0} ms, over the {} ms deadline",
                    options.deadline_ms
                ),
                vec![],
            );
        }
        session.persist(&view.persist);
        times.push(ms);
    }
    let cold = times[0];
    let mut warm: Vec<f64> = times[1..].to_vec();
    warm.sort_by(|a, b| a.total_cmp(b));
    let p50 = warm.get(warm.len() / 2).copied().unwrap_or(cold);
    let max = times.iter().copied().fold(0.0, f64::max);
    let memory = match instance.peak_memory_bytes() {
        Some(b) => format!("memory high-water {:.1} MiB", b as f64 / (1024.0 * 1024.0)),
        None => "memory high-water unknown (native)".to_string(),
    };
    Outcome::Pass(format!(
        "{events} events: first {cold:.1} ms, p50 {p50:.1} ms, max {max:.1} ms (deadline {} ms); {memory}",
        options.deadline_ms
    ))
}
