//! One engine replaying one recorded session: the engine's copy of the log
//! (the recorded events with the recorded engine's kernel-context entries
//! left out and its own put in), each moment asked again, each view priced
//! and graded.

use super::options::{ReplayEngine, ReplayOptions};
use super::prepared::{Prepared, input_price, tools_key};
use super::session::ReplaySession;
use crate::compare::CompareError;
use crate::compare::recording::{CompactPoint, Moment, RequestPoint};
use crate::engine::{ContextEngine, EngineFailure};
use latch_conformance::compare::replay::{
    EngineReplay, ExtraRequest, Items, Outcome, PrefixTracker, ReplayedRequest, RereferenceOutcome,
    Standing, extractive_summary, kept,
};
use latch_conformance::compare::{Summarizer, SummaryRequest};
use latch_engine_sdk::types::{ContextRequest, ContextView, EstimatorProfile, KernelContextEntry};
use latch_kernel::EventKind;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Events `recall` is asked for when a re-referenced result is not in view
/// (what the model's `recall` tool asks for when it names no limit).
pub const RECALL_PROBE_LIMIT: u32 = crate::agent::recall::DEFAULT_LIMIT;

/// What [`SessionRun::play`] reports each accepted view to: the request,
/// the recorded shape, the view and the request's index.
pub(super) type ViewSink<'o> =
    dyn FnMut(&ContextRequest, &latch_kernel::RequestShape, &ContextView, usize) + 'o;

/// The summarizer a summarizing engine gets during a replay: it records
/// each summary request (priced as an extra model call) and answers with
/// the extractive stand-in.
struct StandInSummarizer(Arc<Mutex<Vec<SummaryRequest>>>);

impl Summarizer for StandInSummarizer {
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, String> {
        let text = extractive_summary(request);
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request.clone());
        Ok(text)
    }
}

/// Sequence numbers of one engine's copy of the log: the recording's,
/// moved up past entries the engine persisted beyond the recorded room.
#[derive(Default)]
struct Seqs {
    shift: u64,
    floor: u64,
}

impl Seqs {
    /// The replayed number of the recorded `seq`.
    fn recorded(&mut self, seq: u64) -> u64 {
        let v = (seq + self.shift).max(self.floor);
        self.shift = v - seq;
        self.floor = v + 1;
        v
    }

    /// The number of an entry placed at the recorded `slot`, or right after
    /// the previous event.
    fn entry(&mut self, slot: Option<u64>) -> u64 {
        let v = slot.map_or(self.floor, |s| (s + self.shift).max(self.floor));
        self.floor = v + 1;
        v
    }
}

/// One engine replaying one session.
pub(super) struct SessionRun<'a> {
    prepared: &'a Prepared<'a>,
    engine: Box<dyn ContextEngine>,
    name: String,
    view: ReplaySession,
    seqs: Seqs,
    cursor: usize,
    summaries: Arc<Mutex<Vec<SummaryRequest>>>,
    tracker: PrefixTracker,
    profile: EstimatorProfile,
    options: &'a ReplayOptions,
    tools_keys: HashMap<*const latch_kernel::RequestShape, u64>,
    /// The last request asked, for a `/compact` that follows.
    last_request: Option<ContextRequest>,
}

