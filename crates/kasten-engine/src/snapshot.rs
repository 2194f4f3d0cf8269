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
//! embedding model id and dimension, payload length, CRC-32 of the payload, CRC-32 of
//! the header bytes before it — then the payload: vector index, BM25 index, timeline,
//! link adjacency, each in the byte format of `kasten_core::snapshot`.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use kasten_core::NoteId;
use kasten_core::bm25::TextIndex;
use kasten_core::snapshot::{Decoder, Encoder, SnapshotError};
use kasten_core::timeline::Timeline;
use kasten_core::vector::VectorIndex;
use kasten_store::Endpoint;
use thiserror::Error;

use crate::Indexes;

const MAGIC: &[u8; 8] = b"KASTENIX";
/// Bumped whenever the layout of the header or of any index changes.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// Why a snapshot file was not used.
#[derive(Debug, Error)]
pub(crate) enum SnapshotFileError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Format(#[from] SnapshotError),
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

/// The whole file: header and payload.
pub(crate) fn encode(ix: &Indexes, meta: Expect<'_>) -> Vec<u8> {
    let mut p = Encoder::with_capacity(ix.vector.memory_bytes() + ix.vector.len() * 64);
    ix.vector.encode(&mut p);
    ix.text.encode(&mut p);
    ix.timeline.encode(&mut p);
    p.len32(ix.links.len());
    for (from, to) in &ix.links {
        p.id(from);
        p.len32(to.len());
        for t in to {
            p.id(t);
        }
    }
    let payload = p.into_bytes();
    let mut h = Encoder::new();
    for &b in MAGIC {
        h.u8(b);
    }
    h.u32(FORMAT_VERSION);
    h.str(meta.generation);
    h.str(meta.model);
    h.len32(meta.dim);
    h.u64(payload.len() as u64);
    h.u32(crc32fast::hash(&payload));
    let header_crc = crc32fast::hash(h.as_bytes());
    h.u32(header_crc);
    let mut out = h.into_bytes();
    out.reserve_exact(payload.len());
    out.extend_from_slice(&payload);
    out
}

/// Reads a whole snapshot file, checking header, checksums and what it was written for.
pub(crate) fn decode(bytes: &[u8], want: Expect<'_>) -> Result<Indexes, SnapshotFileError> {
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
    let len = d.u64()?;
    let payload_crc = d.u32()?;
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
    let payload = &bytes[bytes.len() - d.remaining()..];
    if payload.len() as u64 != len {
        return Err(mismatch(format!(
            "the payload is {} bytes, the header says {len}",
            payload.len()
        )));
    }
    if crc32fast::hash(payload) != payload_crc {
        return Err(mismatch("the payload's checksum does not match".into()));
    }
    let mut d = Decoder::new(payload);
    let vector = VectorIndex::decode(&mut d)?;
    if vector.dim() != want.dim {
        return Err(mismatch(format!("vectors of dimension {}", vector.dim())));
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

/// Reads the snapshot at `path` if it is the one `want` describes.
pub(crate) fn read(path: &Path, want: Expect<'_>) -> Result<Indexes, SnapshotFileError> {
    let bytes = std::fs::read(path)?;
    decode(&bytes, want)
}

/// Replaces the file at `path` with `bytes` so that a crash leaves either the old file or
/// the new one, complete: a temporary file beside it, fsync, rename, fsync of the folder.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
