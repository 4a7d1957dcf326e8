//! Agents users define: Markdown files with YAML front matter under
//! `.latch/agents/NAME.md` (the workspace's) and
//! `~/.config/latch/agents/NAME.md` (the user's), written as Claude Code's
//! and OpenCode's agent files are. The front matter says what the agent
//! is (`name`, `description`), what it may use (`tools`,
//! `disallowedTools`), what it runs on (`model`, `sandbox`, `approval`,
//! `engine`); the body is its prompt. A workspace file of the same name
//! as a user file replaces it.
//!
//! Claude Code's format is taken as it is: `tools: Read, Grep, Glob, Bash`
//! names its tools (mapped onto Latch's; those Latch has no counterpart
//! for, such as `WebFetch`, are dropped and listed), `model: sonnet`,
//! `opus`, `haiku` or `inherit` mean the parent's model unless a
//! `[models.<alias>]` is configured. OpenCode's `tools: {write: false}`
//! map turns tools off. Workspace files are opened beneath the workspace
//! with no link followed. A file that cannot be used is reported with its
//! path and line, and left out; the others still load.

use latch_kernel::beneath::{Opened, list, open_beneath, open_dir};
use latch_sandbox::{ApprovalMode, SandboxMode};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Where agent files live, beneath the workspace and the user's config dir.
pub const AGENTS_DIR: &str = ".latch/agents";
/// Largest agent file read, bytes.
pub const MAX_AGENT_FILE: u64 = 256 * 1024;
/// Most agent files read from one directory.
const MAX_FILES: usize = 200;

/// Latch's tool names, which a `tools` entry may use as they are.
pub const LATCH_TOOLS: &[&str] = &[
    "read_file",
    "read_artifact",
    "write_file",
    "edit_file",
    "list_files",
    "grep",
    "shell",
    "process_status",
    "process_output",
    "process_kill",
    "validate",
    "recall",
    "load_skill",
    "propose_plan",
];

/// Claude Code's and OpenCode's tool names (lower-cased) and Latch's tools
/// for each; an empty list: Latch has no counterpart.
const PEER_TOOLS: &[(&str, &[&str])] = &[
    ("read", &["read_file", "read_artifact"]),
    ("write", &["write_file"]),
    ("edit", &["edit_file"]),
    ("multiedit", &["edit_file"]),
    ("patch", &["edit_file"]),
    (
        "bash",
        &["shell", "process_status", "process_output", "process_kill"],
    ),
    ("grep", &["grep"]),
    ("glob", &["list_files"]),
    ("ls", &["list_files"]),
    ("list", &["list_files"]),
    ("webfetch", &[]),
    ("websearch", &[]),
    ("todowrite", &[]),
    ("todoread", &[]),
    ("task", &[]),
    ("notebookedit", &[]),
    ("notebookread", &[]),
    ("bashoutput", &["process_output"]),
    ("killshell", &["process_kill"]),
];

/// Claude Code's model aliases: the parent's model unless configured.
const MODEL_ALIASES: &[&str] = &["sonnet", "opus", "haiku"];

/// Where an agent file came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentScope {
    /// `.latch/agents/` in the workspace (its widening needs trust).
    Workspace,
    /// The user's `~/.config/latch/agents/`.
    User,
}

impl AgentScope {
    /// `workspace` or `user`.
    pub fn name(self) -> &'static str {
        match self {
            AgentScope::Workspace => "workspace",
            AgentScope::User => "user",
        }
    }
}

/// One agent a user defined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentDef {
    /// `name` (the file's stem when absent).
    pub name: String,
    /// `description`.
    pub description: String,
    /// The Latch tools it may use (`None`: every tool its parent has).
    pub tools: Option<Vec<String>>,
    /// Tools it may not use.
    pub deny: Vec<String>,
    /// Tool names the file gave that Latch has no counterpart for.
    pub dropped: Vec<String>,
    /// `model` (`None`: the parent's; `inherit` reads as `None`).
    pub model: Option<String>,
    /// `sandbox`.
    pub sandbox: Option<SandboxMode>,
    /// `approval`.
    pub approval: Option<ApprovalMode>,
    /// `engine`: `builtin:NAME` or a component path.
    pub engine: Option<String>,
    /// The body: the agent's prompt.
    pub prompt: String,
    /// The file.
    pub path: PathBuf,
    /// Where it came from.
    pub scope: AgentScope,
}

impl AgentDef {
    /// The model it runs (`None`: the parent's), given the configured
    /// `[models.<name>]` names: a Claude Code alias nobody configured is
    /// the parent's model.
    pub fn model_for(&self, configured: &dyn Fn(&str) -> bool) -> Option<&str> {
        let model = self.model.as_deref()?;
        if MODEL_ALIASES.contains(&model) && !configured(model) {
            return None;
        }
        Some(model)
    }
}

