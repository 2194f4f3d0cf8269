//! Import (any format, without duplicates), the Markdown vault export, and full backups.
//!
//! - [`Engine::import_notes`] saves what a parser of `kasten_core::transfer` /
//!   `kasten_core::markdown` produced. A note that is already in the memory is not saved
//!   again: the same `source` with the same content, or the id it carries (a Kasten export)
//!   with the same content. An id names one note: another file that carries it with
//!   other content (an exported file copied and edited) is a note of its own under a new
//!   id, recorded by its own file, and listed in [`ImportSummary::new_ids`]. New notes go
//!   in batches, each one transaction with their enrichment jobs (none for notes whose
//!   annotations are final); then the links, created by `import` and accepted, skipping
//!   those that exist.
//! - [`Engine::export_vault`] renders every note as an Obsidian file.
//! - [`Engine::backup`] / [`Engine::restore_backup`]: every table, exactly; a restore goes
//!   only into an empty memory and rebuilds the indexes after it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use chrono::Utc;
use kasten_core::markdown::{FileNamer, NoteView, RenderLink, base_file_name, render_note};
use kasten_core::transfer::{ImportLink, ImportNote};
use kasten_core::{CoreError, EnrichState, JobId, LinkStatus, Note, NoteId, NoteStatus};
use kasten_store::{ImportLinkWrite, NoteWrite};
use serde::Serialize;

use crate::read::{BackupFile, RestoreSummary, TableProgress, TableProgressFn};
use crate::{Engine, EngineError, ProgressFn};

/// Links written per transaction.
const LINK_BATCH: usize = 2000;

/// `todo` cut into runs of at most `most` items and, unless a run is a single item, at
/// most `max_bytes` of `bytes_of` each.
fn bounded_chunks(
    todo: &[usize],
    most: usize,
    max_bytes: usize,
    bytes_of: impl Fn(usize) -> usize,
) -> Vec<&[usize]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, &k) in todo.iter().enumerate() {
        let b = bytes_of(k);
        if i > start && (i - start == most || bytes + b > max_bytes) {
            out.push(&todo[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += b;
    }
    if start < todo.len() {
        out.push(&todo[start..]);
    }
    out
}
/// Notes read per page by an export.
const EXPORT_PAGE: usize = 500;

#[cfg(test)]
#[test]
fn import_batches_end_at_their_length_or_their_bytes() {
    let todo: Vec<usize> = (0..10).collect();
    let sizes = [1, 1, 1, 5, 1, 9, 1, 1, 1, 1];
    let cut = |most, max| {
        bounded_chunks(&todo, most, max, |k| sizes[k])
            .iter()
            .map(|c| c.len())
            .collect::<Vec<_>>()
    };
    assert_eq!(cut(4, 100), vec![4, 4, 2]);
    // 1+1+1 | 5+1 | 9 (over the bound alone, still written) | 1+1+1+1
    assert_eq!(cut(10, 6), vec![3, 2, 1, 4]);
    assert_eq!(cut(1, 0), vec![1; 10]);
    assert!(bounded_chunks(&[], 3, 3, |_| 1).is_empty());
}

/// What an import did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportSummary {
    /// Notes saved now.
    pub created: u64,
    /// Notes that were already in the memory (an earlier import of the same source).
    pub existing: u64,
    pub links_created: u64,
    /// Links that were already there (or repeated).
    pub links_existing: u64,
    /// Enrichment jobs queued (notes whose annotations were not final).
    pub queued: u64,
    /// The note of each imported item, in input order.
    pub ids: Vec<NoteId>,
    /// Items that carried the id of another note (a copy of an exported file, edited):
    /// each is a note of its own, under a new id.
    pub new_ids: Vec<NewId>,
}

/// An imported item that could not keep the id it carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewId {
    /// The file (or record) it came from.
    pub origin: String,
    /// The id it carried, which names another note.
    pub carried: NoteId,
    /// Its note's id.
    pub id: NoteId,
}

