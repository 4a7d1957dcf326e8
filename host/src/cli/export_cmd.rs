//! `latch export`: a session as Markdown a person can read, as its durable
//! events in JSON ([`latch_surface::export`]), or as a trace engine authors
//! can replay (`--trace`, [`crate::compare::trace`]). The store is opened
//! read-only; a session deleted from history is refused. [`to_file`] is
//! the `/export` slash command of the terminal UI and the line interface.

use super::GlobalArgs;
use super::read_only;
use crate::compare::recording::{from_store, open_session};
use crate::compare::trace;
use latch_kernel::{SessionRecord, Store};
use latch_surface::export::{SessionHeader, json, markdown};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What `latch export` writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Markdown: the transcript, tool calls folded, edits as diffs.
    #[default]
    Md,
    /// The session's durable events as JSON.
    Json,
}

/// `latch export` arguments.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Session id or unique prefix (default: the workspace's latest).
    pub session: Option<String>,
    /// Markdown or the durable events as JSON.
    #[arg(long, value_enum, default_value_t = Format::Md, conflicts_with = "trace")]
    pub format: Format,
    /// Write here instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE", conflicts_with = "trace")]
    pub output: Option<PathBuf>,
    /// Write the session as a trace (versioned JSONL, docs/trace-format.md)
    /// for `latch engine replay` and `latch engine compare --trace`.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// With --trace: replace file contents and command output by
    /// same-length placeholders.
    #[arg(long, requires = "trace")]
    pub redact: bool,
    /// With --trace: include the session's child agents.
    #[arg(long, requires = "trace")]
    pub tree: bool,
}

/// `latch export`.
pub fn run(global: &GlobalArgs, workspace: &Path, args: &ExportArgs) -> anyhow::Result<i32> {
    let (store, key) = read_only::open(global, workspace)?;
    let record = open_session(&store, &key, args.session.as_deref())?;
    if let Some(path) = &args.trace {
        let recording = from_store(&store, &record, args.tree)?;
        trace::write(&recording, path, args.redact)?;
        let events: usize = recording.sessions.iter().map(|s| s.log.len()).sum();
        eprintln!(
            "wrote {}{}: {} session{}, {events} events",
            path.display(),
            if args.redact { " (redacted)" } else { "" },
            recording.sessions.len(),
            if recording.sessions.len() == 1 {
                ""
            } else {
                "s"
            },
        );
        return Ok(0);
    }
    let text = render(&store, &record, args.format)?;
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    Ok(0)
}

/// `record`'s events rendered as `format`.
fn render(store: &Store, record: &SessionRecord, format: Format) -> anyhow::Result<String> {
    let header = SessionHeader {
        id: record.id.clone(),
        parent: record.parent.clone(),
        workspace: record.workspace.clone(),
        provider: record.model.provider.clone(),
        model: record.model.model.clone(),
        created_ms: record.created_ms,
    };
    let events = store.all_events(&record.id)?;
    Ok(match format {
        Format::Md => markdown(&header, &events),
        Format::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&json(&header, &events))?
        ),
    })
}

/// The file `/export` writes when it is given no path: `latch-SESSION.md`
/// in the workspace.
pub fn default_file(session: &str) -> String {
    format!("latch-{session}.md")
}

/// `/export [PATH]`: write the running session to `PATH` (relative to the
/// session's workspace; `latch-SESSION.md` there when absent), as the
/// durable events in JSON when it ends in `.json` and as Markdown
/// otherwise, the same bytes `latch export` writes. An existing file is
/// never overwritten. Returns the line to show.
pub fn to_file(
    store: &Store,
    record: &SessionRecord,
    path: Option<&str>,
) -> anyhow::Result<String> {
    let name = path.map_or_else(|| default_file(&record.id), str::to_string);
    let path = Path::new(&record.workspace).join(&name);
    let format = match path.extension() {
        Some(e) if e.eq_ignore_ascii_case("json") => Format::Json,
        _ => Format::Md,
    };
    let text = render(store, record, format)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
                "{} exists and is kept: name another file, e.g. /export session-2.md",
                path.display()
            ),
            _ => anyhow::anyhow!("cannot write {}: {e}", path.display()),
        })?;
    file.write_all(text.as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(format!(
        "exported the session to {} ({})",
        path.display(),
        match format {
            Format::Md => "Markdown",
            Format::Json => "its durable events as JSON",
        }
    ))
}
