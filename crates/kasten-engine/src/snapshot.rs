//! The index snapshot: the in-memory indexes saved in one file in an embedded memory's
//! directory, so that opening it does not rebuild them from the store.
//!
//! A snapshot is trusted only when the store vouches for it: a clean close writes the
//! file (temporary file, fsync, rename, fsync of the directory) and then stores its
//! generation ([`kasten_store::Store::seal_snapshot`]); the first write of a later
//! session that changes indexed data removes that seal before it writes. A crash, a
//! write after the snapshot, a close whose indexes may have missed a write, a damaged
//! or truncated file, another format version or another embedding model: each makes
//! the open rebuild from the store, as it did before snapshots existed.
//!
//! Layout (little-endian): the header — magic `KASTENIX`, format version, generation,
//! embedding model id and dimension, payload length, CRC-32 of the payload, rows length,
//! CRC-32 of the rows, CRC-32 of the header bytes before it — then the payload: vector
//! index without its f32 rows, BM25 index, timeline, link adjacency, each in the byte
//! format of `kasten_core::snapshot`; then the rows: the vector index's f32 rows in slot
//! order.
//!
//! The rows stay in the file: the vector index reads the few it rescores per query from
//! it ([`FileRows`]) instead of holding 1.5 KiB per note in RAM. That is sound because the
//! file is never modified in place: [`write_temp`] writes a new file beside it and
//! renames it over the old one, so the open handle keeps reading the bytes whose checksum
//! [`read`] verified, even after a close in this process has replaced the file (no other
//! process writes it: one process owns an embedded store). Everything is checked before
//! the index is used; a row that later cannot be read is an error of that search.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kasten_core::bm25::TextIndex;
use kasten_core::snapshot::{Decoder, Encoder, SnapshotError};
use kasten_core::timeline::Timeline;
use kasten_core::vector::{RowSource, RowSpill, VectorIndex};
use kasten_core::{CoreError, NoteId};
use kasten_store::Endpoint;
use thiserror::Error;

use crate::Indexes;

const MAGIC: &[u8; 8] = b"KASTENIX";
/// Bumped whenever the layout of the header or of any index changes.
/// 2: the vector index's f32 rows moved out of the payload to the end of the file.
/// 3: the BM25 index holds the unigrams of CJK text too (an older index lacks them).
pub(crate) const FORMAT_VERSION: u32 = 3;
/// Headers are small (two ids and a model name); a longer one is damage.
const HEADER_MAX: u64 = 64 * 1024;

/// Why a snapshot file was not used.
#[derive(Debug, Error)]
pub(crate) enum SnapshotFileError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Format(#[from] SnapshotError),
    #[error(transparent)]
    Rows(#[from] CoreError),
    #[error("{0}")]
    Mismatch(String),
}

/// What a snapshot must have been written for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expect<'a> {
    pub generation: &'a str,
    pub model: &'a str,
    pub dim: usize,
}

/// Where the snapshot of a memory lives: in an embedded store's directory
/// ([`kasten_store::SNAPSHOT_FILE`]), so the memory stays one folder (copied, moved or
/// deleted together). Other endpoints have no snapshot.
pub(crate) fn path_for(endpoint: &Endpoint) -> Option<PathBuf> {
    match endpoint {
        Endpoint::SurrealKv(dir) => Some(dir.join(kasten_store::SNAPSHOT_FILE)),
        _ => None,
    }
}

/// Why a snapshot could not be written.
#[derive(Debug, Error)]
pub(crate) enum WriteError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Rows left in the previous snapshot file could not be read.
    #[error(transparent)]
    Rows(#[from] CoreError),
}

/// Bytes a section is encoded into before it is written out: the file is written in
/// pieces of about this size, never held whole in memory (230 MB at 100k notes). Tests
/// use a few hundred bytes, so their small memories go through every flush in the middle
/// of a section (links, rows) that a large memory does.
const FLUSH_BYTES: usize = if cfg!(test) { 256 } else { 1 << 20 };

