//! `latch rewind <session> [--to SEQ]`: list a session's user messages with
//! the files Latch changed from each on, or put those files back to their
//! state before one of them (see [`latch_kernel::checkpoint`]). The same
//! text serves `/rewind` in the line interface and the terminal UI.

use super::GlobalArgs;
use super::render::terminal_safe;
use super::setup::{self, Env};
use latch_kernel::{FileAction, RewindPlan, RewindPoint};
use std::path::Path;

/// `latch rewind` arguments.
#[derive(Debug, clap::Args)]
pub struct RewindArgs {
    /// Session id or prefix (default: the latest).
    pub session: Option<String>,
    /// The sequence number of the user message to go back before (as
    /// listed without it).
    #[arg(long, value_name = "SEQ")]
    pub to: Option<u64>,
}

/// Run `latch rewind`: exit 0, or 1 when files were left alone because they
/// changed outside Latch.
pub fn run(global: &GlobalArgs, workspace: &Path, args: &RewindArgs) -> anyhow::Result<i32> {
    let env = Env::open_existing(global, workspace)?;
    let record = setup::select_session(&env, args.session.as_deref())?;
    let Some(to) = args.to else {
        let points = latch_kernel::rewind_points(&env.store, &record.id)?;
        print!("{}", points_text(&points));
        return Ok(0);
    };
    // Nobody else drives the session while its files go back.
    let _lease = setup::take_lease(&env, &record.id, "`latch rewind`")?;
    let mut plan = latch_kernel::plan_rewind(&env.store, &record.id, &env.workspace, to)?;
    latch_kernel::apply_rewind(&env.store, &record.id, &env.workspace, &mut plan)?;
    print!("{}", plan_text(&plan));
    Ok(if plan.conflicts.is_empty() { 0 } else { 1 })
}

/// The list `/rewind` and `latch rewind` show: one line per user message.
pub fn points_text(points: &[RewindPoint]) -> String {
    if points.is_empty() {
        return "no user messages to rewind to yet\n".into();
    }
    let mut out = String::from("rewind to before a message with `--to SEQ` (`/rewind SEQ`):\n");
    for p in points {
        let text: String = p.text.chars().take(60).collect();
        let files = match p.files.len() {
            0 => "no file changes since".to_string(),
            1 => format!("1 file: {}", p.files[0]),
            n => format!("{n} files: {}", p.files.join(", ")),
        };
        out.push_str(&format!(
            "  {:>6}  {}  ({})\n",
            p.seq,
            terminal_safe(&text, 240),
            terminal_safe(&files, 400)
        ));
    }
    out
}

/// What a rewind did.
pub fn plan_text(plan: &RewindPlan) -> String {
    let mut out = format!("rewound files to before message {}:\n", plan.to_seq);
    if plan.actions.is_empty() && plan.conflicts.is_empty() {
        out.push_str("  nothing to restore: the files are as they were\n");
    }
    for (path, action) in &plan.actions {
        let verb = match action {
            FileAction::Restore(_) => "restored",
            FileAction::Remove => "removed ",
        };
        out.push_str(&format!("  {verb} {}\n", terminal_safe(path, 400)));
    }
    for path in &plan.conflicts {
        let why = if plan.links.contains(path) {
            "a symbolic link (or a directory) stands where the file was, or on the way \
             to it; Latch never writes through a link"
        } else {
            "changed outside Latch since Latch last wrote it"
        };
        out.push_str(&format!(
            "  ! left alone {}: {why}; restore it by hand\n",
            terminal_safe(path, 400)
        ));
    }
    out
}
