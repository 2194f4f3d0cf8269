//! Lifecycle records: strength and reinforcement, tiers and projects, archive and restore,
//! and the merge of a near-duplicate. The formulas live in `kasten_core::lifecycle`; this
//! module only reads and writes what they need.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use kasten_core::lifecycle::{StrengthState, Tier};
use kasten_core::{Action, NoteId, NoteStatus};
use surrealdb::types::SurrealValue;

use crate::{Store, StoreError, first_real_error, returned_bool};

/// What the current strength of one note is computed from.
#[derive(Debug, Clone)]
pub struct StrengthRow {
    pub id: NoteId,
    pub state: StrengthState,
    pub project: Option<String>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct StrengthRaw {
    id: String,
    strength: f64,
    reference: DateTime<Utc>,
    access_count: i64,
    tier: String,
    project: Option<String>,
}

#[derive(Debug, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct ProjectRaw {
    name: String,
    active: bool,
    changed_at: DateTime<Utc>,
}

#[derive(Debug, Clone, SurrealValue)]
#[surreal(crate = "surrealdb::types")]
struct ReinforceRaw {
    id: String,
    strength: f64,
    at: DateTime<Utc>,
}

/// A project and whether it is still active.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProjectState {
    pub name: String,
    pub active: bool,
    pub changed_at: DateTime<Utc>,
}

const STRENGTH_COLUMNS: &str = "record::id(id) AS id, strength, \
    (IF last_accessed != NONE AND last_accessed > (added_at ?? updated_at) THEN last_accessed ELSE (added_at ?? updated_at) END) AS reference, \
    access_count, tier ?? $tier_long_term AS tier, project";

impl Store {
    /// When each closed project was closed (active projects are absent).
    pub async fn closed_projects(&self) -> Result<HashMap<String, DateTime<Utc>>, StoreError> {
        Ok(self
            .projects()
            .await?
            .into_iter()
            .filter(|p| !p.active)
            .map(|p| (p.name, p.changed_at))
            .collect())
    }