impl std::fmt::Display for NewId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: carries the id {} of another note; imported as note {}",
            self.origin, self.carried, self.id
        )
    }
}

/// Where an import stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportProgress {
    Notes { done: u64, total: u64 },
    Links { done: u64, total: u64 },
}

/// One file of an exported vault.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportFile {
    /// File name, with `.md`.
    pub name: String,
    pub text: String,
    pub note: NoteId,
}

/// A Box for the export: its label and members.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxLabel {
    pub label: String,
    pub members: Vec<NoteId>,
}

impl Engine {
    /// Each Box's label and members, as an export names the notes' folders.
    pub async fn export_boxes(&self) -> Result<Vec<BoxLabel>, EngineError> {
        Ok(self
            .boxes()
            .await?
            .into_iter()
            .map(|b| BoxLabel {
                label: b.label,
                members: b.members,
            })
            .collect())
    }

    /// Saves imported notes and the links between them, skipping what is already there.
    ///
    /// Takes the items: each note's text, annotations and source move into the store as
    /// its batch is saved, and the items are dropped before the links are written, so an
    /// import of 100k notes does not hold the whole vault until it ends.
    pub async fn import_notes(
        &self,
        mut items: Vec<ImportNote>,
        links: &[ImportLink],
        batch: usize,
        progress: &(dyn Fn(ImportProgress) + Send + Sync),
    ) -> Result<ImportSummary, EngineError> {
        let batch = batch.max(1);
        let t0 = std::time::Instant::now();
        let mut summary = ImportSummary::default();
        let mut ids: Vec<Option<NoteId>> = vec![None; items.len()];

        // 1. What is already there: by id (with the same content), then by source + content.
        // An id names one note: the memory's note of that id, or else the first item that
        // carries it. An item with that note's content is that note; any other item that
        // carries the id (an edited copy of an exported file) gets a new id and is
        // recorded by its own file, so that importing it again recognises it.
        let wanted: Vec<NoteId> = items.iter().filter_map(|i| i.id.clone()).collect();
        let by_id = self.store.contents_of(&wanted).await?;
        let mut fresh_id: Vec<bool> = vec![true; items.len()];
        {
            let mut named: HashMap<&NoteId, &str> = HashMap::new();
            for (k, item) in items.iter().enumerate() {
                let Some(id) = &item.id else {
                    continue;
                };
                let content = *named.entry(id).or_insert_with(|| {
                    by_id
                        .get(id)
                        .map_or(item.note.content.as_str(), String::as_str)
                });
                if content != item.note.content {
                    fresh_id[k] = false; // the id names another note
                } else if by_id.contains_key(id) {
                    ids[k] = Some(id.clone());
                }
            }
        }
        for (item, fresh) in items.iter_mut().zip(&fresh_id) {
            if !fresh && item.note.source.is_none() {
                item.note.source = item.file_source.clone();
            }
        }
        let mut sources: Vec<String> = items
            .iter()
            .zip(&ids)
            .filter(|(_, id)| id.is_none())
            .filter_map(|(i, _)| i.note.source.clone())
            .collect();
        sources.sort();
        sources.dedup();
        let mut by_key: HashMap<(Option<String>, String), NoteId> = HashMap::new();
        for chunk in sources.chunks(1000) {
            for (id, source, content) in self.store.notes_with_sources(chunk).await? {
                by_key.entry((source, content)).or_insert(id);
            }
        }
        for (k, item) in items.iter().enumerate() {
            if ids[k].is_some() {
                continue;
            }
            if item.note.source.is_some()
                && let Some(id) = by_key.get(&(item.note.source.clone(), item.note.content.clone()))
            {
                ids[k] = Some(id.clone());
            }
        }
        summary.existing = ids.iter().filter(|i| i.is_some()).count() as u64;

        // 2. New notes, in batches (the same item twice in one import is saved once). The
        // items are keyed by their own source and content, borrowed, not copied again (a
        // vault of 100k long notes would be held twice).
        let mut planned: HashMap<(&str, &str), usize> = HashMap::new();
        // the item that brings each kept id (a second item with it has the same content)
        let mut claimed: HashMap<&NoteId, usize> = HashMap::new();
        let mut todo: Vec<usize> = Vec::new();
        for (k, item) in items.iter().enumerate() {
            if ids[k].is_some() {
                continue;
            }
            let key = item
                .note
                .source
                .as_deref()
                .map(|source| (source, item.note.content.as_str()));
            let kept = item.id.as_ref().filter(|_| fresh_id[k]);
            let same = key
                .and_then(|key| planned.get(&key))
                .or_else(|| kept.and_then(|id| claimed.get(id)));
            if let Some(&j) = same {
                ids[k] = ids[j].clone();
                summary.existing += 1;
                continue;
            }
            let id = match kept {
                Some(id) => {
                    claimed.insert(id, k);
                    id.clone()
                }
                None => NoteId::generate(),
            };
            if let Some(key) = key {
                planned.insert(key, k);
            }
            ids[k] = Some(id);
            todo.push(k);
        }
        // the items that carried an id another note has
        for (k, item) in items.iter().enumerate() {
            if let (Some(carried), Some(id)) = (&item.id, &ids[k])
                && carried != id
            {
                summary.new_ids.push(NewId {
                    origin: item.origin.clone(),
                    carried: carried.clone(),
                    id: id.clone(),
                });
            }
        }
        let total = todo.len() as u64;
        tracing::info!(
            existing = summary.existing,
            new = total,
            ms = t0.elapsed().as_millis() as u64,
            "import: matched existing notes"
        );
        progress(ImportProgress::Notes { done: 0, total });
        let (mut embed_ms, mut store_ms) = (0u128, 0u128);
        let model = self.embedder.model_id().to_owned();
        let mut done = 0u64;
        // each batch is embedded while the store writes the one before it; its items'
        // texts move into the notes (they are not needed again)
        let begin = |chunk: &[usize], items: &mut [ImportNote]| {
            let now = Utc::now();
            let notes: Vec<Note> = chunk
                .iter()
                .map(|&k| {
                    let item = &mut items[k];
                    let set_by = kasten_core::provenance::all_set_by(
                        kasten_core::provenance::Annotations {
                            keywords: &item.keywords,
                            tags: &item.tags,
                            context: &item.context,
                        },
                        kasten_core::provenance::SetBy::Import,
                    );
                    Note {
                        id: ids[k].clone().unwrap_or_else(NoteId::generate),
                        content: std::mem::take(&mut item.note.content),
                        created_at: item.note.created_at.unwrap_or(now),
                        updated_at: now,
                        keywords: std::mem::take(&mut item.keywords),
                        tags: std::mem::take(&mut item.tags),
                        context: std::mem::take(&mut item.context),
                        status: if item.archived {
                            NoteStatus::Archived
                        } else {
                            NoteStatus::Active
                        },
                        enrich_state: if item.enriched {
                            EnrichState::Done
                        } else {
                            EnrichState::Pending { reason: None }
                        },
                        source: item.note.source.take(),
                        strength: 1.0,
                        access_count: 0,
                        last_accessed: None,
                        version: 1,
                        tier: Default::default(),
                        project: None,
                        added_at: now,
                        set_by,
                    }
                })
                .collect::<Vec<Note>>();
            let texts: Vec<String> = notes.iter().map(Note::index_text).collect();
            let embedding = self.spawn_embed(texts);
            (notes, embedding)
        };
        // a batch is one transaction: it ends at its length in notes or at about
        // BULK_WRITE_BYTES of text, whichever comes first
        let mut chunks = bounded_chunks(&todo, batch, kasten_store::BULK_WRITE_BYTES, |k| {
            let it = &items[k];
            it.note.content.len() + it.context.len() + it.note.source.as_deref().map_or(0, str::len)
        })
        .into_iter();
        // room for the batches' notes at once, not by doubling as they come (at 100k notes
        // a doubling holds the old and the new copy of the vector codes together)
        self.write_indexes()?.reserve(todo.len());
        let mut next = chunks.next().map(|c| (c, begin(c, &mut items)));
        while let Some((chunk, (notes, embedding))) = next.take() {
            let (texts, vectors, took) = embedding.wait().await?;
            embed_ms += took.as_millis();
            next = chunks.next().map(|c| (c, begin(c, &mut items)));
            let writes: Vec<NoteWrite> = chunk
                .iter()
                .zip(&notes)
                .zip(&vectors)
                .map(|((&k, n), v)| NoteWrite {
                    note: n.clone(),
                    embedding: Some(v.clone()),
                    embed_model: Some(model.clone()),
                    job: (!items[k].enriched).then(JobId::generate),
                })
                .collect();
            summary.queued += writes.iter().filter(|w| w.job.is_some()).count() as u64;
            let ts = std::time::Instant::now();
            let _order = self.index_order().await;
            self.store.insert_notes(&writes).await?;
            let sync = self.index_sync();
            store_ms += ts.elapsed().as_millis();
            self.write_indexes()?
                .add_new_notes(&notes, &vectors, &texts)?;
            sync.done();
            done += chunk.len() as u64;
            summary.created += chunk.len() as u64;
            progress(ImportProgress::Notes { done, total });
        }

        tracing::info!(
            embed_ms,
            store_ms,
            ms = t0.elapsed().as_millis() as u64,
            "import: notes saved"
        );
        drop(items);
        // 3. Links between imported notes.
        let id_of = |k: usize| -> Result<NoteId, EngineError> {
            ids.get(k).cloned().flatten().ok_or_else(|| {
                EngineError::Invalid(CoreError::Invalid(format!(
                    "an imported link names item {k}, which is not in the import"
                )))
            })
        };
        let now = Utc::now();
        let mut writes = Vec::with_capacity(links.len());
        for l in links {
            let (from, to) = (id_of(l.from)?, id_of(l.to)?);
            if from == to {
                continue;
            }
            writes.push(ImportLinkWrite {
                from,
                to,
                kind: l.kind.clone(),
                reason: l.reason.clone(),
                confidence: l.confidence,
                status: l.status,
                created_at: now,
            });
        }
        let total = writes.len() as u64;
        let mut done = 0u64;
        progress(ImportProgress::Links { done, total });
        for chunk in writes.chunks(LINK_BATCH) {
            let _order = self.index_order().await;
            let created = self.store.insert_import_links(chunk).await?;
            let sync = self.index_sync();
            summary.links_created += created;
            summary.links_existing += chunk.len() as u64 - created;
            let mut ix = self.write_indexes()?;
            for l in chunk.iter().filter(|l| l.status == LinkStatus::Accepted) {
                if ix.vector.contains(&l.from) && ix.vector.contains(&l.to) {
                    ix.add_link(&l.from, &l.to);
                }
            }
            drop(ix);
            sync.done();
            done += chunk.len() as u64;
            progress(ImportProgress::Links { done, total });
        }
        tracing::info!(ms = t0.elapsed().as_millis() as u64, "import: links saved");
        // every item has its note by now (found, or created above)
        summary.ids = ids.into_iter().flatten().collect();
        Ok(summary)
    }

