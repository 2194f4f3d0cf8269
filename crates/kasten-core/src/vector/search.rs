//! A query: the int8 scan (over every row, over threads, or over the prefilter's
//! candidates), the bound that spares rows, and the f32 rescoring.

use std::collections::BinaryHeap;

use super::kernels::{Int8Bound, dot_f32, dot_i8, normalized, push_top, quantize};
use super::{Cand, VectorIndex};
use crate::{CoreError, NoteId};

/// Candidates the prefilter passes to the int8 scan when it reads lists: `max(this,
/// LISTS_PER_CUT × the int8 cut)`, at most what [`Prefilter`] asks. Half the full pass's
/// 1,000 at 100k: once the lists cut the Hamming pass, the int8 scan of scattered rows is
/// the larger cost, and on the bench memory 500 find the same top 10 as 1,000 (recall@10
/// 0.9997) in about three quarters of the time (docs/BENCHMARKS.md, "Search").
const LISTS_CANDIDATES: usize = 500;
/// See [`LISTS_CANDIDATES`].
const LISTS_PER_CUT: usize = 4;

/// Above this many vectors an exact int8 scan is split across threads.
const PARALLEL_MIN: usize = 32_768;

/// Candidate rows whose cache lines are touched together before they are scored.
const TOUCH_BATCH: usize = 16;

impl VectorIndex {
    /// int8 approximate scores of `slots`, the best `cap` kept.
    fn scan(&self, q: &[i8], slots: std::ops::Range<usize>, cap: usize) -> BinaryHeap<Cand> {
        let d = self.dim;
        let mut heap = BinaryHeap::with_capacity(cap + 1);
        let rows = self.quant[slots.start * d..slots.end * d].chunks_exact(d.max(1));
        for ((slot, row), scale) in slots.clone().zip(rows).zip(&self.scales[slots]) {
            let score = dot_i8(q, row) as f32 * scale;
            push_top(&mut heap, cap, Cand { score, slot });
        }
        heap
    }

    /// The same over a list of slots (ascending). The rows of a prefilter's candidates are
    /// scattered over the memory (a cache miss per 64 bytes, which the hardware prefetcher
    /// cannot guess), so each batch's rows are first touched one byte per cache line: those
    /// loads do not depend on each other, and the CPU has them in flight together instead
    /// of waiting on one row's lines at a time.
    fn scan_slots(&self, q: &[i8], slots: &[u32], cap: usize) -> BinaryHeap<Cand> {
        let d = self.dim;
        let mut heap = BinaryHeap::with_capacity(cap + 1);
        for batch in slots.chunks(TOUCH_BATCH) {
            let mut touched = 0i8;
            for &s in batch {
                let slot = s as usize;
                for b in self.quant[slot * d..(slot + 1) * d].iter().step_by(64) {
                    touched ^= *b;
                }
            }
            std::hint::black_box(touched);
            for &s in batch {
                let slot = s as usize;
                let row = &self.quant[slot * d..(slot + 1) * d];
                let score = dot_i8(q, row) as f32 * self.scales[slot];
                push_top(&mut heap, cap, Cand { score, slot });
            }
        }
        heap
    }

