//! The host side of the contract's imports: the read-only `session-view`
//! resource and the canonical estimator, served from whatever
//! [`SessionView`] the current call was given.
//!
//! Every import is bounded: inputs past [`HostCallLimits`] are refused with a
//! typed [`HostCallError`] (the guest call traps with it and the host reports
//! it by name), and each host call starts and ends by checking the call's
//! deadline, so time spent in the host counts against the engine's budget: a
//! call over budget stops at its next host-call boundary and is reported with
//! the real time it took.

use super::bindings::context::latch::context::{estimator, session, types as wt};
use super::convert::Conv;
use super::sandbox::EngineState;
use latch_engine_sdk::SessionView;
use std::ptr::NonNull;
use wasmtime::component::Resource;

/// The representation of a `session-view` handle in the resource table. The
/// handle carries nothing: it stands for the session of the call in progress.
pub struct SessionHandle;

/// Most strings one `estimate` call may price.
pub const MAX_ESTIMATE_BATCH: usize = 10_000;

/// Input limits of the imports (see the contract's `session` and
/// `estimator` interfaces).
pub struct HostCallLimits;

impl HostCallLimits {
    /// Most bytes of a `search` query.
    pub const SEARCH_QUERY_BYTES: usize = latch_engine_sdk::MAX_SEARCH_QUERY_BYTES;
    /// Most words of a `search` query.
    pub const SEARCH_QUERY_WORDS: usize = latch_engine_sdk::MAX_SEARCH_QUERY_WORDS;
    /// Most strings one `estimate` call prices.
    pub const ESTIMATE_STRINGS: usize = MAX_ESTIMATE_BATCH;
    /// Most bytes, all strings together, one `estimate` call prices.
    pub const ESTIMATE_BYTES: usize = 16 << 20;
    /// Longest `artifact` hash argument (a SHA-256 in hex is 64).
    pub const ARTIFACT_HASH_BYTES: usize = 64;
}

/// Why the host ended an engine call inside one of its imports.
#[derive(Debug, thiserror::Error)]
pub enum HostCallError {
    /// An argument exceeded the import's input limits.
    #[error("host call `{call}` refused: {reason}")]
    Refused {
        /// The import, e.g. `session-view.search`.
        call: &'static str,
        /// What exceeded which limit.
        reason: String,
    },
    /// The call's deadline passed; found at a host-call boundary.
    #[error(
        "the {deadline_ms} ms deadline passed at host call `{call}`, {elapsed_ms} ms into the call"
    )]
    Deadline {
        /// The import at whose boundary the deadline was found passed.
        call: &'static str,
        /// Real time since the engine call started.
        elapsed_ms: u64,
        /// The deadline.
        deadline_ms: u64,
    },
}

fn refuse<T>(call: &'static str, reason: String) -> wasmtime::Result<T> {
    Err(wasmtime::Error::new(HostCallError::Refused {
        call,
        reason,
    }))
}

impl EngineState {
    /// Stop the call if its deadline has passed (checked as each host call
    /// starts and ends).
    fn boundary(&self, call: &'static str) -> wasmtime::Result<()> {
        if let Some(started) = self.started {
            let elapsed = started.elapsed();
            if elapsed > self.deadline {
                return Err(wasmtime::Error::new(HostCallError::Deadline {
                    call,
                    elapsed_ms: elapsed.as_millis() as u64,
                    deadline_ms: self.deadline.as_millis() as u64,
                }));
            }
        }
        Ok(())
    }

    /// Run one host call between two deadline checks.
    fn bounded<T>(
        &mut self,
        call: &'static str,
        f: impl FnOnce(&mut Self) -> wasmtime::Result<T>,
    ) -> wasmtime::Result<T> {
        self.boundary(call)?;
        let value = f(self)?;
        self.boundary(call)?;
        Ok(value)
    }
}

