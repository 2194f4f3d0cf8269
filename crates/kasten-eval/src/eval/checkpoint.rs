//! Checkpoints of an enriching ingest in a folder of the caller's choice (`--checkpoint`).
//!
//! The cached memory under `$KASTEN_HOME/eval` resumes an interrupted run on the same
//! machine; a run with a real model takes longer than a work session, and the next session
//! may be on a new machine with an empty cache. A checkpoint is what carries it over: a
//! gzipped full backup of the memory (the same rows `kasten backup` writes) and the ingest's
//! progress file, kept in a folder that travels (a repository, a shared disk). A run that
//! finds no cached memory but a checkpoint restores the backup and goes on after the last
//! note it holds.
//!
//! Layout: `<checkpoint>/<cache name>/memory.json.gz` and one progress file, the partial
//! one while the ingest runs, the complete marker once it has finished. Each is replaced
//! through a temporary file and a rename, the memory before the progress: a run stopped
//! between the two leaves a progress file one step behind the memory, which only
//! undercounts the notes enriched before the stop (the resume counts the notes themselves).

use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use kasten_engine::{BackupFile, Engine};

use super::model::{COMPLETE, PARTIAL};

const MEMORY: &str = "memory.json.gz";

/// One conversation's checkpoint folder.
pub(crate) struct Checkpoint {
    dir: PathBuf,
    /// How often a running ingest writes it (and always when it ends).
    every: Duration,
    last: std::sync::Mutex<Instant>,
}

impl Checkpoint {
    /// The checkpoint of the memory cached at `cache_dir`, kept under `root`.
    pub(crate) fn new(root: &Path, cache_dir: &Path, every: Duration) -> Result<Self> {
        let Some(name) = cache_dir.file_name() else {
            bail!(
                "the cached memory {} has no folder name",
                cache_dir.display()
            );
        };
        Ok(Self {
            dir: root.join(name),
            every,
            last: std::sync::Mutex::new(Instant::now()),
        })
    }