impl AgentDef {
    /// One line of what it runs with: tools, model, sandbox, approval and
    /// engine (what it leaves as its parent's is not shown).
    pub fn settings_line(&self) -> String {
        let mut parts = vec![match &self.tools {
            Some(t) => format!("tools: {}", t.join(", ")),
            None => "tools: the parent's".to_string(),
        }];
        if !self.deny.is_empty() {
            parts.push(format!("not: {}", self.deny.join(", ")));
        }
        parts.push(format!(
            "model: {}",
            self.model.as_deref().unwrap_or("the parent's")
        ));
        if let Some(s) = self.sandbox {
            parts.push(format!("sandbox: {}", s.name()));
        }
        if let Some(a) = self.approval {
            parts.push(format!("approval: {}", a.name()));
        }
        if let Some(e) = &self.engine {
            parts.push(format!("engine: {e}"));
        }
        if !self.dropped.is_empty() {
            parts.push(format!("not in Latch: {}", self.dropped.join(", ")));
        }
        parts.join(" · ")
    }
}

impl AgentCatalog {
    /// The listing every surface shows (`latch agents`, `/agents`): each
    /// agent with where it came from and what it runs with, then each file
    /// left out with its line.
    pub fn listing(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if self.agents.is_empty() {
            lines.push(
                "No agents defined: write .latch/agents/NAME.md (or ~/.config/latch/agents/NAME.md) \
                 with front matter (name, description, tools, model) and a prompt"
                    .to_string(),
            );
        }
        for a in self.agents.values() {
            lines.push(format!(
                "{} ({}, {}): {}",
                a.name,
                a.scope.name(),
                a.path.display(),
                a.description.lines().next().unwrap_or("")
            ));
            lines.push(format!("  {}", a.settings_line()));
        }
        for e in &self.errors {
            lines.push(format!("left out: {e}"));
        }
        lines
    }
}

/// An agent file that cannot be used: its path, the line at fault and what
/// to change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {message}", .path.display())]
pub struct AgentFileError {
    /// The file.
    pub path: PathBuf,
    /// The 1-based line at fault.
    pub line: usize,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// The agents of one workspace and user, and the files that failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentCatalog {
    agents: BTreeMap<String, AgentDef>,
    /// The files left out, each with why.
    pub errors: Vec<AgentFileError>,
}

impl AgentCatalog {
    /// The agents of `workspace` (canonical) and of the user's config
    /// directory `config_dir`; a workspace agent replaces a user agent of
    /// the same name.
    pub fn discover(workspace: &Path, config_dir: Option<&Path>) -> AgentCatalog {
        let mut catalog = AgentCatalog::default();
        if let Some(dir) = config_dir {
            catalog.read_dir(&dir.join("agents"), Path::new("."), AgentScope::User);
        }
        catalog.read_dir(workspace, Path::new(AGENTS_DIR), AgentScope::Workspace);
        catalog
    }

    /// The agents, by name.
    pub fn agents(&self) -> impl Iterator<Item = &AgentDef> {
        self.agents.values()
    }

    /// The agent named `name`.
    pub fn get(&self, name: &str) -> Option<&AgentDef> {
        self.agents.get(name)
    }

    /// True when no agent is defined.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// Read the `*.md` files of `rel` beneath `tree`.
    fn read_dir(&mut self, tree: &Path, rel: &Path, scope: AgentScope) {
        let Ok(root) = open_dir(tree) else {
            return;
        };
        let Ok(Opened::Dir(dir)) = open_beneath(&root, rel) else {
            return;
        };
        for entry in list(&dir, MAX_FILES) {
            if !entry.ends_with(".md") || entry.contains('/') {
                continue;
            }
            let path = tree.join(rel).join(&entry);
            let path = path
                .components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .collect::<PathBuf>();
            let stem = entry.trim_end_matches(".md");
            let text = match open_beneath(&dir, Path::new(&entry)) {
                Ok(Opened::File(f)) => read_capped(f, &path),
                Ok(Opened::Dir(_)) => continue,
                Err(e) => Err(AgentFileError {
                    path: path.clone(),
                    line: 1,
                    message: format!("the file {e}"),
                }),
            };
            match text.and_then(|t| parse(&t, stem, &path, scope)) {
                Ok(agent) => {
                    self.agents.insert(agent.name.clone(), agent);
                }
                Err(e) => self.errors.push(e),
            }
        }
    }
}

