//! Crash, fault, resource and security suite (issue 9). Filled in by the reliability work.
