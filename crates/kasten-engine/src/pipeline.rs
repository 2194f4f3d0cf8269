//! The A-Mem pipeline per note (DESIGN.md §2): construct → embed → neighbours →
//! link + evolve → apply, driven by the durable job queue.
//!
//! A job is claimed with a lease, processed, and finished by one store transaction
//! ([`kasten_store::Store::apply_enrichment`]) that also marks it done, so a crash at any
//! step repeats at most the LLM calls — never a write. A failed attempt leaves the note
//! saved, embedded and searchable, queues the job again with the error shown on the note,
//! and after `max_attempts` ends it `failed`.

use std::collections::HashMap;
use std::time::Instant;

use chrono::Utc;
use futures_util::future::join_all;
use kasten_core::prompts::{self, Construction, Handles, LinkEvolve, Neighbour, Prompt};
use kasten_core::{Note, NoteId, NoteStatus, note::index_text};
use kasten_llm::{
    LlmClient, LlmError, Message, Role, StructuredRequest, StructuredResponse, Usage,
};
use kasten_store::{
    ApplyMode, Change, ClaimedJob, Enrichment, Fields, LinkWrite, NeighbourWrite, NoteRead,
    StoreError,
};

use crate::{Engine, EngineError};

mod guided;
mod options;

use guided::{GUIDED_TAGS, GUIDED_TERMS};
pub(crate) use options::POLICY_SETTING;
pub use options::{
    JobOutcome, ModelProfile, PipelineOptions, Policy, PolicyMode, RunSummary, Steps,
};

fn messages(p: &Prompt) -> Vec<Message> {
    p.messages
        .iter()
        .map(|m| Message {
            role: match m.role {
                "system" => Role::System,
                "assistant" => Role::Assistant,
                _ => Role::User,
            },
            content: m.content.clone(),
        })
        .collect()
}

pub(crate) fn request(p: &Prompt) -> StructuredRequest {
    StructuredRequest {
        messages: messages(p),
        schema_name: p.schema_name.to_owned(),
        schema: p.schema.clone(),
        temperature: 0.0,
        max_tokens: Some(p.max_tokens),
    }
}

fn fields(n: &Note) -> Fields {
    Fields {
        keywords: n.keywords.clone(),
        tags: n.tags.clone(),
        context: n.context.clone(),
    }
}

/// Errors of one attempt, split by whether trying again can help.
enum AttemptError {
    Llm(LlmError),
    Engine(EngineError),
}

impl From<EngineError> for AttemptError {
    fn from(e: EngineError) -> Self {
        AttemptError::Engine(e)
    }
}
impl From<StoreError> for AttemptError {
    fn from(e: StoreError) -> Self {
        AttemptError::Engine(EngineError::Store(e))
    }
}
impl From<LlmError> for AttemptError {
    fn from(e: LlmError) -> Self {
        AttemptError::Llm(e)
    }
}

impl Engine {
    /// The applied links of a committed enrichment that are in force: the store skips a
    /// link whose ends and kind already have one (imported, or rejected by the user), so
    /// the adjacency asks the store rather than trusting the plan. Call under
    /// [`Engine::index_order`], after the commit.
    pub(crate) async fn links_in_force(&self, e: &Enrichment) -> Result<Vec<NoteId>, EngineError> {
        let mut out = Vec::new();
        for l in e.links.iter().filter(|l| l.mode == ApplyMode::Apply) {
            if self.store.linked(&e.note, &l.to).await? {
                out.push(l.to.clone());
            }
        }
        Ok(out)
    }

    /// The review policy in force (a setting; default: apply at once, keep for review).
    pub async fn policy(&self) -> Result<Policy, EngineError> {
        Ok(match self.store.get_setting(POLICY_SETTING).await? {
            Some(v) => serde_json::from_value(v).unwrap_or_default(),
            None => Policy::default(),
        })
    }

    pub async fn set_policy(&self, p: &Policy) -> Result<(), EngineError> {
        let v = serde_json::to_value(p).map_err(|e| EngineError::Internal(e.to_string()))?;
        Ok(self.store.set_setting(POLICY_SETTING, &v).await?)
    }

