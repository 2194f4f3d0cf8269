//! Where the ONNX Runtime library and the model files live.
//!
//! Lookup order, first hit wins:
//! - library: `ORT_DYLIB_PATH`, then `<home>/lib/libonnxruntime.so.1.31.1` for `<home>` in
//!   (`KASTEN_HOME`, the platform data dir + `/kasten`, the installed home)
//! - model directory: `KASTEN_MODEL_DIR`, then `<home>/models/<model id>` likewise.
//!
//! `scripts/setup` installs both into the platform data dir (or `KASTEN_HOME`); the `.deb`
//! that `scripts/package` builds ships them in the installed home, `/usr/lib/kasten`
//! (`<prefix>/lib/kasten` for the executable's `<prefix>/bin`).

use std::path::{Path, PathBuf};

use crate::EmbedError;

pub const DEFAULT_MODEL_ID: &str = "all-minilm-l6-v2-int8";
const ORT_FILE: &str = "libonnxruntime.so.1.31.1";
pub(crate) const MODEL_FILES: [&str; 5] = [
    "model.onnx",
    "tokenizer.json",
    "config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
];

/// Resolved locations of everything an embedder needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPaths {
    pub model_id: String,
    pub runtime: PathBuf,
    pub model_dir: PathBuf,
}

/// Where a packaged install keeps the runtime and models: `<prefix>/lib/kasten` for an
/// executable in `<prefix>/bin` (`/usr/bin/kasten` → `/usr/lib/kasten`).
pub fn installed_home(exe: &Path) -> Option<PathBuf> {
    let prefix = exe.parent()?.parent()?;
    Some(prefix.join("lib").join("kasten"))
}

/// The homes searched, in order: `KASTEN_HOME`, `<data_dir>/kasten`, the installed home.
fn homes(
    get: &impl Fn(&str) -> Option<String>,
    data_dir: Option<PathBuf>,
    exe: Option<PathBuf>,
) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(h) = get("KASTEN_HOME").filter(|s| !s.is_empty()) {
        v.push(PathBuf::from(h));
    }
    if let Some(d) = data_dir {
        v.push(d.join("kasten"));
    }
    if let Some(h) = exe.as_deref().and_then(installed_home) {
        v.push(h);
    }
    v
}

impl ModelPaths {
    /// Resolves paths from the process environment.
    pub fn from_env(model_id: &str) -> Self {
        Self::resolve(model_id, |k| std::env::var(k).ok())
    }

    /// Resolves paths with `get` standing in for the environment.
    pub fn resolve(model_id: &str, get: impl Fn(&str) -> Option<String>) -> Self {
        Self::resolve_in(
            model_id,
            &get,
            dirs::data_dir(),
            std::env::current_exe().ok(),
        )
    }

    /// Resolves paths with the data dir and the executable's path given too.
    fn resolve_in(
        model_id: &str,
        get: &impl Fn(&str) -> Option<String>,
        data_dir: Option<PathBuf>,
        exe: Option<PathBuf>,
    ) -> Self {
        let homes = homes(get, data_dir, exe);
        let first_existing = |rel: &Path| {
            homes
                .iter()
                .map(|h| h.join(rel))
                .find(|p| p.exists())
                .or_else(|| homes.first().map(|h| h.join(rel)))
        };
        let runtime = get("ORT_DYLIB_PATH")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .or_else(|| first_existing(&Path::new("lib").join(ORT_FILE)))
            .unwrap_or_else(|| PathBuf::from(ORT_FILE));
        let model_dir = get("KASTEN_MODEL_DIR")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .or_else(|| first_existing(&Path::new("models").join(model_id)))
            .unwrap_or_else(|| PathBuf::from(model_id));
        Self {
            model_id: model_id.to_owned(),
            runtime,
            model_dir,
        }
    }

    /// Checks that every file is there, naming the first missing one.
    pub fn check(&self) -> Result<(), EmbedError> {
        if !self.runtime.is_file() {
            return Err(EmbedError::Missing {
                what: "the ONNX Runtime library",
                path: self.runtime.display().to_string(),
                var: "ORT_DYLIB_PATH",
            });
        }
        for f in MODEL_FILES {
            let p = self.model_dir.join(f);
            if !p.is_file() {
                return Err(EmbedError::Missing {
                    what: "an embedding model file",
                    path: p.display().to_string(),
                    var: "KASTEN_MODEL_DIR",
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_variables_win() {
        let p = ModelPaths::resolve("m", |k| match k {
            "ORT_DYLIB_PATH" => Some("/x/libort.so".into()),
            "KASTEN_MODEL_DIR" => Some("/y/model".into()),
            _ => None,
        });
        assert_eq!(p.runtime, PathBuf::from("/x/libort.so"));
        assert_eq!(p.model_dir, PathBuf::from("/y/model"));
    }

    #[test]
    fn missing_files_name_the_setup_command() {
        let dir = std::env::temp_dir().join(format!("kasten-embed-test-{}", std::process::id()));
        let home = dir.to_string_lossy().to_string();
        let p = ModelPaths::resolve("m", |k| (k == "KASTEN_HOME").then(|| home.clone()));
        // KASTEN_HOME comes first even when nothing is there yet
        assert!(p.model_dir.starts_with(&dir) || p.model_dir.ends_with("models/m"));
        let err = ModelPaths {
            model_id: "m".into(),
            runtime: dir.join("nope.so"),
            model_dir: dir.clone(),
        }
        .check()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.contains("scripts/setup"), "{err}");
        assert!(err.contains("ORT_DYLIB_PATH"), "{err}");
    }

    #[test]
    fn a_packaged_install_is_found_next_to_the_executable() {
        let root = std::env::temp_dir().join(format!("kasten-embed-inst-{}", std::process::id()));
        let installed = root.join("usr/lib/kasten");
        let _ = std::fs::create_dir_all(installed.join("models/m"));
        let _ = std::fs::create_dir_all(installed.join("lib"));
        let _ = std::fs::write(installed.join("lib").join(ORT_FILE), b"so");
        let empty = root.join("fresh-home").display().to_string();
        let exe = Some(root.join("usr/bin/kasten"));
        let get = |k: &str| (k == "KASTEN_HOME").then(|| empty.clone());
        let p = ModelPaths::resolve_in("m", &get, Some(root.join("data")), exe.clone());
        assert_eq!(p.model_dir, installed.join("models/m"));
        assert_eq!(p.runtime, installed.join("lib").join(ORT_FILE));
        // a copy in KASTEN_HOME still wins over the installed one
        let _ = std::fs::create_dir_all(root.join("fresh-home/models/m"));
        let p = ModelPaths::resolve_in("m", &get, Some(root.join("data")), exe);
        assert_eq!(p.model_dir, root.join("fresh-home/models/m"));
        // nothing anywhere: the first home is named, not the installed one
        let p = ModelPaths::resolve_in("other", &get, None, None);
        assert_eq!(p.model_dir, root.join("fresh-home/models/other"));
        let _ = std::fs::remove_dir_all(&root);
    }
}