    pub async fn projects(&self) -> Result<Vec<ProjectState>, StoreError> {
        let mut resp = self
            .db
            .query("SELECT record::id(id) AS name, active, changed_at FROM project ORDER BY name")
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<ProjectRaw> = resp.take(0).map_err(StoreError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|r| ProjectState {
                name: r.name,
                active: r.active,
                changed_at: r.changed_at,
            })
            .collect())
    }

    /// Opens or closes a project (a project-tier note lives while its project is active).
    pub async fn set_project_active(
        &self,
        name: &str,
        active: bool,
        actor: &str,
    ) -> Result<(), StoreError> {
        let q = "BEGIN TRANSACTION;
            UPSERT type::record('project', $name) SET active = $active, changed_at = time::now();
            CREATE audit CONTENT { action: IF $active THEN $act_project_open ELSE $act_project_close END,
                target: $name, notes: [], actor: $actor, reason: '', at: time::now() };
            COMMIT TRANSACTION;";
        let mut resp = self
            .db
            .query(q)
            .bind(("name", name.to_owned()))
            .bind(("active", active))
            .bind(("actor", actor.to_owned()))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }

    fn strength_rows_from(
        rows: Vec<StrengthRaw>,
        closed: &HashMap<String, DateTime<Utc>>,
    ) -> Result<Vec<StrengthRow>, StoreError> {
        rows.into_iter()
            .map(|r| {
                let tier = Tier::parse(&r.tier).ok_or_else(|| {
                    StoreError::Corrupt(format!("note {} has unknown tier '{}'", r.id, r.tier))
                })?;
                let project_closed = r.project.as_ref().and_then(|p| closed.get(p).copied());
                Ok(StrengthRow {
                    id: NoteId::parse(&r.id).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    state: StrengthState {
                        strength: r.strength,
                        reference: r.reference,
                        reinforcements: r.access_count.max(0) as u64,
                        tier,
                        project_closed,
                    },
                    project: r.project,
                })
            })
            .collect()
    }

    /// Strength inputs of every active note, a page at a time (`after` = last id seen).
    pub async fn strength_rows(
        &self,
        after: Option<&NoteId>,
        limit: usize,
    ) -> Result<Vec<StrengthRow>, StoreError> {
        let closed = self.closed_projects().await?;
        let filter = if after.is_some() {
            "status = $note_active AND id > type::record('note', $after)"
        } else {
            "status = $note_active"
        };
        let mut resp = self
            .db
            .query(format!(
                "SELECT {STRENGTH_COLUMNS} FROM note WHERE {filter} ORDER BY id LIMIT $limit"
            ))
            .bind(("after", after.map(|a| a.to_string()).unwrap_or_default()))
            .bind(("limit", limit as i64))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<StrengthRaw> = resp.take(0).map_err(StoreError::from_db)?;
        Self::strength_rows_from(rows, &closed)
    }

    /// Strength inputs of the given notes (any status).
    pub async fn strength_of(&self, ids: &[NoteId]) -> Result<Vec<StrengthRow>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let closed = self.closed_projects().await?;
        let keys: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let mut resp = self
            .db
            .query(format!(
                "SELECT {STRENGTH_COLUMNS} FROM array::map($ids, |$k| type::record('note', $k))"
            ))
            .bind(("ids", keys))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        let rows: Vec<StrengthRaw> = resp.take(0).map_err(StoreError::from_db)?;
        Self::strength_rows_from(rows, &closed)
    }

    /// Records reinforcements: each note gets its new strength, `last_accessed = at` and one
    /// more access. The note's version is not bumped (strength is not an annotation, and a
    /// retrieval must not make a pending evolution of the note stale).
    pub async fn reinforce(
        &self,
        updates: &[(NoteId, f64, DateTime<Utc>)],
    ) -> Result<(), StoreError> {
        if updates.is_empty() {
            return Ok(());
        }
        let rows: Vec<ReinforceRaw> = updates
            .iter()
            .map(|(id, s, at)| ReinforceRaw {
                id: id.to_string(),
                strength: *s,
                at: *at,
            })
            .collect();
        let q = "BEGIN TRANSACTION;
            FOR $u IN $rows {
                UPDATE type::record('note', $u.id) SET strength = $u.strength,
                    last_accessed = $u.at, access_count += 1;
            };
            COMMIT TRANSACTION;";
        // reinforcement runs beside searches and enrichments that touch the same notes: a
        // lost write conflict is run again, as the pipeline's writes are
        let (db, rows) = (&self.db, &rows);
        crate::pipeline::retry_conflicts("reinforce notes", || async move {
            let mut resp = db
                .query(q)
                .bind(("rows", rows.clone()))
                .await
                .map_err(StoreError::from_db)?;
            first_real_error(&mut resp)
        })
        .await
    }

    /// Records that `actor` kept a fading note: its new strength, `last_accessed = at` and
    /// one more access (as [`Store::reinforce`]), with a `keep` audit entry for its history,
    /// in one transaction.
    pub async fn keep(
        &self,
        id: &NoteId,
        strength: f64,
        at: DateTime<Utc>,
        actor: &str,
    ) -> Result<(), StoreError> {
        let q = "BEGIN TRANSACTION;
            LET $r = type::record('note', $id);
            UPDATE $r SET strength = $strength, last_accessed = $at, access_count += 1;
            CREATE audit CONTENT { action: $act_keep, target: $id, notes: [$r], actor: $actor,
                reason: 'kept by the user', at: time::now() };
            COMMIT TRANSACTION;";
        let (db, id, actor) = (&self.db, id.to_string(), actor.to_owned());
        crate::pipeline::retry_conflicts("keep a note", || {
            let (id, actor) = (id.clone(), actor.clone());
            async move {
                let mut resp = db
                    .query(q)
                    .bind(("id", id))
                    .bind(("strength", strength))
                    .bind(("at", at))
                    .bind(("actor", actor))
                    .bind(crate::words::words())
                    .await
                    .map_err(StoreError::from_db)?;
                first_real_error(&mut resp)
            }
        })
        .await
    }

    /// Moves a note from status `from` to `to` (archive, restore), with an audit entry.
    /// Returns false (and changes nothing) when the note is not in status `from`. A status
    /// change is a change of the note: its `version` goes up, so a write that read the note
    /// before (an enrichment's neighbour update) is refused.
    pub async fn change_status(
        &self,
        id: &NoteId,
        from: NoteStatus,
        to: NoteStatus,
        action: Action,
        actor: &str,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let w = self.index_write().await?;
        w.finish(
            self.change_status_unmarked(id, from, to, action, actor, reason)
                .await,
        )
    }

    /// [`Store::change_status`] without the snapshot bookkeeping.
    async fn change_status_unmarked(
        &self,
        id: &NoteId,
        from: NoteStatus,
        to: NoteStatus,
        action: Action,
        actor: &str,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let q = "BEGIN TRANSACTION;
            LET $r = type::record('note', $id);
            LET $ok = (SELECT VALUE status FROM ONLY $r) = $from;
            IF $ok {
                UPDATE $r SET status = $to, version += 1;
                CREATE audit CONTENT { action: $action, target: $id, notes: [$r], actor: $actor,
                    reason: $reason, at: time::now() };
            };
            RETURN $ok;
            COMMIT TRANSACTION;";
        let mut resp = self
            .db
            .query(q)
            .bind(("id", id.to_string()))
            .bind(("from", from.as_str()))
            .bind(("to", to.as_str()))
            .bind(("action", action.as_str().to_owned()))
            .bind(("actor", actor.to_owned()))
            .bind(("reason", reason.to_owned()))
            .await
            .map_err(StoreError::from_db)?;
        returned_bool(&mut resp)
    }

    /// Sets a note's tier (and project). `by` is `llm` (the construction step's proposal,
    /// never over a user's choice) or `user`. Returns whether the note changed.
    pub async fn set_tier(
        &self,
        id: &NoteId,
        tier: Tier,
        project: Option<&str>,
        by: &str,
    ) -> Result<bool, StoreError> {
        let q = "BEGIN TRANSACTION;
            LET $r = type::record('note', $id);
            LET $cur = (SELECT VALUE tier_set_by ?? 'default' FROM ONLY $r);
            LET $ok = $cur != NONE AND ($by = $by_user OR $cur != $by_user);
            IF $ok {
                UPDATE $r SET tier = $tier, project = $project, tier_set_by = $by;
                IF $by = $by_user {
                    CREATE audit CONTENT { action: $act_tier, target: $tier, notes: [$r],
                        actor: $by_user, reason: $project ?? '', at: time::now() };
                };
            };
            RETURN $ok;
            COMMIT TRANSACTION;";
        let mut resp = self
            .db
            .query(q)
            .bind(("id", id.to_string()))
            .bind(("tier", tier.as_str().to_owned()))
            .bind(("project", project.map(str::to_owned)))
            .bind(("by", by.to_owned()))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        returned_bool(&mut resp)
    }
}

impl Store {
    /// Queues an enrichment job for a note (a merge that was undone: the note now needs
    /// the pipeline it skipped). Does nothing if the note already has a queued or running
    /// job.
    pub async fn enqueue_job(
        &self,
        note: &NoteId,
        job: &kasten_core::JobId,
    ) -> Result<(), StoreError> {
        let q = "BEGIN TRANSACTION;
            LET $n = type::record('note', $note);
            LET $open = (SELECT VALUE id FROM job WHERE note = $n AND state IN [$job_queued, $job_running]);
            IF array::len($open) = 0 {
                CREATE type::record('job', $job) CONTENT { note: $n, kind: $job_enrich,
                    state: $job_queued, attempts: 0, created_at: time::now(), updated_at: time::now() };
            };
            COMMIT TRANSACTION;";
        let mut resp = self
            .db
            .query(q)
            .bind(("note", note.to_string()))
            .bind(("job", job.to_string()))
            .bind(crate::words::words())
            .await
            .map_err(StoreError::from_db)?;
        first_real_error(&mut resp)
    }
}
