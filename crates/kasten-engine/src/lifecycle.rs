//! The memory lifecycle in the engine: strength now, reinforcement, archive candidates,
//! archive and restore, tiers and projects (formulas: `kasten_core::lifecycle`).

use std::collections::HashMap;

use chrono::Utc;
use kasten_core::lifecycle::{DEFAULT_ARCHIVE_THRESHOLD, Reinforce, Tier};
use kasten_core::{Action, Actor, Note, NoteId, NoteStatus};
use serde::Serialize;

use crate::{Engine, EngineError};

/// Setting (group `lifecycle`, field `archive_threshold`): below this current strength a
/// note is an archive candidate.
pub const ARCHIVE_THRESHOLD_SETTING: &str = "lifecycle.archive_threshold";
/// Setting (group `retrieval`, field `strength_weight`): weight of strength in retrieval,
/// 0–1 (0, the default, turns it off).
pub const STRENGTH_WEIGHT_SETTING: &str = "retrieval.strength_weight";

/// Setting (group `retrieval`, field `reinforce`): which retrievals reinforce the notes they
/// return — `all` (search, MCP `search_memory`/`get_memory`, opening a note, chat; the
/// default), `chat` (only chat's shown and cited notes) or `off`.
pub const REINFORCE_SETTING: &str = "retrieval.reinforce";

/// Which retrievals reinforce a note (setting [`REINFORCE_SETTING`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReinforceOn {
    All,
    Chat,
    Off,
}

impl ReinforceOn {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "all" => Self::All,
            "chat" => Self::Chat,
            "off" => Self::Off,
            _ => return None,
        })
    }

    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Self::All => 0,
            Self::Chat => 1,
            Self::Off => 2,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Chat,
            2 => Self::Off,
            _ => Self::All,
        }
    }
}

/// Setting (group `retrieval`, field `follow_links`): whether search follows accepted links
/// from its best hits (link expansion) — `on`, `off`, or `auto` (the default): on, except
/// while the LLM in use is a small model on the guided prompts (the built-in one). Measured
/// with SmolLM2-135M on LoCoMo conv-30 (docs/BENCHMARKS.md): following its links lowered
/// evidence recall@10 from 0.768 to 0.721, and still to 0.721 with only its links that
/// name a rare term, so a small model's links are kept for the graph, Review and chat's
/// context but not followed by search.
pub const FOLLOW_LINKS_SETTING: &str = "retrieval.follow_links";

/// Setting (group `retrieval`, field `search_terms`): whether chat and `ask` search with
/// the terms the LLM writes for the question (A-Mem's retrieval, `kasten_core::search_terms`)
/// beside the question's own words — `on`, `off`, or `auto` (the default): off for every
/// model. Measured with Qwen2.5-Coder-1.5B on LoCoMo (docs/BENCHMARKS.md, "Search terms"):
/// more evidence found, answers no better, one short LLM call per question.
pub const SEARCH_TERMS_SETTING: &str = "retrieval.search_terms";

/// A retrieval step that depends on the model: on, off, or `auto` — for following links
/// ([`FOLLOW_LINKS_SETTING`]) on except while the LLM in use is a small model on the guided
/// prompts; for the search terms ([`SEARCH_TERMS_SETTING`]) off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoSwitch {
    Auto,
    On,
    Off,
}

impl AutoSwitch {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Self::Auto,
            "on" => Self::On,
            "off" => Self::Off,
            _ => return None,
        })
    }

    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Self::Auto => 0,
            Self::On => 1,
            Self::Off => 2,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::On,
            2 => Self::Off,
            _ => Self::Auto,
        }
    }

    /// The setting resolved for the LLM in use: `small` is whether its profile is the
    /// small-model one (`None`: no LLM, so no new links either way).
    pub fn resolve(self, small: Option<bool>) -> bool {
        match self {
            Self::On => true,
            Self::Off => false,
            Self::Auto => small != Some(true),
        }
    }
}

/// A note the lifecycle suggests archiving.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveCandidate {
    pub id: NoteId,
    pub content: String,
    pub tier: Tier,
    pub project: Option<String>,
    /// Current strength.
    pub strength: f64,
    /// Days since it entered the memory or was last used, whichever is later.
    pub idle_days: f64,
}

const PAGE: usize = 2000;