fn read_capped(file: std::fs::File, path: &Path) -> Result<String, AgentFileError> {
    let mut bytes = Vec::new();
    let failed = |message: String| AgentFileError {
        path: path.to_path_buf(),
        line: 1,
        message,
    };
    file.take(MAX_AGENT_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| failed(format!("cannot be read: {e}")))?;
    if bytes.len() as u64 > MAX_AGENT_FILE {
        return Err(failed(format!(
            "is larger than {} KiB; an agent's prompt belongs in a shorter file",
            MAX_AGENT_FILE / 1024
        )));
    }
    String::from_utf8(bytes).map_err(|_| failed("is not UTF-8 text".into()))
}

/// Parse an agent file's `text` (the file `path`, named `stem`).
pub fn parse(
    text: &str,
    stem: &str,
    path: &Path,
    scope: AgentScope,
) -> Result<AgentDef, AgentFileError> {
    let err = |line: usize, message: String| AgentFileError {
        path: path.to_path_buf(),
        line,
        message,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(err(
            1,
            "no front matter: an agent file starts with a `---` line, then `name:` and \
             `description:`, then a closing `---` line, then the agent's prompt"
                .into(),
        ));
    }
    let mut yaml = String::new();
    let mut consumed = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut closed = false;
    for line in lines {
        consumed += line.len();
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err(err(1, "the front matter has no closing `---` line".into()));
    }
    // Line n of `yaml` is line n + 1 of the file.
    let key_line = |key: &str| {
        yaml.lines()
            .position(|l| l.starts_with(key) && l[key.len()..].trim_start().starts_with(':'))
            .map_or(1, |i| i + 2)
    };
    let value: yaml_serde::Value = yaml_serde::from_str(&yaml).map_err(|e| {
        let line = e.location().map_or(1, |l| l.line() + 1);
        err(line, format!("the front matter is not valid YAML: {e}"))
    })?;
    let map = match value {
        yaml_serde::Value::Mapping(m) => m,
        yaml_serde::Value::Null => yaml_serde::Mapping::new(),
        _ => {
            return Err(err(2, "the front matter must be `key: value` lines".into()));
        }
    };
    let string = |key: &str| -> Result<Option<String>, AgentFileError> {
        match map.get(key) {
            None | Some(yaml_serde::Value::Null) => Ok(None),
            Some(v) => scalar(v)
                .map(Some)
                .ok_or_else(|| err(key_line(key), format!("`{key}` must be a single value"))),
        }
    };
    let name = string("name")?.unwrap_or_else(|| stem.to_string());
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(err(
            key_line("name"),
            format!("`name: {name}` must be letters, digits, `-` and `_` only, e.g. `reviewer`"),
        ));
    }
    let description = string("description")?.ok_or_else(|| {
        err(
            1,
            "`description:` is missing: say what the agent does and when to use it".into(),
        )
    })?;
    let mut dropped = Vec::new();
    let mut deny = Vec::new();
    let tools = match map.get("tools") {
        None | Some(yaml_serde::Value::Null) => None,
        Some(yaml_serde::Value::Mapping(m)) => {
            // OpenCode: `tools: {write: false}` turns tools off.
            for (k, v) in m {
                let (Some(k), Some(on)) = (scalar(k), v.as_bool()) else {
                    return Err(err(
                        key_line("tools"),
                        "`tools` as a map must map tool names to true or false".into(),
                    ));
                };
                if !on {
                    deny.extend(
                        latch_names(&k, &mut dropped).map_err(|m| err(key_line("tools"), m))?,
                    );
                }
            }
            None
        }
        Some(v) => {
            let list = names(v).ok_or_else(|| {
                err(
                    key_line("tools"),
                    "`tools` must be a comma-separated list or a YAML list of tool names".into(),
                )
            })?;
            let mut out = Vec::new();
            for t in list {
                out.extend(latch_names(&t, &mut dropped).map_err(|m| err(key_line("tools"), m))?);
            }
            Some(out)
        }
    };
    for key in ["disallowedTools", "disallowed-tools"] {
        if let Some(v) = map.get(key) {
            let list = names(v).ok_or_else(|| {
                err(
                    key_line(key),
                    format!("`{key}` must be a list of tool names"),
                )
            })?;
            for t in list {
                deny.extend(latch_names(&t, &mut dropped).map_err(|m| err(key_line(key), m))?);
            }
        }
    }
    let model = string("model")?.filter(|m| m != "inherit" && !m.is_empty());
    let sandbox = match string("sandbox")? {
        None => None,
        Some(s) => Some(
            s.parse::<SandboxMode>()
                .map_err(|e| err(key_line("sandbox"), format!("`sandbox: {s}`: {e}")))?,
        ),
    };
    let approval = match string("approval")? {
        None => None,
        Some(s) => Some(
            s.parse::<ApprovalMode>()
                .map_err(|e| err(key_line("approval"), format!("`approval: {s}`: {e}")))?,
        ),
    };
    let engine = string("engine")?.filter(|e| !e.is_empty());
    Ok(AgentDef {
        name,
        description,
        tools,
        deny,
        dropped,
        model,
        sandbox,
        approval,
        engine,
        prompt: text[consumed..]
            .trim_start_matches(['\r', '\n'])
            .trim_end()
            .to_string(),
        path: path.to_path_buf(),
        scope,
    })
}

