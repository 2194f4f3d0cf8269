//! The LLM API key: one rule for every surface (the CLI, `kasten mcp`, the app).
//!
//! 1. `KASTEN_LLM_API_KEY` in the environment wins.
//! 2. Else the OS keyring (Secret Service on Linux, Keychain, Credential Manager): the
//!    entry the app has always used (service `app.kasten.desktop`, user `llm-api-key`),
//!    so a key saved in the app reaches the CLI and the MCP server.
//! 3. Else the `llm.api_key` setting, the fallback where no keyring works; storing it
//!    there is reported with a warning (anyone who can read the data directory can
//!    read it).
//!
//! The key is never printed (`kasten config` masks it) and never written to a backup.

use std::sync::Arc;

use crate::{Engine, EngineError};

/// Where API keys are kept outside the memory. The engine uses [`OsKeyring`]; tests give
/// it another one ([`Engine::set_key_store`]).
pub trait KeyStore: Send + Sync {
    /// The stored key, if this store works and holds one.
    fn get(&self) -> Option<String>;
    /// Stores `key`; false if this store cannot (no keyring on a headless machine).
    fn set(&self, key: &str) -> bool;
    /// Removes the key (nothing if there is none).
    fn delete(&self);
}

/// The OS keyring, through the `keyring` crate.
pub struct OsKeyring;

const SERVICE: &str = "app.kasten.desktop";
const USER: &str = "llm-api-key";

impl OsKeyring {
    fn entry() -> Option<keyring::Entry> {
        keyring::Entry::new(SERVICE, USER).ok()
    }
}

impl KeyStore for OsKeyring {
    fn get(&self) -> Option<String> {
        Self::entry()?
            .get_password()
            .ok()
            .filter(|k| !k.trim().is_empty())
    }
    fn set(&self, key: &str) -> bool {
        Self::entry().is_some_and(|e| e.set_password(key).is_ok())
    }
    fn delete(&self) {
        if let Some(e) = Self::entry() {
            let _ = e.delete_credential();
        }
    }
}

/// Said when the key has to go into the settings.
pub const UNENCRYPTED_WARNING: &str = "No OS keyring is available, so the API key is stored \
     unencrypted in the memory's settings: anyone who can read Kasten's data directory can \
     read it (backups leave it out).";

/// Where [`Engine::store_api_key`] put the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPlace {
    Keyring,
    /// The fallback: the memory's settings (see [`UNENCRYPTED_WARNING`]).
    Settings,
}

impl Engine {
    /// Uses `keys` instead of the OS keyring (tests; a shell with its own store).
    pub fn set_key_store(&mut self, keys: Arc<dyn KeyStore>) {
        self.keys = keys;
    }

    /// The key in the keyring, if there is a keyring and a key in it (blocking calls run
    /// off the async threads).
    pub async fn api_key_from_keyring(&self) -> Option<String> {
        let keys = Arc::clone(&self.keys);
        tokio::task::spawn_blocking(move || keys.get())
            .await
            .ok()
            .flatten()
    }

    /// The API key to use when the environment sets none: the keyring's, else the one in
    /// the settings.
    pub async fn stored_api_key(&self) -> Result<Option<String>, EngineError> {
        let stored = self.setting_group("llm").await?;
        Ok(self.api_key_without_env(&stored).await)
    }

    /// The API key to use when the environment sets none: the keyring's, else the one
    /// in the settings.
    pub(crate) async fn api_key_without_env(&self, stored: &serde_json::Value) -> Option<String> {
        if let Some(k) = self.api_key_from_keyring().await {
            return Some(k);
        }
        stored
            .get("api_key")
            .and_then(|v| v.as_str())
            .filter(|k| !k.trim().is_empty())
            .map(str::to_owned)
    }

