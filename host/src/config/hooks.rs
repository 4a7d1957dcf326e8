//! `[hooks]`: commands Latch runs at points of a session (see
//! [`crate::agent::hooks`]). Each point is a list of hooks, run in order
//! in the session's sandbox. A hook is an `sh -c` command line, or a table
//! `{ command = "…", matcher = "write_file|edit_file" }` whose `matcher`
//! (at `pre_tool` and `post_tool` only) names the tools it runs for, as
//! Claude Code's hooks do (see [`ToolMatcher`]). A workspace's hooks start
//! programs, so they take effect only once the workspace is trusted; and
//! a workspace's config adds hooks, never removes or replaces the user's
//! ([`keep_user_hooks`]): `pre_tool = []` in a repository leaves the user's
//! guard hooks in place.

use crate::agent::hooks::{DEFAULT_HOOK_TIMEOUT, Hook, HookCommands, ToolMatcher};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use std::time::Duration;

/// `[hooks]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// When this process runs its first turn of a session.
    #[serde(default, deserialize_with = "session_start")]
    pub session_start: Vec<Hook>,
    /// After each user message is recorded (`LATCH_PROMPT`).
    #[serde(default, deserialize_with = "user_message")]
    pub user_message: Vec<Hook>,
    /// Before each tool call its matcher matches (`LATCH_TOOL`,
    /// `LATCH_TOOL_INPUT`); a non-zero exit denies the call with the hook's
    /// output as the reason.
    #[serde(default, deserialize_with = "pre_tool")]
    pub pre_tool: Vec<Hook>,
    /// After each tool call its matcher matches (`LATCH_TOOL_OUTPUT`,
    /// `LATCH_TOOL_ERROR` too).
    #[serde(default, deserialize_with = "post_tool")]
    pub post_tool: Vec<Hook>,
    /// When the model ends a turn (`LATCH_FINAL_TEXT`).
    #[serde(default, deserialize_with = "turn_end")]
    pub turn_end: Vec<Hook>,
    /// Milliseconds one hook may run before it is killed (default 60000).
    #[serde(default, deserialize_with = "positive_timeout")]
    pub timeout_ms: Option<u64>,
}

fn positive_timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let ms = u64::deserialize(d)?;
    if ms == 0 {
        return Err(de::Error::custom(
            "[hooks] timeout_ms must be at least 1 (milliseconds one hook may run)",
        ));
    }
    Ok(Some(ms))
}

/// One entry of a hook point's list as written: a command line or a table.
#[derive(Debug)]
struct Entry {
    command: String,
    matcher: Option<String>,
}

/// The table form of an entry.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryTable {
    command: String,
    #[serde(default)]
    matcher: Option<String>,
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Entry, D::Error> {
        struct EntryVisitor;
        impl<'de> Visitor<'de> for EntryVisitor {
            type Value = Entry;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a command line, or a table { command = \"…\", matcher = \"write_file|edit_file\" }",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Entry, E> {
                Ok(Entry {
                    command: v.to_string(),
                    matcher: None,
                })
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Entry, A::Error> {
                let t = EntryTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Entry {
                    command: t.command,
                    matcher: t.matcher,
                })
            }
        }
        d.deserialize_any(EntryVisitor)
    }
}

/// The hooks of the point `key`; `tools`: whether it is about a tool call
/// (only then may an entry carry a `matcher`).
fn entries<'de, D: Deserializer<'de>>(d: D, key: &str, tools: bool) -> Result<Vec<Hook>, D::Error> {
    Vec::<Entry>::deserialize(d)?
        .into_iter()
        .map(|e| {
            let matcher = match e.matcher {
                None => ToolMatcher::all(),
                Some(m) if !tools => {
                    return Err(de::Error::custom(format!(
                        "[hooks] {key}: `matcher = \"{m}\"` applies to tool calls: a matcher \
                         is read at pre_tool and post_tool only; remove it here"
                    )));
                }
                Some(m) => ToolMatcher::parse(&m).map_err(|err| {
                    de::Error::custom(format!(
                        "[hooks] {key}: matcher \"{m}\" is not a valid regular expression \
                         ({err}); write tool names separated by `|` (\"write_file|edit_file\") \
                         or a valid regex (\"mcp__github__.*\")"
                    ))
                })?,
            };
            Ok(Hook {
                command: e.command,
                matcher,
            })
        })
        .collect()
}

fn session_start<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Hook>, D::Error> {
    entries(d, "session_start", false)
}

fn user_message<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Hook>, D::Error> {
    entries(d, "user_message", false)
}

fn pre_tool<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Hook>, D::Error> {
    entries(d, "pre_tool", true)
}

fn post_tool<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Hook>, D::Error> {
    entries(d, "post_tool", true)
}

fn turn_end<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Hook>, D::Error> {
    entries(d, "turn_end", false)
}

/// The hook points (each a list of hooks).
pub const POINTS: [&str; 5] = [
    "session_start",
    "user_message",
    "pre_tool",
    "post_tool",
    "turn_end",
];

/// Make the workspace layer's hook lists add to the user layer's: each
/// point the workspace names becomes the user's hooks followed by the
/// workspace's own (an entry the user already has is not repeated), so the
/// merge that follows (the later layer wins) keeps every hook of the
/// user's. Run it after trust left out what the workspace may not set.
pub fn keep_user_hooks(user: &toml::Table, workspace: &mut toml::Table) {
    let Some(user_hooks) = user.get("hooks").and_then(toml::Value::as_table) else {
        return;
    };
    let Some(ws_hooks) = workspace
        .get_mut("hooks")
        .and_then(toml::Value::as_table_mut)
    else {
        return;
    };
    for point in POINTS {
        let (Some(theirs), Some(toml::Value::Array(ours))) = (
            user_hooks.get(point).and_then(toml::Value::as_array),
            ws_hooks.get(point),
        ) else {
            continue;
        };
        let mut all = theirs.clone();
        all.extend(ours.iter().filter(|h| !theirs.contains(h)).cloned());
        ws_hooks.insert(point.to_string(), toml::Value::Array(all));
    }
}

