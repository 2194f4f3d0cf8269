//! With `cpu-variants` (the default), llama.cpp comes as shared libraries and ggml's CPU code
//! as one `libggml-cpu-*.so` per instruction set, all built by llama-cpp-sys-2 in its own
//! OUT_DIR. This puts them beside the programs cargo builds (`target/<profile>/` and its
//! `deps/`, where test binaries live), so a program run in place finds them through its rpath
//! `$ORIGIN` (set by the build scripts of `kasten` and `kasten-desktop`) without
//! LD_LIBRARY_PATH, and `scripts/package` takes them from there. llama-cpp-sys-2 links only
//! the unversioned names there (`libllama.so`, a symlink to `libllama.so.0`), not the files
//! the programs load (`libllama.so.0`, their sonames).
//!
//! Each file is copied under a temporary name and renamed into place, so a program that has
//! the old one open keeps it intact.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_CPU_VARIANTS").is_none() {
        return;
    }
    // llama-cpp-sys-2's `cargo:backends_dir`, given to the crates that depend on it directly
    let Some(backends) = std::env::var_os("DEP_LLAMA_BACKENDS_DIR").map(PathBuf::from) else {
        println!("cargo:warning=llama-cpp-sys-2 did not say where ggml's CPU variants are");
        return;
    };
    let Some(lib) = backends.parent().map(|out| out.join("lib")) else {
        return;
    };
    println!("cargo:rerun-if-changed={}", lib.display());
    println!("cargo:rerun-if-changed={}", backends.display());
    let Some(profile_dir) = std::env::var_os("OUT_DIR")
        .map(PathBuf::from)
        .and_then(|out| out.ancestors().nth(3).map(Path::to_path_buf))
    else {
        return;
    };
    let mut files = Vec::new();
    // the sonames: libllama.so.0, libggml.so.0, libggml-base.so.0, libllama-common.so.0
    files.extend(entries(&lib, |name| {
        name.starts_with("lib")
            && name
                .split_once(".so.")
                .is_some_and(|(_, version)| !version.is_empty() && !version.contains('.'))
    }));
    files.extend(entries(&backends, |name| {
        name.starts_with("libggml-cpu-") && name.ends_with(".so")
    }));
    if files.is_empty() {
        println!(
            "cargo:warning=no llama.cpp library found in {} or {}",
            lib.display(),
            backends.display()
        );
    }
    // examples/ too: llama-cpp-sys-2 links its unversioned symlinks there when it exists, and
    // a second build of it (other features of its build dependencies) stops with "File
    // exists" on a symlink whose target is missing
    for dir in [
        profile_dir.clone(),
        profile_dir.join("deps"),
        profile_dir.join("examples"),
    ] {
        for file in &files {
            if let Err(e) = place(file, &dir) {
                println!(
                    "cargo:warning=cannot copy {} to {}: {e}",
                    file.display(),
                    dir.display()
                );
            }
        }
    }
}

fn entries(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&keep))
        .collect();
    out.sort();
    out
}

/// Copies `file` (its content, when it is a symlink) into `dir` under the same name, unless
/// the same content is there already.
fn place(file: &Path, dir: &Path) -> std::io::Result<()> {
    let Some(name) = file.file_name() else {
        return Ok(());
    };
    let dst = dir.join(name);
    let content = std::fs::read(file)?;
    if std::fs::read(&dst).is_ok_and(|old| old == content) {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.kasten-tmp", name.to_string_lossy()));
    std::fs::write(&tmp, &content)?;
    std::fs::rename(&tmp, &dst)
}
