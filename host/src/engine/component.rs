//! [`ComponentEngine`]: one sandboxed instance of an engine component serving
//! one session. A trap, timeout, out-of-memory or panic ends that call with a
//! typed [`EngineFailure`]; the instance is discarded and rebuilt (≈ tens of
//! microseconds from the pre-linked component) for the next call.

use super::bindings::context::ContextEngine as EngineBindings;
use super::convert::Conv;
use super::display::{MAX_PRINTED_CHARS, terminal_safe};
use super::guard::ViewGuard;
use super::runtime::{EPOCH_TICK, LoadedComponent};
use super::sandbox::{EngineState, SandboxHandles, SandboxLimits};
use super::session_host::{HostCallError, SessionHandle};
use super::{ContextEngine, ContextEngineFactory, EngineFailure};
use latch_engine_sdk::types::*;
use latch_engine_sdk::{KeptTooMany, SessionView, ViewAssembler};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use wasmtime::Store;
use wasmtime::component::{Resource, ResourceAny};

/// A live instance: its store, bindings and the engine resource.
struct Live {
    store: Store<EngineState>,
    bindings: EngineBindings,
    resource: ResourceAny,
    handles: SandboxHandles,
}

/// View messages an engine moved across the boundary, against the messages
/// of the whole views they described (see the contract's `kept-messages`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViewTraffic {
    /// Messages the engine returned.
    pub received: u64,
    /// Messages of the assembled views.
    pub assembled: u64,
}

/// One session's engine, running as a sandboxed component instance.
pub struct ComponentEngine {
    loaded: Arc<LoadedComponent>,
    limits: SandboxLimits,
    session_id: String,
    model: ModelProfile,
    config_json: Option<String>,
    estimator: Option<EstimatorProfile>,
    live: Option<Live>,
    /// Restores whole views from the live instance's continued ones.
    views: ViewAssembler,
    /// The host's checks on the instance's views and entries.
    guard: ViewGuard,
    /// How many messages the last view kept from the one before it.
    last_kept: usize,
    traffic: ViewTraffic,
    instantiations: u64,
    peak_memory_bytes: usize,
}

impl ComponentEngine {
    /// An engine for `session_id`; the instance is created on first use.
    pub fn new(
        loaded: Arc<LoadedComponent>,
        limits: SandboxLimits,
        session_id: &str,
        model: ModelProfile,
    ) -> Self {
        ComponentEngine {
            guard: ViewGuard::new(model.estimator, limits.kernel_context()),
            last_kept: 0,
            loaded,
            limits,
            session_id: session_id.to_string(),
            model,
            config_json: None,
            estimator: None,
            live: None,
            views: ViewAssembler::new(),
            traffic: ViewTraffic::default(),
            instantiations: 0,
            peak_memory_bytes: 0,
        }
    }

    /// How many view messages crossed the boundary and how many the
    /// assembled views held, over this engine's life.
    pub fn view_traffic(&self) -> ViewTraffic {
        self.traffic
    }

    /// How many instances have been created (1 + rebuilds after failures).
    pub fn instantiations(&self) -> u64 {
        self.instantiations
    }

    /// The largest linear memory any instance of this engine was granted.
    pub fn peak_memory_bytes(&self) -> usize {
        self.live
            .as_ref()
            .map(|l| l.store.data().limiter.peak_bytes)
            .unwrap_or(0)
            .max(self.peak_memory_bytes)
    }

    /// The limits this engine runs under.
    pub fn limits(&self) -> &SandboxLimits {
        &self.limits
    }

