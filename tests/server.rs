//! Two Kasten processes against a real SurrealDB server over ws:// (issue 9).
