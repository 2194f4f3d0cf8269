//! What the report tests compare: a JSON value's shape.

use serde_json::Value;

/// Every path of a JSON value with the type at its end (`number:int` and `number:float`
/// apart): what a script reading the report relies on, values aside.
pub(crate) fn shape(v: &Value) -> Vec<String> {
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
