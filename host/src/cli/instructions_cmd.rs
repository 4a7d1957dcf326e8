//! `latch instructions`: the instructions files a session in this
//! workspace would read at its start, in order, with where each came from,
//! its size, whether it was cut and which imports were refused; and the
//! directories below the workspace whose files join a session when the
//! model first works there.

use super::GlobalArgs;
use super::render::terminal_safe;
use crate::config::instructions::{AGENTS_FILE, CLAUDE_FILE, MAX_FILE_BYTES, Scope, discover};
use std::path::Path;

/// `latch instructions [--json]`.
pub fn run(_global: &GlobalArgs, workspace: &Path, json: bool) -> anyhow::Result<i32> {
    let workspace = std::fs::canonicalize(workspace).map_err(|e| {
        anyhow::anyhow!("the workspace {} does not exist: {e}", workspace.display())
    })?;
    let config_dir = crate::config::user_config_dir();
    let found = discover(&workspace, config_dir.as_deref());
    let nested = nested_dirs(&workspace);
    if json {
        let out = serde_json::json!({
            "workspace": workspace,
            "repository_root": found.root,
            "config_dir": config_dir,
            "max_file_bytes": MAX_FILE_BYTES,
            "files": found.files.iter().map(|f| serde_json::json!({
                "scope": f.scope,
                "path": f.path,
                "label": f.label,
                "bytes": f.bytes,
                "cut": f.cut,
                "refused_imports": f.refused,
            })).collect::<Vec<_>>(),
            "nested": nested,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    let safe = |s: &str| terminal_safe(s, 4_096);
    println!(
        "A session in {} reads, in this order (repository root {}):",
        safe(&workspace.display().to_string()),
        safe(&found.root.display().to_string())
    );
    if found.files.is_empty() {
        println!("  nothing yet: write an AGENTS.md (`/init` asks the model to write one)");
    }
    for f in &found.files {
        let scope = match f.scope {
            Scope::Global => "global",
            Scope::Repository => "repository",
            Scope::Latch => "latch",
            Scope::Nested => "nested",
            Scope::Import => "  import",
        };
        let cut = if f.cut {
            format!(", cut at {MAX_FILE_BYTES} bytes")
        } else {
            String::new()
        };
        println!(
            "  {scope:<10} {}  ({} bytes{cut})",
            safe(&f.path.display().to_string()),
            f.bytes
        );
        for r in &f.refused {
            println!("             {}", safe(r));
        }
    }
    if !nested.is_empty() {
        println!("Read when the model first reads or edits a file there:");
        for n in &nested {
            println!("  nested     {}", safe(n));
        }
    }
    if config_dir.is_none() {
        println!("(no user config directory: set LATCH_CONFIG_DIR for a global AGENTS.md)");
    }
    Ok(0)
}

/// Instructions files below the workspace (at most 200, not under `.git`,
/// `.latch`, `target` or `node_modules`), relative to it.
fn nested_dirs(workspace: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let walker = ignore::WalkBuilder::new(workspace)
        .hidden(true)
        .max_depth(Some(12))
        .filter_entry(|e| {
            !matches!(
                e.file_name().to_str(),
                Some(".git" | ".latch" | "target" | "node_modules")
            )
        })
        .build();
    for entry in walker.flatten() {
        if out.len() >= 200 {
            break;
        }
        let path = entry.path();
        let Some(parent) = path.parent() else {
            continue;
        };
        if parent == workspace || !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let name = entry.file_name().to_str().unwrap_or("");
        let is_agents = name == AGENTS_FILE;
        let is_claude = name == CLAUDE_FILE && !parent.join(AGENTS_FILE).exists();
        if (is_agents || is_claude)
            && let Ok(rel) = path.strip_prefix(workspace)
        {
            out.push(rel.display().to_string());
        }
    }
    out.sort();
    out
}
