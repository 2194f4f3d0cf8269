//! The settings registry: every key `kasten config` knows, written once with what it
//! takes, the environment variable that wins over it, the rule its values are checked by
//! and its default.

use std::ops::RangeInclusive;
use std::time::Duration;

use kasten_llm::Provider;
use serde_json::{Value, json};
use thiserror::Error;

use crate::pipeline::ModelProfile;

/// Whole seconds one LLM request may take: the rule of `llm.timeout`,
/// `KASTEN_LLM_TIMEOUT` and the settings form's timeout.
pub(crate) const TIMEOUT_SECS: RangeInclusive<u64> = 1..=3600;
/// Neighbours shown to the LLM (`pipeline.k`).
pub(crate) const K: RangeInclusive<u64> = 1..=50;
/// Concurrent enrichment jobs (`pipeline.workers`).
pub(crate) const WORKERS: RangeInclusive<u64> = 1..=16;

/// The environment variable of the API key (not a setting: the key has its own rule,
/// `secrets.rs`).
pub(crate) const API_KEY_VAR: &str = "KASTEN_LLM_API_KEY";

/// A server's request timeout when none is set.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// A local model's request timeout when none is set: a small model on 2 cores needs more
/// than a server's 60 s for a long note.
pub const LOCAL_TIMEOUT_SECS: u64 = 300;

/// The rule a setting's values are checked by.
enum Rule {
    /// `openai | ollama | local | none`
    Provider,
    /// `http(s)://…`, stored without a trailing `/`
    Url,
    /// Any text but the empty one.
    NonEmpty,
    /// A GGUF file that exists.
    Gguf,
    /// Whole seconds in [`TIMEOUT_SECS`].
    Seconds,
    /// A whole number in the range.
    Whole(RangeInclusive<u64>),
    /// `auto | full | small`
    Profile,
    /// `auto | review`
    Mode,
    /// `true | false`
    Bool,
    /// `all | chat | off`
    Reinforce,
    /// `auto | on | off`
    AutoSwitch,
    /// A number in 0-1.
    Fraction,
}

/// One setting.
struct Setting {
    key: &'static str,
    /// What it takes, in words.
    takes: &'static str,
    /// The environment variable that wins over it.
    env: Option<&'static str>,
    rule: Rule,
    /// Its value when neither the environment nor the settings give one (`null`: none).
    default: fn() -> Value,
}

const fn setting(
    key: &'static str,
    takes: &'static str,
    env: Option<&'static str>,
    rule: Rule,
    default: fn() -> Value,
) -> Setting {
    Setting {
        key,
        takes,
        env,
        rule,
        default,
    }
}

fn none() -> Value {
    Value::Null
}

