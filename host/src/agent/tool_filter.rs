//! `[tools] allow` / `deny`: which tools the model is offered. A model with
//! a small window cannot take every schema; the filter applies to the whole
//! set the model would see (built-in tools, `recall`, `load_skill`, MCP
//! tools, the child-agent tools), and a call to a tool it removed is
//! answered with an error, never run.

use latch_provider::ToolSchema;

/// Which tools are offered: the allow-list (all when absent) less the
/// deny-list. An entry is a tool name, or a prefix ending in `*`
/// (`mcp__fs__*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolFilter {
    allow: Option<Vec<String>>,
    deny: Vec<String>,
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

impl ToolFilter {
    /// A filter offering what `allow` names (every tool when `None`) and
    /// nothing `deny` names.
    pub fn new(allow: Option<Vec<String>>, deny: Vec<String>) -> Self {
        ToolFilter { allow, deny }
    }

    /// True when nothing is filtered.
    pub fn is_open(&self) -> bool {
        self.allow.is_none() && self.deny.is_empty()
    }

    /// True when the model is offered `name`.
    pub fn offers(&self, name: &str) -> bool {
        let allowed = self
            .allow
            .as_ref()
            .is_none_or(|a| a.iter().any(|p| matches(p, name)));
        allowed && !self.deny.iter().any(|p| matches(p, name))
    }

    /// The schemas the model is offered, in their order.
    pub fn apply(&self, schemas: Vec<ToolSchema>) -> Vec<ToolSchema> {
        schemas
            .into_iter()
            .filter(|s| self.offers(&s.name))
            .collect()
    }

    /// Entries that name no tool of `names`: a typo would silently offer
    /// nothing (`allow`) or everything (`deny`). MCP entries are not
    /// checked, since a server that failed to start has no tools yet.
    pub fn unknown_entries<'a>(&'a self, names: &[&str]) -> Vec<&'a str> {
        self.allow
            .iter()
            .flatten()
            .chain(&self.deny)
            .filter(|p| !p.starts_with("mcp__"))
            .filter(|p| !names.iter().any(|n| matches(p, n)))
            .map(String::as_str)
            .collect()
    }

    /// The answer to a call of a tool the filter removed.
    pub fn refusal(name: &str) -> String {
        format!(
            "[Latch] The tool `{name}` is not offered in this session ([tools] allow / deny in \
             the config); use one of the tools you were given."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(name: &str) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
        }
    }

    #[test]
    fn allow_then_deny_with_prefixes() {
        let all = [
            "read_file",
            "edit_file",
            "shell",
            "mcp__fs__read",
            "mcp__fs__write",
        ];
        let schemas = || all.iter().map(|n| schema(n)).collect::<Vec<_>>();
        let names = |f: &ToolFilter| {
            f.apply(schemas())
                .into_iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&ToolFilter::default()).len(), all.len());
        let f = ToolFilter::new(
            Some(vec![
                "read_file".into(),
                "shell".into(),
                "mcp__fs__*".into(),
            ]),
            vec!["mcp__fs__write".into()],
        );
        assert_eq!(names(&f), ["read_file", "shell", "mcp__fs__read"]);
        assert!(!f.offers("edit_file"));
        let f = ToolFilter::new(None, vec!["shell".into()]);
        assert_eq!(names(&f).len(), all.len() - 1);
        assert!(!f.offers("shell") && f.offers("edit_file"));
    }

    #[test]
    fn entries_that_name_no_tool_are_found() {
        let f = ToolFilter::new(
            Some(vec![
                "raed_file".into(),
                "shell".into(),
                "mcp__gone__*".into(),
            ]),
            vec!["spawn_*".into(), "nope".into()],
        );
        let names = ["read_file", "shell", "spawn_agent"];
        assert_eq!(f.unknown_entries(&names), ["raed_file", "nope"]);
    }
}