impl HooksConfig {
    /// The hooks the agent runs.
    pub fn commands(&self) -> HookCommands {
        HookCommands {
            session_start: self.session_start.clone(),
            user_message: self.user_message.clone(),
            pre_tool: self.pre_tool.clone(),
            post_tool: self.post_tool.clone(),
            turn_end: self.turn_end.clone(),
            timeout: self
                .timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_HOOK_TIMEOUT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<HooksConfig, String> {
        toml::from_str::<crate::config::Config>(text)
            .map(|c| c.hooks)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn both_forms_and_matchers_as_claude_code_reads_them() {
        let hooks = parse(
            r#"
[hooks]
pre_tool = ["echo all"]
turn_end = [{ command = "echo end" }]

[[hooks.post_tool]]
command = "echo edits"
matcher = "write_file|edit_file"

[[hooks.post_tool]]
command = "echo mcp"
matcher = "mcp__fs__.*"

[[hooks.post_tool]]
command = "echo star"
matcher = "*"
"#,
        )
        .unwrap();
        assert_eq!(hooks.pre_tool, vec![Hook::new("echo all")]);
        assert_eq!(hooks.turn_end, vec![Hook::new("echo end")]);
        let [edits, mcp, star] = &hooks.post_tool[..] else {
            panic!("{hooks:?}")
        };
        assert!(edits.matcher.matches("write_file") && edits.matcher.matches("edit_file"));
        // Names match exactly, never as a prefix or a substring.
        assert!(!edits.matcher.matches("write_file_x") && !edits.matcher.matches("shell"));
        assert!(mcp.matcher.matches("mcp__fs__write_file") && !mcp.matcher.matches("shell"));
        assert!(star.matcher.matches("shell") && Hook::new("x").matcher.matches("any"));
    }

    #[test]
    fn the_readme_example_parses() {
        let readme = include_str!("../../../README.md");
        let start = readme
            .find("```toml\n[hooks]")
            .expect("the README's [hooks] example")
            + 8;
        let end = start + readme[start..].find("```").unwrap();
        let hooks = parse(&readme[start..end]).unwrap();
        let [_, mcp] = &hooks.pre_tool[..] else {
            panic!("{hooks:?}")
        };
        assert!(mcp.matcher.matches("mcp__github__create_issue"));
        assert!(!mcp.matcher.matches("mcp__github__get_issue"));
        assert!(hooks.post_tool[0].matcher.matches("edit_file"));
    }

    #[test]
    fn a_workspace_adds_hooks_and_never_removes_the_users() {
        let user: toml::Table = toml::from_str(
            "[hooks]\npre_tool = [\"guard\"]\nturn_end = [{ command = \"notify\" }]\n",
        )
        .unwrap();
        let merged = |ws: &str| {
            let mut ws: toml::Table = toml::from_str(ws).unwrap();
            keep_user_hooks(&user, &mut ws);
            let mut all = user.clone();
            for (k, v) in ws {
                match (all.get_mut(&k), v) {
                    (Some(toml::Value::Table(a)), toml::Value::Table(b)) => a.extend(b),
                    (_, v) => {
                        all.insert(k, v);
                    }
                }
            }
            toml::Value::Table(all)
                .try_into::<crate::config::Config>()
                .unwrap()
                .hooks
        };
        // An empty list removes nothing.
        let hooks = merged("[hooks]\npre_tool = []\nturn_end = []\n");
        assert_eq!(hooks.pre_tool, vec![Hook::new("guard")]);
        assert_eq!(hooks.turn_end, vec![Hook::new("notify")]);
        // A list of its own adds after the user's, without repeating them.
        let hooks = merged("[hooks]\npre_tool = [\"ws check\", \"guard\"]\n");
        assert_eq!(
            hooks.pre_tool,
            vec![Hook::new("guard"), Hook::new("ws check")]
        );
        // A point the user left empty takes the workspace's list.
        let hooks = merged("[hooks]\npost_tool = [\"fmt\"]\n");
        assert_eq!(hooks.post_tool, vec![Hook::new("fmt")]);
    }

    #[test]
    fn a_bad_matcher_names_the_key_and_the_pattern() {
        let err =
            parse("[[hooks.pre_tool]]\ncommand = \"x\"\nmatcher = \"edit_(file\"\n").unwrap_err();
        assert!(
            err.contains(
                "[hooks] pre_tool: matcher \"edit_(file\" is not a valid regular expression"
            ),
            "{err}"
        );
        let err =
            parse("[hooks]\nturn_end = [{ command = \"x\", matcher = \"shell\" }]\n").unwrap_err();
        assert!(
            err.contains("[hooks] turn_end") && err.contains("pre_tool and post_tool only"),
            "{err}"
        );
        let err =
            parse("[hooks]\npre_tool = [{ command = \"x\", match = \"shell\" }]\n").unwrap_err();
        assert!(err.contains("unknown field `match`"), "{err}");
        let err = parse("[hooks]\npre_tool = [3]\n").unwrap_err();
        assert!(err.contains("a command line, or a table"), "{err}");
    }
}