/// A snapshot written to its temporary file, not yet synced or in place ([`Written::commit`]).
pub(crate) struct Written {
    file: std::fs::File,
    tmp: PathBuf,
    pub bytes: u64,
}

/// Counts and checksums what goes into the file.
struct Sink<'a> {
    file: &'a mut std::io::BufWriter<std::fs::File>,
    crc: crc32fast::Hasher,
    len: u64,
}

impl Sink<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc.update(bytes);
        self.len += bytes.len() as u64;
        self.file.write_all(bytes)
    }

    /// Writes what `e` holds and clears it.
    fn flush(&mut self, e: &mut Encoder) -> std::io::Result<()> {
        self.write(e.as_bytes())?;
        e.clear();
        Ok(())
    }
}

fn header(meta: Expect<'_>, payload: (u64, u32), rows: (u64, u32)) -> Vec<u8> {
    let mut h = Encoder::new();
    for &b in MAGIC {
        h.u8(b);
    }
    h.u32(FORMAT_VERSION);
    h.str(meta.generation);
    h.str(meta.model);
    h.len32(meta.dim);
    h.u64(payload.0);
    h.u32(payload.1);
    h.u64(rows.0);
    h.u32(rows.1);
    let header_crc = crc32fast::hash(h.as_bytes());
    h.u32(header_crc);
    h.into_bytes()
}