/// Every setting, in the order `kasten config` lists them.
const REGISTRY: [Setting; 21] = [
    setting(
        "llm.provider",
        "openai | ollama | local | none",
        Some("KASTEN_LLM_PROVIDER"),
        Rule::Provider,
        none,
    ),
    setting(
        "llm.base_url",
        "the server's URL, http(s)://… (OpenAI-compatible: including /v1)",
        Some("KASTEN_LLM_BASE_URL"),
        Rule::Url,
        none,
    ),
    setting(
        "llm.model",
        "the model's name on the server",
        Some("KASTEN_LLM_MODEL"),
        Rule::NonEmpty,
        none,
    ),
    setting(
        "llm.model_path",
        "a GGUF file for the built-in (local) provider",
        Some("KASTEN_LLM_MODEL_PATH"),
        Rule::Gguf,
        none,
    ),
    setting(
        "llm.timeout",
        "seconds one LLM request may take, 1-3600",
        Some("KASTEN_LLM_TIMEOUT"),
        Rule::Seconds,
        || json!(DEFAULT_TIMEOUT_SECS),
    ),
    setting(
        "llm.profile",
        "auto | full | links | small (what the model is trusted to do)",
        Some("KASTEN_LLM_PROFILE"),
        Rule::Profile,
        || json!("auto"),
    ),
    setting(
        "pipeline.k",
        "neighbours shown to the LLM, 1-50",
        None,
        Rule::Whole(K),
        || json!(crate::PipelineOptions::default().k),
    ),
    setting(
        "pipeline.workers",
        "concurrent enrichment jobs, 1-16",
        None,
        Rule::Whole(WORKERS),
        || json!(crate::PipelineOptions::default().workers),
    ),
    setting("policy.links", "auto | review", None, Rule::Mode, || {
        serde_json::to_value(crate::Policy::default().links).unwrap_or(Value::Null)
    }),
    setting("policy.edits", "auto | review", None, Rule::Mode, || {
        serde_json::to_value(crate::Policy::default().edits).unwrap_or(Value::Null)
    }),
    setting(
        "policy.auto_accept_confidence",
        "0-1",
        None,
        Rule::Fraction,
        || json!(crate::Policy::default().auto_accept_confidence),
    ),
    setting(
        "retrieval.strength_weight",
        "0-1",
        None,
        Rule::Fraction,
        || json!(0.0),
    ),
    setting(
        "retrieval.reinforce",
        "all | chat | off (which retrievals strengthen a note)",
        None,
        Rule::Reinforce,
        || json!("all"),
    ),
    setting(
        "retrieval.follow_links",
        "auto | on | off (search follows links; auto: not a small model's)",
        None,
        Rule::AutoSwitch,
        || json!("auto"),
    ),
    setting(
        "retrieval.search_terms",
        "auto | on | off (chat searches with the terms the LLM writes for the question; auto: off, measured no better answers)",
        None,
        Rule::AutoSwitch,
        || json!("auto"),
    ),
    setting(
        "lifecycle.archive_threshold",
        "0-1",
        None,
        Rule::Fraction,
        || json!(kasten_core::lifecycle::DEFAULT_ARCHIVE_THRESHOLD),
    ),
    setting("merge.enabled", "true | false", None, Rule::Bool, || {
        json!(crate::MergeOptions::default().enabled)
    }),
    setting("merge.min_cosine", "0-1", None, Rule::Fraction, || {
        json!((f64::from(crate::MergeOptions::default().min_cosine) * 1e6).round() / 1e6)
    }),
    setting("merge.min_jaccard", "0-1", None, Rule::Fraction, || {
        json!(crate::MergeOptions::default().min_jaccard)
    }),
    setting("merge.supersede", "true | false", None, Rule::Bool, || {
        json!(crate::MergeOptions::default().supersede)
    }),
    setting(
        "merge.supersede_llm",
        "true | false",
        None,
        Rule::Bool,
        || json!(crate::MergeOptions::default().supersede_llm),
    ),
];

const fn keys_and_takes() -> [(&'static str, &'static str); REGISTRY.len()] {
    let mut out = [("", ""); REGISTRY.len()];
    let mut i = 0;
    while i < REGISTRY.len() {
        out[i] = (REGISTRY[i].key, REGISTRY[i].takes);
        i += 1;
    }
    out
}

const KEYS_AND_TAKES: [(&str, &str); REGISTRY.len()] = keys_and_takes();

/// Every setting `kasten config` knows, with what it takes.
pub const SETTINGS: &[(&str, &str)] = &KEYS_AND_TAKES;

fn find(key: &str) -> Option<&'static Setting> {
    static ALL: [Setting; REGISTRY.len()] = REGISTRY;
    ALL.iter().find(|s| s.key == key)
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingError {
    #[error("unknown setting '{key}'; known: {known}")]
    Unknown { key: String, known: String },
    #[error("'{value}' is not a valid value for {key}: it takes {takes}")]
    Invalid {
        key: String,
        value: String,
        takes: String,
    },
}

/// What `key` takes, in words (empty for an unknown key).
pub(crate) fn takes(key: &str) -> &'static str {
    find(key).map_or("", |s| s.takes)
}

/// Whether `key` is a setting.
pub(crate) fn is_setting(key: &str) -> bool {
    find(key).is_some()
}

