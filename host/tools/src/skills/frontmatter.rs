//! `SKILL.md`: YAML frontmatter between `---` lines, then the body. The
//! fields follow the Agent Skills format: `name` (1–64 characters of
//! `[a-z0-9-]`, no leading, trailing or doubled `-`, equal to the
//! directory's name) and `description` (1–1024 characters) are required;
//! `license`, `compatibility` (≤ 500), `metadata` (string → string) and
//! `allowed-tools` are optional. Other keys are ignored.

use std::collections::BTreeMap;

/// Longest skill name.
pub const MAX_NAME: usize = 64;
/// Longest description.
pub const MAX_DESCRIPTION: usize = 1024;
/// Longest `compatibility` text.
pub const MAX_COMPATIBILITY: usize = 500;

/// A `SKILL.md` that cannot be used, naming the field at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", .field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
pub struct FrontmatterError {
    /// The field, when one is at fault.
    pub field: Option<String>,
    /// What is wrong and how to fix it.
    pub message: String,
}

fn bad(field: &str, message: impl Into<String>) -> FrontmatterError {
    FrontmatterError {
        field: Some(field.to_string()),
        message: message.into(),
    }
}

/// The parsed frontmatter and the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// `license`.
    pub license: Option<String>,
    /// `compatibility`.
    pub compatibility: Option<String>,
    /// `metadata`.
    pub metadata: BTreeMap<String, String>,
    /// `allowed-tools`, as written.
    pub allowed_tools: Option<String>,
    /// The Markdown below the frontmatter.
    pub body: String,
}

/// Split `text` into its frontmatter and body and check the fields.
pub fn parse(text: &str) -> Result<Parsed, FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let no_front = || FrontmatterError {
        field: None,
        message: "no YAML frontmatter: the file must start with a `---` line, then `name:` and \
                  `description:`, then a closing `---` line"
            .into(),
    };
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().ok_or_else(no_front)?;
    if first.trim_end() != "---" {
        return Err(no_front());
    }
    let mut yaml = String::new();
    let mut closed = false;
    let mut consumed = first.len();
    for line in lines {
        consumed += line.len();
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err(FrontmatterError {
            field: None,
            message: "the frontmatter has no closing `---` line".into(),
        });
    }
    let body = text[consumed..]
        .trim_start_matches(['\r', '\n'])
        .to_string();
    let value: yaml_serde::Value = yaml_serde::from_str(&yaml).map_err(|e| FrontmatterError {
        field: None,
        message: format!("the frontmatter is not valid YAML: {e}"),
    })?;
    let map = match value {
        yaml_serde::Value::Mapping(m) => m,
        yaml_serde::Value::Null => yaml_serde::Mapping::new(),
        _ => {
            return Err(FrontmatterError {
                field: None,
                message: "the frontmatter must be a YAML mapping of `key: value` lines".into(),
            });
        }
    };
    let get = |k: &str| map.get(k);
    let string = |k: &str| -> Result<Option<String>, FrontmatterError> {
        match get(k) {
            None | Some(yaml_serde::Value::Null) => Ok(None),
            Some(yaml_serde::Value::String(s)) => Ok(Some(s.clone())),
            Some(yaml_serde::Value::Number(n)) => Ok(Some(n.to_string())),
            Some(yaml_serde::Value::Bool(b)) => Ok(Some(b.to_string())),
            Some(_) => Err(bad(k, "must be a string")),
        }
    };
    let name = string("name")?.ok_or_else(|| bad("name", "is missing (required)"))?;
    check_name(&name)?;
    let description =
        string("description")?.ok_or_else(|| bad("description", "is missing (required)"))?;
    let chars = description.trim().chars().count();
    if chars == 0 {
        return Err(bad(
            "description",
            "is empty; say what the skill does and when to use it",
        ));
    }
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(bad(
            "description",
            format!(
                "has {} characters; at most {MAX_DESCRIPTION} are allowed",
                description.chars().count()
            ),
        ));
    }
    let compatibility = string("compatibility")?;
    if let Some(c) = &compatibility
        && c.chars().count() > MAX_COMPATIBILITY
    {
        return Err(bad(
            "compatibility",
            format!("has more than {MAX_COMPATIBILITY} characters"),
        ));
    }
    let mut metadata = BTreeMap::new();
    match get("metadata") {
        None | Some(yaml_serde::Value::Null) => {}
        Some(yaml_serde::Value::Mapping(m)) => {
            for (k, v) in m {
                let (Some(k), Some(v)) = (scalar(k), scalar(v)) else {
                    return Err(bad("metadata", "must map strings to strings"));
                };
                metadata.insert(k, v);
            }
        }
        Some(_) => return Err(bad("metadata", "must be a mapping of strings to strings")),
    }
    let allowed_tools = match get("allowed-tools") {
        Some(yaml_serde::Value::Sequence(items)) => Some(
            items
                .iter()
                .map(|v| scalar(v).ok_or_else(|| bad("allowed-tools", "must list tool names")))
                .collect::<Result<Vec<_>, _>>()?
                .join(" "),
        ),
        _ => string("allowed-tools")?,
    };
    Ok(Parsed {
        name,
        description,
        license: string("license")?,
        compatibility,
        metadata,
        allowed_tools,
        body,
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

/// Check a skill name: 1–64 characters of `[a-z0-9-]`, no leading,
/// trailing or consecutive `-`.
pub fn check_name(name: &str) -> Result<(), FrontmatterError> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(bad(
            "name",
            format!("`{name}` must be 1-{MAX_NAME} characters long"),
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(bad(
            "name",
            format!("`{name}` may use only lower-case letters, digits and `-`"),
        ));
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Err(bad(
            "name",
            format!("`{name}` must not start or end with `-` or contain `--`"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_skill_parses() {
        let p = parse(
            "---\nname: pdf-tools\ndescription: Work with PDFs.\nlicense: MIT\n\
             metadata:\n  author: me\n  version: 1\nallowed-tools: Bash(git:*) Read\n---\n\n# PDF\nbody\n",
        )
        .unwrap();
        assert_eq!(p.name, "pdf-tools");
        assert_eq!(p.license.as_deref(), Some("MIT"));
        assert_eq!(p.metadata.get("version").map(String::as_str), Some("1"));
        assert_eq!(p.allowed_tools.as_deref(), Some("Bash(git:*) Read"));
        assert_eq!(p.body, "# PDF\nbody\n");
    }

    #[test]
    fn each_bad_field_is_named() {
        let field = |text: &str| parse(text).unwrap_err().field;
        assert_eq!(field("---\ndescription: d\n---\n"), Some("name".into()));
        assert_eq!(
            field("---\nname: Bad_Name\ndescription: d\n---\n"),
            Some("name".into())
        );
        assert_eq!(
            field("---\nname: a--b\ndescription: d\n---\n"),
            Some("name".into())
        );
        assert_eq!(field("---\nname: ok\n---\n"), Some("description".into()));
        let long = format!("---\nname: ok\ndescription: {}\n---\n", "x".repeat(1025));
        assert_eq!(field(&long), Some("description".into()));
        assert_eq!(
            field("---\nname: ok\ndescription: d\nmetadata: [1]\n---\n"),
            Some("metadata".into())
        );
        assert_eq!(field("# no frontmatter"), None);
        assert_eq!(field("---\nname: ok\ndescription: d\n"), None);
        assert!(
            parse("---\nname: [unclosed\n---\n")
                .unwrap_err()
                .message
                .contains("YAML")
        );
    }
}
