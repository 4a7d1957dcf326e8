//! The session view the agent lends an engine for one call.
//!
//! The contract's session-view methods cannot fail, but the store behind them
//! can (a disk error, a row this build cannot decode). The store's own view
//! panics on such an error; this wrapper never does: it records the first
//! store error, answers that call with an empty value, and the agent turns
//! the recorded error into an engine-call error after the call, discarding
//! whatever the engine answered from the incomplete reads.

use latch_engine_sdk::SessionView;
use latch_engine_sdk::types::{
    CanonicalState, EstimatorProfile, Event, MediaRef, OutlinedEvent, SearchHit, SessionInfo,
};
use latch_kernel::{StoreError, StoreSessionView};
use std::sync::Mutex;

/// A store error met while serving an engine call.
#[derive(Debug)]
pub(crate) struct ServedFailure {
    /// The session-view method that failed (`events`, `search`, ...).
    pub(crate) call: &'static str,
    /// The store's error.
    pub(crate) error: StoreError,
}

/// A [`StoreSessionView`] that records store errors instead of panicking.
pub(crate) struct GuardedView {
    inner: StoreSessionView,
    /// The session's facts as of the start of the call: what `info` answers
    /// if the store fails later in the call.
    info: SessionInfo,
    failure: Mutex<Option<ServedFailure>>,
}

impl GuardedView {
    /// Wrap `inner`; reads the session's facts first, so a store that is
    /// already failing is reported before any engine code runs.
    pub(crate) fn new(inner: StoreSessionView) -> Result<GuardedView, ServedFailure> {
        let info = inner.try_info().map_err(|error| ServedFailure {
            call: "info",
            error,
        })?;
        Ok(GuardedView {
            inner,
            info,
            failure: Mutex::new(None),
        })
    }

    /// The first store error met while serving the engine, if any.
    pub(crate) fn take_failure(&self) -> Option<ServedFailure> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    fn served<T>(&self, call: &'static str, result: Result<T, StoreError>, empty: T) -> T {
        match result {
            Ok(value) => value,
            Err(error) => {
                let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
                if slot.is_none() {
                    *slot = Some(ServedFailure { call, error });
                }
                empty
            }
        }
    }
}

impl SessionView for GuardedView {
    fn info(&self) -> SessionInfo {
        let fallback = self.info.clone();
        self.served("info", self.inner.try_info(), fallback)
    }
    fn latest_seq(&self) -> u64 {
        self.served("latest-seq", self.inner.try_latest_seq(), 0)
    }
    fn events(&self, from: u64, to: u64, limit: u32) -> Vec<Event> {
        self.served("events", self.inner.try_events(from, to, limit), vec![])
    }
    fn events_before(&self, before: u64, limit: u32) -> Vec<Event> {
        self.served(
            "events-before",
            self.inner.try_events_before(before, limit),
            vec![],
        )
    }
    fn events_outline(
        &self,
        from: u64,
        to: u64,
        limit: u32,
        profile: EstimatorProfile,
    ) -> Vec<OutlinedEvent> {
        self.served(
            "events-outline",
            self.inner.try_events_outline(from, to, limit, profile),
            vec![],
        )
    }
    fn search(&self, query: &str, before: u64, limit: u32) -> Vec<SearchHit> {
        self.served(
            "search",
            self.inner.try_search(query, before, limit),
            vec![],
        )
    }
    fn canonical_state(&self) -> CanonicalState {
        self.served(
            "canonical-state",
            self.inner.try_canonical_state(),
            CanonicalState::empty(),
        )
    }
    fn artifact(&self, sha256: &str) -> Option<MediaRef> {
        self.served("artifact", self.inner.try_artifact(sha256), None)
    }
}
