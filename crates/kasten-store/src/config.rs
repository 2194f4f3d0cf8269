//! Settings (one JSON object per key) and the queue's size.

use super::*;

impl Store {
    /// A setting as stored (JSON text), or None.
    pub async fn get_setting(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let mut resp = self
            .db
            .query("SELECT VALUE value FROM ONLY type::record('setting', $k)")
            .bind(("k", key.to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        let v: Option<String> = resp.take(0).map_err(StoreError::from_db)?;
        v.map(|s| {
            serde_json::from_str(&s).map_err(|e| StoreError::Corrupt(format!("setting {key}: {e}")))
        })
        .transpose()
    }

    pub async fn set_setting(
        &self,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let mut resp = self
            .db
            .query("UPSERT type::record('setting', $k) SET value = $v")
            .bind(("k", key.to_owned()))
            .bind(("v", value.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }

    /// Number of queued enrichment jobs.
    pub async fn queued_jobs(&self) -> Result<u64, StoreError> {
        let mut resp = self
            .db
            .query("SELECT count() AS n FROM job WHERE state = $job_queued GROUP ALL")
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let n: Option<i64> = resp.take((0, "n")).map_err(StoreError::from_db)?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }
}