    fn llm(&self) -> Result<&LlmClient, EngineError> {
        self.llm.as_ref().ok_or(EngineError::NoLlm)
    }

    /// Runs queued jobs until none is left, `workers` at a time, reporting each outcome.
    /// Each job is attempted at most once per call: a job that fails goes back to the
    /// queue for the next call instead of being hammered in a loop.
    pub async fn run_pending(
        &self,
        on_job: &(dyn Fn(&JobOutcome) + Send + Sync),
    ) -> Result<RunSummary, EngineError> {
        self.llm()?;
        let retries_before = kasten_store::Store::conflict_retries();
        let worker_name = format!("{}{}", self.worker_prefix, Utc::now().timestamp_millis());
        let attempted: std::sync::Mutex<Vec<kasten_core::JobId>> =
            std::sync::Mutex::new(Vec::new());
        let attempted = &attempted;
        let workers = (0..self.pipeline.workers.max(1)).map(|i| {
            let name = format!("{worker_name}-{i}");
            async move {
                let mut outcomes = Vec::new();
                loop {
                    if self.is_closing() {
                        break;
                    }
                    let until = Utc::now()
                        + chrono::Duration::from_std(self.pipeline.lease)
                            .unwrap_or(chrono::Duration::minutes(10));
                    let exclude = attempted.lock().map(|v| v.clone()).unwrap_or_default();
                    let job = match self
                        .store
                        .claim_jobs_except(&name, 1, until, &exclude)
                        .await
                    {
                        Ok(mut v) => match v.pop() {
                            Some(j) => j,
                            None => break,
                        },
                        // two workers raced for the same job: the loser just tries again
                        Err(StoreError::Conflict) => continue,
                        Err(e) => return Err(EngineError::Store(e)),
                    };
                    // Another worker may have attempted this job and put it back in the
                    // queue after our exclusion list was read: give it back untouched.
                    let first_attempt = match attempted.lock() {
                        Ok(v) if v.contains(&job.id) => false,
                        Ok(mut v) => {
                            v.push(job.id.clone());
                            true
                        }
                        Err(_) => true,
                    };
                    if !first_attempt {
                        self.store.release_job(&job.id).await?;
                        continue;
                    }
                    let outcome = match self.process(&job).await {
                        Ok(o) => o,
                        // the job went back to the queue untouched
                        Err(EngineError::Closing) => break,
                        Err(e) => return Err(e),
                    };
                    on_job(&outcome);
                    outcomes.push(outcome);
                }
                Ok::<_, EngineError>(outcomes)
            }
        });
        let mut summary = RunSummary::default();
        for r in join_all(workers).await {
            for o in r? {
                match o {
                    JobOutcome::Done { tokens, .. } => {
                        summary.done += 1;
                        summary.tokens += tokens;
                    }
                    JobOutcome::Retrying { error, .. } => {
                        summary.retrying += 1;
                        summary.errors.push(error);
                    }
                    JobOutcome::Failed { error, .. } => {
                        summary.failed += 1;
                        summary.errors.push(error);
                    }
                    JobOutcome::Gone { .. } => {}
                }
            }
        }
        summary.conflict_retries =
            kasten_store::Store::conflict_retries().saturating_sub(retries_before);
        Ok(summary)
    }

    /// Runs the job of one note now (for `add --wait`). `None` if it has no runnable job.
    pub async fn enrich_note(&self, note: &NoteId) -> Result<Option<JobOutcome>, EngineError> {
        self.llm()?;
        let until = Utc::now()
            + chrono::Duration::from_std(self.pipeline.lease)
                .unwrap_or(chrono::Duration::minutes(10));
        let name = format!("{}wait", self.worker_prefix);
        match self.store.claim_job_for_note(&name, note, until).await? {
            Some(job) => Ok(Some(self.process(&job).await?)),
            None => Ok(None),
        }
    }