    /// Create the instance if there is none.
    pub fn ensure_instance(&mut self) -> Result<(), EngineFailure> {
        if self.live.is_some() {
            return Ok(());
        }
        // A new instance has no previous view to continue.
        self.views.reset();
        self.guard.reset();
        let (state, handles) = EngineState::new(&self.limits, &self.session_id);
        let mut store = Store::new(self.loaded.pre.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(self.deadline_ticks());
        store.epoch_deadline_trap();
        self.instantiations += 1;
        let bindings = match self.loaded.pre.instantiate(&mut store) {
            Ok(b) => b,
            Err(e) => {
                return Err(EngineFailure::Instantiate {
                    engine: self.loaded.name.clone(),
                    message: format!("{e:#}"),
                });
            }
        };
        let model: super::bindings::context::latch::context::types::ModelProfile =
            self.model.clone().conv();
        let constructed = bindings
            .latch_context_engine()
            .context_engine()
            .call_constructor(&mut store, &model);
        let resource = match constructed {
            Ok(r) => r,
            Err(e) => return Err(self.classify(e, &store, &handles)),
        };
        let mut live = Live {
            store,
            bindings,
            resource,
            handles,
        };
        // Re-apply what the host configured on earlier instances.
        if let Some(json) = self.config_json.clone() {
            let guest = live.bindings.latch_context_engine().context_engine();
            match guest.call_set_config(&mut live.store, live.resource, &json) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    return Err(EngineFailure::Config {
                        engine: self.loaded.name.clone(),
                        error: error.conv(),
                    });
                }
                Err(e) => return Err(self.classify(e, &live.store, &live.handles)),
            }
        }
        if let Some(profile) = self.estimator {
            let guest = live.bindings.latch_context_engine().context_engine();
            if let Err(e) = guest.call_set_estimator(&mut live.store, live.resource, profile.conv())
            {
                return Err(self.classify(e, &live.store, &live.handles));
            }
        }
        self.live = Some(live);
        Ok(())
    }

    fn deadline_ticks(&self) -> u64 {
        self.limits
            .deadline_ms
            .div_ceil(EPOCH_TICK.as_millis() as u64)
            .max(1)
            + 1
    }

    /// Run one guest call with the session lent to the store. On a trap the
    /// instance is dropped; it is rebuilt on the next call.
    fn call<R>(
        &mut self,
        session: Option<&dyn SessionView>,
        f: impl FnOnce(&mut Live, Option<Resource<SessionHandle>>) -> wasmtime::Result<R>,
    ) -> Result<R, EngineFailure> {
        self.ensure_instance()?;
        // Taken out so that a panic in host code leaves no half-used instance.
        let mut live = self.live.take().expect("instance ensured above");
        live.store.set_epoch_deadline(self.deadline_ticks());
        live.store.data_mut().limiter.hit = false;
        let started = Instant::now();
        live.store.data_mut().started = Some(started);
        let mut owned = None;
        if let Some(session) = session {
            let latest_time = session
                .events_before(u64::MAX, 1)
                .first()
                .map(|e| e.time_ms)
                .unwrap_or(0);
            live.handles.clock_ms.store(latest_time, Ordering::Relaxed);
            // SAFETY: cleared below before `session` can go out of scope, and
            // the store stays on this thread for the call.
            unsafe { live.store.data_mut().session.lend(session) };
            match live.store.data_mut().table.push(SessionHandle) {
                Ok(handle) => owned = Some(handle),
                Err(e) => {
                    live.store.data_mut().session.clear();
                    return Err(EngineFailure::Trap {
                        engine: self.loaded.name.clone(),
                        message: format!("session handle table: {e}"),
                    });
                }
            }
        }
        let borrow = owned
            .as_ref()
            .map(|h| Resource::<SessionHandle>::new_borrow(h.rep()));
        let result = f(&mut live, borrow);
        live.store.data_mut().started = None;
        live.store.data_mut().session.clear();
        if let Some(handle) = owned {
            let _ = live.store.data_mut().table.delete(handle);
        }
        self.peak_memory_bytes = self
            .peak_memory_bytes
            .max(live.store.data().limiter.peak_bytes);
        match result {
            Ok(value) => {
                forward_logs(&self.loaded.name, &live.handles);
                self.live = Some(live);
                Ok(value)
            }
            Err(e) => {
                let mut failure = self.classify(e, &live.store, &live.handles);
                if let EngineFailure::Timeout { elapsed_ms, .. } = &mut failure {
                    *elapsed_ms = (*elapsed_ms).max(started.elapsed().as_millis() as u64);
                }
                Err(failure)
            }
        }
    }

    /// The instance's whole view, before the host's checks (the conformance
    /// suite checks it with the same rules and reports the evidence).
    pub fn materialize_unchecked(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, EngineFailure> {
        let request: super::bindings::context::exports::latch::context::engine::ContextRequest =
            request.clone().conv();

        let result = self.call(Some(session), |live, handle| {
            live.bindings
                .latch_context_engine()
                .context_engine()
                .call_materialize(
                    &mut live.store,
                    live.resource,
                    handle.expect("session lent"),
                    &request,
                )
        })?;
        let view = result.map_err(|e| EngineFailure::Engine {
            engine: self.loaded.name.clone(),
            error: e.conv(),
        })?;
        let received = view.messages.len() as u64;
        self.last_kept = view.kept_messages as usize;
        let whole = self
            .views
            .assemble(view.conv())
            .map_err(|e| EngineFailure::Rejected {
                engine: self.loaded.name.clone(),
                rule: KeptTooMany::RULE,
                detail: e.to_string(),
            })?;
        self.traffic.received += received;
        self.traffic.assembled += whole.messages.len() as u64;
        Ok(whole)
    }

    /// The instance's `manual-compact` entries, before the host's checks.
    pub fn manual_compact_unchecked(
        &mut self,
        session: &dyn SessionView,
    ) -> Result<Vec<KernelContextEntry>, EngineFailure> {
        let result = self.call(Some(session), |live, handle| {
            live.bindings
                .latch_context_engine()
                .context_engine()
                .call_manual_compact(
                    &mut live.store,
                    live.resource,
                    handle.expect("session lent"),
                )
        })?;
        result.map(Conv::conv).map_err(|e| EngineFailure::Engine {
            engine: self.loaded.name.clone(),
            error: e.conv(),
        })
    }

    /// Turn a wasmtime error into the failure the user reads.
    fn classify(
        &self,
        error: wasmtime::Error,
        store: &Store<EngineState>,
        handles: &SandboxHandles,
    ) -> EngineFailure {
        let engine = self.loaded.name.clone();
        let (stderr, _) = handles.stderr.drain();
        let (stdout, _) = handles.stdout.drain();
        if !stdout.is_empty() {
            tracing::info!(target: "latch::engine", engine = %engine, "{}", log_line(&stdout));
        }
        if !stderr.is_empty() {
            tracing::warn!(target: "latch::engine", engine = %engine, "{}", log_line(&stderr));
        }
        match error.downcast_ref::<HostCallError>() {
            Some(HostCallError::Deadline {
                elapsed_ms,
                deadline_ms,
                ..
            }) => {
                return EngineFailure::Timeout {
                    engine,
                    deadline_ms: *deadline_ms,
                    elapsed_ms: *elapsed_ms,
                };
            }
            Some(refused @ HostCallError::Refused { .. }) => {
                return EngineFailure::HostCall {
                    engine,
                    detail: refused.to_string(),
                };
            }
            None => {}
        }
        if matches!(
            error.downcast_ref::<wasmtime::Trap>(),
            Some(wasmtime::Trap::Interrupt)
        ) {
            return EngineFailure::Timeout {
                engine,
                deadline_ms: self.limits.deadline_ms,
                elapsed_ms: 0,
            };
        }
        if store.data().limiter.hit {
            return EngineFailure::OutOfMemory {
                engine,
                limit_mib: self.limits.memory_mib,
            };
        }
        if let Some(pos) = stderr.find("panicked at") {
            let message = stderr[pos..].lines().take(3).collect::<Vec<_>>().join(" ");
            return EngineFailure::Panic { engine, message };
        }
        let mut message = format!("{error:#}");
        if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
            message = format!("{trap}: {message}");
        }
        if !stderr.trim().is_empty() {
            let tail: String = stderr
                .trim_end()
                .chars()
                .rev()
                .take(400)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            message.push_str(&format!(" (engine stderr: {tail})"));
        }
        EngineFailure::Trap { engine, message }
    }
}