impl Engine {
    /// The archive threshold in force (setting, else the default 0.2).
    pub async fn archive_threshold(&self) -> Result<f64, EngineError> {
        Ok(self
            .store
            .get_setting("lifecycle")
            .await?
            .and_then(|v| v.get("archive_threshold").and_then(|x| x.as_f64()))
            .filter(|x| (0.0..=1.0).contains(x))
            .unwrap_or(DEFAULT_ARCHIVE_THRESHOLD))
    }

    /// Current strength of the given notes (missing notes are left out).
    pub async fn strength_now(&self, ids: &[NoteId]) -> Result<HashMap<NoteId, f64>, EngineError> {
        let now = Utc::now();
        Ok(self
            .store
            .strength_of(ids)
            .await?
            .into_iter()
            .map(|r| (r.id, r.state.at(now)))
            .collect())
    }

    /// Reinforces notes (retrieved for an answer, cited, repeated): each moves part of
    /// the way back to full strength and its half-life grows.
    pub async fn reinforce(&self, ids: &[NoteId], why: Reinforce) -> Result<(), EngineError> {
        let now = Utc::now();
        let mut seen = std::collections::HashSet::new();
        let ids: Vec<NoteId> = ids.iter().filter(|i| seen.insert(*i)).cloned().collect();
        let updates: Vec<(NoteId, f64, chrono::DateTime<Utc>)> = self
            .store
            .strength_of(&ids)
            .await?
            .into_iter()
            .map(|r| {
                let s = r.state.reinforced(why, now);
                (r.id, s.strength, now)
            })
            .collect();
        Ok(self.store.reinforce(&updates).await?)
    }

