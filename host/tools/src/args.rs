//! Checking a call's JSON arguments against its tool's schema, with lenient
//! coercions models commonly need (`"10"` for an integer, `"true"` for a
//! boolean, one string for a list of strings).

use crate::error::ToolError;
use crate::spec::{ToolSpec, properties_of, required_of};
use serde_json::{Map, Value};

/// A call's arguments, checked against its spec: an object with no unknown
/// keys, every required key present and every value of the declared type.
pub(crate) struct Args {
    spec: &'static ToolSpec,
    values: Map<String, Value>,
}

impl Args {
    /// Parse and check `json` for `spec`.
    pub(crate) fn parse(spec: &'static ToolSpec, json: &str) -> Result<Args, ToolError> {
        let invalid = |problem: String| ToolError::InvalidArguments {
            tool: spec.name.clone(),
            problem,
            expected: spec.signature(),
        };
        let value: Value = if json.trim().is_empty() {
            Value::Object(Map::new())
        } else {
            serde_json::from_str(json)
                .map_err(|e| invalid(format!("the arguments are not valid JSON ({e})")))?
        };
        let Value::Object(raw) = value else {
            return Err(invalid("the arguments must be a JSON object".to_string()));
        };
        let props = properties_of(&spec.input_schema).expect("every spec has properties");
        let mut values = Map::new();
        let mut unknown = Vec::new();
        for (key, v) in raw {
            let Some(prop) = props.get(&key) else {
                unknown.push(key);
                continue;
            };
            if v.is_null() {
                continue; // an explicit null means "not given"
            }
            let ty = prop.get("type").and_then(Value::as_str).unwrap_or("string");
            let coerced =
                coerce(ty, v).ok_or_else(|| invalid(format!("`{key}` must be {}", article(ty))))?;
            values.insert(key, coerced);
        }
        if !unknown.is_empty() {
            unknown.sort();
            return Err(invalid(format!(
                "unknown argument{} {}",
                if unknown.len() == 1 { "" } else { "s" },
                unknown
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let missing: Vec<&str> = required_of(&spec.input_schema)
            .into_iter()
            .filter(|r| !values.contains_key(*r))
            .collect();
        if !missing.is_empty() {
            return Err(invalid(format!(
                "missing required argument{} {}",
                if missing.len() == 1 { "" } else { "s" },
                missing
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(Args { spec, values })
    }

    /// An error about these arguments (a semantic problem the schema cannot
    /// express, e.g. an empty requirement).
    pub(crate) fn invalid(&self, problem: impl Into<String>) -> ToolError {
        ToolError::InvalidArguments {
            tool: self.spec.name.clone(),
            problem: problem.into(),
            expected: self.spec.signature(),
        }
    }

    /// A string argument, if given.
    pub(crate) fn opt_str(&self, key: &str) -> Option<&str> {
        self.values.get(key).and_then(Value::as_str)
    }

    /// A required string argument (presence is checked by [`Args::parse`]).
    pub(crate) fn str(&self, key: &str) -> &str {
        self.opt_str(key).unwrap_or_default()
    }

    /// A required string argument that must not be blank; returned trimmed.
    pub(crate) fn text(&self, key: &str) -> Result<String, ToolError> {
        let t = self.str(key).trim();
        if t.is_empty() {
            return Err(self.invalid(format!("`{key}` must not be empty")));
        }
        Ok(t.to_string())
    }

    /// An integer argument, if given.
    pub(crate) fn opt_u64(&self, key: &str) -> Option<u64> {
        self.values.get(key).and_then(Value::as_u64)
    }

    /// A boolean argument, false when absent.
    pub(crate) fn flag(&self, key: &str) -> bool {
        self.values
            .get(key)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// A list-of-strings argument, empty when absent.
    pub(crate) fn list(&self, key: &str) -> Vec<String> {
        self.values
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn article(ty: &str) -> &'static str {
    match ty {
        "integer" => "a non-negative integer",
        "boolean" => "a boolean",
        "array" => "a list of strings",
        _ => "a string",
    }
}

/// `v` as a value of JSON-schema type `ty`, or none when it cannot be.
fn coerce(ty: &str, v: Value) -> Option<Value> {
    match (ty, v) {
        ("string", v @ Value::String(_)) => Some(v),
        ("integer", Value::Number(n)) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
                    .map(|f| f as u64)
            })
            .map(Value::from),
        ("integer", Value::String(s)) => s.trim().parse::<u64>().ok().map(Value::from),
        ("boolean", v @ Value::Bool(_)) => Some(v),
        ("boolean", Value::String(s)) => match s.trim() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        ("array", Value::Array(items)) => items
            .into_iter()
            .map(|i| match i {
                s @ Value::String(_) => Some(s),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        ("array", s @ Value::String(_)) => Some(Value::Array(vec![s])),
        _ => None,
    }
}
