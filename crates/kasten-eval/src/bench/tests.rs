//! The `--json` reports of `kasten bench` against what they printed before they were
//! typed: `testdata/` holds the output of `kasten --json bench search --notes 60
//! --queries 15 --reopen` and `kasten --json bench share --notes 60 --queries 15` from the
//! `serde_json::Value` builders; read into the types and printed again, nothing changes.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::report::{SearchReport, ShareReport};

/// Every path of a JSON value with the type at its end (`number:int` and `number:float`
/// apart): what a script reading the report relies on, values aside.
fn shape(v: &Value) -> Vec<String> {
    fn walk(v: &Value, path: &str, out: &mut Vec<String>) {
        let kind = match v {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(n) if n.is_f64() => "number:float",
            Value::Number(_) => "number:int",
            Value::String(_) => "string",
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{path}[{i}]"), out);
                }
                "array"
            }
            Value::Object(m) => {
                for (k, x) in m {
                    walk(x, &format!("{path}.{k}"), out);
                }
                "object"
            }
        };
        out.push(format!("{path}: {kind}"));
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out.sort();
    out
}

fn reads_back_unchanged<T: Serialize + DeserializeOwned>(text: &str) -> T {
    let old: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON: {e}"));
    let r: T = serde_json::from_value(old.clone()).unwrap_or_else(|e| panic!("does not read: {e}"));
    let new = serde_json::to_value(&r).unwrap_or_else(|e| panic!("does not serialise: {e}"));
    assert_eq!(shape(&new), shape(&old));
    assert_eq!(new, old);
    r
}

#[test]
fn the_search_report_is_the_json_it_was() {
    let r: SearchReport = reads_back_unchanged(include_str!("testdata/bench-search-run.json"));
    assert!(r.reopen.is_some() && r.boxes.is_some());
    // without --reopen the field is absent, not null; without --no-boxes, null
    let mut plain = r;
    plain.reopen = None;
    plain.boxes = None;
    let v = serde_json::to_value(&plain).unwrap_or_default();
    assert!(v.get("reopen").is_none());
    assert!(v.get("boxes").is_some_and(Value::is_null));
}

#[test]
fn the_share_report_is_the_json_it_was() {
    let _: ShareReport = reads_back_unchanged(include_str!("testdata/bench-share-run.json"));
}
