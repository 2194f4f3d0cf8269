//! The in-process vector index: an exact scan over int8-quantised vectors, then the best
//! candidates rescored in f32.
//!
//! Why not an ANN graph: at the sizes a personal memory reaches (10k–100k notes) a
//! quantised scan is memory-bound and fast (100k × 384 bytes = 37 MB per query), needs no
//! build step, never misses a neighbour after deletes (SurrealDB's HNSW can), and updates
//! are O(1). Vectors are L2-normalised on insert, so scores are cosine similarities.
//! Each vector is quantised with its own scale (`max |v_i| / 127`): the approximate score
//! of slot j is `scale_j * <q_query, q_j>`, which orders candidates the same way as the
//! true cosine up to quantisation error; the top `max(4k, 64)` are rescored exactly.
//! The store (SurrealDB) stays the source of truth: this index is rebuilt from it at open.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use crate::{CoreError, NoteId};

/// Above this many vectors a query is split across threads.
const PARALLEL_MIN: usize = 32_768;

#[derive(Debug, Clone)]
pub struct VectorIndex {
    dim: usize,
    ids: Vec<NoteId>,
    slot_of: HashMap<NoteId, usize>,
    full: Vec<f32>,
    quant: Vec<i8>,
    scales: Vec<f32>,
    threads: usize,
}

/// A scored candidate; ordered by score, ties broken by slot for determinism.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cand {
    score: f32,
    slot: usize,
}
impl Eq for Cand {}
impl Ord for Cand {
    fn cmp(&self, other: &Self) -> Ordering {
        // reversed so that BinaryHeap<Cand> is a min-heap on score
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.slot.cmp(&other.slot))
    }
}
impl PartialOrd for Cand {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn normalized(v: &[f32]) -> Result<Vec<f32>, CoreError> {
    if v.iter().any(|x| !x.is_finite()) {
        return Err(CoreError::NonFiniteVector);
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        Ok(v.iter().map(|x| x / norm).collect())
    } else {
        Ok(v.to_vec())
    }
}

fn quantize(v: &[f32], out: &mut [i8]) -> f32 {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        out.iter_mut().for_each(|q| *q = 0);
        return 0.0;
    }
    let inv = 127.0 / max;
    for (q, x) in out.iter_mut().zip(v) {
        // in [-127, 127] by construction
        *q = (x * inv).round().clamp(-127.0, 127.0) as i8;
    }
    max / 127.0
}

#[inline]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Chunked so LLVM vectorises it (pmaddwd on SSE2/AVX2).
    let mut acc = [0i32; 16];
    let ca = a.chunks_exact(16);
    let cb = b.chunks_exact(16);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += x[i] as i32 * y[i] as i32;
        }
    }
    let mut s: i32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += *x as i32 * *y as i32;
    }
    s
}

#[inline]
fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

fn push_top(heap: &mut BinaryHeap<Cand>, cap: usize, c: Cand) {
    if heap.len() < cap {
        heap.push(c);
    } else if let Some(min) = heap.peek()
        && c.score > min.score
    {
        heap.pop();
        heap.push(c);
    }
}

impl VectorIndex {
    pub fn new(dim: usize) -> Self {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(8);
        Self {
            dim,
            ids: Vec::new(),
            slot_of: HashMap::new(),
            full: Vec::new(),
            quant: Vec::new(),
            scales: Vec::new(),
            threads,
        }
    }