/// Checks `raw` for `key` and returns the JSON value to store.
pub fn validate_setting(key: &str, raw: &str) -> Result<Value, SettingError> {
    let Some(setting) = find(key) else {
        return Err(SettingError::Unknown {
            key: key.to_owned(),
            known: SETTINGS
                .iter()
                .map(|(k, _)| *k)
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let bad = || SettingError::Invalid {
        key: key.to_owned(),
        value: raw.to_owned(),
        takes: setting.takes.to_owned(),
    };
    let v = raw.trim();
    match &setting.rule {
        Rule::Provider if v.eq_ignore_ascii_case("none") => Ok(json!("none")),
        Rule::Provider => Provider::parse(v)
            .map(|p| json!(p.as_str()))
            .ok_or_else(bad),
        Rule::Url => {
            if v.starts_with("http://") || v.starts_with("https://") {
                Ok(json!(v.trim_end_matches('/')))
            } else {
                Err(bad())
            }
        }
        Rule::NonEmpty if !v.is_empty() => Ok(json!(v)),
        Rule::NonEmpty => Err(bad()),
        Rule::Gguf => match kasten_llm::check_gguf(std::path::Path::new(v)) {
            Ok(()) => Ok(json!(v)),
            Err(e) => Err(SettingError::Invalid {
                key: key.to_owned(),
                value: raw.to_owned(),
                takes: e.to_string(),
            }),
        },
        Rule::Seconds => parse_timeout(v)
            .map(|d| Value::from(d.as_secs()))
            .ok_or_else(bad),
        Rule::Whole(range) => v
            .parse::<u64>()
            .ok()
            .filter(|n| range.contains(n))
            .map(Value::from)
            .ok_or_else(bad),
        Rule::Profile => ModelProfile::parse(v)
            .map(|_| json!(v.to_ascii_lowercase()))
            .ok_or_else(bad),
        Rule::Mode => match v {
            "auto" | "review" => Ok(json!(v)),
            _ => Err(bad()),
        },
        Rule::Bool => v.parse::<bool>().map(Value::from).map_err(|_| bad()),
        Rule::Reinforce => crate::lifecycle::ReinforceOn::parse(v)
            .map(|_| json!(v.trim().to_ascii_lowercase()))
            .ok_or_else(bad),
        Rule::AutoSwitch => crate::lifecycle::AutoSwitch::parse(v)
            .map(|_| json!(v.trim().to_ascii_lowercase()))
            .ok_or_else(bad),
        Rule::Fraction => v
            .parse::<f64>()
            .ok()
            .filter(|f| (0.0..=1.0).contains(f))
            .map(Value::from)
            .ok_or_else(bad),
    }
}

/// A timeout in whole seconds, 1-3600 ([`TIMEOUT_SECS`]): the rule of `llm.timeout` and
/// `KASTEN_LLM_TIMEOUT`.
pub fn parse_timeout(raw: &str) -> Option<Duration> {
    raw.trim()
        .parse::<u64>()
        .ok()
        .filter(|s| TIMEOUT_SECS.contains(s))
        .map(Duration::from_secs)
}

/// A stored `k` as the pipeline uses it (neighbours shown to the LLM): 1-50 ([`K`]).
pub fn clamp_k(k: u64) -> usize {
    k.clamp(*K.start(), *K.end()) as usize
}

/// A count of concurrent enrichment jobs as the pipeline uses it: 1-16 ([`WORKERS`]).
pub(crate) fn clamp_workers(n: u64) -> usize {
    n.clamp(*WORKERS.start(), *WORKERS.end()) as usize
}

/// The environment variable that wins over a setting, if there is one.
pub fn env_var_of(key: &str) -> Option<&'static str> {
    find(key).and_then(|s| s.env)
}

/// A setting's value when neither the environment nor the settings give one (`null`:
/// none, e.g. no server named, so the built-in model is used).
pub fn default_of(key: &str) -> Value {
    find(key).map_or(Value::Null, |s| (s.default)())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_when_set() {
        assert!(matches!(
            validate_setting("llm.provider", "opneai"),
            Err(SettingError::Invalid { .. })
        ));
        assert_eq!(
            validate_setting("llm.provider", "Ollama"),
            Ok(json!("ollama"))
        );
        assert!(validate_setting("llm.timeout", "soon").is_err());
        assert!(validate_setting("llm.timeout", "0").is_err());
        assert_eq!(validate_setting("llm.timeout", "180"), Ok(json!(180)));
        assert!(validate_setting("llm.base_url", "localhost:8080").is_err());
        assert!(validate_setting("pipeline.k", "500").is_err());
        assert!(validate_setting("merge.min_cosine", "1.5").is_err());
        assert!(validate_setting("llm.model_path", "/nowhere/model.gguf").is_err());
        let e = validate_setting("llm.nope", "x")
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("llm.model_path")));
    }

    /// What a setting takes in words states the range its rule checks, at both ends.
    #[test]
    fn the_words_state_the_ranges_the_rules_check() {
        for (key, range) in [
            ("llm.timeout", TIMEOUT_SECS),
            ("pipeline.k", K),
            ("pipeline.workers", WORKERS),
        ] {
            let (lo, hi) = (*range.start(), *range.end());
            assert!(
                takes(key).ends_with(&format!("{lo}-{hi}")),
                "{key}: {}",
                takes(key)
            );
            assert!(validate_setting(key, &lo.to_string()).is_ok(), "{key}");
            assert!(validate_setting(key, &hi.to_string()).is_ok(), "{key}");
            assert!(
                validate_setting(key, &(hi + 1).to_string()).is_err(),
                "{key}"
            );
            assert!(
                validate_setting(key, &(lo - 1).to_string()).is_err(),
                "{key}"
            );
        }
        // one entry per key
        let mut keys: Vec<&str> = SETTINGS.iter().map(|(k, _)| *k).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), SETTINGS.len());
    }
}