    /// The progress file the checkpoint holds (the complete marker wins), if any.
    fn progress(&self) -> Option<&'static str> {
        [COMPLETE, PARTIAL]
            .into_iter()
            .find(|f| self.dir.join(f).is_file())
    }

    /// Whether there is a checkpoint to restore.
    pub(crate) fn exists(&self) -> bool {
        self.dir.join(MEMORY).is_file() && self.progress().is_some()
    }

    /// Restores the checkpoint into `engine`, a memory just opened at `cache_dir` and empty,
    /// and puts its progress file beside it, so the run goes on as if the memory had been
    /// cached here.
    pub(crate) async fn restore(&self, engine: &Engine, cache_dir: &Path) -> Result<()> {
        let Some(progress) = self.progress() else {
            bail!("no checkpoint in {}", self.dir.display());
        };
        let packed = self.dir.join(MEMORY);
        let plain = cache_dir.join(".checkpoint-restore.json");
        unpack(&packed, &plain)?;
        let result = async {
            let file = BackupFile::scan(&plain)
                .with_context(|| format!("the checkpoint {} is damaged", packed.display()))?;
            engine
                .restore_backup_file(&file, &|_| {}, &|_| {})
                .await
                .with_context(|| format!("cannot restore the checkpoint {}", packed.display()))?;
            copy_atomic(&self.dir.join(progress), &cache_dir.join(progress))
        }
        .await;
        let _ = std::fs::remove_file(&plain);
        result
    }

    /// Whether a running ingest should write its checkpoint now.
    pub(crate) fn due(&self) -> bool {
        self.last
            .lock()
            .map(|t| t.elapsed() >= self.every)
            .unwrap_or(true)
    }

    /// Writes the memory at `cache_dir` (open in `engine`) and its progress file (partial
    /// or complete) into the checkpoint, replacing the one there.
    pub(crate) async fn save(&self, engine: &Engine, cache_dir: &Path) -> Result<()> {
        let progress = [COMPLETE, PARTIAL]
            .into_iter()
            .find(|f| cache_dir.join(f).is_file());
        let Some(progress) = progress else {
            bail!(
                "the cached memory {} has no progress file to checkpoint",
                cache_dir.display()
            );
        };
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        let plain = cache_dir.join(".checkpoint-backup.json");
        let result = async {
            engine
                .backup_to_file(&plain, &|_| {})
                .await
                .context("cannot back up the memory for its checkpoint")?;
            pack(&plain, &self.dir.join(MEMORY))?;
            copy_atomic(&cache_dir.join(progress), &self.dir.join(progress))?;
            // a complete marker replaces the partial progress
            if progress == COMPLETE {
                let _ = std::fs::remove_file(self.dir.join(PARTIAL));
            }
            Ok(())
        }
        .await;
        let _ = std::fs::remove_file(&plain);
        if let Ok(mut t) = self.last.lock() {
            *t = Instant::now();
        }
        result
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Replaces `to` with a copy of `from` (through a temporary file and a rename).
fn copy_atomic(from: &Path, to: &Path) -> Result<()> {
    let tmp = tmp_beside(to);
    std::fs::copy(from, &tmp)
        .and_then(|_| std::fs::rename(&tmp, to))
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    Ok(())
}

fn tmp_beside(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Gzips `from` into `to` (through a temporary file, synced, and a rename).
fn pack(from: &Path, to: &Path) -> Result<()> {
    let tmp = tmp_beside(to);
    let write = || -> std::io::Result<()> {
        let mut input = BufReader::new(std::fs::File::open(from)?);
        let out = std::fs::File::create(&tmp)?;
        let mut gz = GzEncoder::new(BufWriter::new(out), Compression::default());
        std::io::copy(&mut input, &mut gz)?;
        let out = gz.finish()?.into_inner().map_err(|e| e.into_error())?;
        out.sync_all()?;
        std::fs::rename(&tmp, to)
    };
    write().with_context(|| format!("cannot write the checkpoint {}", to.display()))
}

/// Un-gzips `from` into `to`.
fn unpack(from: &Path, to: &Path) -> Result<()> {
    let read = || -> std::io::Result<()> {
        let mut gz = GzDecoder::new(BufReader::new(std::fs::File::open(from)?));
        let mut out = BufWriter::new(std::fs::File::create(to)?);
        std::io::copy(&mut gz, &mut out)?;
        out.flush()
    };
    read().with_context(|| format!("cannot read the checkpoint {}", from.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_file_unpacks_to_the_same_bytes_and_a_cut_one_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let plain = d.path().join("a.json");
        let body: String = (0..5_000).map(|i| format!("{{\"n\":{i}}}\n")).collect();
        std::fs::write(&plain, &body).unwrap();
        let packed = d.path().join("a.json.gz");
        pack(&plain, &packed).unwrap();
        assert!(!tmp_beside(&packed).exists());
        let back = d.path().join("b.json");
        unpack(&packed, &back).unwrap();
        assert_eq!(std::fs::read_to_string(&back).unwrap(), body);
        // a checkpoint cut off in transit says so instead of restoring half a memory
        let bytes = std::fs::read(&packed).unwrap();
        std::fs::write(&packed, &bytes[..bytes.len() / 2]).unwrap();
        let err = unpack(&packed, &back).unwrap_err();
        assert!(
            format!("{err:#}").contains("cannot read the checkpoint"),
            "{err:#}"
        );
    }

    #[test]
    fn the_checkpoint_is_named_after_the_cached_memory() {
        let c = Checkpoint::new(
            Path::new("/runs"),
            Path::new("/cache/eval/abc-conv-26-llm-x-v1"),
            Duration::from_secs(600),
        )
        .unwrap();
        assert_eq!(c.dir(), Path::new("/runs/abc-conv-26-llm-x-v1"));
        assert!(!c.exists());
    }
}