/// Writes the snapshot of `ix` (header, payload, rows) to a temporary file beside `path`,
/// one section at a time: the header's place is kept and filled in last, when the
/// lengths and checksums are known. Memory needed: the largest section but the rows (the
/// BM25 index, the vector index without its rows), not the whole file.
pub(crate) fn write_temp(
    path: &Path,
    ix: &Indexes,
    meta: Expect<'_>,
) -> Result<Written, WriteError> {
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = (|| {
        let mut file = std::io::BufWriter::with_capacity(FLUSH_BYTES, std::fs::File::create(&tmp)?);
        // the header has a fixed size for given meta: its place first, its bytes last
        let header_len = header(meta, (0, 0), (0, 0)).len();
        file.write_all(&vec![0u8; header_len])?;

        let mut payload = Sink {
            file: &mut file,
            crc: crc32fast::Hasher::new(),
            len: 0,
        };
        let mut e = Encoder::with_capacity(2 * FLUSH_BYTES).draining_at(FLUSH_BYTES);
        {
            // every section hands over its bytes as they pile up, the indexes too: the
            // buffer stays ~1 MB (encoded whole, a 100k-note vector index was a 45 MB
            // buffer grown by doubling, a spike at the end of a vault import)
            let mut drain = |e: &mut Encoder| payload.flush(e);
            ix.vector.encode_drained(&mut e, &mut drain)?;
            ix.text.encode_drained(&mut e, &mut drain)?;
            ix.timeline.encode_drained(&mut e, &mut drain)?;
            e.len32(ix.links.len());
            for (from, to) in &ix.links {
                e.id(from);
                e.len32(to.len());
                for t in to {
                    e.id(t);
                }
                e.drain_if_full(&mut drain)?;
            }
            drain(&mut e)?;
        }
        let payload = (payload.len, payload.crc.finalize());
        drop(e);

        let mut rows = Sink {
            file: &mut file,
            crc: crc32fast::Hasher::new(),
            len: 0,
        };
        let mut e = Encoder::with_capacity(FLUSH_BYTES + 4 * ix.vector.dim());
        let mut failed: Option<std::io::Error> = None;
        ix.vector.for_each_vector(|_, row| {
            if failed.is_some() {
                return;
            }
            e.f32s(row);
            if e.len() >= FLUSH_BYTES
                && let Err(err) = rows.flush(&mut e)
            {
                failed = Some(err);
            }
        })?;
        if let Some(err) = failed {
            return Err(WriteError::Io(err));
        }
        rows.flush(&mut e)?;
        let rows = (rows.len, rows.crc.finalize());

        let head = header(meta, payload, rows);
        let mut file = file.into_inner().map_err(|e| e.into_error())?;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
        file.write_all(&head)?;
        Ok(Written {
            file,
            tmp: tmp.clone(),
            bytes: head.len() as u64 + payload.0 + rows.0,
        })
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

impl Written {
    /// Puts the file in place of `path` so that a crash leaves either the old file or the
    /// new one, complete: fsync, rename, fsync of the folder.
    pub(crate) fn commit(self, path: &Path) -> std::io::Result<()> {
        let Written { file, tmp, .. } = self;
        let done = (|| {
            file.sync_all()?;
            drop(file);
            std::fs::rename(&tmp, path)
        })();
        if let Err(e) = done {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

/// What the header says about the rest of the file.
#[derive(Debug)]
struct Header {
    len: u64,
    payload_len: u64,
    payload_crc: u32,
    rows_len: u64,
    rows_crc: u32,
}

/// Checks the header at the start of `bytes` and what it was written for.
fn decode_header(bytes: &[u8], want: Expect<'_>) -> Result<Header, SnapshotFileError> {
    let mismatch = |m: String| SnapshotFileError::Mismatch(m);
    let mut d = Decoder::new(bytes);
    let mut magic = [0u8; 8];
    for b in &mut magic {
        *b = d.u8()?;
    }
    if &magic != MAGIC {
        return Err(mismatch("not a Kasten index snapshot".into()));
    }
    let version = d.u32()?;
    if version != FORMAT_VERSION {
        return Err(mismatch(format!(
            "format version {version}, this build reads {FORMAT_VERSION}"
        )));
    }
    let generation = d.str()?.to_owned();
    let model = d.str()?.to_owned();
    let dim = d.u32()? as usize;
    let payload_len = d.u64()?;
    let payload_crc = d.u32()?;
    let rows_len = d.u64()?;
    let rows_crc = d.u32()?;
    let header_len = bytes.len() - d.remaining();
    let header_crc = d.u32()?;
    if crc32fast::hash(&bytes[..header_len]) != header_crc {
        return Err(mismatch("the header's checksum does not match".into()));
    }
    if generation != want.generation {
        return Err(mismatch(format!(
            "it is generation {generation}, the store vouches for {}",
            want.generation
        )));
    }
    if model != want.model || dim != want.dim {
        return Err(mismatch(format!(
            "it was written for model {model} ({dim} dimensions), the memory uses {} ({})",
            want.model, want.dim
        )));
    }
    Ok(Header {
        len: (bytes.len() - d.remaining()) as u64,
        payload_len,
        payload_crc,
        rows_len,
        rows_crc,
    })
}

/// Reads exactly `out.len()` bytes at `offset` without moving a cursor (the handle is
/// shared by every search).
fn read_exact_at(file: &std::fs::File, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, out, offset)
    }
    #[cfg(windows)]
    {
        let (mut done, mut out) = (0u64, out);
        while !out.is_empty() {
            match std::os::windows::fs::FileExt::seek_read(file, out, offset + done) {
                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    out = &mut out[n..];
                    done += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The vector index's f32 rows, read from the snapshot file they were loaded with.
#[derive(Debug)]
pub(crate) struct FileRows {
    file: std::fs::File,
    /// Where the rows start in the file.
    start: u64,
}

impl RowSource for FileRows {
    fn read_at(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        read_exact_at(&self.file, self.start + offset, out)
    }
}

/// Where a growing index's f32 rows go while the memory has no snapshot to read them
/// from (a rebuild, a restore, a bulk import into a new memory): an unnamed file in the
/// memory's folder, gone when it is closed (or the process dies). The next snapshot
/// copies the rows out of it.
#[derive(Debug)]
pub(crate) struct SpillFile {
    file: std::fs::File,
    /// Bytes appended so far (appends come from the one writer of the indexes).
    len: std::sync::Mutex<u64>,
}

impl SpillFile {
    /// A new, empty spill file in `dir`.
    pub(crate) fn create_in(dir: &Path) -> std::io::Result<Self> {
        Ok(SpillFile {
            file: tempfile::tempfile_in(dir)?,
            len: std::sync::Mutex::new(0),
        })
    }
}

impl RowSource for SpillFile {
    fn read_at(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        read_exact_at(&self.file, offset, out)
    }
}

impl RowSpill for SpillFile {
    fn append(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut len = self
            .len
            .lock()
            .map_err(|_| std::io::Error::other("the spill file's lock is poisoned"))?;
        write_all_at(&self.file, *len, bytes)?;
        *len += bytes.len() as u64;
        Ok(())
    }
}

/// Writes all of `bytes` at `offset` without moving a cursor.
fn write_all_at(file: &std::fs::File, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
    }
    #[cfg(windows)]
    {
        let (mut done, mut bytes) = (0u64, bytes);
        while !bytes.is_empty() {
            match std::os::windows::fs::FileExt::seek_write(file, bytes, offset + done) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    bytes = &bytes[n..];
                    done += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Reads the snapshot at `path` if it is the one `want` describes: the header, the
/// payload into RAM, the rows only through their checksum (they stay in the file).
pub(crate) fn read(path: &Path, want: Expect<'_>) -> Result<Indexes, SnapshotFileError> {
    let mismatch = |m: String| SnapshotFileError::Mismatch(m);
    let file = std::fs::File::open(path)?;
    let file_len = file.metadata()?.len();
    let mut head = vec![0u8; usize::try_from(file_len.min(HEADER_MAX)).unwrap_or(0)];
    read_exact_at(&file, 0, &mut head)?;
    let h = decode_header(&head, want)?;
    drop(head);
    let expected = h
        .len
        .checked_add(h.payload_len)
        .and_then(|n| n.checked_add(h.rows_len));
    if expected != Some(file_len) {
        return Err(mismatch(format!(
            "the file is {file_len} bytes, the header says {}",
            expected.map_or_else(|| "more".to_owned(), |n| n.to_string())
        )));
    }
    let mut payload = vec![0u8; usize::try_from(h.payload_len).unwrap_or(0)];
    read_exact_at(&file, h.len, &mut payload)?;
    if crc32fast::hash(&payload) != h.payload_crc {
        return Err(mismatch("the payload's checksum does not match".into()));
    }
    // the rows' checksum, read in pieces: they are not kept
    let rows_start = h.len + h.payload_len;
    let mut crc = crc32fast::Hasher::new();
    let mut rows = std::io::BufReader::with_capacity(1 << 20, &file);
    std::io::Seek::seek(&mut rows, std::io::SeekFrom::Start(rows_start))?;
    let mut rows = rows.take(h.rows_len);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = rows.read(&mut buf)?;
        if n == 0 {
            break;
        }
        crc.update(&buf[..n]);
    }
    drop(buf);
    if crc.finalize() != h.rows_crc {
        return Err(mismatch("the vectors' checksum does not match".into()));
    }
    let source = Arc::new(FileRows {
        file,
        start: rows_start,
    });
    let mut d = Decoder::new(&payload);
    let vector = VectorIndex::decode(&mut d, source)?;
    if vector.dim() != want.dim {
        return Err(mismatch(format!("vectors of dimension {}", vector.dim())));
    }
    if vector.row_bytes() != h.rows_len {
        return Err(mismatch(format!(
            "{} bytes of vectors for {} notes",
            h.rows_len,
            vector.len()
        )));
    }
    let text = TextIndex::decode(&mut d)?;
    let timeline = Timeline::decode(&mut d)?;
    let n = d.count(8)?;
    let mut links: HashMap<NoteId, Vec<NoteId>> = HashMap::with_capacity(n);
    for _ in 0..n {
        let from = d.id()?;
        let m = d.count(4)?;
        let mut to = Vec::with_capacity(m);
        for _ in 0..m {
            to.push(d.id()?);
        }
        if links.insert(from, to).is_some() {
            return Err(mismatch("a note's links are listed twice".into()));
        }
    }
    d.finish()?;
    Ok(Indexes {
        vector,
        text,
        links,
        timeline,
    })
}
