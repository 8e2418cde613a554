//! Checks a results document against `schema/results.schema.json`.
//!
//! A small validator for the subset of JSON Schema (2020-12) the file uses:
//! `type` (one or a list), `properties`, `required`,
//! `additionalProperties` (boolean or schema), `items`, `enum`, `minimum`,
//! `maximum` and local `$ref`s into `$defs`. Anything else in the schema is
//! refused, so the file cannot silently use a keyword this check ignores.

use serde_json::Value;

use crate::error::{BenchError, Result};

/// The schema of a results file (an array of per-model objects).
pub const RESULTS_SCHEMA: &str = include_str!("../schema/results.schema.json");

const KNOWN: [&str; 12] =
    ["$schema", "$id", "$defs", "$ref", "title", "description", "type", "properties", "required", "additionalProperties", "items", "enum"];
const KNOWN_NUM: [&str; 2] = ["minimum", "maximum"];

/// Validates `doc` against the results schema.
///
/// # Errors
/// [`BenchError::Schema`] with the JSON path of the first mismatch.
pub fn validate_results(doc: &Value) -> Result<()> {
    let schema: Value = serde_json::from_str(RESULTS_SCHEMA)?;
    validate(&schema, doc)
}

/// Validates `doc` against `schema`.
///
/// # Errors
/// [`BenchError::Schema`] with the path of the first mismatch, or of a
/// schema keyword this validator does not implement.
pub fn validate(schema: &Value, doc: &Value) -> Result<()> {
    check(schema, schema, doc, "$")
}

fn fail(path: &str, msg: String) -> Result<()> {
    Err(BenchError::Schema(format!("{path}: {msg}")))
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    }
}

fn check(root: &Value, s: &Value, v: &Value, path: &str) -> Result<()> {
    let Some(obj) = s.as_object() else {
        return if s.as_bool() == Some(true) { Ok(()) } else { fail(path, "schema is not an object".into()) };
    };
    for k in obj.keys() {
        if !KNOWN.contains(&k.as_str()) && !KNOWN_NUM.contains(&k.as_str()) {
            return fail(path, format!("schema keyword {k:?} is not supported by this validator"));
        }
    }
    if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
        let Some(name) = r.strip_prefix("#/$defs/") else { return fail(path, format!("unsupported $ref {r}")) };
        let Some(target) = root.get("$defs").and_then(|d| d.get(name)) else { return fail(path, format!("unknown $ref {r}")) };
        return check(root, target, v, path);
    }
    if let Some(t) = obj.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => return fail(path, "bad type".into()),
        };
        if !types.iter().any(|t| type_ok(t, v)) {
            return fail(path, format!("expected {}, found {}", types.join(" or "), short(v)));
        }
    }
    if let Some(e) = obj.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        return fail(path, format!("{} is not one of {}", short(v), Value::Array(e.clone())));
    }
    if let Some(n) = v.as_f64() {
        if let Some(m) = obj.get("minimum").and_then(Value::as_f64)
            && n < m
        {
            return fail(path, format!("{n} is below the minimum {m}"));
        }
        if let Some(m) = obj.get("maximum").and_then(Value::as_f64)
            && n > m
        {
            return fail(path, format!("{n} is above the maximum {m}"));
        }
    }
    if let Some(o) = v.as_object() {
        if let Some(req) = obj.get("required").and_then(Value::as_array) {
            for k in req.iter().filter_map(Value::as_str) {
                if !o.contains_key(k) {
                    return fail(path, format!("missing required property {k:?}"));
                }
            }
        }
        let props = obj.get("properties").and_then(Value::as_object);
        for (k, val) in o {
            let p = format!("{path}.{k}");
            match props.and_then(|ps| ps.get(k)) {
                Some(ps) => check(root, ps, val, &p)?,
                None => match obj.get("additionalProperties") {
                    Some(Value::Bool(false)) => return fail(path, format!("property {k:?} is not allowed")),
                    Some(extra) if extra.is_object() => check(root, extra, val, &p)?,
                    _ => {}
                },
            }
        }
    }
    if let (Some(a), Some(items)) = (v.as_array(), obj.get("items")) {
        for (i, x) in a.iter().enumerate() {
            check(root, items, x, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 { format!("{}…", s.chars().take(40).collect::<String>()) } else { s }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn the_validator_rejects_what_it_should() {
        let s = json!({
            "$defs": {"n": {"type": "integer", "minimum": 0, "maximum": 3}},
            "type": "object", "required": ["a"], "additionalProperties": false,
            "properties": {"a": {"type": "array", "items": {"$ref": "#/$defs/n"}}, "b": {"type": ["string", "null"], "enum": ["x", null]}}
        });
        assert!(validate(&s, &json!({"a": [0, 3], "b": null})).is_ok());
        let bad = [
            (json!({"b": "x"}), "missing required property \"a\""),
            (json!({"a": [4]}), "$.a[0]: 4 is above the maximum 3"),
            (json!({"a": [1.5]}), "$.a[0]: expected integer"),
            (json!({"a": [], "c": 1}), "property \"c\" is not allowed"),
            (json!({"a": [], "b": "y"}), "is not one of"),
            (json!([]), "expected object"),
        ];
        for (doc, want) in bad {
            let e = validate(&s, &doc).unwrap_err().to_string();
            assert!(e.contains(want), "{doc}: {e}");
        }
        let unsupported = json!({"type": "string", "pattern": "x"});
        assert!(validate(&unsupported, &json!("x")).unwrap_err().to_string().contains("pattern"));
    }

    #[test]
    fn the_schema_file_parses() {
        let s: Value = serde_json::from_str(RESULTS_SCHEMA).unwrap();
        assert_eq!(s["type"], "array");
        // An empty results file is valid, a wrong top level is not.
        assert!(validate_results(&json!([])).is_ok());
        assert!(validate_results(&json!({"model": "x"})).is_err());
    }
}
