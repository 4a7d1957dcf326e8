//! What `latch engine compare` needs that does not drive an agent: the
//! scripted sessions and the scripted model that plays them, the planted
//! facts and their grading, the figures computed from captured requests and
//! provider usage, the two pricing styles, the report, and the
//! summarize-and-discard baseline engine the comparison always includes.
//!
//! The host drives the real agent loop, tools, store and engines against
//! the local wire-format server and hands the captured requests here; this
//! module never touches a store, a provider or an agent.
//!
//! Module order (each uses only those before it): [`facts`], [`wire`],
//! [`baseline`], [`sessions`], [`model`], [`metrics`], [`report`],
//! [`replay`] (what `latch engine replay` computes from replayed views).

pub mod baseline;
pub mod facts;
pub mod metrics;
pub mod model;
pub mod replay;
pub mod report;
pub mod sessions;
pub mod wire;

#[cfg(test)]
mod tests;

pub use baseline::{SummarizeEngine, Summarizer, SummaryRequest, is_summary_request};
pub use facts::{FACTS, Fact, FactId, Survival};
pub use metrics::{Cost, Exchange, RunFigures, RunRecord, Usage, figures};
pub use model::{Move, ScriptedModel};
pub use report::{CompareReport, EngineRun, SessionBlock};
pub use sessions::{Call, SessionKind, SessionPlan, plan};
