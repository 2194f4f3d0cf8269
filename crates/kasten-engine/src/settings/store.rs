//! Stored settings: one JSON object per group, read, set and unset one key at a time,
//! each value checked by its rule first.

use serde_json::{Value, json};

use super::registry::{clamp_k, clamp_workers, is_setting, validate_setting};
use crate::{Engine, EngineError};

impl Engine {
    /// The stored value of a setting group (`{}` when unset).
    pub async fn setting_group(&self, group: &str) -> Result<Value, EngineError> {
        Ok(self
            .store
            .get_setting(group)
            .await?
            .unwrap_or_else(|| json!({})))
    }

    /// Checks and stores one setting (`group.field`).
    pub async fn set_setting_checked(&self, key: &str, raw: &str) -> Result<(), EngineError> {
        let value = validate_setting(key, raw)?;
        let (group, field) = key.split_once('.').unwrap_or((key, ""));
        if group == "policy" {
            let mut p = serde_json::to_value(self.policy().await?)
                .map_err(|e| EngineError::Internal(e.to_string()))?;
            p[field] = value;
            let p: crate::Policy =
                serde_json::from_value(p).map_err(|e| EngineError::Internal(e.to_string()))?;
            return self.set_policy(&p).await;
        }
        let mut obj = self.setting_group(group).await?;
        if !obj.is_object() {
            obj = json!({});
        }
        obj[field] = value;
        self.store.set_setting(group, &obj).await?;
        if group == "retrieval" {
            self.refresh_retrieval_settings().await?;
        }
        Ok(())
    }

    /// Removes one stored setting (it falls back to its default). Unknown keys are refused;
    /// invalid stored values can always be removed.
    pub async fn unset_setting(&self, key: &str) -> Result<(), EngineError> {
        if !is_setting(key) {
            validate_setting(key, "")?;
        }
        let (group, field) = key.split_once('.').unwrap_or((key, ""));
        if group == "policy" {
            let mut p = serde_json::to_value(self.policy().await?)
                .map_err(|e| EngineError::Internal(e.to_string()))?;
            let d = serde_json::to_value(crate::Policy::default())
                .map_err(|e| EngineError::Internal(e.to_string()))?;
            p[field] = d[field].clone();
            let p: crate::Policy =
                serde_json::from_value(p).map_err(|e| EngineError::Internal(e.to_string()))?;
            return self.set_policy(&p).await;
        }
        let mut obj = self.setting_group(group).await?;
        if let Some(map) = obj.as_object_mut() {
            map.remove(field);
            self.store.set_setting(group, &obj).await?;
        }
        Ok(())
    }

    /// Every setting group as stored, with secrets masked, for `kasten config`.
    pub async fn settings_view(&self) -> Result<Value, EngineError> {
        let mut all = serde_json::Map::new();
        for group in ["llm", "pipeline", "retrieval", "lifecycle", "merge"] {
            let mut v = self.setting_group(group).await?;
            if let Some(k) = v.get_mut("api_key")
                && k.as_str().is_some_and(|s| !s.is_empty())
            {
                *k = json!("********");
            }
            all.insert(group.into(), v);
        }
        all.insert(
            "policy".into(),
            serde_json::to_value(self.policy().await?)
                .map_err(|e| EngineError::Internal(e.to_string()))?,
        );
        Ok(Value::Object(all))
    }

    /// Pipeline options from the stored settings (values out of range are clamped).
    pub async fn pipeline_settings(&self) -> Result<crate::PipelineOptions, EngineError> {
        let s = self.setting_group("pipeline").await?;
        let mut p = crate::PipelineOptions::default();
        if let Some(k) = s.get("k").and_then(Value::as_u64) {
            p.k = clamp_k(k);
        }
        if let Some(w) = s.get("workers").and_then(Value::as_u64) {
            p.workers = clamp_workers(w);
        }
        Ok(p)
    }
}
