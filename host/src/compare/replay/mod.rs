//! `latch engine replay`: recorded sessions played again through other
//! engines. For every recorded model request the log is rebuilt as it
//! stood ([`session::ReplaySession`]), each engine is asked for its view
//! under the same request and budget, and the view is priced and graded
//! ([`latch_conformance::compare::replay`]); the recorded responses follow
//! as they were ([`driver`]). Nothing is written to the store: a recording
//! is read from a store opened read-only or from a trace.

pub mod driver;
pub mod options;
mod prepared;
mod run;
pub mod session;
pub mod wire;

pub use driver::{ReplayedView, replay};
pub use options::{MakeEngine, ReplayEngine, ReplayOptions};
pub use run::RECALL_PROBE_LIMIT;
pub use session::ReplaySession;
pub use wire::provider_request;
