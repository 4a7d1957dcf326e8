//! [`AgentReport`]: the compact semantic result a child hands back, built by
//! the host (never written by the model) from the child's own log, and the
//! one provider-visible text the parent receives for it.

use crate::event::{CertificationOutcome, EventKind, Outcome, StoredEvent};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Most characters of a report's summary.
pub const SUMMARY_MAX_CHARS: usize = 2_000;
/// Most changed files a report lists.
pub const FILES_MAX: usize = 50;
/// Most validation entries a report lists (the newest).
pub const VALIDATIONS_MAX: usize = 20;

/// How a child's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportOutcome {
    /// The model ended its turn.
    Completed,
    /// The run failed (provider, engine or store error).
    Failed,
    /// The parent (or the user) cancelled it.
    Cancelled,
}

impl ReportOutcome {
    /// `completed`, `failed` or `cancelled`.
    pub fn label(self) -> &'static str {
        match self {
            ReportOutcome::Completed => "completed",
            ReportOutcome::Failed => "failed",
            ReportOutcome::Cancelled => "cancelled",
        }
    }

    /// True for the outcomes that did not finish the work.
    pub fn is_failure(self) -> bool {
        !matches!(self, ReportOutcome::Completed)
    }
}

/// One validation the child ran, carried for information only: it is never
/// evidence of the parent's session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InformationalValidation {
    /// The requirements it checked.
    pub requirements: Vec<String>,
    /// The command.
    pub command: String,
    /// What happened.
    pub outcome: Outcome,
    /// The workspace generation it checked.
    pub generation: u64,
}

/// The report of one finished child run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentReport {
    /// The child's role.
    pub role: String,
    /// How the run ended.
    pub outcome: ReportOutcome,
    /// The child's final answer (or the error), bounded.
    pub summary: String,
    /// Workspace-relative paths the child's mutations named.
    pub files_changed: Vec<String>,
    /// The child's validations, informational only.
    pub validations: Vec<InformationalValidation>,
    /// The child's last certification attempt: `certified`, `refused` or
    /// `not attempted`.
    pub certification: String,
}

fn bounded(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut} …[cut]")
}

/// The report of a child's run, from the child session's own events (its
/// mutations, validations and certification attempts) and how the run ended.
pub fn build_report(
    role: &str,
    child_events: &[StoredEvent],
    outcome: ReportOutcome,
    summary: &str,
) -> AgentReport {
    let mut files = BTreeSet::new();
    let mut validations = Vec::new();
    let mut certification = "not attempted".to_string();
    for e in child_events {
        match &e.kind {
            EventKind::Mutation { paths, .. } => files.extend(paths.iter().cloned()),
            EventKind::Validation {
                requirements,
                command,
                outcome,
                generation,
                ..
            } => validations.push(InformationalValidation {
                requirements: requirements.clone(),
                command: command.clone(),
                outcome: *outcome,
                generation: *generation,
            }),
            EventKind::CertificationAttempt {
                outcome, blockers, ..
            } => {
                certification = match outcome {
                    CertificationOutcome::Certified => "certified".to_string(),
                    CertificationOutcome::Refused => {
                        format!("refused: {}", blockers.join("; "))
                    }
                };
            }
            _ => {}
        }
    }
    let skip = validations.len().saturating_sub(VALIDATIONS_MAX);
    AgentReport {
        role: role.to_string(),
        outcome,
        summary: bounded(summary, SUMMARY_MAX_CHARS),
        files_changed: files.into_iter().take(FILES_MAX).collect(),
        validations: validations.into_iter().skip(skip).collect(),
        certification,
    }
}

/// The one provider-visible text the parent receives for a report.
pub fn notification_text(child: &str, report: &AgentReport) -> String {
    let mut text = format!(
        "[Latch] Child agent {child} ({}) {}.\nSummary: {}",
        report.role,
        report.outcome.label(),
        if report.summary.is_empty() {
            "(none)"
        } else {
            &report.summary
        }
    );
    if !report.files_changed.is_empty() {
        text.push_str(&format!(
            "\nFiles changed: {}",
            report.files_changed.join(", ")
        ));
    }
    if !report.validations.is_empty() {
        text.push_str("\nIts validations (informational; not evidence for this session):");
        for v in &report.validations {
            text.push_str(&format!(
                "\n- {} via `{}`: {} (generation {})",
                v.requirements.join("; "),
                v.command,
                v.outcome.label(),
                v.generation
            ));
        }
    }
    text.push_str(&format!("\nCertification: {}", report.certification));
    text
}
