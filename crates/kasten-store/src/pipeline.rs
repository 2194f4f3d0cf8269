//! The durable job queue and the one-transaction apply of an enrichment.
//!
//! - Jobs are claimed with a lease (`lease_until`); a job whose worker died is claimed
//!   again once its lease has run out. Claiming is one transaction, so two workers (or two
//!   processes on a server) never run the same job at the same time.
//! - [`Store::apply_enrichment`] writes everything one pipeline run produced — the note's
//!   annotations and embedding, the event, the revisions with exact before/after, the
//!   links, the neighbour updates and the job's completion — in one transaction. The event
//!   id is the job id, so a second apply of the same job fails instead of doubling links
//!   or revisions. A neighbour update is applied only if the neighbour's `version` is still
//!   the one the pipeline read; an update computed from an outdated view (another job or
//!   the user changed that note meanwhile) is kept as a proposal for review instead, so it
//!   never clobbers the newer change and the rest of the enrichment still lands. The
//!   construction revision records the note's annotations and embedding as they are inside
//!   the transaction (another job may have evolved the note meanwhile), so its rollback is
//!   exact; a note deleted meanwhile refuses the apply ([`StoreError::Conflict`]).
//! - Several processes may share one store on a SurrealDB server (docs/SERVER.md). Its
//!   transactions are optimistic (snapshot isolation): two that write the same record
//!   cannot both commit, and the loser fails with a transaction conflict instead of
//!   waiting. The claim, the apply and a failed attempt's bookkeeping are each one
//!   transaction that is safe to run again from the start, so a conflict is retried here
//!   a few times with a short random pause ([`retry_conflicts`]) — the LLM's work is not
//!   thrown away — and only then reported as [`StoreError::Conflict`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use kasten_core::{Enrich, JobId, JobState, LinkStatus, NoteId};
use surrealdb::types::{Bytes, RecordId, SurrealValue, Value};

use crate::{LinkCursor, Store, StoreError, emb_to_bytes, first_real_error};
mod records;

pub use records::{
    ApplyMode, Change, ClaimedJob, Enrichment, EventSummary, Fields, JobCounts, LinkWrite,
    ModelUsage, NeighbourWrite, NoteRead, RevisionSummary,
};
use records::{ClaimRow, EventParam, LinkParam, ReadParam, UpdateParam};

/// Thrown inside the apply transaction when the note was deleted under us.
const STALE: &str = "kasten:stale-version";
/// Thrown inside the apply transaction when the note changed since the job read it.
const CHANGED_SINCE: &str = "kasten:note-changed-since-read";

/// How many times work that lost a write conflict is run in all ([`retry_on_conflict`]):
/// one limit for the store's transactions, the engine's open and the shells' retries.
pub const CONFLICT_TRIES: u32 = 6;

/// An error that can say it is a lost write conflict: the work wrote nothing and running
/// it again is safe ([`retry_on_conflict`] runs it again).
pub trait ConflictError {
    fn is_conflict(&self) -> bool;
}

impl ConflictError for StoreError {
    fn is_conflict(&self) -> bool {
        matches!(self, StoreError::Conflict)
    }
}

/// Transactions this process ran again after a write conflict (see [`Store::conflict_retries`]).
static CONFLICT_RETRIES: AtomicU64 = AtomicU64::new(0);