    /// Every note as an Obsidian Markdown file (oldest first), with its accepted outgoing
    /// links and the Boxes it belongs to. Holds every file: for large memories use
    /// [`Engine::export_vault_each`].
    pub async fn export_vault(&self, boxes: &[BoxLabel]) -> Result<Vec<ExportFile>, EngineError> {
        let mut files = Vec::new();
        let order = self
            .export_vault_each(
                boxes,
                &mut |f| {
                    files.push(f);
                    Ok(())
                },
                &|_, _| {},
            )
            .await?;
        let rank: HashMap<&NoteId, usize> =
            order.iter().enumerate().map(|(i, id)| (id, i)).collect();
        files.sort_by_key(|f| rank.get(&f.note).copied().unwrap_or(usize::MAX));
        Ok(files)
    }

    /// Renders every note as an Obsidian Markdown file and hands each to `sink`, a page
    /// of notes at a time: memory holds one page and the file names (names are unique in
    /// the notes' time order, as [`kasten_core::markdown::file_names`] gives them).
    /// `progress` gets (files done, total). Returns the note ids oldest first.
    pub async fn export_vault_each(
        &self,
        boxes: &[BoxLabel],
        sink: &mut (dyn FnMut(ExportFile) -> Result<(), EngineError> + Send),
        progress: &(dyn Fn(u64, u64) + Send + Sync),
    ) -> Result<Vec<NoteId>, EngineError> {
        // 1. file names, given in time order (each note's base name from one pass)
        let mut bases: Vec<(chrono::DateTime<Utc>, NoteId, String)> = Vec::new();
        let mut after: Option<NoteId> = None;
        loop {
            let page = self.store.notes_after(after.as_ref(), EXPORT_PAGE).await?;
            let full = page.len() == EXPORT_PAGE;
            for n in &page {
                bases.push((
                    n.created_at,
                    n.id.clone(),
                    base_file_name(&NoteView::from(n)),
                ));
            }
            after = page.last().map(|n| n.id.clone());
            if !full || after.is_none() {
                break;
            }
        }
        bases.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut namer = FileNamer::default();
        let order: Vec<NoteId> = bases.iter().map(|b| b.1.clone()).collect();
        let names: HashMap<NoteId, String> = bases
            .into_iter()
            .map(|(_, id, base)| (id, namer.unique(base)))
            .collect();
        let mut box_of: HashMap<&NoteId, Vec<String>> = HashMap::new();
        for b in boxes {
            for m in &b.members {
                box_of.entry(m).or_default().push(b.label.clone());
            }
        }
        // 2. the files, a page of notes and their links at a time
        let total = names.len() as u64;
        let mut done = 0u64;
        progress(done, total);
        let mut after: Option<NoteId> = None;
        loop {
            let page = self.store.notes_after(after.as_ref(), EXPORT_PAGE).await?;
            let full = page.len() == EXPORT_PAGE;
            let ids: Vec<NoteId> = page.iter().map(|n| n.id.clone()).collect();
            let mut out_links: HashMap<String, Vec<RenderLink>> = HashMap::new();
            for l in self.store.accepted_links_from(&ids).await? {
                let Ok(to) = NoteId::parse(&l.to) else {
                    continue;
                };
                let Some(target) = names.get(&to) else {
                    continue;
                };
                out_links
                    .entry(l.from.clone())
                    .or_default()
                    .push(RenderLink {
                        target: target.clone(),
                        kind: l.kind.to_string(),
                        reason: l.reason,
                        confidence: l.confidence,
                        status: LinkStatus::Accepted,
                    });
            }
            for n in &page {
                // a note written since the names were given is left for the next export
                let Some(name) = names.get(&n.id) else {
                    continue;
                };
                let links = out_links.remove(n.id.as_str()).unwrap_or_default();
                let boxes = box_of.get(&n.id).cloned().unwrap_or_default();
                sink(ExportFile {
                    name: format!("{name}.md"),
                    text: render_note(NoteView::from(n), &boxes, &links),
                    note: n.id.clone(),
                })?;
                done += 1;
            }
            progress(done, total);
            after = page.last().map(|n| n.id.clone());
            if !full || after.is_none() {
                break;
            }
        }
        Ok(order)
    }

