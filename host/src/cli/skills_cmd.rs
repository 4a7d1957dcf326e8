//! `latch skills`: the skills a session in this workspace would see, where
//! they come from, which are shadowed or skipped, and the list that goes
//! into the session context with its cap.

use super::GlobalArgs;
use super::integrations::{discover_skills, skill_catalog};
use super::render::terminal_safe;
use super::setup::default_model;
use crate::config::Config;
use latch_provider::ProviderKind;
use latch_tools::skills;
use std::path::Path;

/// `latch skills [--json]`.
pub fn skills(global: &GlobalArgs, workspace: &Path, json: bool) -> anyhow::Result<i32> {
    let workspace = std::fs::canonicalize(workspace).map_err(|e| {
        anyhow::anyhow!("the workspace {} does not exist: {e}", workspace.display())
    })?;
    let config = Config::load(&workspace, global.config.as_deref())?.config;
    let kind = global
        .provider
        .clone()
        .or_else(|| config.provider.kind.clone())
        .and_then(|k| k.parse::<ProviderKind>().ok())
        .unwrap_or(ProviderKind::Anthropic);
    let model_name = global
        .model
        .clone()
        .or_else(|| config.provider.model.clone())
        .unwrap_or_else(|| default_model(kind).to_string());
    let model = config.model_profile(
        kind.name(),
        &model_name,
        config.provider.max_tokens.unwrap_or(8_192),
    )?;
    let discovery = discover_skills(&config, &workspace);
    let catalog = skill_catalog(&config, &discovery, &model);
    let cap = skills::cap_tokens(model.context_window_tokens, config.skills.catalog_percent);
    if json {
        let out = serde_json::json!({
            "skills": discovery.skills.iter().map(|s| serde_json::json!({
                "name": s.name, "description": s.description, "dir": s.dir, "file": s.file,
                "listed": catalog.listed.contains(&s.name),
            })).collect::<Vec<_>>(),
            "shadowed": discovery.shadowed.iter().map(|(f, n)| serde_json::json!({"name": n, "file": f})).collect::<Vec<_>>(),
            "warnings": discovery.warnings.iter().map(|w| serde_json::json!({
                "file": w.file, "field": w.field, "message": w.message,
            })).collect::<Vec<_>>(),
            "catalog": {"text": catalog.text, "omitted": catalog.omitted, "cap_tokens": cap},
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    if !config.skills.enabled {
        println!("skills are off ([skills] enabled = false)");
        return Ok(0);
    }
    if discovery.skills.is_empty() {
        println!(
            "no skills; put one in .latch/skills/NAME/SKILL.md (also .agents/skills, .claude/skills, \
             up to the repository root, or the user config dir's skills/)"
        );
    }
    for s in &discovery.skills {
        let description: String = s
            .description
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        println!(
            "{:<24} {}\n{:<24} {}{}",
            terminal_safe(&s.name, 100),
            terminal_safe(&description, 160),
            "",
            s.file.display(),
            if catalog.omitted.contains(&s.name) {
                "  (left out of the list by the cap)"
            } else {
                ""
            }
        );
    }
    for (file, name) in &discovery.shadowed {
        println!("shadowed: {} (`{name}` was found earlier)", file.display());
    }
    for w in &discovery.warnings {
        println!("warning: {}", terminal_safe(&w.to_string(), 600));
    }
    let tokens = latch_engine_sdk::estimate(model.estimator, &catalog.text);
    println!(
        "skill list in the session context: ≈{tokens} tokens (cap ≈{cap}: {}% of {}'s {} -token window); {} listed, {} left out",
        config.skills.catalog_percent,
        model.model,
        model.context_window_tokens,
        catalog.listed.len(),
        catalog.omitted.len()
    );
    Ok(0)
}