fn scalar(v: &yaml_serde::Value) -> Option<String> {
    match v {
        yaml_serde::Value::String(s) => Some(s.clone()),
        yaml_serde::Value::Number(n) => Some(n.to_string()),
        yaml_serde::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A tool list as written: `Read, Grep` or a YAML list.
fn names(v: &yaml_serde::Value) -> Option<Vec<String>> {
    let split = |s: &str| -> Vec<String> {
        s.split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    };
    match v {
        yaml_serde::Value::String(s) => Some(split(s)),
        yaml_serde::Value::Sequence(items) => {
            let mut out = Vec::new();
            for i in items {
                out.extend(split(&scalar(i)?));
            }
            Some(out)
        }
        _ => None,
    }
}

/// Latch's tools for the name `tool` as a file wrote it: a Latch tool, an
/// MCP tool (`mcp__server__tool`), or a peer's name; a peer tool Latch has
/// no counterpart for is added to `dropped`. An unknown name is an error
/// that lists what may be written.
fn latch_names(tool: &str, dropped: &mut Vec<String>) -> Result<Vec<String>, String> {
    // Claude Code's `Bash(git diff:*)`: the tool, its argument rule aside.
    let bare = tool.split('(').next().unwrap_or(tool).trim();
    if LATCH_TOOLS.contains(&bare) || bare.starts_with("mcp__") {
        return Ok(vec![bare.to_string()]);
    }
    let lower = bare.to_ascii_lowercase();
    match PEER_TOOLS.iter().find(|(peer, _)| *peer == lower) {
        Some((_, [])) => {
            dropped.push(bare.to_string());
            Ok(Vec::new())
        }
        Some((_, latch)) => Ok(latch.iter().map(|s| s.to_string()).collect()),
        None => Err(format!(
            "tool `{bare}` is neither a Latch tool ({}), an MCP tool (`mcp__server__tool`) nor \
             a Claude Code tool (Read, Write, Edit, Bash, Grep, Glob, ...)",
            LATCH_TOOLS.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<AgentDef, AgentFileError> {
        parse(
            text,
            "reviewer",
            Path::new(".latch/agents/reviewer.md"),
            AgentScope::Workspace,
        )
    }

    #[test]
    fn claude_codes_format_is_read_as_it_is() {
        let a = parsed(
            "---\nname: reviewer\ndescription: Reviews diffs.\ntools: Read, Grep, Glob, WebFetch\n\
             model: haiku\n---\n\nYou review code.\n",
        )
        .unwrap();
        assert_eq!(a.name, "reviewer");
        assert_eq!(
            a.tools.as_deref().unwrap(),
            ["read_file", "read_artifact", "grep", "list_files"]
        );
        assert_eq!(a.dropped, ["WebFetch"]);
        assert_eq!(a.prompt, "You review code.");
        // An alias nobody configured is the parent's model.
        assert_eq!(a.model_for(&|_| false), None);
        assert_eq!(a.model_for(&|m| m == "haiku"), Some("haiku"));
    }

    #[test]
    fn opencodes_tool_map_turns_tools_off() {
        let a = parsed(
            "---\ndescription: Plans.\ntools:\n  write: false\n  edit: false\n  bash: true\n---\nPlan.\n",
        )
        .unwrap();
        assert_eq!(a.tools, None);
        assert_eq!(a.deny, ["write_file", "edit_file"]);
    }

    #[test]
    fn a_bad_field_is_named_with_its_line() {
        let e = parsed("---\ndescription: x\nsandbox: wide-open\n---\nbody\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(
            e.to_string()
                .starts_with(".latch/agents/reviewer.md:3: `sandbox: wide-open`")
        );
        let e = parsed("---\ndescription: x\ntools: Read, Frobnicate\n---\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("tool `Frobnicate`"), "{e}");
        let e = parsed("---\ndescription: [unclosed\nmodel: x\n---\n").unwrap_err();
        assert!(e.line >= 2, "{e}");
        let e = parsed("no front matter\n").unwrap_err();
        assert_eq!(e.line, 1);
    }
}