    /// One attempt at a claimed job; failures are recorded on the job and the note.
    async fn process(&self, job: &ClaimedJob) -> Result<JobOutcome, EngineError> {
        // A neighbour changing between our read and our write makes the apply refuse;
        // that is not the LLM's fault, so it is retried here without spending an attempt.
        let mut conflicts = 0;
        let result = loop {
            match self.attempt(job).await {
                Err(AttemptError::Engine(EngineError::Store(StoreError::Conflict)))
                    if conflicts < 3 =>
                {
                    conflicts += 1
                }
                other => break other,
            }
        };
        match result {
            Ok(outcome) => Ok(outcome),
            // Abandoned before its write: not an attempt, the job goes back as it was.
            Err(AttemptError::Engine(EngineError::Closing)) => {
                self.store.release_job(&job.id).await?;
                Err(EngineError::Closing)
            }
            Err(e) => {
                let (msg, retryable) = match &e {
                    AttemptError::Llm(l) => (format!("LLM: {l}"), true),
                    AttemptError::Engine(EngineError::Store(StoreError::Conflict)) => (
                        "the note's neighbours kept changing; will try again".to_owned(),
                        true,
                    ),
                    AttemptError::Engine(other) => (other.to_string(), true),
                };
                let give_up = !retryable || job.attempts >= self.pipeline.max_attempts;
                self.store
                    .fail_job(&job.id, &job.note, &msg, give_up)
                    .await?;
                tracing::warn!(job = %job.id, note = %job.note, attempt = job.attempts, give_up, "enrichment failed: {msg}");
                Ok(if give_up {
                    JobOutcome::Failed {
                        note: job.note.clone(),
                        error: msg,
                    }
                } else {
                    JobOutcome::Retrying {
                        note: job.note.clone(),
                        error: msg,
                    }
                })
            }
        }
    }

