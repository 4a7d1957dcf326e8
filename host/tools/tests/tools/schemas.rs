//! Tool schemas (valid, described, byte-stable, fixed order) and the errors
//! for unknown tools and malformed arguments.

use crate::common;

use common::{assert_err, assert_ok, env};
use latch_tools::{schemas, spec_of};
use serde_json::{Value, json};
use std::collections::BTreeSet;

#[test]
fn schemas_are_described_json_objects_in_a_stable_order() {
    let specs = schemas();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        &names[..12],
        &[
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
            "complete"
        ]
    );
    for required in [
        "set_goal",
        "add_constraint",
        "record_decision",
        "add_hypothesis",
        "reject_hypothesis",
        "add_question",
        "add_action",
        "add_criterion",
        "require_validation",
        "record_disproof",
        "add_note",
    ] {
        assert!(names.contains(&required), "{required} missing");
    }
    assert_eq!(
        names.iter().collect::<BTreeSet<_>>().len(),
        names.len(),
        "unique names"
    );
    for s in &specs {
        assert!(!s.description.is_empty());
        let schema = &s.input_schema;
        assert_eq!(schema["type"], "object", "{}", s.name);
        let props = schema["properties"].as_object().unwrap();
        for (name, prop) in props {
            assert!(prop["type"].is_string(), "{}.{name}", s.name);
            assert!(
                prop["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{}.{name} undescribed",
                s.name
            );
        }
        for r in schema["required"].as_array().unwrap() {
            assert!(props.contains_key(r.as_str().unwrap()), "{}: {r}", s.name);
        }
    }
    // Byte-stable: the JSON is the same every time.
    let a = serde_json::to_string(&schemas()).unwrap();
    let b = serde_json::to_string(&schemas()).unwrap();
    assert_eq!(a, b);
    let reparsed: Value = serde_json::from_str(&a).unwrap();
    assert!(reparsed.is_array());
    assert_eq!(
        spec_of("read_file").unwrap().signature(),
        "read_file(path: string, limit?: integer, offset?: integer)"
    );
}

#[test]
fn unknown_tools_and_malformed_arguments_are_errors() {
    let e = env();
    let o = e.call("teleport", json!({}));
    assert_err(&o, "unknown tool `teleport`");
    assert_err(&o, "read_file");

    let o = e.call_raw("read_file", "{not json");
    assert_err(&o, "not valid JSON");
    assert_err(&o, "read_file(path: string");

    assert_err(&e.call_raw("read_file", "[1, 2]"), "must be a JSON object");
    assert_err(
        &e.call("read_file", json!({})),
        "missing required argument `path`",
    );
    assert_err(
        &e.call("read_file", json!({"path": 7})),
        "`path` must be a string",
    );
    assert_err(
        &e.call("read_file", json!({"path": "a", "offset": "soon"})),
        "`offset` must be a non-negative integer",
    );
    assert_err(
        &e.call("read_file", json!({"file_path": "a"})),
        "unknown argument `file_path`",
    );
    assert_err(
        &e.call(
            "edit_file",
            json!({"path": "a", "old_string": "", "new_string": "b"}),
        ),
        "must not be empty",
    );
    assert_err(
        &e.call("validate", json!({"command": "true"})),
        "name at least one requirement",
    );
    assert_err(
        &e.call("shell", json!({"command": "true", "timeout_ms": 0})),
        "at least 1",
    );
    // Lenient coercions models need.
    e.write("n.txt", "1\n2\n3\n");
    let o = e.call(
        "read_file",
        json!({"path": "n.txt", "offset": "2", "limit": 1.0}),
    );
    assert_ok(&o);
    assert!(
        o.result.content.contains("     2\t2"),
        "{}",
        o.result.content
    );
    // Call ids and names are echoed.
    assert!(o.result.call_id.starts_with("call-"));
    assert_eq!(o.result.name, "read_file");
}
