//! Crash, fault, resource and security suite: whole-system tests that run the
//! real `kasten` binary (and `kasten-fakellm`) and check the memory afterwards through the
//! CLI and full backups. docs/RELIABILITY.md reports what they try and the figures.
//!
//! Random choices (kill points, batch sizes) come from a seed printed at the start of each
//! test; `KASTEN_RELIABILITY_SEED=N` repeats a run.
#![allow(clippy::panic)] // test helpers fail loudly

#[path = "reliability/consistency.rs"]
mod consistency;
#[path = "reliability/crash.rs"]
mod crash;
#[path = "reliability/faults.rs"]
mod faults;
#[path = "reliability/index.rs"]
mod index;
#[path = "reliability/resources.rs"]
mod resources;
#[path = "reliability/security.rs"]
mod security;
