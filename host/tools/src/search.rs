//! `list_files` and `grep`: walks of the workspace that respect `.gitignore`
//! (also outside a git repository), skip `.git` and `.latch`, visit entries
//! in a stable order, and stop at a bounded number of results. `grep` reads
//! each file beneath the workspace without following a link
//! ([`latch_kernel::beneath`]): a file swapped for a link after the walk
//! saw it is skipped, never read through.

use crate::args::Args;
use crate::error::ToolError;
use crate::paths::{Access, Resolved};
use crate::{Reply, ToolContext};
use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;
use regex::RegexBuilder;
use std::path::Path;

/// Most paths `list_files` prints.
const MAX_LISTED: usize = 1000;
/// Most matching lines `grep` prints.
const MAX_MATCHES: usize = 400;
/// Longest line `grep` prints (longer lines are cut).
const MAX_LINE_CHARS: usize = 300;
/// Files larger than this are not searched.
const MAX_GREP_FILE_BYTES: u64 = 8 * 1024 * 1024;

fn glob(args: &Args, key: &str) -> Result<Option<GlobMatcher>, ToolError> {
    let Some(pattern) = args.opt_str(key).filter(|p| !p.trim().is_empty()) else {
        return Ok(None);
    };
    GlobBuilder::new(pattern.trim())
        .literal_separator(false)
        .build()
        .map(|g| Some(g.compile_matcher()))
        .map_err(|e| args.invalid(format!("`{key}` is not a valid glob: {e}")))
}

/// Matches the workspace-relative path or the file name.
fn glob_matches(glob: &Option<GlobMatcher>, rel: &str) -> bool {
    match glob {
        None => true,
        Some(g) => g.is_match(rel) || g.is_match(rel.rsplit('/').next().unwrap_or(rel)),
    }
}

/// A walk from `root`: gitignore-aware, hidden files included, `.git` and
/// `.latch` skipped, sorted by name.
fn walk(root: &Path) -> ignore::Walk {
    WalkBuilder::new(root)
        .hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| {
            let name = e.file_name();
            !(e.depth() > 0 && (name == ".git" || name == ".latch"))
        })
        .sort_by_file_name(|a, b| a.cmp(b))
        .build()
}

fn rel_of(ctx: &ToolContext, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(ctx.workspace()).ok()?;
    Some(
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"),
    )
}

fn root_of(ctx: &ToolContext, args: &Args) -> Result<Resolved, ToolError> {
    let raw = args
        .opt_str("path")
        .filter(|p| !p.trim().is_empty())
        .unwrap_or(".");
    let r = ctx.resolve(raw, Access::Read)?;
    if !r.abs.exists() {
        return Err(ToolError::Failed(format!("`{}` does not exist", r.rel)));
    }
    Ok(r)
}

/// `list_files {path?, pattern?}`.
pub(crate) fn list_files(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let root = root_of(ctx, args)?;
    let pattern = glob(args, "pattern")?;
    let mut listed = Vec::new();
    let mut more = 0usize;
    for entry in walk(&root.abs).flatten() {
        if !entry
            .file_type()
            .is_some_and(|t| t.is_file() || t.is_symlink())
        {
            continue;
        }
        let Some(rel) = rel_of(ctx, entry.path()) else {
            continue;
        };
        if !glob_matches(&pattern, &rel) {
            continue;
        }
        if listed.len() < MAX_LISTED {
            listed.push(rel);
        } else {
            more += 1;
        }
    }
    if listed.is_empty() {
        return Ok(Reply::ok(match args.opt_str("pattern") {
            Some(p) => format!("[no files under `{}` match `{p}`]", root.rel),
            None => format!("[no files under `{}`]", root.rel),
        }));
    }
    let mut out = listed.join("\n");
    if more > 0 {
        out.push_str(&format!(
            "\n[{more} more files not shown; narrow the path or pattern]"
        ));
    } else {
        out.push_str(&format!("\n[{} files]", listed.len()));
    }
    Ok(Reply::ok(out))
}

/// `grep {pattern, path?, glob?, case_insensitive?}`.
pub(crate) fn grep(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let pattern = args.str("pattern");
    if pattern.is_empty() {
        return Err(args.invalid("`pattern` must not be empty"));
    }
    let re = RegexBuilder::new(pattern)
        .case_insensitive(args.flag("case_insensitive"))
        .size_limit(10 * 1024 * 1024)
        .build()
        .map_err(|e| args.invalid(format!("`pattern` is not a valid regular expression: {e}")))?;
    let root = root_of(ctx, args)?;
    let dir = ctx.workspace_dir()?;
    let filter = glob(args, "glob")?;
    let mut out = String::new();
    let mut shown = 0usize;
    let mut more = 0usize;
    let mut files = 0usize;
    for entry in walk(&root.abs).flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Some(rel) = rel_of(ctx, entry.path()) else {
            continue;
        };
        if !glob_matches(&filter, &rel) {
            continue;
        }
        if entry
            .metadata()
            .map(|m| m.len() > MAX_GREP_FILE_BYTES)
            .unwrap_or(true)
        {
            continue;
        }
        let Ok(Some(bytes)) = latch_kernel::beneath::read(&dir, Path::new(&rel)) else {
            continue;
        };
        if bytes[..bytes.len().min(8192)].contains(&0) {
            continue; // binary
        }
        let text = String::from_utf8_lossy(&bytes);
        let mut in_file = false;
        for (i, line) in text.lines().enumerate() {
            if !re.is_match(line) {
                continue;
            }
            if !in_file {
                files += 1;
                in_file = true;
            }
            if shown >= MAX_MATCHES {
                more += 1;
                continue;
            }
            shown += 1;
            let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
            let ellipsis = if cut.len() < line.len() { " …" } else { "" };
            out.push_str(&format!("{rel}:{}: {cut}{ellipsis}\n", i + 1));
        }
    }
    if shown == 0 {
        return Ok(Reply::ok(format!(
            "[no matches for `{pattern}` under `{}`]",
            root.rel
        )));
    }
    if more > 0 {
        out.push_str(&format!(
            "[{more} more matching lines not shown; narrow the pattern, path or glob]"
        ));
    } else {
        out.push_str(&format!("[{shown} matching lines in {files} files]"));
    }
    Ok(Reply::ok(out))
}
