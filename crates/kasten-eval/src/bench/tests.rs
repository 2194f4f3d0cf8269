//! The `--json` reports of `kasten bench` against what they printed before they were
//! typed: `testdata/` holds the output of `kasten --json bench search --notes 60
//! --queries 15 --reopen` and `kasten --json bench share --notes 60 --queries 15` from the
//! `serde_json::Value` builders; read into the types and printed again, nothing changes.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::test_shape::shape;

use super::report::{SearchReport, ShareReport};

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