    /// Stores the API key: in the keyring when there is one (and removes any copy from
    /// the settings), else in the settings. An empty key removes it from both.
    pub async fn store_api_key(&self, key: &str) -> Result<Option<KeyPlace>, EngineError> {
        let key = key.trim().to_owned();
        let keys = Arc::clone(&self.keys);
        let mut llm = self.setting_group("llm").await?;
        if !llm.is_object() {
            llm = serde_json::json!({});
        }
        let place = if key.is_empty() {
            let _ = tokio::task::spawn_blocking(move || keys.delete()).await;
            None
        } else {
            let k = key.clone();
            let in_keyring = tokio::task::spawn_blocking(move || keys.set(&k))
                .await
                .unwrap_or(false);
            Some(if in_keyring {
                KeyPlace::Keyring
            } else {
                tracing::warn!("{UNENCRYPTED_WARNING}");
                KeyPlace::Settings
            })
        };
        if let Some(obj) = llm.as_object_mut() {
            match place {
                Some(KeyPlace::Settings) => {
                    obj.insert("api_key".into(), key.into());
                }
                _ => {
                    obj.remove("api_key");
                }
            }
        }
        self.store.set_setting("llm", &llm).await?;
        Ok(place)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code fails loudly

    use std::sync::Mutex;

    use super::*;
    use crate::tests::HashEmbedder;

    /// A keyring in memory; `works: false` is a machine without one.
    struct MemKeyring {
        works: bool,
        key: Mutex<Option<String>>,
    }

    impl KeyStore for MemKeyring {
        fn get(&self) -> Option<String> {
            self.key.lock().ok()?.clone()
        }
        fn set(&self, key: &str) -> bool {
            if !self.works {
                return false;
            }
            self.key
                .lock()
                .map(|mut k| *k = Some(key.to_owned()))
                .is_ok()
        }
        fn delete(&self) {
            if let Ok(mut k) = self.key.lock() {
                *k = None;
            }
        }
    }

    async fn engine(works: bool) -> (Engine, Arc<MemKeyring>) {
        let mut e = Engine::open(
            &kasten_store::Endpoint::Mem,
            HashEmbedder::arc("h", 16, 1),
            &|_| {},
        )
        .await
        .unwrap();
        let keys = Arc::new(MemKeyring {
            works,
            key: Mutex::new(None),
        });
        e.set_key_store(keys.clone());
        e.set_setting_checked("llm.provider", "openai")
            .await
            .unwrap();
        e.set_setting_checked("llm.base_url", "http://127.0.0.1:9/v1")
            .await
            .unwrap();
        e.set_setting_checked("llm.model", "m").await.unwrap();
        (e, keys)
    }

    async fn key_in_use(e: &Engine, env: Option<&str>) -> Option<String> {
        let env = env.map(str::to_owned);
        let get = move |k: &str| (k == "KASTEN_LLM_API_KEY").then(|| env.clone()).flatten();
        let choice = e.choose_llm(&get).await.unwrap();
        choice.client.and_then(|c| c.config().api_key.clone())
    }

    /// The key the app's Settings store (through `store_api_key`) is the one the CLI and
    /// `kasten mcp` use: they choose the LLM through `choose_llm`.
    #[tokio::test]
    async fn the_key_goes_to_the_keyring_first_and_every_surface_reads_it() {
        let (e, keys) = engine(true).await;
        assert_eq!(
            e.store_api_key("sk-in-keyring").await.unwrap(),
            Some(KeyPlace::Keyring)
        );
        assert_eq!(keys.get().as_deref(), Some("sk-in-keyring"));
        assert!(
            e.setting_group("llm")
                .await
                .unwrap()
                .get("api_key")
                .is_none()
        );
        assert_eq!(key_in_use(&e, None).await.as_deref(), Some("sk-in-keyring"));
        // the environment wins
        assert_eq!(
            key_in_use(&e, Some("sk-env")).await.as_deref(),
            Some("sk-env")
        );
        // an empty key removes it from the keyring
        e.store_api_key("").await.unwrap();
        assert_eq!(keys.get(), None);
        assert_eq!(key_in_use(&e, None).await, None);
        e.close().await;
    }

    #[tokio::test]
    async fn without_a_keyring_the_key_falls_back_to_the_settings() {
        let (e, keys) = engine(false).await;
        assert_eq!(
            e.store_api_key("sk-in-settings").await.unwrap(),
            Some(KeyPlace::Settings)
        );
        assert_eq!(keys.get(), None);
        assert_eq!(
            key_in_use(&e, None).await.as_deref(),
            Some("sk-in-settings")
        );
        // shown masked
        let shown = e.settings_view().await.unwrap().to_string();
        assert!(!shown.contains("sk-in-settings"), "{shown}");
        e.close().await;
    }
}