    /// Everything in the memory as one JSON document (held in memory whole: for large
    /// memories use [`Engine::backup_to_file`]).
    pub async fn backup(&self) -> Result<serde_json::Value, EngineError> {
        Ok(self.store.backup().await?)
    }

    /// Writes a full backup to `file`, a page of rows at a time, through a temporary file
    /// of its own in the same folder (a new name, never a file that is there already) that
    /// is synced and renamed at the end: a failure leaves no half file and touches nothing
    /// else in the folder. Returns the rows written per table.
    pub async fn backup_to_file(
        &self,
        file: &Path,
        progress: TableProgressFn<'_>,
    ) -> Result<BTreeMap<String, u64>, EngineError> {
        let dir = match file.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        // the file's name starts the temporary one's (cut so that it stays a valid name)
        let mut name = String::new();
        for c in file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
        {
            if name.len() + c.len_utf8() > 100 {
                break;
            }
            name.push(c);
        }
        // removed when dropped: on an error, and when the caller stops waiting
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".partial")
            .tempfile_in(dir)
            .map_err(|e| {
                EngineError::File(format!(
                    "cannot create a temporary file in {}: {e}",
                    dir.display()
                ))
            })?;
        let shown = tmp.path().display().to_string();
        let mut w = std::io::BufWriter::with_capacity(1 << 16, tmp);
        let rows = |p: &kasten_store::TableProgress| progress(&TableProgress::from(p));
        let counts = self.store.write_backup(&mut w, &rows).await?;
        let tmp = w
            .into_inner()
            .map_err(|e| EngineError::File(format!("cannot write {shown}: {e}")))?;
        tmp.as_file()
            .sync_all()
            .map_err(|e| EngineError::File(format!("cannot write {shown}: {e}")))?;
        tmp.persist(file).map_err(|e| {
            EngineError::File(format!("cannot write {}: {}", file.display(), e.error))
        })?;
        // the rename itself made durable (best effort: not every file system syncs a folder)
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        Ok(counts)
    }

    /// Restores a backup file ([`BackupFile::scan`] read it whole and found it sound) into
    /// this memory, which must be empty, then rebuilds the indexes from it. The rows are
    /// read from the file a batch at a time.
    pub async fn restore_backup_file(
        &self,
        file: &BackupFile,
        progress: TableProgressFn<'_>,
        loading: ProgressFn<'_>,
    ) -> Result<RestoreSummary, EngineError> {
        self.refuse_unless_empty().await?;
        let summary = {
            let _order = self.index_order().await;
            let rows = |p: &kasten_store::TableProgress| progress(&TableProgress::from(p));
            self.store.restore_file(&file.0, &rows).await?
        };
        let sync = self.index_sync();
        self.load(loading).await?;
        sync.done();
        Ok(summary.into())
    }

    async fn refuse_unless_empty(&self) -> Result<(), EngineError> {
        let busy = self.store.non_empty_tables().await?;
        if !busy.is_empty() {
            let list: Vec<String> = busy.iter().map(|(t, n)| format!("{n} {t}")).collect();
            return Err(EngineError::Invalid(CoreError::Invalid(format!(
                "a backup is restored only into an empty memory, and this one holds {}; use a new --db location (or KASTEN_DB) for the restore, or `kasten restore --replace FILE` to put the backup in this memory's place (the memory as it is is kept beside it)",
                list.join(", ")
            ))));
        }
        Ok(())
    }

    /// Restores a backup into this memory, which must be empty (a memory only opened has
    /// settings, which the backup's replace), then rebuilds the indexes from it.
    pub async fn restore_backup(
        &self,
        backup: &serde_json::Value,
        progress: ProgressFn<'_>,
    ) -> Result<RestoreSummary, EngineError> {
        self.refuse_unless_empty().await?;
        // the load after it reads everything back from the store (and re-embeds under
        // the write order itself)
        let summary = {
            let _order = self.index_order().await;
            self.store.restore(backup).await?
        };
        let sync = self.index_sync();
        self.load(progress).await?;
        sync.done();
        Ok(summary.into())
    }
}