    /// Limits the threads one query may use (1 = single-threaded).
    pub fn set_threads(&mut self, n: usize) {
        self.threads = n.max(1);
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn contains(&self, id: &NoteId) -> bool {
        self.slot_of.contains_key(id)
    }

    /// Bytes held by the vectors (the dominant part of the index's memory).
    pub fn memory_bytes(&self) -> usize {
        self.full.len() * 4 + self.quant.len() + self.scales.len() * 4
    }

    /// Inserts or replaces the vector of `id`.
    pub fn upsert(&mut self, id: NoteId, v: &[f32]) -> Result<(), CoreError> {
        if v.len() != self.dim {
            return Err(CoreError::DimensionMismatch {
                expected: self.dim,
                got: v.len(),
            });
        }
        let v = normalized(v)?;
        let slot = match self.slot_of.get(&id) {
            Some(&s) => s,
            None => {
                let s = self.ids.len();
                self.ids.push(id.clone());
                self.slot_of.insert(id, s);
                self.full.resize(self.full.len() + self.dim, 0.0);
                self.quant.resize(self.quant.len() + self.dim, 0);
                self.scales.push(0.0);
                s
            }
        };
        let range = slot * self.dim..(slot + 1) * self.dim;
        self.full[range.clone()].copy_from_slice(&v);
        self.scales[slot] = quantize(&v, &mut self.quant[range]);
        Ok(())
    }

    /// Removes `id`; returns whether it was there. The last vector moves into its slot.
    pub fn remove(&mut self, id: &NoteId) -> bool {
        let Some(slot) = self.slot_of.remove(id) else {
            return false;
        };
        let last = self.ids.len() - 1;
        if slot != last {
            let (d, moved) = (self.dim, self.ids[last].clone());
            self.full.copy_within(last * d..(last + 1) * d, slot * d);
            self.quant.copy_within(last * d..(last + 1) * d, slot * d);
            self.scales[slot] = self.scales[last];
            self.ids[slot] = moved.clone();
            self.slot_of.insert(moved, slot);
        }
        self.ids.pop();
        self.full.truncate(last * self.dim);
        self.quant.truncate(last * self.dim);
        self.scales.pop();
        true
    }

    fn scan(&self, q: &[i8], slots: std::ops::Range<usize>, cap: usize) -> BinaryHeap<Cand> {
        let mut heap = BinaryHeap::with_capacity(cap + 1);
        let d = self.dim;
        for slot in slots {
            let approx =
                dot_i8(q, &self.quant[slot * d..(slot + 1) * d]) as f32 * self.scales[slot];
            push_top(
                &mut heap,
                cap,
                Cand {
                    score: approx,
                    slot,
                },
            );
        }
        heap
    }

    /// The `k` nearest vectors to `query` by cosine similarity, best first.
    pub fn search(&self, query: &[f32], k: usize) -> Result<Vec<(NoteId, f32)>, CoreError> {
        if query.len() != self.dim {
            return Err(CoreError::DimensionMismatch {
                expected: self.dim,
                got: query.len(),
            });
        }
        let n = self.ids.len();
        if k == 0 || n == 0 {
            return Ok(Vec::new());
        }
        let query = normalized(query)?;
        let mut q = vec![0i8; self.dim];
        quantize(&query, &mut q);
        let cap = (4 * k).max(64).min(n);
        let threads = if n >= PARALLEL_MIN {
            self.threads.min(n / (PARALLEL_MIN / 2)).max(1)
        } else {
            1
        };
        let mut cands: Vec<Cand> = if threads <= 1 {
            self.scan(&q, 0..n, cap).into_vec()
        } else {
            let chunk = n.div_ceil(threads);
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let q = &q;
                        s.spawn(move || self.scan(q, t * chunk..((t + 1) * chunk).min(n), cap))
                    })
                    .collect();
                let mut all = Vec::with_capacity(cap * threads);
                for h in handles {
                    match h.join() {
                        Ok(heap) => all.extend(heap.into_vec()),
                        // a scan thread cannot panic on valid slices; fall back to a serial scan
                        Err(_) => return self.scan(&q, 0..n, cap).into_vec(),
                    }
                }
                all
            })
        };
        let d = self.dim;
        for c in &mut cands {
            c.score = dot_f32(&query, &self.full[c.slot * d..(c.slot + 1) * d]);
        }
        cands.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.slot.cmp(&b.slot))
        });
        cands.truncate(k);
        Ok(cands
            .into_iter()
            .map(|c| (self.ids[c.slot].clone(), c.score))
            .collect())
    }

    /// Exact f32 cosine over every vector: the reference the fast path is tested against.
    pub fn search_exact(&self, query: &[f32], k: usize) -> Result<Vec<(NoteId, f32)>, CoreError> {
        if query.len() != self.dim {
            return Err(CoreError::DimensionMismatch {
                expected: self.dim,
                got: query.len(),
            });
        }
        let query = normalized(query)?;
        let d = self.dim;
        let mut all: Vec<Cand> = (0..self.ids.len())
            .map(|slot| Cand {
                score: dot_f32(&query, &self.full[slot * d..(slot + 1) * d]),
                slot,
            })
            .collect();
        all.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.slot.cmp(&b.slot))
        });
        all.truncate(k);
        Ok(all
            .into_iter()
            .map(|c| (self.ids[c.slot].clone(), c.score))
            .collect())
    }

    /// Every (id, normalised vector), in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (&NoteId, &[f32])> {
        self.ids.iter().zip(self.full.chunks_exact(self.dim.max(1)))
    }

    /// The stored (normalised) vector of `id`.
    pub fn get(&self, id: &NoteId) -> Option<&[f32]> {
        self.slot_of
            .get(id)
            .map(|&s| &self.full[s * self.dim..(s + 1) * self.dim])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn rand_vec(rng: &mut StdRng, d: usize) -> Vec<f32> {
        (0..d).map(|_| rng.random_range(-1.0f32..1.0)).collect()
    }

    fn id(i: usize) -> NoteId {
        NoteId::parse(&format!("n{i}")).unwrap_or_else(|_| NoteId::generate())
    }

    /// Ids returned by the fast path equal brute force, allowing only swaps between
    /// scores that tie within quantisation noise.
    fn assert_matches_exact(ix: &VectorIndex, q: &[f32], k: usize) {
        let fast = ix.search(q, k).unwrap_or_default();
        let exact = ix.search_exact(q, k).unwrap_or_default();
        assert_eq!(fast.len(), exact.len());
        for (i, (f, e)) in fast.iter().zip(&exact).enumerate() {
            assert!((f.1 - e.1).abs() < 1e-5, "rank {i}: fast {f:?} exact {e:?}");
        }
    }

    #[test]
    fn fast_search_equals_brute_force_including_after_deletes_and_updates() {
        let mut rng = StdRng::seed_from_u64(7);
        let d = 384;
        let mut ix = VectorIndex::new(d);
        for i in 0..3000 {
            assert!(ix.upsert(id(i), &rand_vec(&mut rng, d)).is_ok());
        }
        for _ in 0..20 {
            let q = rand_vec(&mut rng, d);
            assert_matches_exact(&ix, &q, 10);
        }
        // churn: delete a third, re-embed a third, add new ones
        for i in (0..3000).step_by(3) {
            assert!(ix.remove(&id(i)));
        }
        for i in (1..3000).step_by(3) {
            assert!(ix.upsert(id(i), &rand_vec(&mut rng, d)).is_ok());
        }
        for i in 3000..3500 {
            assert!(ix.upsert(id(i), &rand_vec(&mut rng, d)).is_ok());
        }
        assert_eq!(ix.len(), 2500);
        for _ in 0..20 {
            let q = rand_vec(&mut rng, d);
            assert_matches_exact(&ix, &q, 10);
            let hits = ix.search(&q, 10).unwrap_or_default();
            assert!(
                hits.iter()
                    .all(|(h, _)| !h.as_str().is_empty() && ix.contains(h))
            );
            assert!(
                hits.iter()
                    .all(|(h, _)| h.as_str() != "n0" && h.as_str() != "n3")
            );
        }
    }

    #[test]
    fn parallel_scan_equals_serial() {
        let mut rng = StdRng::seed_from_u64(11);
        let d = 32;
        let mut ix = VectorIndex::new(d);
        for i in 0..(PARALLEL_MIN * 2 + 17) {
            assert!(ix.upsert(id(i), &rand_vec(&mut rng, d)).is_ok());
        }
        ix.set_threads(4);
        let q = rand_vec(&mut rng, d);
        let par = ix.search(&q, 10).unwrap_or_default();
        ix.set_threads(1);
        let ser = ix.search(&q, 10).unwrap_or_default();
        assert_eq!(par, ser);
        assert_matches_exact(&ix, &q, 10);
    }

    #[test]
    fn a_vector_finds_itself_first() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut ix = VectorIndex::new(16);
        let vs: Vec<_> = (0..100).map(|_| rand_vec(&mut rng, 16)).collect();
        for (i, v) in vs.iter().enumerate() {
            assert!(ix.upsert(id(i), v).is_ok());
        }
        for (i, v) in vs.iter().enumerate() {
            let hits = ix.search(v, 1).unwrap_or_default();
            assert_eq!(hits[0].0, id(i));
            assert!((hits[0].1 - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn bad_vectors_are_errors_not_panics() {
        let mut ix = VectorIndex::new(4);
        assert_eq!(
            ix.upsert(id(1), &[1.0, 2.0]),
            Err(CoreError::DimensionMismatch {
                expected: 4,
                got: 2
            })
        );
        assert_eq!(
            ix.upsert(id(1), &[f32::NAN, 0.0, 0.0, 0.0]),
            Err(CoreError::NonFiniteVector)
        );
        assert!(ix.search(&[1.0], 3).is_err());
        assert!(ix.upsert(id(1), &[0.0; 4]).is_ok()); // a zero vector is allowed, scores 0
        assert_eq!(ix.search(&[1.0, 0.0, 0.0, 0.0], 3).map(|h| h.len()), Ok(1));
        assert!(!ix.remove(&id(9)));
        assert!(ix.remove(&id(1)));
        assert!(ix.is_empty());
    }
}
