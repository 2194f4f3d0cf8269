//! The settings in effect: for each key the environment, then the stored settings, then
//! the default, each value checked by its rule and a bad one skipped with a problem.

use serde::Serialize;
use serde_json::Value;

use super::registry::{SETTINGS, default_of, env_var_of, validate_setting};
use crate::{Engine, EngineError};

/// Where a value in effect comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueSource {
    Environment,
    Settings,
    Default,
}

/// One setting in effect.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Effective {
    pub key: &'static str,
    /// `null`: not set and no default (see [`default_of`]).
    pub value: Value,
    pub source: ValueSource,
    /// A value the environment or the settings give that is not valid: it is not used
    /// (the next in line is), and this says which it is and how to fix it.
    pub problem: Option<String>,
}

/// Every setting in effect, first match wins: the environment, the stored settings, the
/// default. Each value is checked by the rule `kasten config set` applies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EffectiveSettings(pub Vec<Effective>);

impl EffectiveSettings {
    pub fn get(&self, key: &str) -> Option<&Effective> {
        self.0.iter().find(|e| e.key == key)
    }

    pub(super) fn value(&self, key: &str) -> &Value {
        self.get(key).map_or(&Value::Null, |e| &e.value)
    }

    pub(super) fn text(&self, key: &str) -> Option<String> {
        match self.value(key) {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            v => Some(v.to_string()),
        }
    }

    /// The settings the environment fixes (as their variables' names).
    pub fn from_environment(&self) -> Vec<String> {
        self.0
            .iter()
            .filter(|e| e.source == ValueSource::Environment)
            .filter_map(|e| env_var_of(e.key).map(str::to_owned))
            .collect()
    }

    /// Every problem, in words.
    pub fn problems(&self) -> Vec<String> {
        self.0.iter().filter_map(|e| e.problem.clone()).collect()
    }
}

fn raw_of(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) if s.trim().is_empty() => None,
        Value::String(s) => Some(s.clone()),
        v => Some(v.to_string()),
    }
}

impl Engine {
    /// Every setting in effect: the environment (`get`), then the stored settings, then
    /// the defaults; a value that breaks its rule is skipped with a problem naming it.
    pub async fn effective_settings(
        &self,
        get: &(dyn Fn(&str) -> Option<String> + Send + Sync),
    ) -> Result<EffectiveSettings, EngineError> {
        let mut groups: Vec<(&str, Value)> = Vec::new();
        let mut out = Vec::with_capacity(SETTINGS.len());
        for &(key, _) in SETTINGS {
            let (group, field) = key.split_once('.').unwrap_or((key, ""));
            if !groups.iter().any(|(g, _)| *g == group) {
                let v = self.setting_group(group).await?;
                groups.push((group, v));
            }
            let stored = groups
                .iter()
                .find(|(g, _)| *g == group)
                .and_then(|(_, v)| v.get(field))
                .and_then(raw_of);
            let mut problem = None;
            let mut found = None;
            if let Some(var) = env_var_of(key)
                && let Some(raw) = get(var).filter(|v| !v.trim().is_empty())
            {
                match validate_setting(key, &raw) {
                    Ok(v) => found = Some((v, ValueSource::Environment)),
                    Err(e) => {
                        problem = Some(format!(
                            "{var} is ignored: {e}; fix or unset the environment variable"
                        ))
                    }
                }
            }
            if found.is_none()
                && let Some(raw) = stored
            {
                match validate_setting(key, &raw) {
                    Ok(v) => found = Some((v, ValueSource::Settings)),
                    Err(e) => {
                        problem.get_or_insert(format!(
                            "the stored {key} is ignored: {e}; fix it with `kasten config set {key} …` \
                             or `kasten config unset {key}`"
                        ));
                    }
                }
            }
            let (value, source) = found.unwrap_or_else(|| (default_of(key), ValueSource::Default));
            out.push(Effective {
                key,
                value,
                source,
                problem,
            });
        }
        Ok(EffectiveSettings(out))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::settings::test_util::*;

    /// env > settings > default for each setting, and a bad value at any level is skipped
    /// with a problem naming the setting (or the variable) and the fix.
    #[tokio::test]
    async fn the_environment_wins_over_the_settings_which_win_over_the_defaults() {
        let e = engine().await;
        let none = env_sync(&[]);
        let eff = e.effective_settings(&none).await.unwrap();
        let t = eff.get("llm.timeout").unwrap();
        assert_eq!(
            (t.value.clone(), t.source),
            (json!(60), ValueSource::Default)
        );
        assert_eq!(eff.get("pipeline.k").unwrap().value, json!(10));
        assert!(eff.problems().is_empty(), "{:?}", eff.problems());

        e.set_setting_checked("llm.timeout", "120").await.unwrap();
        e.set_setting_checked("pipeline.k", "7").await.unwrap();
        let eff = e.effective_settings(&none).await.unwrap();
        let t = eff.get("llm.timeout").unwrap();
        assert_eq!(
            (t.value.clone(), t.source),
            (json!(120), ValueSource::Settings)
        );
        assert_eq!(eff.get("pipeline.k").unwrap().source, ValueSource::Settings);

        let env = env_sync(&[("KASTEN_LLM_TIMEOUT", "30")]);
        let eff = e.effective_settings(&env).await.unwrap();
        let t = eff.get("llm.timeout").unwrap();
        assert_eq!(
            (t.value.clone(), t.source),
            (json!(30), ValueSource::Environment)
        );
        assert_eq!(
            eff.from_environment(),
            vec!["KASTEN_LLM_TIMEOUT".to_owned()]
        );
        // the form shows the same values
        let form = e.settings_form(&env).await.unwrap();
        assert_eq!((form.timeout_secs, form.k), (30, 7));
        assert_eq!(form.env_overrides, vec!["KASTEN_LLM_TIMEOUT".to_owned()]);

        // a bad environment value falls back to the stored one and is named
        let bad_env = env_sync(&[("KASTEN_LLM_TIMEOUT", "soon")]);
        let eff = e.effective_settings(&bad_env).await.unwrap();
        let t = eff.get("llm.timeout").unwrap();
        assert_eq!(
            (t.value.clone(), t.source),
            (json!(120), ValueSource::Settings)
        );
        let p = t.problem.clone().unwrap_or_default();
        assert!(
            p.contains("KASTEN_LLM_TIMEOUT") && p.contains("soon"),
            "{p}"
        );

        // a bad stored value (written before values were checked) falls back to the default
        e.store
            .set_setting("llm", &json!({"timeout": "soon", "provider": "opneai"}))
            .await
            .unwrap();
        e.store
            .set_setting("pipeline", &json!({"k": 500}))
            .await
            .unwrap();
        let eff = e.effective_settings(&none).await.unwrap();
        for (key, default) in [
            ("llm.timeout", json!(60)),
            ("llm.provider", Value::Null),
            ("pipeline.k", json!(10)),
        ] {
            let s = eff.get(key).unwrap();
            assert_eq!(
                (s.value.clone(), s.source),
                (default, ValueSource::Default),
                "{key}"
            );
            let p = s.problem.clone().unwrap_or_default();
            assert!(p.contains(key) && p.contains("kasten config"), "{p}");
        }
        // the pipeline clamps what it cannot refuse
        assert_eq!(e.pipeline_settings().await.unwrap().k, 50);
        e.close().await;
    }
}