/// A captured guest log as one printable line.
fn log_line(text: &str) -> String {
    terminal_safe(text.trim_end(), MAX_PRINTED_CHARS)
}

fn forward_logs(engine: &str, handles: &SandboxHandles) {
    for (stream, log) in [("stdout", &handles.stdout), ("stderr", &handles.stderr)] {
        let (text, dropped) = log.drain();
        if !text.is_empty() {
            tracing::info!(target: "latch::engine", engine = %engine, stream, "{}", log_line(&text));
        }
        if dropped > 0 {
            tracing::warn!(target: "latch::engine", engine = %engine, stream, "dropped {dropped} bytes of engine output over the cap");
        }
    }
}

impl ContextEngine for ComponentEngine {
    fn name(&self) -> &str {
        &self.loaded.name
    }

    fn config(&mut self) -> Result<String, EngineFailure> {
        self.call(None, |live, _| {
            live.bindings
                .latch_context_engine()
                .context_engine()
                .call_config(&mut live.store, live.resource)
        })
    }

    fn set_config(&mut self, json: &str) -> Result<(), EngineFailure> {
        let result = self.call(None, |live, _| {
            live.bindings
                .latch_context_engine()
                .context_engine()
                .call_set_config(&mut live.store, live.resource, json)
        })?;
        match result {
            Ok(()) => {
                self.config_json = Some(json.to_string());
                Ok(())
            }
            Err(error) => Err(EngineFailure::Config {
                engine: self.loaded.name.clone(),
                error: error.conv(),
            }),
        }
    }

