//! The replay itself: for each engine and each recorded session, rebuild
//! the log as it stood at every recorded model request, ask the engine for
//! its view under the same request and budget, keep the entries it asks to
//! persist in its own copy of the log (never the recorded engine's), and
//! price and grade the view ([`super::run`]). The recorded responses follow
//! as they were.

use super::options::{ReplayEngine, ReplayOptions};
use super::prepared::{Prepared, prepare};
use super::run::SessionRun;
use crate::compare::CompareError;
use crate::compare::recording::{Moment, Recording, RequestPoint};
use latch_conformance::compare::replay::{
    APPROXIMATION, EngineReplay, ProviderReport, RecordedRequest, ReplayReport, SessionLine,
};
use latch_engine_sdk::types::{ContextRequest, ContextView};
use latch_surface::PriceTable;
use std::sync::Arc;
use std::time::Instant;

/// A view an engine returned during a replay, for observers (tests, the
/// per-request output).
pub struct ReplayedView<'a> {
    /// Index of the engine.
    pub engine: usize,
    /// Index of the session.
    pub session: usize,
    /// The request's index in its session.
    pub request: usize,
    /// The request the engine was asked.
    pub request_sent: &'a ContextRequest,
    /// What the recorded request's agent sent with every view (tools,
    /// model, output limit).
    pub shape: &'a latch_kernel::RequestShape,
    /// The view.
    pub view: &'a ContextView,
}

/// Dollars of a recorded request's input by the provider's counts.
fn recorded_dollars(prices: Option<&PriceTable>, model: &str, u: &ProviderReport) -> Option<f64> {
    let p = prices?.price(model)?;
    let input = u.input_tokens?;
    let read = u.cache_read_tokens.unwrap_or(0);
    let write = u.cache_creation_tokens.unwrap_or(0);
    let rate = |n: u64, per: Option<f64>| match (n, per) {
        (0, _) => Some(0.0),
        (n, Some(p)) => Some(n as f64 * p),
        (_, None) => None,
    };
    let plain = input.saturating_sub(read).saturating_sub(write) as f64 * p.input;
    Some((plain + rate(read, p.cache_read)? + rate(write, p.cache_write)?) / 1e6)
}

/// Replay every session of `recording` through every engine.
pub fn replay(
    recording: &Recording,
    engines: &[ReplayEngine],
    options: &ReplayOptions,
    observer: &mut dyn FnMut(ReplayedView),
) -> Result<ReplayReport, CompareError> {
    let prepared: Vec<Prepared> = recording
        .sessions
        .iter()
        .map(prepare)
        .collect::<Result<_, _>>()?;
    let prices = options.prices.as_ref();
    let mut sessions = Vec::new();
    let mut recorded = Vec::new();
    for (i, p) in prepared.iter().enumerate() {
        let requests: Vec<&RequestPoint> = p
            .moments
            .iter()
            .filter_map(|m| match m {
                Moment::Request(r) => Some(r),
                Moment::Compact(_) => None,
            })
            .collect();
        let first = requests.first();
        sessions.push(SessionLine {
            id: p.session.id.clone(),
            parent: p.session.parent.clone(),
            model: first.map_or(p.session.model.model.clone(), |r| r.shape.model.clone()),
            requests: requests.len(),
            window_tokens: options.window_tokens.unwrap_or(
                first.map_or(p.session.model.context_window_tokens, |r| {
                    r.budget.context_window_tokens
                }),
            ),
            reserve_tokens: options.reserve_tokens.unwrap_or(
                first.map_or(p.session.model.reserve_tokens, |r| r.budget.reserve_tokens),
            ),
        });
        for r in requests {
            let provider = r.usage.and_then(|u| {
                u.input_tokens.map(|_| ProviderReport {
                    input_tokens: u.input_tokens,
                    cache_read_tokens: u.cache_read_tokens,
                    cache_creation_tokens: u.cache_creation_tokens,
                    output_tokens: u.output_tokens,
                })
            });
            recorded.push(RecordedRequest {
                session: i,
                request: r.index,
                engine: r.engine.clone(),
                estimated_tokens: r.usage.and_then(|u| u.estimated_input_tokens),
                dollars: provider
                    .as_ref()
                    .and_then(|u| recorded_dollars(prices, &r.shape.model, u)),
                provider,
            });
        }
    }
    let artifacts = Arc::new(recording.artifacts.clone());
    let mut replays = Vec::new();
    for (e, engine) in engines.iter().enumerate() {
        let started = Instant::now();
        let mut out = EngineReplay {
            engine: engine.name.clone(),
            requests: Vec::new(),
            rereferences: Vec::new(),
            seconds: 0.0,
        };
        for (s, p) in prepared.iter().enumerate() {
            let mut run = SessionRun::start(engine, p, artifacts.clone(), options)?;
            run.play(
                &mut out,
                &mut |request, shape, view, index| {
                    observer(ReplayedView {
                        engine: e,
                        session: s,
                        request: index,
                        request_sent: request,
                        shape,
                        view,
                    })
                },
                s,
            )?;
        }
        out.seconds = started.elapsed().as_secs_f64();
        replays.push(out);
    }
    Ok(ReplayReport {
        source: recording.source.clone(),
        redacted: recording.redacted,
        note: APPROXIMATION,
        sessions,
        recorded,
        rereferences: prepared
            .iter()
            .map(|p| p.rereferences.values().map(Vec::len).sum::<usize>())
            .sum(),
        engines: replays,
    })
}
