//! What tests and generated memories need to write enrichments without an LLM
//! ([`crate::Engine::enrich_queued_with`]): the store's types an enrichment is made of.
//! Only with the `testing` feature, which no shipped build turns on.

pub use kasten_store::{ApplyMode, ClaimedJob, Enrichment, Fields, LinkWrite};