    /// Active notes whose current strength is below the threshold (the setting unless
    /// given), weakest first. Nothing is archived: the user decides.
    pub async fn archive_candidates(
        &self,
        threshold: Option<f64>,
        limit: usize,
    ) -> Result<Vec<ArchiveCandidate>, EngineError> {
        let threshold = match threshold {
            Some(t) => t,
            None => self.archive_threshold().await?,
        };
        let now = Utc::now();
        let mut weak: Vec<(NoteId, f64, f64, Tier, Option<String>)> = Vec::new();
        let mut after: Option<NoteId> = None;
        loop {
            let page = self.store.strength_rows(after.as_ref(), PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            for r in page {
                let s = r.state.at(now);
                if s < threshold {
                    let idle = (now - r.state.reference).num_seconds().max(0) as f64 / 86_400.0;
                    weak.push((r.id, s, idle, r.state.tier, r.project));
                }
            }
        }
        weak.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal));
        weak.truncate(limit);
        let ids: Vec<NoteId> = weak.iter().map(|w| w.0.clone()).collect();
        let notes: HashMap<NoteId, Note> = self
            .store
            .get_notes(&ids)
            .await?
            .into_iter()
            .map(|n| (n.id.clone(), n))
            .collect();
        Ok(weak
            .into_iter()
            .filter_map(|(id, strength, idle_days, tier, project)| {
                notes.get(&id).map(|n| ArchiveCandidate {
                    id,
                    content: n.content.clone(),
                    tier,
                    project,
                    strength,
                    idle_days,
                })
            })
            .collect())
    }

    /// Archives a note: it leaves default retrieval (and the in-memory indexes) but is
    /// kept, with its links and history, until the user restores or deletes it.
    pub async fn archive(&self, id: &NoteId, actor: &str) -> Result<Note, EngineError> {
        let note = self.require(id).await?;
        if note.status != NoteStatus::Active {
            return Err(EngineError::Invalid(kasten_core::CoreError::Invalid(
                format!(
                    "note {id} is {} and cannot be archived",
                    note.status.as_str()
                ),
            )));
        }
        let _order = self.index_order().await;
        if !self
            .store
            .change_status(
                id,
                NoteStatus::Active,
                NoteStatus::Archived,
                Action::Archive,
                actor,
                "archived by the user",
            )
            .await?
        {
            return Err(EngineError::Conflict(format!(
                "note {id} changed while it was being archived; try again"
            )));
        }
        let sync = self.index_sync();
        self.write_indexes()?.remove_note(id);
        sync.done();
        self.require(id).await
    }

    /// Restores an archived note into the active memory and its indexes.
    pub async fn restore_archived(&self, id: &NoteId, actor: &str) -> Result<Note, EngineError> {
        let note = self.require(id).await?;
        if note.status != NoteStatus::Archived {
            return Err(EngineError::Invalid(kasten_core::CoreError::Invalid(
                format!(
                    "note {id} is {}, not archived; nothing to restore",
                    note.status.as_str()
                ),
            )));
        }
        let _order = self.index_order().await;
        if !self
            .store
            .change_status(
                id,
                NoteStatus::Archived,
                NoteStatus::Active,
                Action::Restore,
                actor,
                "restored by the user",
            )
            .await?
        {
            return Err(EngineError::Conflict(format!(
                "note {id} changed while it was being restored; try again"
            )));
        }
        let sync = self.index_sync();
        self.index_note(id).await?;
        sync.done();
        self.require(id).await
    }

    /// Sets a note's tier (a project tier needs the project's name).
    pub async fn set_tier(
        &self,
        id: &NoteId,
        tier: Tier,
        project: Option<&str>,
    ) -> Result<Note, EngineError> {
        let project = project.map(str::trim).filter(|p| !p.is_empty());
        match (tier, project) {
            (Tier::Project, None) => {
                return Err(EngineError::Invalid(kasten_core::CoreError::Invalid(
                    "a project-tier note needs a project name (--project NAME)".into(),
                )));
            }
            (Tier::LongTerm | Tier::ShortTerm, Some(_)) => {
                return Err(EngineError::Invalid(kasten_core::CoreError::Invalid(
                    "only project-tier notes belong to a project".into(),
                )));
            }
            _ => {}
        }
        self.require(id).await?;
        self.store
            .set_tier(id, tier, project, Actor::User.as_str())
            .await?;
        if let Some(p) = project
            && !self.store.projects().await?.iter().any(|s| s.name == p)
        {
            self.store
                .set_project_active(p, true, Actor::User.as_str())
                .await?;
        }
        self.require(id).await
    }

    /// A word-valued field of the `retrieval` settings group, parsed (None: unset or not
    /// valid, so the default holds).
    async fn retrieval_word<T>(
        &self,
        field: &str,
        parse: fn(&str) -> Option<T>,
    ) -> Result<Option<T>, EngineError> {
        Ok(self
            .store
            .get_setting("retrieval")
            .await?
            .and_then(|v| v.get(field).and_then(|x| x.as_str().and_then(parse))))
    }

    /// Which retrievals reinforce (setting `retrieval.reinforce`, read at open).
    pub async fn reinforce_setting(&self) -> Result<ReinforceOn, EngineError> {
        Ok(self
            .retrieval_word("reinforce", ReinforceOn::parse)
            .await?
            .unwrap_or(ReinforceOn::All))
    }

    /// Whether search follows links (setting `retrieval.follow_links`, read at open).
    pub async fn follow_links_setting(&self) -> Result<AutoSwitch, EngineError> {
        Ok(self
            .retrieval_word("follow_links", AutoSwitch::parse)
            .await?
            .unwrap_or(AutoSwitch::Auto))
    }

    /// Whether chat searches with the LLM's terms (setting `retrieval.search_terms`, read
    /// at open).
    pub async fn search_terms_setting(&self) -> Result<AutoSwitch, EngineError> {
        Ok(self
            .retrieval_word("search_terms", AutoSwitch::parse)
            .await?
            .unwrap_or(AutoSwitch::Auto))
    }

    /// Whether the LLM in use is a small model on the guided prompts (`None`: no LLM).
    fn small_llm(&self) -> Option<bool> {
        self.llm
            .as_ref()
            .map(|llm| self.pipeline.profile.resolve(llm).guided())
    }

    /// Whether search follows links now: [`Engine::follow_links_setting`] (as last read)
    /// resolved for the LLM in use.
    pub fn follows_links(&self) -> bool {
        AutoSwitch::from_u8(self.follow_links.load(std::sync::atomic::Ordering::Relaxed))
            .resolve(self.small_llm())
    }

    /// Whether chat and `ask` search with the LLM's terms now:
    /// [`Engine::search_terms_setting`] (as last read); `auto` is off for every model —
    /// with the 1.5B the terms found more evidence but its answers were no better and each
    /// cost a call (docs/BENCHMARKS.md, "Search terms") — and never without an LLM.
    pub fn uses_search_terms(&self) -> bool {
        self.llm.is_some()
            && AutoSwitch::from_u8(self.search_terms.load(std::sync::atomic::Ordering::Relaxed))
                == AutoSwitch::On
    }

    /// Reads the retrieval settings the search path keeps at hand (at open, and when one
    /// of them is set).
    pub(crate) async fn refresh_retrieval_settings(&self) -> Result<(), EngineError> {
        self.strength_weight.store(self.strength_weight().await?);
        self.reinforce_on.store(
            self.reinforce_setting().await?.to_u8(),
            std::sync::atomic::Ordering::Relaxed,
        );
        self.follow_links.store(
            self.follow_links_setting().await?.to_u8(),
            std::sync::atomic::Ordering::Relaxed,
        );
        self.search_terms.store(
            self.search_terms_setting().await?.to_u8(),
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }

    /// [`Engine::reinforce_setting`] as last read.
    pub fn reinforce_on(&self) -> ReinforceOn {
        ReinforceOn::from_u8(self.reinforce_on.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// A note opened by a person or an agent (`kasten show`, MCP `get_memory`, the app's
    /// note detail): its detail, and the note reinforced as *retrieved* when the setting
    /// says every retrieval does. The detail is the one read before the reinforcement.
    pub async fn open_note(&self, id: &NoteId) -> Result<crate::NoteDetail, EngineError> {
        let detail = self.get(id).await?;
        if self.reinforce_on() == ReinforceOn::All {
            self.reinforce_quietly(std::slice::from_ref(id), Reinforce::Retrieved)
                .await;
        }
        Ok(detail)
    }

    /// Reinforces on behalf of a read: a failure is logged, never the read's failure (a
    /// search or an opened note is not lost because its bookkeeping could not be written).
    pub(crate) async fn reinforce_quietly(&self, ids: &[NoteId], why: Reinforce) {
        if let Err(err) = self.reinforce(ids, why).await {
            tracing::warn!(%err, notes = ids.len(), "could not reinforce the notes read");
        }
    }

    /// The retrieval weight of strength in force (setting `retrieval.strength_weight`).
    pub async fn strength_weight(&self) -> Result<f64, EngineError> {
        Ok(self
            .store
            .get_setting("retrieval")
            .await?
            .and_then(|v| v.get("strength_weight").and_then(|x| x.as_f64()))
            .filter(|x| (0.0..=1.0).contains(x))
            .unwrap_or(0.0))
    }

    pub async fn projects(&self) -> Result<Vec<crate::ProjectState>, EngineError> {
        Ok(crate::shell::into_all(self.store.projects().await?))
    }

    /// Opens or closes a project: notes of a closed project start to fade.
    pub async fn set_project_active(&self, name: &str, active: bool) -> Result<(), EngineError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(EngineError::Invalid(kasten_core::CoreError::Invalid(
                "the project name is empty".into(),
            )));
        }
        Ok(self
            .store
            .set_project_active(name, active, Actor::User.as_str())
            .await?)
    }

    pub(crate) async fn require(&self, id: &NoteId) -> Result<Note, EngineError> {
        self.store
            .get_note(id)
            .await?
            .ok_or_else(|| EngineError::NotFound(id.clone()))
    }

    /// Puts an active note (back) into the in-memory indexes from the store.
    pub(crate) async fn index_note(&self, id: &NoteId) -> Result<(), EngineError> {
        let note = self.require(id).await?;
        // a vector of another model (of the same dimension or not, as after a model swap
        // while the note was archived or merged) is made again
        let embedding = match self.store.embedding_with_model(id).await? {
            Some((v, model))
                if v.len() == self.embedder.dim()
                    && model.as_deref() == Some(self.embedder.model_id()) =>
            {
                v
            }
            _ => {
                let v = self.embed_query(&note.index_text()).await?;
                self.store
                    .set_embedding(id, &v, self.embedder.model_id())
                    .await?;
                v
            }
        };
        let links = self.store.links_of(id).await?;
        let mut ix = self.write_indexes()?;
        ix.add_note(&note, &embedding, &note.index_text())?;
        for l in links
            .iter()
            .filter(|l| l.status == kasten_core::LinkStatus::Accepted)
        {
            let other = if &l.from == id { &l.to } else { &l.from };
            if ix.vector.contains(other) {
                ix.add_link(&l.from, &l.to);
            }
        }
        Ok(())
    }
}