    fn set_estimator(&mut self, profile: EstimatorProfile) -> Result<(), EngineFailure> {
        self.call(None, |live, _| {
            live.bindings
                .latch_context_engine()
                .context_engine()
                .call_set_estimator(&mut live.store, live.resource, profile.conv())
        })?;
        self.estimator = Some(profile);
        Ok(())
    }

    fn default_budget(&mut self) -> Result<ContextBudget, EngineFailure> {
        let budget = self.call(None, |live, _| {
            live.bindings
                .latch_context_engine()
                .context_engine()
                .call_default_budget(&mut live.store, live.resource)
        })?;
        Ok(budget.conv())
    }

    fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, EngineFailure> {
        let view = self.materialize_unchecked(session, request)?;
        let accepted =
            self.guard
                .accept_continued(&self.loaded.name, session, request, &view, self.last_kept);
        if accepted.is_err() {
            // The instance believes the refused view was sent: replace it,
            // so that nothing is ever continued from a view the host refused.
            self.live = None;
            self.views.reset();
            self.guard.reset();
        }
        accepted.map(|()| view)
    }

    fn manual_compact(
        &mut self,
        session: &dyn SessionView,
    ) -> Result<Vec<KernelContextEntry>, EngineFailure> {
        let entries = self.manual_compact_unchecked(session)?;
        self.guard
            .accept_entries(&self.loaded.name, session, &entries)?;
        Ok(entries)
    }

    fn recall(
        &mut self,
        session: &dyn SessionView,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Event>, EngineFailure> {
        let result = self.call(Some(session), |live, handle| {
            live.bindings
                .latch_context_engine()
                .context_engine()
                .call_recall(
                    &mut live.store,
                    live.resource,
                    handle.expect("session lent"),
                    query,
                    limit,
                )
        })?;
        result.map(Conv::conv).map_err(|e| EngineFailure::Engine {
            engine: self.loaded.name.clone(),
            error: e.conv(),
        })
    }
}

/// Builds [`ComponentEngine`]s from one loaded component, configured the same
/// way for every session.
pub struct ComponentFactory {
    loaded: Arc<LoadedComponent>,
    limits: SandboxLimits,
    config_json: Option<String>,
}

impl ComponentFactory {
    /// A factory over `loaded`, with engine configuration `config_json` (a JSON
    /// object, `None` for the engine's defaults).
    pub fn new(
        loaded: Arc<LoadedComponent>,
        limits: SandboxLimits,
        config_json: Option<String>,
    ) -> Self {
        ComponentFactory {
            loaded,
            limits,
            config_json,
        }
    }

    /// The component this factory instantiates.
    pub fn component(&self) -> &Arc<LoadedComponent> {
        &self.loaded
    }

    /// A concrete engine (for callers that need its diagnostics).
    pub fn create_component(
        &self,
        session_id: &str,
        model: &ModelProfile,
    ) -> Result<ComponentEngine, EngineFailure> {
        let mut engine = ComponentEngine::new(
            self.loaded.clone(),
            self.limits.clone(),
            session_id,
            model.clone(),
        );
        engine.ensure_instance()?;
        if let Some(json) = &self.config_json {
            engine.set_config(json)?;
        }
        Ok(engine)
    }
}

/// The default factory, by the spec's name: the embedded reference
/// ContinuityEngine with its default configuration, sandboxed under
/// `limits`. Every engine it builds is exactly
/// `ContinuityEngine::for_model(model)`, run as a component (the invariant
/// tier pins that their views are byte-identical). The supervisor holds it
/// whenever the configuration names no other engine.
pub fn continuity_context_engine_factory(
    limits: SandboxLimits,
) -> Result<ComponentFactory, super::LoadError> {
    let source = super::runtime::EngineSource::Builtin("continuity".into());
    let loaded = super::EngineRuntime::global()?.load(&source)?;
    Ok(ComponentFactory::new(loaded, limits, None))
}

impl ContextEngineFactory for ComponentFactory {
    fn describe(&self) -> String {
        self.loaded.name.clone()
    }

    fn create(
        &self,
        session_id: &str,
        model: &ModelProfile,
    ) -> Result<Box<dyn ContextEngine>, EngineFailure> {
        Ok(Box::new(self.create_component(session_id, model)?))
    }
}
