//! The host side of the contract's imports: the read-only `session-view`
//! resource and the canonical estimator, served from whatever
//! [`SessionView`] the current call was given.

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
        Ok(self.session.get()?.info().conv())
    }

    fn latest_seq(&mut self, _: Resource<SessionHandle>) -> wasmtime::Result<u64> {
        Ok(self.session.get()?.latest_seq())
    }

    fn events(
        &mut self,
        _: Resource<SessionHandle>,
        from: u64,
        to: u64,
        limit: u32,
    ) -> wasmtime::Result<Vec<wt::Event>> {
        let limit = limit.min(latch_engine_sdk::MAX_PAGE);
        Ok(self.session.get()?.events(from, to, limit).conv())
    }

    fn events_before(
        &mut self,
        _: Resource<SessionHandle>,
        before: u64,
        limit: u32,
    ) -> wasmtime::Result<Vec<wt::Event>> {
        let limit = limit.min(latch_engine_sdk::MAX_PAGE);
        Ok(self.session.get()?.events_before(before, limit).conv())
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
        Ok(self
            .session
            .get()?
            .events_outline(from, to, limit, profile.conv())
            .conv())
    }

    fn search(
        &mut self,
        _: Resource<SessionHandle>,
        query: String,
        before: u64,
        limit: u32,
    ) -> wasmtime::Result<Vec<wt::SearchHit>> {
        let limit = limit.min(latch_engine_sdk::MAX_SEARCH);
        Ok(self.session.get()?.search(&query, before, limit).conv())
    }

    fn canonical_state(
        &mut self,
        _: Resource<SessionHandle>,
    ) -> wasmtime::Result<wt::CanonicalState> {
        Ok(self.session.get()?.canonical_state().conv())
    }

    fn artifact(
        &mut self,
        _: Resource<SessionHandle>,
        sha256: String,
    ) -> wasmtime::Result<Option<wt::MediaRef>> {
        Ok(self.session.get()?.artifact(&sha256).conv())
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
        if texts.len() > MAX_ESTIMATE_BATCH {
            wasmtime::bail!(
                "estimate was called with {} strings; the limit is {MAX_ESTIMATE_BATCH} a call",
                texts.len()
            );
        }
        Ok(latch_engine_sdk::estimate_many(profile.conv(), &texts))
    }
}
