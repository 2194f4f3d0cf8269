//! Notes: written in batches (with their merges, differences, flags and jobs), read by
//! id through the note cache, listed, counted, deleted; index rows and embeddings.

use super::*;

impl Store {
    /// Writes notes (and their jobs) in one transaction: all of them or none.
    pub async fn insert_notes(&self, writes: &[NoteWrite]) -> Result<(), StoreError> {
        self.insert_notes_with(writes, &[], &[]).await
    }

    /// [`Store::insert_notes`] where some of the notes are near-duplicates of existing
    /// ones: each merge records an event, the `same-entity` link from the new (merged)
    /// note to the one it repeats, and the reinforcement of the old note, in the same
    /// transaction as the notes; so does each link between a new note and one it reads like
    /// but whose facts differ.
    pub async fn insert_notes_with(
        &self,
        writes: &[NoteWrite],
        merges: &[MergeWrite],
        differs: &[DifferWrite],
    ) -> Result<(), StoreError> {
        self.insert_notes_flagged(writes, merges, differs, &[])
            .await
    }

    /// [`Store::insert_notes_with`], and the "may be outdated" flags that the accepted
    /// supersessions among `differs` raise (see `supersede.rs`), in the same transaction.
    pub async fn insert_notes_flagged(
        &self,
        writes: &[NoteWrite],
        merges: &[MergeWrite],
        differs: &[DifferWrite],
        flags: &[FlagWrite],
    ) -> Result<(), StoreError> {
        let w = self.index_write().await?;
        w.finish(
            self.insert_notes_with_unmarked(writes, merges, differs, flags)
                .await,
        )
    }

    /// [`Store::insert_notes_flagged`] without the snapshot bookkeeping.
    pub(crate) async fn insert_notes_with_unmarked(
        &self,
        writes: &[NoteWrite],
        merges: &[MergeWrite],
        differs: &[DifferWrite],
        flags: &[FlagWrite],
    ) -> Result<(), StoreError> {
        if writes.is_empty() && merges.is_empty() && differs.is_empty() && flags.is_empty() {
            return Ok(());
        }
        let mut notes = Vec::with_capacity(writes.len());
        let mut jobs = Vec::new();
        for w in writes {
            let n = &w.note;
            let err = match &n.enrich_state {
                EnrichState::Pending { reason } => reason.clone(),
                EnrichState::Done => None,
                EnrichState::Failed { error } => Some(error.clone()),
            };
            let state = n.enrich_state.label();
            notes.push(NoteInsert {
                id: RecordId::new("note", n.id.to_string()),
                content: n.content.clone(),
                created_at: n.created_at,
                updated_at: n.updated_at,
                keywords: n.keywords.clone(),
                tags: n.tags.clone(),
                context: n.context.clone(),
                embedding: w.embedding.as_deref().map(emb_to_bytes),
                embed_model: w.embed_model.clone(),
                status: n.status.as_str().to_owned(),
                enrich_state: state.to_owned(),
                enrich_error: err,
                source: n.source.clone(),
                strength: n.strength,
                access_count: n.access_count as i64,
                version: n.version as i64,
                tier: n.tier.as_str().to_owned(),
                project: n.project.clone(),
                added_at: n.added_at,
                set_by: origin_rows(&n.set_by),
            });
            if let Some(job) = &w.job {
                jobs.push(JobInsert {
                    id: RecordId::new("job", job.to_string()),
                    note: RecordId::new("note", n.id.to_string()),
                    kind: JobKind::Enrich.as_str().to_owned(),
                    state: JobState::Queued.as_str().to_owned(),
                    attempts: 0,
                    created_at: n.updated_at,
                    updated_at: n.updated_at,
                });
            }
        }
        // INSERT of the bound rows rather than a CREATE per row in a FOR loop: the same
        // checks (schema, an existing id is an error that cancels the transaction) at ~60 %
        // of the CPU, which a bulk write takes from the embedder.
        let q = "BEGIN TRANSACTION;
            IF array::len($notes) > 0 { INSERT INTO note $notes RETURN NONE };
            IF array::len($jobs) > 0 { INSERT INTO job $jobs RETURN NONE };
            FOR $m IN $merges {
                LET $new = type::record('note', $m.note);
                LET $old = type::record('note', $m.duplicate_of);
                LET $ev = type::record('event', $m.event);
                IF (SELECT VALUE status FROM ONLY $old) != $note_active { THROW 'the note to merge into is gone' };
                CREATE $ev CONTENT { note: $new, kind: $event_merge, llm_calls: 0, created_at: $m.at };
                RELATE $new->link->$old CONTENT {
                    kind: $same_entity, reason: $m.reason, confidence: $m.similarity,
                    created_by: $by_merge, status: $m.status, reviewed: false, event: $ev,
                    created_at: $m.at
                };
                UPDATE $old SET strength = $m.strength, last_accessed = $m.at, access_count += 1;
            };
            FOR $d IN $differs {
                LET $from = type::record('note', $d.from);
                LET $to = type::record('note', $d.to);
                IF record::exists($to) {
                    RELATE $from->link->$to CONTENT {
                        kind: $d.kind, reason: $d.reason, confidence: $d.confidence,
                        created_by: $d.by, status: $d.status, reviewed: false, created_at: $d.at
                    };
                };
            };
            ";
        // the flags' statements only when there are flags: a bulk write parses less
        let q = if flags.is_empty() {
            format!("{q}COMMIT TRANSACTION;")
        } else {
            format!("{q}{}\nCOMMIT TRANSACTION;", supersede::FLAG_WRITES)
        };
        // the notes this write changes: the new ones and those they are merged into
        // (links, events and jobs are other tables; the flags' statements only read notes)
        let touched: Vec<NoteId> = writes
            .iter()
            .map(|w| w.note.id.clone())
            .chain(
                merges
                    .iter()
                    .flat_map(|m| [m.note.clone(), m.duplicate_of.clone()]),
            )
            .collect();
        let merges: Vec<MergeInsert> = merges
            .iter()
            .map(|m| MergeInsert {
                note: m.note.to_string(),
                duplicate_of: m.duplicate_of.to_string(),
                event: m.event.clone(),
                reason: m.reason.clone(),
                similarity: m.similarity,
                status: held_or_accepted(m.accepted).to_string(),
                strength: m.strength,
                at: m.at,
            })
            .collect();
        let differs: Vec<DifferInsert> = differs
            .iter()
            .map(|d| DifferInsert {
                from: d.from.to_string(),
                to: d.to.to_string(),
                kind: d.kind.clone(),
                reason: d.reason.clone(),
                confidence: d.confidence,
                status: held_or_accepted(d.accepted).to_string(),
                at: d.at,
                by: d.by.as_str().to_owned(),
            })
            .collect();
        let mut resp = self
            .db
            .query_touching(q, touched)
            .bind(("notes", notes))
            .bind(("jobs", jobs))
            .bind(("merges", merges))
            .bind(("differs", differs))
            .bind(("flags", supersede::flag_params(flags)))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }

