//! The in-process vector index: a binary (sign-code) prefilter over the vectors, the
//! survivors scored over int8-quantised vectors, and the best of those rescored in f32.
//!
//! Why not an ANN graph: at the sizes a personal memory reaches (10k–100k notes) a scan
//! over compact codes is fast, needs no build step, never misses a neighbour after
//! deletes (SurrealDB's HNSW can), and updates are O(1). Vectors are L2-normalised on
//! insert, so scores are cosine similarities.
//!
//! Three stages, each cheaper per vector than the next:
//!
//! 1. **Sign codes** (memories of at least [`Prefilter::min_len`] vectors): each vector
//!    is also kept as one bit per dimension (its sign, 48 bytes for 384-d). The query's
//!    code is compared with every code by Hamming distance (XOR + popcount) and the
//!    nearest `max(1000, n / 100, 8 × the int8 cut)` survive (1 % at 100k notes). Sign
//!    codes order sentence embeddings well enough that recall@30 against the exact
//!    ranking was still 1.0 with 700 candidates on the bench corpus (MiniLM, 100k
//!    notes). This is the one approximate step: recall against `search_exact` is what
//!    `kasten bench search` reports. Smaller memories skip it and are scanned exactly.
//!    The survivors are found in one pass: a sample of 4,096 codes gives a cut-off
//!    distance that would keep about twice as many, only codes within it are kept, and
//!    the exact nearest are picked among those (were there too few, every distance is
//!    counted after all). From 50k vectors on the codes are also kept in lists by
//!    cluster (`lists`), and a query reads only the nearest lists, an eighth of all
//!    codes, keeping `max(500, 4 × the int8 cut)`: a second approximation.
//! 2. **int8**: each vector is quantised with its own scale (`max |v_i| / 127`); the
//!    approximate score of slot j is `scale_j * <q_query, q_j>`, which orders candidates
//!    as the true cosine does up to quantisation error. The best `max(4k, 64)` go on.
//!    The candidates' rows are scattered, so their cache lines are loaded a batch at a
//!    time before they are scored.
//! 3. **f32**: those are rescored exactly and the best `k` returned.
//!
//! Without the prefilter, memories of 32k vectors and more are scanned over threads;
//! the prefilter's stages stay on one (splitting them over two cores measured slower:
//! spawning costs what the halves save). The build targets x86-64-v2 (SSE4.2 and the
//! `popcnt` instruction, no AVX; `.cargo/config.toml`): the loops are written so LLVM
//! vectorises them for it.
//! The store (SurrealDB) stays the source of truth: this index is rebuilt from it at open,
//! or read back from a snapshot the store vouches for ([`VectorIndex::encode`]).
//!
//! Where the f32 rows live: an index built in this process holds them in RAM. An index
//! read from a snapshot leaves them in the snapshot file and reads the few it rescores per
//! query through a [`RowSource`] (positioned reads; the page cache keeps them warm, and
//! they are not part of the process's memory); rows written after the load are held in
//! RAM on top of it (see `Rows`). Quantised vectors, scales and sign codes, which every
//! query scans, are always in RAM.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use crate::{CoreError, NoteId};

mod codec;
mod kernels;
mod lists;
mod prefilter;
mod rows;
mod search;
#[cfg(test)]
mod test_util;

use kernels::{normalized, quantize, sign_code};
pub use prefilter::Prefilter;
pub use rows::{RowSource, RowSpill};
use rows::{Rows, SPILL_ROWS, Spill};

/// From this many vectors on, the prefilter reads the codes of the nearest clusters
/// only (see `lists`); the lists are kept from half as many.
const LISTS_MIN: usize = 50_000;

#[derive(Debug, Clone)]
pub struct VectorIndex {
    dim: usize,
    /// u64 words per sign code (`dim / 64`, rounded up).
    words: usize,
    ids: Vec<NoteId>,
    slot_of: HashMap<NoteId, usize>,
    full: Rows,
    quant: Vec<i8>,
    scales: Vec<f32>,
    codes: Vec<u64>,
    threads: usize,
    prefilter: Option<Prefilter>,
    /// The codes by cluster, kept from `lists_min / 2` vectors on.
    lists: Option<lists::Lists>,
    /// From this many vectors on, the prefilter reads `lists`.
    lists_min: usize,
}

/// A scored candidate; ordered by score, ties broken by slot for determinism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cand {
    pub(crate) score: f32,
    pub(crate) slot: usize,
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

impl VectorIndex {
    pub fn new(dim: usize) -> Self {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(8);
        Self {
            dim,
            words: dim.div_ceil(64),
            ids: Vec::new(),
            slot_of: HashMap::new(),
            full: Rows::new(dim),
            quant: Vec::new(),
            scales: Vec::new(),
            codes: Vec::new(),
            threads,
            prefilter: Some(Prefilter::default()),
            lists: None,
            lists_min: LISTS_MIN,
        }
    }

    /// Limits the threads one exact int8 scan may use (1 = single-threaded).
    pub fn set_threads(&mut self, n: usize) {
        self.threads = n.max(1);
    }

    /// From how many vectors on the prefilter reads only the codes of the clusters
    /// nearest the query (`usize::MAX`: never; the default is 50,000).
    pub fn set_lists_min(&mut self, n: usize) {
        self.lists_min = n.max(1);
        self.lists = None;
        self.refresh_lists();
    }

    /// Whether the prefilter reads the lists (rather than every code).
    fn reads_lists(&self) -> bool {
        self.lists.is_some() && self.ids.len() >= self.lists_min
    }

