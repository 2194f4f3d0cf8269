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

/// A built-in model: its directory under `<KASTEN_HOME>/models`, its file there, and how
/// it is named to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinModel {
    pub dir: &'static str,
    pub file: &'static str,
    pub name: &'static str,
}

/// The model Kasten uses when none is chosen, as `scripts/setup` and the .deb install it:
/// Qwen2.5-Coder-0.5B-Instruct (why this one: README, "Built-in models").
pub const DEFAULT_BUILTIN: BuiltinModel = BuiltinModel {
    dir: "qwen2.5-coder-0.5b-instruct",
    file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    name: "Qwen2.5-Coder-0.5B",
};

/// The small, quick model: used when the default is not installed (a home set up before
/// the default changed), and by the tests that run a real model.
pub const QUICK_BUILTIN: BuiltinModel = BuiltinModel {
    dir: "smollm2-135m-instruct",
    file: "SmolLM2-135M-Instruct.Q4_1.gguf",
    name: "SmolLM2-135M",
};

impl BuiltinModel {
    fn rel(&self) -> PathBuf {
        PathBuf::from("models").join(self.dir).join(self.file)
    }

    /// Its file in the first of `homes` that holds it.
    fn find_in(&self, homes: &[PathBuf]) -> Option<PathBuf> {
        let rel = self.rel();
        homes.iter().map(|h| h.join(&rel)).find(|p| p.is_file())
    }

    /// Where this model is installed (the first home that holds its file), if it is.
    pub fn installed(&self, get: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
        self.find_in(&kasten_homes(
            &get,
            dirs::data_dir(),
            std::env::current_exe().ok(),
        ))
    }
}

/// The built-in model in use when none is chosen, and where it is: the default model in
/// `<home>/models/<dir>/<file>` for `<home>` in (`KASTEN_HOME`, the platform data dir +
/// `/kasten`, the installed home `<prefix>/lib/kasten` of an executable in `<prefix>/bin`,
/// where the `.deb` puts it), the first that holds it; else the quick model, where only it
/// is installed; else the default in the first home (so an error can name where it should
/// be).
pub fn builtin_model(get: impl Fn(&str) -> Option<String>) -> (PathBuf, BuiltinModel) {
    builtin_model_in(&get, dirs::data_dir(), std::env::current_exe().ok())
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

fn builtin_model_in(
    get: &impl Fn(&str) -> Option<String>,
    data_dir: Option<PathBuf>,
    exe: Option<PathBuf>,
) -> (PathBuf, BuiltinModel) {
    let homes = kasten_homes(get, data_dir, exe);
    [DEFAULT_BUILTIN, QUICK_BUILTIN]
        .into_iter()
        .find_map(|m| m.find_in(&homes).map(|p| (p, m)))
        .unwrap_or_else(|| {
            let rel = DEFAULT_BUILTIN.rel();
            let path = homes.first().map(|h| h.join(&rel)).unwrap_or(rel);
            (path, DEFAULT_BUILTIN)
        })
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

    fn put(home: &std::path::Path, m: BuiltinModel) -> PathBuf {
        let dir = home.join("models").join(m.dir);
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join(m.file), b"GGUF");
        dir.join(m.file)
    }

    #[test]
    fn the_builtin_model_is_looked_up_under_kasten_home_first() {
        let home = std::env::temp_dir().join(format!("kasten-builtin-{}", std::process::id()));
        let file = put(&home, DEFAULT_BUILTIN);
        let h = home.display().to_string();
        let (p, _) = builtin_model(|k| (k == "KASTEN_HOME").then(|| h.clone()));
        assert_eq!(p, file);
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn a_packaged_builtin_model_is_found_next_to_the_executable() {
        let root = std::env::temp_dir().join(format!("kasten-builtin-inst-{}", std::process::id()));
        let file = put(&root.join("usr/lib/kasten"), DEFAULT_BUILTIN);
        let fresh = root.join("fresh-home").display().to_string();
        let get = |k: &str| (k == "KASTEN_HOME").then(|| fresh.clone());
        let exe = Some(root.join("usr/bin/kasten-desktop"));
        let (p, m) = builtin_model_in(&get, Some(root.join("data")), exe);
        assert_eq!((p, m), (file, DEFAULT_BUILTIN));
        // without the executable's prefix the first home is named, for the default model
        let (p, m) = builtin_model_in(&get, Some(root.join("data")), None);
        assert!(p.starts_with(root.join("fresh-home")), "{}", p.display());
        assert!(p.ends_with(DEFAULT_BUILTIN.file), "{}", p.display());
        assert_eq!(m, DEFAULT_BUILTIN);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_quick_model_is_used_only_where_the_default_is_not_installed() {
        let root =
            std::env::temp_dir().join(format!("kasten-builtin-quick-{}", std::process::id()));
        let (home, data) = (root.join("home"), root.join("data"));
        let h = home.display().to_string();
        let get = |k: &str| (k == "KASTEN_HOME").then(|| h.clone());
        // only the quick model, in the data dir: it is the one
        let quick = put(&data.join("kasten"), QUICK_BUILTIN);
        let (p, m) = builtin_model_in(&get, Some(data.clone()), None);
        assert_eq!((p, m), (quick, QUICK_BUILTIN));
        // the default anywhere wins over the quick model in an earlier home
        let _ = std::fs::remove_dir_all(&data);
        put(&home, QUICK_BUILTIN);
        let default = put(&data.join("kasten"), DEFAULT_BUILTIN);
        let (p, m) = builtin_model_in(&get, Some(data.clone()), None);
        assert_eq!((p, m), (default, DEFAULT_BUILTIN));
        let _ = std::fs::remove_dir_all(&root);
    }
}
