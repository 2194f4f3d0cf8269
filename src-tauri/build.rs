fn main() {
    // llama.cpp's shared libraries (kasten-llm's `cpu-variants`): beside the program, or in
    // <prefix>/lib/kasten/lib (the .deb), as for `kasten` (crates/kasten-cli/build.rs)
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,$ORIGIN:$ORIGIN/../lib/kasten/lib");
    }
    tauri_build::build()
}
