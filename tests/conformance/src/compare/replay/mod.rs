//! What `latch engine replay` needs that does not touch a store or run an
//! engine: the price of each replayed request ([`pricing`]), what each
//! view kept of the session and the re-references found in the recorded
//! log ([`kept`]), the stand-in summary the baseline gets ([`summary`]) and
//! the report ([`report`]) with its text table ([`table`]).
//!
//! The host rebuilds each recorded request's log, asks each engine for its
//! view and hands the views here.

pub mod kept;
pub mod pricing;
pub mod report;
pub mod summary;
pub mod table;

pub use kept::{Items, Kept, Rereference, Reuse, Share, Standing, Standings, kept, rereferences};
pub use pricing::{InputPrice, PrefixTracker, Priced};
pub use report::{
    APPROXIMATION, EngineReplay, EngineSummary, ExtraRequest, Outcome, ProviderReport,
    REDACTED_NOTE, RecordedRequest, ReplayReport, ReplayedRequest, RereferenceOutcome, SessionLine,
};
pub use summary::extractive_summary;