/// The session a call is running against, lent to the store for the call's
/// duration only.
#[derive(Default)]
pub struct SessionSlot(Option<NonNull<dyn SessionView + 'static>>);

// SAFETY: the pointer is set by `ComponentEngine` immediately before a
// synchronous call into the guest and cleared right after it, on the same
// thread; it is never dereferenced outside that window.
unsafe impl Send for SessionSlot {}

impl SessionSlot {
    /// Lend `session` for the duration of one call.
    ///
    /// # Safety
    /// The caller must call [`SessionSlot::clear`] before `session` is dropped
    /// and must not let the store be used by another thread meanwhile.
    pub unsafe fn lend(&mut self, session: &dyn SessionView) {
        let ptr: NonNull<dyn SessionView + '_> = NonNull::from(session);
        // SAFETY: lifetime erased; upheld by the contract above.
        self.0 = Some(unsafe {
            std::mem::transmute::<NonNull<dyn SessionView + '_>, NonNull<dyn SessionView + 'static>>(
                ptr,
            )
        });
    }

    /// End the loan.
    pub fn clear(&mut self) {
        self.0 = None;
    }

    fn get(&self) -> wasmtime::Result<&dyn SessionView> {
        match self.0 {
            // SAFETY: see `lend`.
            Some(ptr) => Ok(unsafe { ptr.as_ref() }),
            None => Err(wasmtime::format_err!(
                "the engine used a session-view outside the call it was lent to"
            )),
        }
    }
}

impl wt::Host for EngineState {}
impl session::Host for EngineState {}

impl session::HostSessionView for EngineState {
    fn info(&mut self, _: Resource<SessionHandle>) -> wasmtime::Result<wt::SessionInfo> {
        self.bounded("session-view.info", |s| Ok(s.session.get()?.info().conv()))
    }

    fn latest_seq(&mut self, _: Resource<SessionHandle>) -> wasmtime::Result<u64> {
        self.bounded("session-view.latest-seq", |s| {
            Ok(s.session.get()?.latest_seq())
        })
    }

    fn events(
        &mut self,
        _: Resource<SessionHandle>,
        from: u64,
        to: u64,
        limit: u32,
    ) -> wasmtime::Result<Vec<wt::Event>> {
        let limit = limit.min(latch_engine_sdk::MAX_PAGE);
        self.bounded("session-view.events", |s| {
            Ok(s.session.get()?.events(from, to, limit).conv())
        })
    }

    fn events_before(
        &mut self,
        _: Resource<SessionHandle>,
        before: u64,
        limit: u32,
    ) -> wasmtime::Result<Vec<wt::Event>> {
        let limit = limit.min(latch_engine_sdk::MAX_PAGE);
        self.bounded("session-view.events-before", |s| {
            Ok(s.session.get()?.events_before(before, limit).conv())
        })
    }

    fn events_outline(
        &mut self,
        _: Resource<SessionHandle>,
        from: u64,
        to: u64,
        limit: u32,
        profile: wt::EstimatorProfile,
    ) -> wasmtime::Result<Vec<wt::OutlinedEvent>> {
        let limit = limit.min(latch_engine_sdk::MAX_PAGE);
        self.bounded("session-view.events-outline", |s| {
            Ok(s.session
                .get()?
                .events_outline(from, to, limit, profile.conv())
                .conv())
        })
    }

    fn search(
        &mut self,
        _: Resource<SessionHandle>,
        query: String,
        before: u64,
        limit: u32,
    ) -> wasmtime::Result<Vec<wt::SearchHit>> {
        const CALL: &str = "session-view.search";
        if query.len() > HostCallLimits::SEARCH_QUERY_BYTES {
            return refuse(
                CALL,
                format!(
                    "the query is {} bytes; the limit is {} (search for a few words, not a document)",
                    query.len(),
                    HostCallLimits::SEARCH_QUERY_BYTES
                ),
            );
        }
        let words = query.split_whitespace().count();
        if words > HostCallLimits::SEARCH_QUERY_WORDS {
            return refuse(
                CALL,
                format!(
                    "the query has {words} words; the limit is {}",
                    HostCallLimits::SEARCH_QUERY_WORDS
                ),
            );
        }
        let limit = limit.min(latch_engine_sdk::MAX_SEARCH);
        self.bounded(CALL, |s| {
            Ok(s.session.get()?.search(&query, before, limit).conv())
        })
    }

    fn canonical_state(
        &mut self,
        _: Resource<SessionHandle>,
    ) -> wasmtime::Result<wt::CanonicalState> {
        self.bounded("session-view.canonical-state", |s| {
            Ok(s.session.get()?.canonical_state().conv())
        })
    }

    fn artifact(
        &mut self,
        _: Resource<SessionHandle>,
        sha256: String,
    ) -> wasmtime::Result<Option<wt::MediaRef>> {
        if sha256.len() > HostCallLimits::ARTIFACT_HASH_BYTES {
            return refuse(
                "session-view.artifact",
                format!(
                    "the hash is {} bytes; a SHA-256 in hex is {}",
                    sha256.len(),
                    HostCallLimits::ARTIFACT_HASH_BYTES
                ),
            );
        }
        self.bounded("session-view.artifact", |s| {
            Ok(s.session.get()?.artifact(&sha256).conv())
        })
    }

    fn drop(&mut self, handle: Resource<SessionHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl estimator::Host for EngineState {
    fn estimate(
        &mut self,
        profile: wt::EstimatorProfile,
        texts: Vec<String>,
    ) -> wasmtime::Result<Vec<u32>> {
        const CALL: &str = "estimator.estimate";
        if texts.len() > HostCallLimits::ESTIMATE_STRINGS {
            return refuse(
                CALL,
                format!(
                    "{} strings; the limit is {} a call",
                    texts.len(),
                    HostCallLimits::ESTIMATE_STRINGS
                ),
            );
        }
        let bytes: usize = texts.iter().map(String::len).sum();
        if bytes > HostCallLimits::ESTIMATE_BYTES {
            return refuse(
                CALL,
                format!(
                    "{bytes} bytes of text; the limit is {} a call",
                    HostCallLimits::ESTIMATE_BYTES
                ),
            );
        }
        self.bounded(CALL, |_| {
            Ok(latch_engine_sdk::estimate_many(profile.conv(), &texts))
        })
    }
}