    async fn attempt(&self, job: &ClaimedJob) -> Result<JobOutcome, AttemptError> {
        let llm = self.llm()?;
        let t_start = Instant::now();
        let Some(note) = self.store.get_note(&job.note).await? else {
            return Ok(JobOutcome::Gone {
                note: job.note.clone(),
            });
        };
        let policy = self.policy().await?;
        let mut usage = Usage::default();
        let mut calls = 0u32;

        let profile = self.pipeline.profile.resolve(llm);
        let small = profile.guided();

        // 1. construct
        let t0 = Instant::now();
        let p = if small {
            let existing: Vec<String> = self
                .store
                .tag_counts(40)
                .await?
                .into_iter()
                .map(|(t, _)| t)
                .collect();
            let tags = kasten_core::quality::tag_choices(&existing, 40);
            let mut terms = prompts::guided_candidates(&note.content);
            let common = self.common_terms(&terms)?;
            terms.retain(|t| !common.contains(t));
            // a small model picks well from a short list of what is close to the note
            let note_vec = match self.store.embedding_of(&note.id).await? {
                Some(v) if !v.is_empty() => v,
                _ => self
                    .embed_blocking(vec![note.content.clone()])
                    .await?
                    .pop()
                    .unwrap_or_default(),
            };
            // a tag is compared as what it covers ("health: doctor, dentist, …"), a term as
            // itself
            let tags = self
                .shortlist(
                    &note_vec,
                    tags,
                    GUIDED_TAGS,
                    kasten_core::quality::tag_meaning,
                )
                .await?;
            let terms = self
                .shortlist(&note_vec, terms, GUIDED_TERMS, |t| t)
                .await?;
            prompts::construct_guided(
                &note.content,
                &note.created_at.format("%Y-%m-%d").to_string(),
                &terms,
                &tags,
            )
        } else {
            prompts::construct(&note.content, &note.created_at.to_rfc3339())
        };
        let mut steps = self.pipeline.steps;
        // a profile without evolution is not asked for it
        steps.evolution &= profile.evolves();
        let mut c = if steps.construction {
            let validate = |v: &serde_json::Value| Construction::from_value(v).map(|_| ());
            let resp: StructuredResponse = self
                .unless_closing(llm.structured(&request(&p), &validate))
                .await??;
            usage.add(&resp.usage);
            calls += resp.attempts;
            tracing::debug!(note = %note.id, answer = %resp.value, "construction");
            Construction::from_value(&resp.value).map_err(|e| LlmError::BadOutput {
                reason: e,
                raw: resp.value.to_string(),
            })?
        } else {
            Construction::default()
        };
        // whatever the model: prompt text, dates as context and the like are never stored
        let sanitized = kasten_core::quality::sanitize(
            &note.content,
            &mut c.keywords,
            &mut c.tags,
            &mut c.context,
        );
        // what a person set stays, first; the LLM's values are added to it
        kasten_core::provenance::merge_construction(
            &note.set_by,
            note.annotations(),
            &mut c.keywords,
            &mut c.tags,
            &mut c.context,
        );
        let construct_ms = t0.elapsed().as_millis() as u64;

        // 2. embed content + annotations
        let t1 = Instant::now();
        let text = index_text(&note.content, &c.keywords, &c.tags, &c.context);
        let vector = self
            .embed_blocking(vec![text.clone()])
            .await?
            .pop()
            .unwrap_or_default();
        let embed_ms = t1.elapsed().as_millis() as u64;

        // 3. neighbours: top-k by cosine, excluding the note itself
        let ids: Vec<NoteId> = self
            .rank_vector(&vector, self.pipeline.k + 1)?
            .into_iter()
            .map(|(id, _)| id)
            .filter(|id| id != &note.id)
            .take(self.pipeline.k)
            .collect();
        let neighbours: Vec<Note> = self.store.get_notes(&ids).await?;

        // 4. link + evolve
        let t2 = Instant::now();
        let mut le = LinkEvolve::default();
        // the guided prompt only proposes links: without them it has nothing to ask (and a
        // small model's profile has no evolution)
        let asks = steps.links || steps.evolution;
        if !neighbours.is_empty() && asks {
            let handles = Handles::new(neighbours.iter().map(|n| n.id.clone()));
            let shown: Vec<Neighbour> = neighbours
                .iter()
                .map(|n| Neighbour {
                    id: n.id.clone(),
                    content: n.content.clone(),
                    keywords: n.keywords.clone(),
                    tags: n.tags.clone(),
                    context: n.context.clone(),
                    time: Some(n.created_at.format("%Y-%m-%d").to_string()),
                })
                .collect();
            let me = Neighbour {
                id: note.id.clone(),
                content: note.content.clone(),
                keywords: c.keywords.clone(),
                tags: c.tags.clone(),
                context: c.context.clone(),
                time: Some(note.created_at.format("%Y-%m-%d").to_string()),
            };
            // small models: the guided prompt (None when no neighbour shares a term)
            type Parse = fn(&serde_json::Value, &Handles) -> Result<LinkEvolve, String>;
            let call: Option<(Prompt, Parse)> = if small {
                let mut terms = me.keywords.clone();
                terms.extend(prompts::guided_candidates(&me.content));
                let common = self.common_terms(&terms)?;
                let is_common = |t: &str| common.contains(&t.to_lowercase());
                prompts::link_guided(&me, &shown, &handles, &is_common)
                    .map(|p| (p, LinkEvolve::from_guided as Parse))
            } else if steps.evolution {
                Some((
                    prompts::link_evolve(&me, &shown, &handles),
                    LinkEvolve::from_value as Parse,
                ))
            } else {
                Some((
                    prompts::link_only(&me, &shown, &handles),
                    LinkEvolve::from_value as Parse,
                ))
            };
            if let Some((p, parse)) = call {
                let validate = |v: &serde_json::Value| parse(v, &handles).map(|_| ());
                let resp = self
                    .unless_closing(llm.structured(&request(&p), &validate))
                    .await??;
                usage.add(&resp.usage);
                calls += resp.attempts;
                le = parse(&resp.value, &handles).map_err(|e| LlmError::BadOutput {
                    reason: e,
                    raw: resp.value.to_string(),
                })?;
                if !small {
                    // what the quality check would flag is not stored (the guided prompt's
                    // reasons are written by the pipeline, not the model)
                    let mut terms = me.keywords.clone();
                    terms.extend(prompts::guided_candidates(&me.content));
                    let common = self.common_terms(&terms)?;
                    let is_common = |t: &str| common.contains(&t.to_lowercase());
                    let v = prompts::vet(&mut le, &me, &shown, &is_common);
                    tracing::debug!(
                        note = %note.id,
                        links_reworded = v.links_reworded,
                        links_dropped = v.links_dropped,
                        ops_proposed = v.ops_proposed,
                        ops_dropped = v.ops_dropped,
                        "the answer held to the quality rules"
                    );
                }
                if !steps.links {
                    le.links.clear();
                }
                if !steps.evolution {
                    le.updates.clear();
                }
                // the new note's own tags are revised only when it was annotated and
                // evolution is on (an ablation without construction writes no tags)
                if !steps.evolution || !steps.construction {
                    le.note_tags.clear();
                }
            }
        }
        let link_ms = t2.elapsed().as_millis() as u64;

        // the new note's own tags, revised in the same call (A-Mem's tags_to_update)
        let mut construction_changes = Vec::new();
        let mut no_kw = Vec::new();
        let mut no_ctx = String::new();
        let c_tags = c.tags.clone();
        let own = kasten_core::provenance::Annotations {
            keywords: &c.keywords,
            tags: &c_tags,
            context: &c.context,
        };
        for op in &le.note_tags {
            // construction never removes a person's tag
            if kasten_core::provenance::touches_person(&note.set_by, own, op.op, &op.value) {
                continue;
            }
            if op.apply(&mut no_kw, &mut c.tags, &mut no_ctx) {
                construction_changes.push(change(op));
            }
        }
        let text = if construction_changes.is_empty() {
            text
        } else {
            index_text(&note.content, &c.keywords, &c.tags, &c.context)
        };
        let vector = if construction_changes.is_empty() {
            vector
        } else {
            self.embed_blocking(vec![text.clone()])
                .await?
                .pop()
                .unwrap_or_default()
        };

        // 5. neighbour updates: operations on the fields the model was shown, re-embedded
        let by_id: HashMap<&NoteId, &Note> = neighbours.iter().map(|n| (&n.id, n)).collect();
        let mut updates = Vec::new();
        let mut texts = Vec::new();
        for u in &le.updates {
            let Some(n) = by_id.get(&u.target) else {
                continue;
            };
            let before = fields(n);
            let mut after = before.clone();
            let mut changes = Vec::new();
            // an operation that removes or replaces a person's value is a proposal
            let persons = u.ops.iter().any(|op| {
                kasten_core::provenance::touches_person(
                    &n.set_by,
                    n.annotations(),
                    op.op,
                    &op.value,
                )
            });
            for op in &u.ops {
                if op.apply(&mut after.keywords, &mut after.tags, &mut after.context) {
                    changes.push(change(op));
                }
            }
            if after == before {
                continue;
            }
            texts.push(index_text(
                &n.content,
                &after.keywords,
                &after.tags,
                &after.context,
            ));
            updates.push((n, before, after, changes, persons));
        }
        let new_vectors = if texts.is_empty() {
            Vec::new()
        } else {
            self.embed_blocking(texts.clone()).await?
        };
        let edit_mode = if policy.edits == PolicyMode::Auto {
            ApplyMode::Apply
        } else {
            ApplyMode::Hold
        };
        let mut writes = Vec::new();
        for ((n, before, after, changes, persons), v) in updates.into_iter().zip(new_vectors) {
            writes.push(NeighbourWrite {
                id: n.id.clone(),
                version: n.version,
                before,
                after,
                embedding_before: self.store.embedding_of(&n.id).await?,
                embedding_after: v,
                mode: if persons { ApplyMode::Hold } else { edit_mode },
                changes,
            });
        }
        let links: Vec<LinkWrite> = le
            .links
            .iter()
            .map(|l| LinkWrite {
                to: l.to.clone(),
                kind: l.kind.clone(),
                reason: l.reason.clone(),
                confidence: l.confidence,
                mode: match (policy.links, policy.auto_accept_confidence) {
                    (PolicyMode::Auto, _) => ApplyMode::Apply,
                    (PolicyMode::Review, Some(t)) if l.confidence >= t => ApplyMode::Apply,
                    (PolicyMode::Review, _) => ApplyMode::Hold,
                },
            })
            .collect();

        // 5b. the LLM's word on the older notes this one contradicts (filed after the commit)
        let t3 = Instant::now();
        let contradicted: Vec<NoteId> = le
            .links
            .iter()
            .filter(|l| l.kind == crate::merge::CONTRADICTS)
            .map(|l| l.to.clone())
            .collect();
        let asked = self
            .ask_about_replacements(&note, &contradicted, llm)
            .await?;
        usage.add(&asked.usage);
        calls += asked.calls;
        let replaced = asked.found;
        let replaces_ms = t3.elapsed().as_millis() as u64;

        // 6. apply, in one transaction
        let tokens = u64::from(usage.prompt_tokens) + u64::from(usage.completion_tokens);
        let e = Enrichment {
            job: job.id.clone(),
            note: note.id.clone(),
            read: NoteRead::of(&note),
            after: Fields {
                keywords: c.keywords.clone(),
                tags: c.tags.clone(),
                context: c.context.clone(),
            },
            construction_changes,
            embedding: vector.clone(),
            construction_mode: edit_mode,
            tier: c.tier.map(|t| t.as_str().to_owned()),
            embed_model: self.embedder.model_id().to_owned(),
            llm_model: llm.config().model.clone(),
            prompt_version: profile.prompt_version(steps).to_owned(),
            tokens_in: u64::from(usage.prompt_tokens),
            tokens_out: u64::from(usage.completion_tokens),
            tokens_estimated: usage.estimated,
            llm_calls: calls,
            unknown_handles: le.unknown_handles as u32,
            dropped: (le.dropped + sanitized) as u32,
            timings_ms: serde_json::json!({
                "construct": construct_ms, "embed": embed_ms, "link_evolve": link_ms,
                "replaces": replaces_ms, "total": t_start.elapsed().as_millis() as u64
            }),
            links,
            updates: writes,
        };
        let order = self.index_order().await;
        // updates of neighbours that changed meanwhile are held for review, not applied
        let held = self.store.apply_enrichment(&e).await?;
        #[cfg(test)]
        self.after_commit().await;

        // 7. the indexes follow the committed write (until they do, a close writes no
        // index snapshot)
        let sync = self.index_sync();
        let joined = self.links_in_force(&e).await?;
        {
            let mut ix = self.write_indexes()?;
            // only active notes are searchable (the apply checked the status is still the
            // one read)
            if e.construction_mode == ApplyMode::Apply && note.status == NoteStatus::Active {
                ix.vector
                    .upsert(note.id.clone(), &vector)
                    .map_err(EngineError::from)?;
                ix.text.upsert(note.id.clone(), &text);
            }
            for (w, t) in e.updates.iter().zip(&texts) {
                // a neighbour archived or merged meanwhile stays out of search
                if w.mode == ApplyMode::Apply && !held.contains(&w.id) && ix.vector.contains(&w.id)
                {
                    ix.vector
                        .upsert(w.id.clone(), &w.embedding_after)
                        .map_err(EngineError::from)?;
                    ix.text.upsert(w.id.clone(), t);
                }
            }
            // as every open does: a link counts once both ends are searchable (a note
            // merged while it was being enriched is not)
            for to in &joined {
                if ix.vector.contains(&note.id) && ix.vector.contains(to) {
                    ix.add_link(&note.id, to);
                }
            }
        }
        sync.done();
        drop(order);
        // the incremental Box update: the note joins the Box its links lead to (a failure
        // here only delays it to the next recompute; the enrichment is committed)
        if let Err(err) = self.place_in_box(&note.id).await {
            tracing::warn!(note = %note.id, %err, "could not place the note in a Box");
        }
        // what the LLM found replaced among the older notes this one contradicts: proposals,
        // in their own transaction (the enrichment stands whatever happens here)
        match self.file_replacements(replaced).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(note = %note.id, n, "the LLM found supersessions"),
            Err(err) => {
                tracing::warn!(note = %note.id, %err, "could not file the LLM's supersessions")
            }
        }
        Ok(JobOutcome::Done {
            note: note.id,
            links: e.links.len(),
            updates: e.updates.len(),
            tokens,
        })
    }
}

/// An applied operation as the store records it.
fn change(op: &prompts::FieldOp) -> Change {
    Change {
        op: op.op.as_str().to_owned(),
        value: op.value.clone(),
        reason: op.reason.clone(),
    }
}