impl<'a> SessionRun<'a> {
    pub(super) fn start(
        engine: &ReplayEngine,
        prepared: &'a Prepared<'a>,
        artifacts: Arc<BTreeMap<String, latch_engine_sdk::types::MediaRef>>,
        options: &'a ReplayOptions,
    ) -> Result<SessionRun<'a>, CompareError> {
        let session = prepared.session;
        let summaries = Arc::new(Mutex::new(Vec::new()));
        let instance = (engine.make)(session, Box::new(StandInSummarizer(summaries.clone())))?;
        Ok(SessionRun {
            prepared,
            engine: instance,
            name: engine.name.clone(),
            view: ReplaySession::new(
                &session.id,
                session.parent.clone(),
                &session.workspace,
                session.model.clone(),
                artifacts,
            ),
            seqs: Seqs::default(),
            cursor: 0,
            summaries,
            tracker: PrefixTracker::default(),
            profile: session.model.estimator,
            options,
            tools_keys: HashMap::new(),
            last_request: None,
        })
    }

    /// Push the recorded log up to (not including) `at`, leaving out the
    /// recorded engine's kernel-context entries.
    fn advance(&mut self, at: usize) {
        let session = self.prepared.session;
        while self.cursor < at {
            let l = &session.log[self.cursor];
            self.cursor += 1;
            let recorded_entry = l.session == session.id
                && matches!(l.event.event(), Some(EventKind::KernelContext(_)));
            if !recorded_entry {
                let seq = self.seqs.recorded(l.seq);
                self.view.push(l, seq);
            }
        }
    }

    /// Push the event at `at` itself (a request record or `/compact`).
    fn take(&mut self, at: usize) {
        self.advance(at);
        let l = &self.prepared.session.log[at];
        let seq = self.seqs.recorded(l.seq);
        self.view.push(l, seq);
        self.cursor = at + 1;
    }

    fn persist(&mut self, entries: &[KernelContextEntry], slots: &[u64], time_ms: u64) {
        for (i, entry) in entries.iter().enumerate() {
            let seq = self.seqs.entry(slots.get(i).copied());
            self.view
                .push_entry(&self.name, entry.clone(), seq, time_ms);
        }
    }

    fn request_of(&self, r: &RequestPoint) -> ContextRequest {
        let mut budget = r.budget;
        if let Some(w) = self.options.window_tokens {
            budget.context_window_tokens = w;
        }
        if let Some(reserve) = self.options.reserve_tokens {
            budget.reserve_tokens = reserve;
        }
        ContextRequest {
            system_prompt: r.shape.system_prompt.clone(),
            session_context: r.session_context.clone(),
            budget,
            query: r.query.clone(),
            extensions: r.shape.extensions.clone(),
        }
    }

    pub(super) fn play(
        &mut self,
        out: &mut EngineReplay,
        observer: &mut ViewSink,
        session: usize,
    ) -> Result<(), CompareError> {
        let moments = &self.prepared.moments;
        for (i, m) in moments.iter().enumerate() {
            match m {
                Moment::Request(r) => {
                    let replayed = self.request(r, observer)?;
                    out.requests.push(ReplayedRequest {
                        session,
                        request: r.index,
                        outcome: replayed.0,
                        extra: replayed.1,
                    });
                    out.rereferences.extend(replayed.2.into_iter().map(|mut x| {
                        x.session = session;
                        x
                    }));
                }
                Moment::Compact(c) => {
                    let next = moments[i + 1..].iter().find_map(|m| match m {
                        Moment::Request(r) => Some(r),
                        Moment::Compact(_) => None,
                    });
                    self.compact(c, next);
                }
            }
        }
        Ok(())
    }

    fn price_extra(&mut self, tools: (u64, u64), model: &str) -> Vec<ExtraRequest> {
        let asked: Vec<SummaryRequest> =
            std::mem::take(&mut *self.summaries.lock().unwrap_or_else(|p| p.into_inner()));
        let price = input_price(self.options.prices.as_ref(), model);
        asked
            .iter()
            .map(|s| {
                let priced = self
                    .tracker
                    .price(self.profile, tools, &s.system, &s.messages);
                ExtraRequest {
                    priced,
                    dollars: price.and_then(|p| p.dollars(&priced)),
                }
            })
            .collect()
    }

    fn request(
        &mut self,
        r: &RequestPoint,
        observer: &mut ViewSink,
    ) -> Result<(Outcome, Vec<ExtraRequest>, Vec<RereferenceOutcome>), CompareError> {
        self.advance(r.at);
        let request = self.request_of(r);
        let result = self.engine.materialize(&self.view, &request);
        let key = *self
            .tools_keys
            .entry(Arc::as_ptr(&r.shape))
            .or_insert_with(|| tools_key(&r.shape.tools));
        let tools = (key, request.budget.tools_tokens);
        let extra = self.price_extra(tools, &r.shape.model);
        let time_ms = self.prepared.session.log[r.at].time_ms;
        self.take(r.at);
        self.last_request = Some(request.clone());
        let view = match result {
            Ok(v) => v,
            Err(e @ EngineFailure::Rejected { .. }) => {
                return Ok((
                    Outcome::Refused {
                        error: e.to_string(),
                    },
                    extra,
                    Vec::new(),
                ));
            }
            Err(e) => {
                return Ok((
                    Outcome::Failed {
                        error: e.to_string(),
                    },
                    extra,
                    Vec::new(),
                ));
            }
        };
        observer(&request, &r.shape, &view, r.index);
        self.persist(&view.persist, &r.slots, time_ms);
        let priced = self
            .tracker
            .price(self.profile, tools, &view.system, &view.messages);
        let price = input_price(self.options.prices.as_ref(), &r.shape.model);
        let state = self.view.reducer().canonical();
        let items = Items {
            user_messages: self
                .view
                .user_messages()
                .iter()
                .map(|(seq, t)| (*seq, t.as_str()))
                .collect(),
            constraints: state.constraints.iter().map(|c| c.text.as_str()).collect(),
            decisions: state.decisions.iter().map(|d| d.text.as_str()).collect(),
        };
        let kept = kept(&view.messages, &items);
        let standings = self.standings(r.index, &view);
        Ok((
            Outcome::Viewed {
                priced,
                dollars: price.and_then(|p| p.dollars(&priced)),
                generation: view.report.epoch_generation,
                kept,
            },
            extra,
            standings,
        ))
    }

    /// Where each result the response to request `index` came back to
    /// stood in `view`, asking the engine's `recall` for those not in it.
    fn standings(&mut self, index: usize, view: &ContextView) -> Vec<RereferenceOutcome> {
        let Some(list) = self.prepared.rereferences.get(&index) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for x in list {
            let Some(seq) = self.view.replayed_seq(x.result_seq) else {
                continue;
            };
            let content = self
                .prepared
                .results
                .get(&x.result_seq)
                .map(|(_, c)| c.as_str())
                .unwrap_or("");
            let standing = if latch_conformance::compare::replay::kept::in_view(
                &view.messages,
                seq,
                &x.call_id,
                content,
            ) {
                Standing::InView
            } else {
                let found = x.queries.iter().any(|q| {
                    matches!(self.engine.recall(&self.view, q, RECALL_PROBE_LIMIT),
                        Ok(events) if events.iter().any(|e| e.seq == seq))
                });
                if found {
                    Standing::Recallable
                } else {
                    Standing::Lost
                }
            };
            out.push(RereferenceOutcome {
                session: 0,
                request: index,
                result_seq: x.result_seq,
                how: x.how,
                standing,
            });
        }
        out
    }

    /// A recorded `/compact`: the engine's fresh epoch, as the agent asks
    /// for it (a view's entries, or `manual-compact`'s), persisted where the
    /// recorded entries were.
    fn compact(&mut self, c: &CompactPoint, next: Option<&RequestPoint>) {
        let time_ms = self.prepared.session.log[c.at].time_ms;
        self.take(c.at);
        let base = match (&self.last_request, next) {
            (Some(r), _) => Some(r.clone()),
            (None, Some(n)) => Some(self.request_of(n)),
            (None, None) => None,
        };
        let Some(mut request) = base else { return };
        request.query = c.query.clone();
        let entries = match self.engine.materialize(&self.view, &request) {
            Ok(v) if !v.persist.is_empty() => v.persist,
            Ok(_) => self.engine.manual_compact(&self.view).unwrap_or_default(),
            Err(_) => return,
        };
        self.persist(&entries, &c.slots, time_ms);
    }
}