/// Runs `op` (one whole transaction, or a call that is one) again while it fails with a
/// write conflict, at most [`CONFLICT_TRIES`] times in all, pausing 10–40 ms × the attempt
/// number (random, so two losers do not collide again in step). Anything else is returned
/// at once. The one retry of the workspace: the engine re-exports it for the shells.
///
/// `op` is a plain closure returning a future (not an async closure), so the future stays
/// `Send` (the engine's futures must be). Each attempt's future is boxed: the store's open
/// is a 14 KB future in a debug build, kept off the caller's stack.
pub async fn retry_on_conflict<T, E, F, Fut>(what: &str, mut op: F) -> Result<T, E>
where
    E: ConflictError,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut attempt = 1;
    loop {
        match Box::pin(op()).await {
            Err(e) if e.is_conflict() && attempt < CONFLICT_TRIES => {
                CONFLICT_RETRIES.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(attempt, "{what}: transaction conflict, running it again");
                tokio::time::sleep(jitter(attempt)).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// [`retry_on_conflict`] for the store's own transactions.
pub(crate) async fn retry_conflicts<T, F, Fut>(what: &str, op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    retry_on_conflict(what, op).await
}

fn jitter(attempt: u32) -> Duration {
    // no RNG dependency for this: the clock's nanoseconds are random enough to desync
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Duration::from_millis(u64::from(attempt) * (10 + u64::from(nanos % 31)))
}

impl Store {
    /// Claims up to `max` runnable jobs (queued, or running with an expired lease), oldest
    /// first, for `worker` until `lease_until`.
    pub async fn claim_jobs(
        &self,
        worker: &str,
        max: usize,
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        self.claim(worker, max, lease_until, None, &[]).await
    }

    /// Like [`Store::claim_jobs`], skipping the jobs in `exclude` (e.g. those already
    /// attempted in this pass, so a failing job is not retried at once).
    pub async fn claim_jobs_except(
        &self,
        worker: &str,
        max: usize,
        lease_until: DateTime<Utc>,
        exclude: &[JobId],
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        self.claim(worker, max, lease_until, None, exclude).await
    }

    /// Claims the job of one note, if it is runnable.
    pub async fn claim_job_for_note(
        &self,
        worker: &str,
        note: &NoteId,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<ClaimedJob>, StoreError> {
        Ok(self
            .claim(worker, 1, lease_until, Some(note), &[])
            .await?
            .pop())
    }

    async fn claim(
        &self,
        worker: &str,
        max: usize,
        lease_until: DateTime<Utc>,
        note: Option<&NoteId>,
        exclude: &[JobId],
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        let filter = if note.is_some() {
            "AND note = type::record('note', $note)"
        } else {
            ""
        };
        // The update repeats the runnable condition, so a job is taken only if it is still
        // runnable when written (not merely when selected), and only the rows this worker
        // actually took are returned. Two claims of the same job conflict on its record:
        // one commits, the other is retried and then finds it taken.
        let q = format!(
            "BEGIN TRANSACTION;
             LET $ids = SELECT VALUE id FROM job
                 WHERE (state = $job_queued OR (state = $job_running AND lease_until < $now)) {filter}
                   AND record::id(id) NOT IN $exclude
                 ORDER BY created_at LIMIT $max;
             LET $won = (UPDATE $ids SET state = $job_running, lease_until = $until, attempts += 1, worker = $worker, updated_at = $now
                 WHERE state = $job_queued OR (state = $job_running AND lease_until < $now)
                 RETURN VALUE id);
             SELECT record::id(id) AS id, record::id(note) AS note, attempts FROM $won WHERE worker = $worker;
             COMMIT TRANSACTION;"
        );
        let note = note.map(|n| n.to_string()).unwrap_or_default();
        let exclude: Vec<String> = exclude.iter().map(|j| j.to_string()).collect();
        let (db, q, note, exclude) = (&self.db, q.as_str(), &note, &exclude);
        let rows: Vec<ClaimRow> = retry_conflicts("claim a job", || async move {
            let mut resp = db
                .query(q)
                .bind(("now", Utc::now()))
                .bind(("until", lease_until))
                .bind(("max", max as i64))
                .bind(("worker", worker.to_owned()))
                .bind(("note", note.clone()))
                .bind(("exclude", exclude.clone()))
                .bind(crate::words::words())
                .await
                .map_err(StoreError::from_db)?;
            first_real_error(&mut resp)?;
            resp.take(3).map_err(StoreError::from_db)
        })
        .await?;
        rows.into_iter()
            .map(|r| {
                Ok(ClaimedJob {
                    id: JobId::parse(&r.id).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    note: NoteId::parse(&r.note).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    attempts: r.attempts.max(0) as u32,
                })
            })
            .collect()
    }

    /// Transactions this process has run again after losing a write conflict to another
    /// writer (only a server shared by several processes produces them; see
    /// docs/SERVER.md). A figure for reports and tests.
    pub fn conflict_retries() -> u64 {
        CONFLICT_RETRIES.load(Ordering::Relaxed)
    }

    /// Records a failed attempt. With `give_up` the job ends `failed` and the note shows
    /// the error; otherwise the job is queued again and the note shows why it is waiting.
    pub async fn fail_job(
        &self,
        job: &JobId,
        note: &NoteId,
        error: &str,
        give_up: bool,
    ) -> Result<(), StoreError> {
        let q = "BEGIN TRANSACTION;
             UPDATE type::record('job', $job) SET state = $state, last_error = $err, lease_until = NONE, updated_at = time::now();
             UPDATE type::record('note', $note) SET enrich_state = $nstate, enrich_error = $err;
             COMMIT TRANSACTION;";
        let (state, nstate) = if give_up {
            (JobState::Failed, Enrich::Failed)
        } else {
            (JobState::Queued, Enrich::Pending)
        };
        let db = &self.db;
        retry_conflicts("record a failed attempt", || async move {
            let mut resp = db
                .query(q)
                .bind(("job", job.to_string()))
                .bind(("note", note.to_string()))
                .bind(("state", state.as_str()))
                .bind(("nstate", nstate.as_str()))
                .bind(("err", error.to_owned()))
                .await
                .map_err(StoreError::from_db)?;
            first_real_error(&mut resp)
        })
        .await
    }

    /// Puts every `running` job back in the queue (their worker is gone). Returns how many.
    pub async fn requeue_running_jobs(&self) -> Result<u64, StoreError> {
        let mut resp = self
            .db
            .query("UPDATE job SET state = $job_queued, lease_until = NONE WHERE state = $job_running RETURN VALUE id")
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)?;
        let ids: Vec<surrealdb::types::Value> = resp.take(0).map_err(StoreError::from_db)?;
        Ok(ids.len() as u64)
    }

    /// Gives a claimed job back untouched (e.g. the process is stopping).
    pub async fn release_job(&self, job: &JobId) -> Result<(), StoreError> {
        let mut resp = self
            .db
            .query("UPDATE type::record('job', $job) SET state = $job_queued, lease_until = NONE, attempts = math::max([attempts - 1, 0]) WHERE state = $job_running")
            .bind(("job", job.to_string()))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }

    /// Gives back every job still held by a worker whose name starts with `prefix` (this
    /// process is stopping), as [`Store::release_job`] does for one. On a server nothing
    /// else would: the next open does not requeue `running` jobs there (another process
    /// may be working on them), so a job cut off by a clean exit would wait for its lease
    /// to run out. Returns how many.
    pub async fn release_jobs_of(&self, prefix: &str) -> Result<u64, StoreError> {
        let db = &self.db;
        let ids: Vec<surrealdb::types::Value> = retry_conflicts("release jobs", || async move {
            let mut resp = db
                .query("UPDATE job SET state = $job_queued, lease_until = NONE, attempts = math::max([attempts - 1, 0]) WHERE state = $job_running AND string::starts_with(worker ?? '', $prefix) RETURN VALUE id")
                .bind(("prefix", prefix.to_owned()))
                .bind(crate::words::words())
                .await
                .map_err(StoreError::from_db)?;
            first_real_error(&mut resp)?;
            resp.take(0).map_err(StoreError::from_db)
        })
        .await?;
        Ok(ids.len() as u64)
    }

    /// Queues failed jobs again (their notes go back to pending). Returns how many.
    pub async fn retry_failed_jobs(&self) -> Result<u64, StoreError> {
        let q = "BEGIN TRANSACTION;
             LET $j = SELECT id, note FROM job WHERE state = $job_failed;
             UPDATE $j.id SET state = $job_queued, attempts = 0, updated_at = time::now();
             UPDATE $j.note SET enrich_state = $enrich_pending;
             RETURN array::len($j);
             COMMIT TRANSACTION;";
        let mut resp = self
            .db
            .query(q)
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)?;
        let n: Option<i64> = resp.take(4).map_err(StoreError::from_db)?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    pub async fn job_counts(&self) -> Result<JobCounts, StoreError> {
        #[derive(SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Row {
            state: String,
            n: i64,
        }
        let mut resp = self
            .db
            .query("SELECT state, count() AS n FROM job GROUP BY state")
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<Row> = resp.take(0).map_err(StoreError::from_db)?;
        let mut c = JobCounts::default();
        for r in rows {
            let n = r.n.max(0) as u64;
            match JobState::parse(&r.state) {
                Ok(JobState::Queued) => c.queued = n,
                Ok(JobState::Running) => c.running = n,
                Ok(JobState::Done) => c.done = n,
                Ok(JobState::Failed) => c.failed = n,
                Err(_) => {}
            }
        }
        Ok(c)
    }

    /// The stored embedding of a note.
    pub async fn embedding_of(&self, id: &NoteId) -> Result<Option<Vec<f32>>, StoreError> {
        let mut resp = self
            .db
            .query("SELECT VALUE embedding FROM ONLY type::record('note', $id)")
            .bind(("id", id.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        let b: Option<Bytes> = resp.take(0).map_err(StoreError::from_db)?;
        b.map(|b| crate::bytes_to_emb(&b)).transpose()
    }

    /// Writes one enrichment in one transaction (see the module docs). Returns the
    /// neighbours whose update was held for review because they changed meanwhile. A
    /// refusal because the note was deleted is [`StoreError::Conflict`]; a second apply of
    /// the same job is refused as well (the event exists).
    pub async fn apply_enrichment(&self, e: &Enrichment) -> Result<Vec<NoteId>, StoreError> {
        let w = self.index_write().await?;
        w.finish(self.apply_enrichment_unmarked(e).await)
    }

    /// [`Store::apply_enrichment`] without the snapshot bookkeeping.
    async fn apply_enrichment_unmarked(&self, e: &Enrichment) -> Result<Vec<NoteId>, StoreError> {
        let links: Vec<LinkParam> = e
            .links
            .iter()
            .map(|l| LinkParam {
                to: l.to.to_string(),
                kind: l.kind.clone(),
                reason: l.reason.clone(),
                confidence: l.confidence,
                status: match l.mode {
                    ApplyMode::Apply => LinkStatus::Accepted,
                    ApplyMode::Hold => LinkStatus::Proposed,
                }
                .to_string(),
            })
            .collect();
        let updates: Vec<UpdateParam> = e
            .updates
            .iter()
            .map(|u| UpdateParam {
                id: u.id.to_string(),
                version: u.version as i64,
                apply: u.mode == ApplyMode::Apply,
                before: u.before.clone(),
                after: u.after.clone(),
                embedding_before: u.embedding_before.as_deref().map(emb_to_bytes),
                embedding_after: emb_to_bytes(&u.embedding_after),
                changes: u.changes.clone(),
            })
            .collect();
        let event = EventParam {
            model: e.llm_model.clone(),
            prompt_version: e.prompt_version.clone(),
            tokens_in: e.tokens_in as i64,
            tokens_out: e.tokens_out as i64,
            tokens_estimated: e.tokens_estimated,
            llm_calls: e.llm_calls as i64,
            unknown_handles: e.unknown_handles as i64,
            dropped: e.dropped as i64,
            timings: e.timings_ms.to_string(),
        };
        // A proposed link whose ends and kind already have a link (imported, or rejected
        // by the user before) is skipped: the existing one stays as it is, instead of the
        // unique index failing the whole apply on every retry.
        let q = format!(
            "BEGIN TRANSACTION;
             LET $now = time::now();
             LET $n = type::record('note', $note);
             LET $ev = type::record('event', $job);
             IF (SELECT VALUE id FROM ONLY $n) = NONE {{ THROW '{STALE}' }};
             LET $seen = (SELECT content, status, set_by ?? [] AS set_by FROM ONLY $n);
             IF $seen.content != $read.content OR $seen.status != $read.status
                OR $seen.set_by != $read.set_by {{ THROW '{CHANGED_SINCE}' }};
             LET $cur = (SELECT keywords, tags, context, embedding FROM ONLY $n);
             CREATE $ev CONTENT {{
                 note: $n, kind: $event_enrich, model: $event.model, prompt_version: $event.prompt_version,
                 tokens_in: $event.tokens_in, tokens_out: $event.tokens_out,
                 tokens_estimated: $event.tokens_estimated, llm_calls: $event.llm_calls,
                 unknown_handles: $event.unknown_handles, dropped: $event.dropped,
                 timings: {{ raw: $event.timings }}, created_at: $now
             }};
             IF $construct_apply {{
                 UPDATE $n SET keywords = $after.keywords, tags = $after.tags, context = $after.context,
                     embedding = $emb, embed_model = $embed_model, enrich_state = $enrich_done,
                     enrich_error = NONE, version += 1, updated_at = $now;
                 IF $tier != NONE AND ((SELECT VALUE tier_set_by FROM ONLY $n) ?? 'default') != $by_user {{
                     UPDATE $n SET tier = $tier, tier_set_by = $by_llm;
                 }};
             }} ELSE {{
                 UPDATE $n SET enrich_state = $enrich_done, enrich_error = NONE, version += 1;
             }};
             CREATE revision CONTENT {{
                 note: $n, event: $ev, actor: $by_llm, reason: $act_construction,
                 before: {{ keywords: $cur.keywords, tags: $cur.tags, context: $cur.context }},
                 after: $after, changes: $construction_changes,
                 embedding_before: $cur.embedding, embedding_after: $emb,
                 status: IF $construct_apply {{ $rev_applied }} ELSE {{ $rev_proposed }}, created_at: $now
             }};
             FOR $l IN $links {{
                 LET $to = type::record('note', $l.to);
                 IF record::exists($to) AND array::len(SELECT VALUE id FROM link WHERE in = $n AND out = $to AND kind = $l.kind) = 0 {{
                     RELATE $n->link->$to CONTENT {{
                         kind: $l.kind, reason: $l.reason, confidence: $l.confidence,
                         created_by: $by_llm, status: $l.status, reviewed: false,
                         event: $ev, created_at: $now
                     }};
                 }};
             }};
             FOR $u IN $updates {{
                 LET $t = type::record('note', $u.id);
                 LET $fresh = (SELECT VALUE version FROM ONLY $t) = $u.version;
                 IF $u.apply AND $fresh {{
                     UPDATE $t SET keywords = $u.after.keywords, tags = $u.after.tags,
                         context = $u.after.context, embedding = $u.embedding_after,
                         version += 1, updated_at = $now;
                 }};
                 CREATE revision CONTENT {{
                     note: $t, event: $ev, actor: $by_llm, reason: $act_evolution,
                     before: $u.before, after: $u.after, changes: $u.changes,
                     embedding_before: $u.embedding_before, embedding_after: $u.embedding_after,
                     status: IF $u.apply AND $fresh {{ $rev_applied }} ELSE {{ $rev_proposed }}, created_at: $now
                 }};
             }};
             UPDATE type::record('job', $job) SET state = $job_done, lease_until = NONE, last_error = NONE, updated_at = $now;
             COMMIT TRANSACTION;"
        );
        let emb = emb_to_bytes(&e.embedding);
        // A conflict with another writer is retried as a whole (the transaction wrote
        // nothing); the version checks then see the winner's changes. A deleted note is
        // not a conflict to retry: it comes back as Ok(Err(..)).
        let read = ReadParam {
            content: e.read.content.clone(),
            status: e.read.status.as_str().to_owned(),
            set_by: crate::origin_rows(&e.read.set_by),
        };
        let (db, q, emb, event, links, updates, read) =
            (&self.db, q.as_str(), &emb, &event, &links, &updates, &read);
        let applied: Result<(), StoreError> =
            retry_conflicts("apply an enrichment", || async move {
                let mut resp = db
                    .query(q)
                    .bind(("job", e.job.to_string()))
                    .bind(("note", e.note.to_string()))
                    .bind(("read", read.clone()))
                    .bind(("after", e.after.clone()))
                    .bind(("construction_changes", e.construction_changes.clone()))
                    .bind(("emb", emb.clone()))
                    .bind(("construct_apply", e.construction_mode == ApplyMode::Apply))
                    .bind(("tier", e.tier.clone()))
                    .bind(("embed_model", e.embed_model.clone()))
                    .bind(("event", event.clone()))
                    .bind(("links", links.clone()))
                    .bind(("updates", updates.clone()))
                    .bind(crate::words::words())
                    .await
                    .map_err(StoreError::from_db)?;
                match first_real_error(&mut resp) {
                    Err(StoreError::Db(msg))
                        if msg.contains(STALE) || msg.contains(CHANGED_SINCE) =>
                    {
                        Ok(Err(StoreError::Conflict))
                    }
                    Err(other) => Err(other),
                    Ok(()) => Ok(Ok(())),
                }
            })
            .await?;
        applied?;
        if !e.updates.iter().any(|u| u.mode == ApplyMode::Apply) {
            return Ok(Vec::new());
        }
        let mut resp = self
            .db
            .query("SELECT VALUE record::id(note) FROM revision WHERE event = type::record('event', $job) AND reason = $act_evolution AND status = $rev_proposed")
            .bind(("job", e.job.to_string()))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let ids: Vec<String> = resp.take(0).map_err(StoreError::from_db)?;
        Ok(e.updates
            .iter()
            .filter(|u| u.mode == ApplyMode::Apply && ids.iter().any(|i| i == u.id.as_str()))
            .map(|u| u.id.clone())
            .collect())
    }

    /// Accepted links (from, to) among active notes: the adjacency the engine keeps for
    /// link expansion.
    pub async fn accepted_links(&self) -> Result<Vec<(NoteId, NoteId)>, StoreError> {
        #[derive(SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Row {
            a: String,
            b: String,
        }
        let mut resp = self
            .db
            .query("SELECT record::id(in) AS a, record::id(out) AS b FROM link WHERE status = $link_accepted")
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<Row> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter()
            .map(|r| {
                Ok((
                    NoteId::parse(&r.a).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    NoteId::parse(&r.b).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                ))
            })
            .collect()
    }

    /// Up to `limit` accepted links (from, to) after the cursor `after` (from the start
    /// with `None`), in record-id order, and the cursor of the next page (`None` at the
    /// end): [`Store::accepted_links`] a page at a time, for a memory with more links than
    /// should be held at once as query results.
    pub async fn accepted_links_page(
        &self,
        after: Option<LinkCursor>,
        limit: usize,
    ) -> Result<(Vec<(NoteId, NoteId)>, Option<LinkCursor>), StoreError> {
        #[derive(SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Row {
            id: RecordId,
            a: String,
            b: String,
        }
        let q = if after.is_some() {
            "SELECT id, record::id(in) AS a, record::id(out) AS b FROM link WHERE id > $after AND status = $link_accepted ORDER BY id LIMIT $limit"
        } else {
            "SELECT id, record::id(in) AS a, record::id(out) AS b FROM link WHERE status = $link_accepted ORDER BY id LIMIT $limit"
        };
        let mut resp = self
            .db
            .query(q)
            .bind(("after", after.map_or(Value::None, |c| Value::RecordId(c.0))))
            .bind(("limit", limit.max(1) as i64))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<Row> = resp.take(0).map_err(StoreError::from_db)?;
        let next = if rows.len() >= limit.max(1) {
            rows.last().map(|r| LinkCursor(r.id.clone()))
        } else {
            None
        };
        let links = rows
            .into_iter()
            .map(|r| {
                Ok((
                    NoteId::parse(&r.a).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    NoteId::parse(&r.b).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                ))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok((links, next))
    }

    /// Recent events, newest first, with how many links and revisions each made.
    pub async fn events(&self, limit: usize) -> Result<Vec<EventSummary>, StoreError> {
        let mut resp = self
            .db
            .query(
                "SELECT record::id(id) AS id, record::id(note) AS note, kind, model, prompt_version,
                        tokens_in, tokens_out, tokens_estimated, llm_calls, unknown_handles, dropped,
                        count(SELECT id FROM link WHERE event = $parent.id) AS links,
                        count(SELECT id FROM revision WHERE event = $parent.id) AS revisions,
                        created_at, timings.raw AS timings
                 FROM event ORDER BY created_at DESC LIMIT $limit",
            )
            .bind(("limit", limit as i64))
            .await
            .map_err(StoreError::from_db)?;
        resp.take(0).map_err(StoreError::from_db)
    }

    /// Revisions, newest first; only those of `note` when given.
    pub async fn revisions(
        &self,
        note: Option<&NoteId>,
        limit: usize,
    ) -> Result<Vec<RevisionSummary>, StoreError> {
        let filter = if note.is_some() {
            "WHERE note = type::record('note', $note)"
        } else {
            ""
        };
        let mut resp = self
            .db
            .query(format!(
                "SELECT record::id(id) AS id, record::id(note) AS note,
                        IF event != NONE {{ record::id(event) }} ELSE {{ NONE }} AS event,
                        actor, reason, status, before, after, created_at, changes ?? [] AS changes
                 FROM revision {filter} ORDER BY created_at DESC LIMIT $limit"
            ))
            .bind(("note", note.map(|n| n.to_string()).unwrap_or_default()))
            .bind(("limit", limit as i64))
            .await
            .map_err(StoreError::from_db)?;
        resp.take(0).map_err(StoreError::from_db)
    }

    /// Token totals per LLM model.
    pub async fn usage_by_model(&self) -> Result<Vec<ModelUsage>, StoreError> {
        let mut resp = self
            .db
            .query(
                "SELECT model, count() AS notes, math::sum(tokens_in) AS tokens_in, math::sum(tokens_out) AS tokens_out
                 FROM event GROUP BY model",
            )
            .await
            .map_err(StoreError::from_db)?;
        resp.take(0).map_err(StoreError::from_db)
    }

    /// Token use per note (its enrichment events), newest first.
    pub async fn usage_by_note(&self, limit: usize) -> Result<Vec<EventSummary>, StoreError> {
        self.events(limit).await
    }
}

#[cfg(test)]
mod tests;
