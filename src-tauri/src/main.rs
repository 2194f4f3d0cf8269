// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

/// jemalloc rather than the system allocator: glibc's malloc held ~30 % more of a
/// 100k-note restore (0.97–1.06 GB peak against 0.73 GB; "Memory: what holds the RSS" in
/// docs/BENCHMARKS.md). It also serves C and C++ `malloc` (ONNX Runtime's, the web
/// view's): see the `tikv-jemallocator` features in the root Cargo.toml.
#[cfg(not(target_os = "windows"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    #[cfg(target_os = "linux")]
    software_webkit();
    kasten_desktop::run()
}

/// WebKitGTK's DMA-BUF renderer needs a GPU. Without one (no `/dev/dri/renderD*`: Xvfb, a
/// VM, a container) it composites through a slow fallback: every animated frame of a page
/// with a WebGL canvas took 2-4 s here, against 40-100 ms with
/// `WEBKIT_DISABLE_DMABUF_RENDERER=1` (see "Graph performance" in ui/README.md). WebKit
/// reads the variable when it starts, and setting it in this process would need `unsafe`
/// (forbidden in this workspace), so the app re-executes itself once with it set — same
/// process id, arguments and environment otherwise. A value the user set is left alone.
#[cfg(target_os = "linux")]
fn software_webkit() {
    use std::os::unix::process::CommandExt;
    const VAR: &str = "WEBKIT_DISABLE_DMABUF_RENDERER";
    if std::env::var_os(VAR).is_some() || has_render_node() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let mut cmd = std::process::Command::new(exe);
    if let Some(arg0) = args.next() {
        cmd.arg0(arg0);
    }
    // `exec` returns only if it failed; then the app starts as it is.
    let err = cmd.args(args).env(VAR, "1").exec();
    eprintln!("kasten: could not restart with {VAR}=1: {err}");
}

#[cfg(target_os = "linux")]
fn has_render_node() -> bool {
    std::fs::read_dir("/dev/dri").is_ok_and(|dir| {
        dir.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("renderD"))
    })
}