    /// The int8 candidates of an exact scan, over threads for large memories.
    fn scan_all(&self, q: &[i8], cap: usize) -> Vec<Cand> {
        let n = self.ids.len();
        let threads = if n >= PARALLEL_MIN {
            self.threads.min(n / (PARALLEL_MIN / 2)).max(1)
        } else {
            1
        };
        if threads <= 1 {
            return self.scan(q, 0..n, cap).into_vec();
        }
        let chunk = n.div_ceil(threads);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| s.spawn(move || self.scan(q, t * chunk..((t + 1) * chunk).min(n), cap)))
                .collect();
            let mut all = Vec::with_capacity(cap * threads);
            for h in handles {
                match h.join() {
                    Ok(heap) => all.extend(heap.into_vec()),
                    // a scan thread cannot panic on valid slices; fall back to a serial scan
                    Err(_) => return self.scan(q, 0..n, cap).into_vec(),
                }
            }
            all
        })
    }

    /// Drops the int8 candidates that cannot be among the `k` best by their f32 score
    /// (what [`VectorIndex::split_surest`] leaves, put back together).
    #[cfg(test)]
    fn drop_unreachable(&self, bound: &Int8Bound, k: usize, cands: &mut Vec<Cand>) {
        let rest = self.split_surest(bound, k, cands);
        cands.extend(rest);
    }

    /// Keeps in `cands` the `k` with the best lower bounds of their f32 score and returns
    /// those of the others that can still be among the `k` best (int8 scores, in no
    /// order). One whose upper bound is below the `k`-th best lower bound has `k` others
    /// surely above it (see [`Int8Bound`]), so its row is never read: at 100k notes a
    /// row read is ~1 µs, most of the rescoring's cost.
    fn split_surest(&self, bound: &Int8Bound, k: usize, cands: &mut Vec<Cand>) -> Vec<Cand> {
        if k == 0 || cands.len() <= k {
            return Vec::new();
        }
        let range = |c: &Cand| bound.range(c.score, self.scales[c.slot]);
        cands.select_nth_unstable_by(k - 1, |a, b| range(b).0.total_cmp(&range(a).0));
        let kth = range(&cands[k - 1]).0;
        let mut rest = cands.split_off(k);
        rest.retain(|c| range(c).1 >= kth);
        rest
    }

    /// Replaces the int8 scores of `cands` by their f32 cosine with `query`, reading the
    /// rows in slot order (rows near each other are read together); leaves `cands` in
    /// slot order.
    fn rescore(&self, query: &[f32], cands: &mut [Cand]) -> Result<(), CoreError> {
        cands.sort_unstable_by_key(|c| c.slot);
        let slots: Vec<usize> = cands.iter().map(|c| c.slot).collect();
        let mut at = 0;
        self.full.for_slots(&slots, |_, row| {
            cands[at].score = dot_f32(query, row);
            at += 1;
        })
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
        let q_scale = quantize(&query, &mut q);
        let cap = (4 * k).max(64).min(n);
        let want = self
            .prefilter
            .filter(|p| n >= p.min_len)
            .map(|p| p.candidates(n, cap))
            .map(|w| {
                if self.reads_lists() {
                    w.min((LISTS_PER_CUT * cap).max(LISTS_CANDIDATES))
                } else {
                    w
                }
            })
            .filter(|&w| w < n);
        let mut cands: Vec<Cand> = match want {
            Some(want) => {
                let slots = self.prefilter_slots(&query, want);
                self.scan_slots(&q, &slots, cap).into_vec()
            }
            None => self.scan_all(&q, cap),
        };
        let bound = Int8Bound::new(&query, &q, q_scale);
        // The `k` candidates surest to win (best lower bounds) are rescored first: the
        // least of their f32 scores is a cut at least as high as the `k`-th best lower
        // bound, and another candidate's row is read only if its upper bound reaches it
        // (one below it has `k` rows surely above it). On 100k MiniLM vectors this reads
        // 47 rows instead of 69 for the 30 best, 16.5 instead of 26 for the 10 best.
        let rest = self.split_surest(&bound, k, &mut cands);
        self.rescore(&query, &mut cands)?;
        if !rest.is_empty() {
            let cut = cands.iter().map(|c| c.score).fold(f32::INFINITY, f32::min);
            let mut reachable: Vec<Cand> = rest
                .into_iter()
                .filter(|c| bound.range(c.score, self.scales[c.slot]).1 >= cut)
                .collect();
            self.rescore(&query, &mut reachable)?;
            cands.extend(reachable);
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
        let mut all: Vec<Cand> = Vec::with_capacity(self.ids.len());
        self.full.for_each(self.ids.len(), |slot, row| {
            all.push(Cand {
                score: dot_f32(&query, row),
                slot,
            });
        })?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::test_util::*;
    use rand::{SeedableRng, rngs::StdRng};

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
        ix.set_prefilter(None);
        ix.set_threads(4);
        let q = rand_vec(&mut rng, d);
        let par = ix.search(&q, 10).unwrap_or_default();
        ix.set_threads(1);
        let ser = ix.search(&q, 10).unwrap_or_default();
        assert_eq!(par, ser);
        assert_matches_exact(&ix, &q, 10);
    }

    #[test]
    fn rescoring_only_reachable_candidates_gives_the_k_best_of_rescoring_them_all() {
        let mut rng = StdRng::seed_from_u64(37);
        let d = 384;
        let mut ix = VectorIndex::new(d);
        for (i, v) in mixed_vectors(&mut rng, 3000, d).iter().enumerate() {
            assert!(ix.upsert(id(i), v).is_ok());
        }
        let (mut before, mut after) = (0, 0);
        for query in mixed_vectors(&mut rng, 60, d) {
            for k in [1, 10, 30] {
                let qn = normalized(&query).unwrap_or_default();
                let mut q = vec![0i8; d];
                let qs = quantize(&qn, &mut q);
                let cap = (4 * k).max(64);
                // the reference: every int8 candidate rescored in f32
                let mut all = ix.scan_all(&q, cap);
                for c in &mut all {
                    c.score = dot_f32(&qn, &ix.full.get(c.slot).unwrap_or_default());
                }
                all.sort_by(|a, b| {
                    b.score
                        .total_cmp(&a.score)
                        .then_with(|| a.slot.cmp(&b.slot))
                });
                all.truncate(k);
                let want: Vec<(NoteId, u32)> = all
                    .iter()
                    .map(|c| (ix.ids[c.slot].clone(), c.score.to_bits()))
                    .collect();
                let got: Vec<(NoteId, u32)> = ix
                    .search(&query, k)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(id, s)| (id, s.to_bits()))
                    .collect();
                assert_eq!(got, want, "k {k}");
                let mut cands = ix.scan_all(&q, cap);
                before += cands.len();
                ix.drop_unreachable(&Int8Bound::new(&qn, &q, qs), k, &mut cands);
                after += cands.len();
            }
        }
        // some rows are never read (about a quarter on these near-orthogonal random
        // vectors, whose scores are close together)
        assert!(after < before, "{after} of {before} candidates rescored");
    }

    /// Up to 16 the int8 pass keeps the same 64 candidates whatever `k`, so a shorter list
    /// is the start of a longer one (merge on write takes its 3 from the 10 that
    /// supersession searches), on an exact scan and through the prefilter alike.
    #[test]
    fn a_shorter_list_is_the_start_of_a_longer_one() {
        let mut rng = StdRng::seed_from_u64(41);
        let d = 64;
        let centers: Vec<Vec<f32>> = (0..8).map(|_| rand_vec(&mut rng, d)).collect();
        // an exact scan, the prefilter, the prefilter reading lists
        for (n, lists_min) in [(900, usize::MAX), (3000, usize::MAX), (3000, 2000)] {
            let ix = clustered_index(&mut rng, &centers, n, lists_min);
            for _ in 0..30 {
                let q = clustered(&mut rng, &centers, d);
                let long = ix.search(&q, 10).unwrap_or_default();
                assert_eq!(long.len(), 10);
                for k in [1, 3, 9] {
                    let short = ix.search(&q, k).unwrap_or_default();
                    assert_eq!(short, long[..k], "n {n}, k {k}");
                }
            }
        }
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
}
