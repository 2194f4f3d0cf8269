//! Helpers of the vector index's tests: random and clustered vectors, a row source in
//! RAM, a snapshot round trip, and the check against brute force.

use std::sync::Arc;

use super::kernels::{dot_f32, normalized};
use super::{Prefilter, RowSource, VectorIndex};
use crate::NoteId;
use crate::snapshot::{Decoder, Encoder};
use rand::{Rng, rngs::StdRng};

pub(super) fn rand_vec(rng: &mut StdRng, d: usize) -> Vec<f32> {
    (0..d).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

pub(super) fn id(i: usize) -> NoteId {
    NoteId::parse(&format!("n{i}")).unwrap_or_else(|_| NoteId::generate())
}

/// The stored vector of `id` (empty if there is none).
pub(super) fn row(ix: &VectorIndex, id: &NoteId) -> Vec<f32> {
    ix.get(id)
        .ok()
        .flatten()
        .map(|v| v.to_vec())
        .unwrap_or_default()
}

/// Rows in a byte buffer, as the engine's snapshot file holds them; counts the rows
/// read and can be made to fail.
#[derive(Debug, Default)]
pub(super) struct Bytes {
    pub(super) bytes: Vec<u8>,
    pub(super) row_len: usize,
    pub(super) rows_read: std::sync::atomic::AtomicUsize,
    pub(super) broken: std::sync::atomic::AtomicBool,
}

impl RowSource for Bytes {
    fn read_at(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.broken.load(SeqCst) {
            return Err(std::io::Error::other("the disk is gone"));
        }
        let at = usize::try_from(offset).map_err(std::io::Error::other)?;
        let src = self
            .bytes
            .get(at..at + out.len())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        out.copy_from_slice(src);
        self.rows_read
            .fetch_add(out.len() / self.row_len.max(1), SeqCst);
        Ok(())
    }
}

/// `ix` written and read back with its rows left in a [`Bytes`] source.
pub(super) fn reloaded(ix: &VectorIndex) -> (VectorIndex, Arc<Bytes>) {
    let mut e = Encoder::new();
    ix.encode(&mut e);
    let mut r = Encoder::new();
    assert!(ix.encode_rows(&mut r).is_ok());
    let rows = r.into_bytes();
    assert_eq!(rows.len() as u64, ix.row_bytes());
    let src = Arc::new(Bytes {
        bytes: rows,
        row_len: ix.dim() * 4,
        ..Bytes::default()
    });
    let bytes = e.into_bytes();
    let mut dec = Decoder::new(&bytes);
    let back = VectorIndex::decode(&mut dec, src.clone())
        .unwrap_or_else(|e| panic!("the snapshot does not decode: {e}"));
    dec.finish()
        .unwrap_or_else(|e| panic!("the snapshot has bytes left over: {e}"));
    (back, src)
}

/// Every (id, vector bits) in slot order.
pub(super) fn vectors(ix: &VectorIndex) -> Vec<(NoteId, Vec<u32>)> {
    let mut out = Vec::new();
    let walked = ix.for_each_vector(|id, v| {
        out.push((id.clone(), v.iter().map(|x| x.to_bits()).collect()));
    });
    assert!(walked.is_ok());
    out
}

/// Ids returned by the fast path equal brute force, allowing only swaps between
/// scores that tie within quantisation noise.
pub(super) fn assert_matches_exact(ix: &VectorIndex, q: &[f32], k: usize) {
    let fast = ix.search(q, k).unwrap_or_default();
    let exact = ix.search_exact(q, k).unwrap_or_default();
    assert_eq!(fast.len(), exact.len());
    for (i, (f, e)) in fast.iter().zip(&exact).enumerate() {
        assert!((f.1 - e.1).abs() < 1e-5, "rank {i}: fast {f:?} exact {e:?}");
    }
}

/// Clustered vectors, like sentence embeddings: 50 topics, each note a topic plus noise.
pub(super) fn clustered(rng: &mut StdRng, centers: &[Vec<f32>], d: usize) -> Vec<f32> {
    let c = &centers[rng.random_range(0..centers.len())];
    (0..d)
        .map(|i| c[i] + 0.35 * rng.random_range(-1.0f32..1.0))
        .collect()
}

/// `n` clustered vectors around `centers`, prefiltered from 1,000 vectors on, read
/// by lists from `lists_min` on.
pub(super) fn clustered_index(
    rng: &mut StdRng,
    centers: &[Vec<f32>],
    n: usize,
    lists_min: usize,
) -> VectorIndex {
    let d = centers[0].len();
    let mut ix = VectorIndex::new(d);
    ix.set_prefilter(Some(Prefilter {
        min_len: 1000,
        min_candidates: 400,
        fraction: 25,
        per_cut: 16,
    }));
    ix.set_lists_min(lists_min);
    for i in 0..n {
        assert!(ix.upsert(id(i), &clustered(rng, centers, d)).is_ok());
    }
    ix
}

/// The share of the exact top 10 that `search` finds for `queries` clustered
/// queries (a tie with an exact score counts); every returned score must be the
/// exact cosine, best first.
pub(super) fn clustered_recall(
    ix: &VectorIndex,
    rng: &mut StdRng,
    centers: &[Vec<f32>],
    queries: usize,
) -> f64 {
    let (mut found, mut total) = (0, 0);
    for _ in 0..queries {
        let q = clustered(rng, centers, ix.dim());
        let fast = ix.search(&q, 10).unwrap_or_default();
        let exact = ix.search_exact(&q, 10).unwrap_or_default();
        assert_eq!(fast.len(), 10);
        let qn = normalized(&q).unwrap_or_default();
        for (h, s) in &fast {
            assert!((dot_f32(&qn, &row(ix, h)) - s).abs() < 1e-6);
        }
        assert!(fast.windows(2).all(|w| w[0].1 >= w[1].1));
        total += exact.len();
        found += exact
            .iter()
            .filter(|(e, es)| fast.iter().any(|(f, fs)| f == e || (fs - es).abs() < 1e-6))
            .count();
    }
    found as f64 / total as f64
}

/// Vectors of three shapes: uniform, clustered, and spiky (one large component, the
/// worst case for a per-row scale).
pub(super) fn mixed_vectors(rng: &mut StdRng, n: usize, d: usize) -> Vec<Vec<f32>> {
    let centers: Vec<Vec<f32>> = (0..20).map(|_| rand_vec(rng, d)).collect();
    (0..n)
        .map(|i| match i % 3 {
            0 => rand_vec(rng, d),
            1 => clustered(rng, &centers, d),
            _ => {
                let mut v: Vec<f32> = (0..d)
                    .map(|_| 0.05 * rng.random_range(-1.0f32..1.0))
                    .collect();
                v[rng.random_range(0..d)] = 3.0;
                v
            }
        })
        .collect()
}