    /// Builds, drops or retrains the lists as the number of vectors asks: built at
    /// `lists_min`, dropped below half of it, trained again when the index has doubled.
    fn refresh_lists(&mut self) {
        let n = self.ids.len();
        let build = match &self.lists {
            None => n >= self.lists_min,
            Some(l) => {
                if n < self.lists_min / 2 {
                    self.lists = None;
                    return;
                }
                n >= 2 * l.trained_at().max(1)
            }
        };
        if build {
            self.lists = Some(lists::Lists::build(&self.codes, self.words));
        }
    }

    /// Sets (or, with `None`, turns off) the sign-code prefilter.
    pub fn set_prefilter(&mut self, p: Option<Prefilter>) {
        self.prefilter = p;
    }

    /// From now on keeps at most [`SPILL_ROWS`] f32 rows of new vectors in RAM and appends
    /// the rest to `spill`, reading them back from it. For an index that holds no vectors
    /// yet; an index read from a snapshot (or holding vectors already) ignores it.
    pub fn spill_rows_to(&mut self, spill: Arc<dyn RowSpill>) {
        if !self.ids.is_empty() || self.full.source.is_some() {
            return;
        }
        self.full.spill = Spill {
            to: Some(spill),
            rows: 0,
            every: SPILL_ROWS,
        };
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

    /// Bytes the vectors hold in RAM (the dominant part of the index's memory); f32 rows
    /// left in a snapshot file ([`VectorIndex::decode`]) are not counted.
    pub fn memory_bytes(&self) -> usize {
        self.full.heap_bytes()
            + self.quant.len()
            + self.scales.len() * 4
            + self.codes.len() * 8
            + self.lists.as_ref().map_or(0, lists::Lists::heap_bytes)
    }

    /// Bytes of the f32 rows (what [`VectorIndex::encode_rows`] writes).
    pub fn row_bytes(&self) -> u64 {
        (self.ids.len() as u64) * (self.dim as u64) * 4
    }

    /// The indexed ids, in slot order.
    pub fn ids(&self) -> &[NoteId] {
        &self.ids
    }

    /// Room for `additional` more vectors (the quantised rows, codes, scales and ids; the
    /// f32 rows of new vectors go to the spill file in fixed pages).
    pub fn reserve(&mut self, additional: usize) {
        self.ids.reserve_exact(additional);
        self.slot_of.reserve(additional);
        self.quant.reserve_exact(additional * self.dim);
        self.codes.reserve_exact(additional * self.words);
        self.scales.reserve_exact(additional);
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
        let (slot, new) = match self.slot_of.get(&id) {
            Some(&s) => {
                self.full.set(s, &v);
                (s, false)
            }
            None => {
                let s = self.ids.len();
                self.ids.push(id.clone());
                self.slot_of.insert(id, s);
                self.full.push(&v);
                self.quant.resize(self.quant.len() + self.dim, 0);
                self.codes.resize(self.codes.len() + self.words, 0);
                self.scales.push(0.0);
                (s, true)
            }
        };
        let range = slot * self.dim..(slot + 1) * self.dim;
        self.scales[slot] = quantize(&v, &mut self.quant[range]);
        let w = self.words;
        let code = &mut self.codes[slot * w..(slot + 1) * w];
        sign_code(&v, code);
        if let Some(l) = &mut self.lists {
            if new {
                l.push(code);
            } else {
                l.set(slot, code);
            }
        }
        if new {
            self.refresh_lists();
        }
        Ok(())
    }

    /// Removes `id`; returns whether it was there. The last vector moves into its slot.
    pub fn remove(&mut self, id: &NoteId) -> bool {
        let Some(slot) = self.slot_of.remove(id) else {
            return false;
        };
        let last = self.ids.len() - 1;
        let (d, w) = (self.dim, self.words);
        self.full.swap_remove(slot, last + 1);
        if let Some(l) = &mut self.lists {
            l.swap_remove(slot);
        }
        if slot != last {
            let moved = self.ids[last].clone();
            self.quant.copy_within(last * d..(last + 1) * d, slot * d);
            self.codes.copy_within(last * w..(last + 1) * w, slot * w);
            self.scales[slot] = self.scales[last];
            self.ids[slot] = moved.clone();
            self.slot_of.insert(moved, slot);
        }
        self.ids.pop();
        self.quant.truncate(last * d);
        self.codes.truncate(last * w);
        self.scales.pop();
        self.refresh_lists();
        true
    }

    /// Calls `f` with every (id, normalised vector), in slot order.
    pub fn for_each_vector(&self, mut f: impl FnMut(&NoteId, &[f32])) -> Result<(), CoreError> {
        self.full
            .for_each(self.ids.len(), |slot, row| f(&self.ids[slot], row))
    }

    /// Calls `f(i, v)` with the stored vector `v` of `ids[i]`, for each of `ids` that is
    /// indexed (in slot order). Cheaper than [`VectorIndex::get`] one by one
    /// when the rows are in a snapshot file: rows close together are read together.
    pub fn for_each_of(
        &self,
        ids: &[&NoteId],
        mut f: impl FnMut(usize, &[f32]),
    ) -> Result<(), CoreError> {
        let mut wanted: Vec<(usize, usize)> = ids
            .iter()
            .enumerate()
            .filter_map(|(i, id)| self.slot_of.get(*id).map(|&s| (s, i)))
            .collect();
        wanted.sort_unstable();
        let slots: Vec<usize> = wanted.iter().map(|w| w.0).collect();
        let mut at = 0;
        self.full.for_slots(&slots, |_, row| {
            f(wanted[at].1, row);
            at += 1;
        })
    }

    /// The stored (normalised) vector of `id`.
    pub fn get(&self, id: &NoteId) -> Result<Option<Cow<'_, [f32]>>, CoreError> {
        self.slot_of.get(id).map(|&s| self.full.get(s)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::test_util::*;

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
