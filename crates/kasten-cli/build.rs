//! With kasten-llm's `cpu-variants` (the default), llama.cpp is a set of shared libraries:
//! `kasten` finds them beside itself (a build run in place, where cargo put them) or in
//! `<prefix>/lib/kasten/lib` (the .deb's /usr/lib/kasten/lib). The app's build script says
//! the same for `kasten-desktop`.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,$ORIGIN:$ORIGIN/../lib/kasten/lib");
    }
}