    pub async fn get_note(&self, id: &NoteId) -> Result<Option<Note>, StoreError> {
        let mut resp = self
            .db
            .query(format!(
                "SELECT {NOTE_COLUMNS} FROM ONLY type::record('note', $id)"
            ))
            .bind(("id", id.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        let row: Option<NoteRow> = resp.take(0).map_err(StoreError::from_db)?;
        row.map(NoteRow::into_note).transpose()
    }

    /// The notes with these ids that exist, in the order given.
    /// Notes read recently are answered from the note cache (`notecache.rs`), which
    /// every write empties.
    pub async fn get_notes(&self, ids: &[NoteId]) -> Result<Vec<Note>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let generation = self.db.cache.generation();
        let (mut found, missing) = self.db.cache.lookup(ids);
        if !missing.is_empty() {
            let read = self.read_notes(&missing).await?;
            self.db.cache.keep(generation, &read);
            found.extend(read.into_iter().map(|n| (n.id.clone(), n)));
        }
        // in the order given; ids given twice come back twice, as the query returns them
        Ok(ids.iter().filter_map(|id| found.get(id).cloned()).collect())
    }

    /// (hits, misses) of the note cache since open.
    pub fn note_cache_counts(&self) -> (u64, u64) {
        self.db.cache.counts()
    }

    /// [`Store::get_notes`] from the database: from the records themselves on an
    /// embedded datastore (`direct.rs`), else by a query.
    pub(crate) async fn read_notes(&self, ids: &[NoteId]) -> Result<Vec<Note>, StoreError> {
        let Some(ds) = self.db.datastore() else {
            return self.query_notes(ids).await;
        };
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let rows = direct::read_notes(ds, &keys)
            .await
            .map_err(StoreError::Db)?;
        rows.into_iter()
            .flatten()
            .map(|v| {
                NoteRow::from_value(v)
                    .map_err(|e| StoreError::Corrupt(format!("a note reads back wrong: {e}")))
                    .and_then(NoteRow::into_note)
            })
            .collect()
    }

    /// [`Store::read_notes`] by a SurrealQL query (any endpoint).
    pub(crate) async fn query_notes(&self, ids: &[NoteId]) -> Result<Vec<Note>, StoreError> {
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let mut resp = self
            .db
            // the record ids followed in a `RETURN`, not a `SELECT` over them: the same
            // reads without a `SELECT` statement's fixed cost (10 notes of a 100k memory in
            // ~1.0 ms instead of ~1.4; one in 0.14 ms instead of 0.6). A missing id is NONE.
            .query(format!(
                "RETURN array::map($ids, |$k| type::record('note', $k).{{{NOTE_COLUMNS}}})"
            ))
            .bind(("ids", keys))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<Option<NoteRow>> = resp.take(0).map_err(StoreError::from_db)?;
        let mut notes: Vec<Note> = rows
            .into_iter()
            .flatten()
            .map(NoteRow::into_note)
            .collect::<Result<_, _>>()?;
        let pos = |id: &NoteId| ids.iter().position(|x| x == id).unwrap_or(usize::MAX);
        notes.sort_by_key(|n| pos(&n.id));
        Ok(notes)
    }

    /// The most recent notes by memory time, newest first. Notes merged into another are
    /// not listed (they show as that note's `same-entity` link).
    pub async fn list_notes(&self, limit: usize, offset: usize) -> Result<Vec<Note>, StoreError> {
        let mut resp = self
            .db
            .query(format!(
                "SELECT {NOTE_COLUMNS} FROM note WHERE status != $note_merged ORDER BY created_at DESC LIMIT $limit START $start"
            ))
            .bind(("limit", limit as i64))
            .bind(crate::words::words())
            .bind(("start", offset as i64))
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<NoteRow> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter().map(NoteRow::into_note).collect()
    }

    pub async fn count_notes(&self) -> Result<u64, StoreError> {
        let mut resp = self
            .db
            .query("SELECT count() AS n FROM note GROUP ALL")
            .await
            .map_err(StoreError::from_db)?;
        let n: Option<i64> = resp.take((0, "n")).map_err(StoreError::from_db)?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    /// Notes `list_notes` shows (every status but `merged`) and notes merged into another.
    pub async fn count_listed_and_merged(&self) -> Result<(u64, u64), StoreError> {
        let mut resp = self
            .db
            .query(
                "SELECT count(status != $note_merged) AS listed, count(status = $note_merged) AS merged \
                 FROM note GROUP ALL",
            )
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let listed: Option<i64> = resp.take((0, "listed")).map_err(StoreError::from_db)?;
        let merged: Option<i64> = resp.take((0, "merged")).map_err(StoreError::from_db)?;
        let n = |x: Option<i64>| x.unwrap_or(0).max(0) as u64;
        Ok((n(listed), n(merged)))
    }

    /// Deletes a note, its links (both directions) and its queued jobs in one transaction.
    /// Notes merged into it (by a merge in force: proposed or accepted) come back as regular
    /// notes in the same transaction, with an `unmerge` audit entry and an enrichment job if
    /// they were never enriched. Returns `None` if the note did not exist, else the notes
    /// that came back (the caller indexes them).
    pub async fn delete_note(&self, id: &NoteId) -> Result<Option<Vec<NoteId>>, StoreError> {
        let w = self.index_write().await?;
        w.finish(self.delete_note_unmarked(id).await)
    }

    /// [`Store::delete_note`] without the snapshot bookkeeping.
    pub(crate) async fn delete_note_unmarked(
        &self,
        id: &NoteId,
    ) -> Result<Option<Vec<NoteId>>, StoreError> {
        #[derive(Debug, SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Freed {
            note: String,
            job: String,
        }
        // the notes merged into this one, with a job id ready for each
        let mut resp = self
            .db
            .query(
                "LET $r = type::record('note', $id);
                 SELECT VALUE record::id(in) FROM link WHERE out = $r AND kind = $same_entity
                     AND created_by = $by_merge AND status IN [$link_proposed, $link_accepted];",
            )
            .bind(("id", id.to_string()))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let dups: Vec<String> = resp.take(1).map_err(StoreError::from_db)?;
        let freed: Vec<Freed> = dups
            .into_iter()
            .map(|note| Freed {
                note,
                job: kasten_core::JobId::generate().to_string(),
            })
            .collect();
        let q = "BEGIN TRANSACTION;
            LET $r = type::record('note', $id);
            LET $existed = (SELECT VALUE id FROM ONLY $r) != NONE;
            LET $back = IF $existed { $freed.filter(|$f| (SELECT VALUE status FROM ONLY type::record('note', $f.note)) = $note_merged) } ELSE { [] };
            FOR $f IN $back {
                LET $d = type::record('note', $f.note);
                UPDATE $d SET status = $note_active, version += 1;
                CREATE audit CONTENT { action: $act_unmerge, target: $f.note, notes: [$d], actor: $by_user,
                    reason: 'the note it was merged into was deleted', at: time::now() };
                IF (SELECT VALUE enrich_state FROM ONLY $d) != $enrich_done
                    AND array::len(SELECT VALUE id FROM job WHERE note = $d AND state IN [$job_queued, $job_running]) = 0 {
                    CREATE type::record('job', $f.job) CONTENT { note: $d, kind: $job_enrich,
                        state: $job_queued, attempts: 0, created_at: time::now(), updated_at: time::now() };
                };
            };
            DELETE link WHERE in = $r OR out = $r;
            DELETE job WHERE note = $r;
            DELETE $r;
            RETURN { existed: $existed, back: $back.map(|$f| $f.note) };
            COMMIT TRANSACTION;";
        let mut resp = self
            .db
            .query(q)
            .bind(("id", id.to_string()))
            .bind(("freed", freed))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)?;
        #[derive(Debug, SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Deleted {
            existed: bool,
            back: Vec<String>,
        }
        let n = resp.num_statements();
        let d: Option<Deleted> = resp
            .take(n.saturating_sub(2))
            .map_err(StoreError::from_db)?;
        match d {
            Some(d) if d.existed => Ok(Some(
                d.back
                    .iter()
                    .map(|s| NoteId::parse(s).map_err(|e| StoreError::Corrupt(e.to_string())))
                    .collect::<Result<_, _>>()?,
            )),
            _ => Ok(None),
        }
    }

    /// One page of what the in-process indexes are built from: active notes with id
    /// greater than `after`, in id order.
    pub async fn index_rows(
        &self,
        after: Option<&NoteId>,
        limit: usize,
    ) -> Result<Vec<IndexRow>, StoreError> {
        let cols = "record::id(id) AS id, content, keywords, tags, context, embedding, embed_model, created_at, source";
        let q = match after {
            Some(_) => format!(
                "SELECT {cols} FROM note WHERE id > type::record('note', $after) AND status = $note_active ORDER BY id LIMIT $limit"
            ),
            None => {
                format!(
                    "SELECT {cols} FROM note WHERE status = $note_active ORDER BY id LIMIT $limit"
                )
            }
        };
        let mut resp = self
            .db
            .query(q)
            .bind(("after", after.map(|a| a.to_string()).unwrap_or_default()))
            .bind(("limit", limit as i64))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<IndexRowRaw> = resp.take(0).map_err(StoreError::from_db)?;
        rows.into_iter()
            .map(|r| {
                Ok(IndexRow {
                    id: NoteId::parse(&r.id).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    text: kasten_core::note::index_text(
                        &r.content,
                        &r.keywords,
                        &r.tags,
                        &r.context,
                    ),
                    embedding: r.embedding.as_ref().map(|b| bytes_to_emb(b)).transpose()?,
                    embed_model: r.embed_model,
                    created_at: r.created_at,
                    source: r.source,
                })
            })
            .collect()
    }

    /// A note's stored embedding with the model that made it (`None`: no such note, or
    /// not embedded). Vectors of two models of one dimension are not comparable: the
    /// model, not the length, says whether a vector can be used.
    pub async fn embedding_with_model(
        &self,
        id: &NoteId,
    ) -> Result<Option<(Vec<f32>, Option<String>)>, StoreError> {
        #[derive(SurrealValue)]
        #[surreal(crate = "surrealdb::types")]
        struct Row {
            embedding: Option<Bytes>,
            embed_model: Option<String>,
        }
        let mut resp = self
            .db
            .query("SELECT embedding, embed_model FROM ONLY type::record('note', $id)")
            .bind(("id", id.to_string()))
            .await
            .map_err(StoreError::from_db)?;
        let row: Option<Row> = resp.take(0).map_err(StoreError::from_db)?;
        match row {
            Some(Row {
                embedding: Some(b),
                embed_model,
            }) => Ok(Some((bytes_to_emb(&b)?, embed_model))),
            _ => Ok(None),
        }
    }

    /// Replaces the embedding of a note.
    pub async fn set_embedding(
        &self,
        id: &NoteId,
        embedding: &[f32],
        model: &str,
    ) -> Result<(), StoreError> {
        let w = self.index_write().await?;
        w.finish(self.set_embedding_unmarked(id, embedding, model).await)
    }

    /// [`Store::set_embedding`] without the snapshot bookkeeping.
    pub(crate) async fn set_embedding_unmarked(
        &self,
        id: &NoteId,
        embedding: &[f32],
        model: &str,
    ) -> Result<(), StoreError> {
        let mut resp = self
            .db
            .query("UPDATE type::record('note', $id) SET embedding = $e, embed_model = $m")
            .bind(("id", id.to_string()))
            .bind(("e", emb_to_bytes(embedding)))
            .bind(("m", model.to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }
}

/// The status of a link applied at once or held for review.
fn held_or_accepted(accepted: bool) -> LinkStatus {
    if accepted {
        LinkStatus::Accepted
    } else {
        LinkStatus::Proposed
    }
}
