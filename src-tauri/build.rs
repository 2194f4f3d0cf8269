fn main() {
    // llama.cpp's shared libraries (kasten-llm's `cpu-variants`): beside the program, or in
    // <prefix>/lib/kasten/lib (the .deb), as for `kasten` (crates/kasten-cli/build.rs)
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,$ORIGIN:$ORIGIN/../lib/kasten/lib");
    }
    // The app embeds the built UI (tauri.conf.json's `frontendDist`): say how to build it
    // rather than leave the reader with the context macro's panic.
    let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui/dist/index.html");
    if !dist.exists() {
        eprintln!(
            "the desktop app embeds the built UI and {} does not exist: build it first with \
             `(cd ui && npm ci && npm run build)` (scripts/run and scripts/test do this)",
            dist.display()
        );
        std::process::exit(1);
    }
    tauri_build::build()
}
