//! Which of ggml's CPU variants runs the model.
//!
//! With the `cpu-variants` feature llama.cpp is built as shared libraries and ggml's CPU
//! code once per instruction set (`libggml-cpu-x64.so` … `libggml-cpu-zen4.so`,
//! `libggml-cpu-sapphirerapids.so`). Before llama.cpp starts, the directory holding them is
//! handed to ggml, which scores every variant against the processor's features and loads
//! the best one: AVX-512 with VNNI where the CPU has it, SSE4.2 on an x86-64-v2 CPU without
//! AVX2 (where a build for AVX2 alone would die with an illegal instruction).
//!
//! The directory, first that holds a `libggml-cpu-*.so`:
//! 1. `KASTEN_CPU_BACKENDS_DIR`, when set (then only it);
//! 2. the program's own directory;
//! 3. `<prefix>/lib/kasten/lib` beside `<prefix>/bin` (the .deb: `/usr/lib/kasten/lib`);
//! 4. where cargo built them (a build from source, run in place).

use std::path::{Path, PathBuf};

/// Names the directory that overrides the search.
pub const BACKENDS_DIR_ENV: &str = "KASTEN_CPU_BACKENDS_DIR";

/// Whether `dir` holds at least one of ggml's CPU variants.
fn holds_cpu_variant(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("libggml-cpu-") && name.ends_with(".so")
        })
    })
}

/// The directories searched, in order (see the module's documentation).
pub fn candidate_dirs() -> Vec<PathBuf> {
    // set, it is the only place looked in: a wrong value is an error, not skipped
    if let Some(dir) = std::env::var_os(BACKENDS_DIR_ENV).filter(|d| !d.is_empty()) {
        return vec![PathBuf::from(dir)];
    }
    let mut dirs = Vec::new();
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        dirs.push(exe_dir.clone());
        dirs.push(exe_dir.join("../lib/kasten/lib"));
    }
    if let Some(built) = llama_cpp_sys_2::BACKENDS_DIR {
        dirs.push(PathBuf::from(built));
    }
    dirs
}

/// Hands ggml the first directory that holds its CPU variants. Call once, before
/// llama.cpp's backend is initialised. Errors in words a user can act on.
pub fn load_variants() -> Result<PathBuf, String> {
    let dirs = candidate_dirs();
    let Some(dir) = dirs.iter().find(|d| holds_cpu_variant(d)) else {
        if let Some(set) = std::env::var_os(BACKENDS_DIR_ENV).filter(|d| !d.is_empty()) {
            return Err(format!(
                "{BACKENDS_DIR_ENV} names {}, which holds none of the built-in model's CPU code \
                 (libggml-cpu-*.so): point it at the directory that does, or unset it",
                Path::new(&set).display()
            ));
        }
        return Err(format!(
            "the built-in model's CPU code (libggml-cpu-*.so) is not installed: looked in {}; \
             reinstall Kasten, or set {BACKENDS_DIR_ENV} to the directory that holds it",
            list(&dirs)
        ));
    };
    // llama-cpp-2 panics on a path that is not UTF-8 or holds a NUL byte: refuse those here
    match dir.to_str() {
        Some(s) if !s.contains('\0') => {
            llama_cpp_2::llama_backend::load_backends_from_path(dir);
            Ok(dir.clone())
        }
        _ => Err(format!(
            "the directory of the built-in model's CPU code has a name llama.cpp cannot open: {}; \
             move Kasten to a directory whose path is plain UTF-8, or set {BACKENDS_DIR_ENV}",
            dir.display()
        )),
    }
}

/// After [`load_variants`] and the backend's start: an error when ggml found no variant
/// this processor can run.
pub fn check_loaded(dir: &Path) -> Result<(), String> {
    let cpu = llama_cpp_2::list_llama_ggml_backend_devices()
        .iter()
        .any(|d| d.backend.eq_ignore_ascii_case("cpu"));
    if cpu {
        Ok(())
    } else {
        Err(format!(
            "none of the built-in model's CPU variants in {} runs on this processor \
             (Kasten needs an x86-64 CPU with SSE4.2, from 2009 on)",
            dir.display()
        ))
    }
}

/// The CPU variant this process loaded (`zen4`, `haswell`, `x64`, …), read from the
/// libraries mapped into it; `None` before the model's first load or in a build without
/// variants.
pub fn loaded_variant() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    variant_in_maps(&maps)
}

fn variant_in_maps(maps: &str) -> Option<String> {
    maps.lines().find_map(|line| {
        let file = line.rsplit('/').next()?;
        let tag = file.strip_prefix("libggml-cpu-")?.strip_suffix(".so")?;
        (!tag.is_empty()).then(|| tag.to_owned())
    })
}

fn list(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variant_is_read_from_the_mapped_library_name() {
        let maps = "7f0000-7f1000 r-xp 00000000 08:01 12 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                    7f2000-7f3000 r-xp 00000000 08:01 13 /usr/lib/kasten/lib/libggml-base.so\n\
                    7f4000-7f5000 r-xp 00000000 08:01 14 /usr/lib/kasten/lib/libggml-cpu-zen4.so\n";
        assert_eq!(variant_in_maps(maps).as_deref(), Some("zen4"));
        assert_eq!(
            variant_in_maps("7f2000-7f3000 r-xp 0 0 1 /x/libggml.so\n"),
            None
        );
    }

    #[test]
    fn a_directory_counts_only_with_a_cpu_variant_in_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(!holds_cpu_variant(dir.path()));
        std::fs::write(dir.path().join("libggml-base.so"), b"").expect("write");
        assert!(!holds_cpu_variant(dir.path()));
        std::fs::write(dir.path().join("libggml-cpu-haswell.so"), b"").expect("write");
        assert!(holds_cpu_variant(dir.path()));
        assert!(!holds_cpu_variant(&dir.path().join("missing")));
    }

    #[test]
    fn the_build_from_source_finds_its_variants() {
        // run in place (cargo test), the variants cargo built are found, whatever else is
        // searched first
        let found = candidate_dirs().into_iter().find(|d| holds_cpu_variant(d));
        assert!(found.is_some(), "no CPU variant in {:?}", candidate_dirs());
    }
}
