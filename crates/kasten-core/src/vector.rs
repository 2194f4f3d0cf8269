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
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use crate::snapshot::{self, Decoder, Drain, Encoder, SnapshotError};
use crate::{CoreError, NoteId};

mod lists;

/// From this many vectors on, the prefilter reads the codes of the nearest clusters
/// only (see `lists`); the lists are kept from half as many.
const LISTS_MIN: usize = 50_000;

/// The share of all codes (1 / this) the prefilter reads when it reads lists.
const LISTS_SCAN_FRACTION: usize = 8;

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

/// When the sign-code prefilter runs and how many candidates it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefilter {
    /// Memories smaller than this are scanned exactly in int8 (no prefilter).
    pub min_len: usize,
    /// Candidates kept: `max(min_candidates, n / fraction, per_cut × the int8 cut)`.
    pub min_candidates: usize,
    /// See `min_candidates`.
    pub fraction: usize,
    /// See `min_candidates`.
    pub per_cut: usize,
}

impl Default for Prefilter {
    fn default() -> Self {
        Self {
            min_len: 20_000,
            min_candidates: 1_000,
            fraction: 100,
            per_cut: 8,
        }
    }
}

impl Prefilter {
    /// Candidates kept out of `n` vectors when the int8 stage keeps `cut`.
    fn candidates(&self, n: usize, cut: usize) -> usize {
        self.min_candidates
            .max(n / self.fraction.max(1))
            .max(self.per_cut * cut)
            .min(n)
    }
}

/// Reads the f32 rows of an index loaded from a snapshot, from where the snapshot keeps
/// them (the engine: the snapshot file). Row `r` is the `dim` little-endian `f32`s at
/// byte `r * dim * 4`. The bytes must not change while the index uses them: the engine
/// reads a file that is only ever replaced whole (written beside it, then renamed over
/// it), never modified in place, so an open handle keeps seeing the bytes it checked.
pub trait RowSource: std::fmt::Debug + Send + Sync {
    /// Fills `out` with the bytes starting at `offset`; an error if there are fewer.
    fn read_at(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()>;
}

/// Where a growing index puts its f32 rows instead of RAM (the engine: an unnamed file
/// in the memory's folder), so that building a large index (a rebuild, a restore, a bulk
/// import into a new memory) does not hold 1.5 KiB per note. Rows are appended in slot
/// order and read back through [`RowSource::read_at`]; bytes once appended never change.
pub trait RowSpill: RowSource {
    /// Appends `bytes` at the end of what was appended before.
    fn append(&self, bytes: &[u8]) -> std::io::Result<()>;
}

/// Rows a growing index keeps in RAM before it appends them to its spill.
const SPILL_ROWS: usize = 4096;

/// The spill of a growing index. A clone of the index does not append to it (two
/// indexes appending to one file would interleave their rows); it keeps reading the rows
/// spilled before the clone, which never change.
#[derive(Debug, Default)]
struct Spill {
    to: Option<Arc<dyn RowSpill>>,
    /// Rows appended so far: the spill holds exactly the source rows `0..rows`.
    rows: usize,
    /// Rows in RAM that make the tail go to the spill.
    every: usize,
}

impl Clone for Spill {
    fn clone(&self) -> Self {
        Spill {
            to: None,
            rows: self.rows,
            every: self.every,
        }
    }
}

/// Where a row lives when it is not the source's row of the same slot.
#[derive(Debug, Clone)]
enum Row {
    /// Written after the load.
    Ram(Box<[f32]>),
    /// The source's row of another slot (moved here when a vector was removed).
    Source(usize),
}

/// The f32 rows, by slot. Slots `0..base_len` read the source's row of the same number
/// unless `moved` says otherwise; slots from `base_len` on are in `tail`, in order. An
/// index built in RAM has no source and everything in `tail`. A write never copies the
/// source's rows into RAM: an insert appends to `tail`, a replacement of a loaded slot
/// goes to `moved`, a removal moves the last slot's row (or, for a loaded slot, just its
/// row number) into the freed slot. With a spill, an index that has no other source
/// appends its tail there whenever it reaches [`SPILL_ROWS`] rows, and the spill becomes
/// its source.
#[derive(Debug, Clone)]
struct Rows {
    dim: usize,
    source: Option<Arc<dyn RowSource>>,
    base_len: usize,
    moved: HashMap<usize, Row>,
    tail: Vec<f32>,
    spill: Spill,
}

/// Rows read from the source at once by whole-index walks.
const ROWS_PER_READ: usize = 256;
/// Rows wanted this close together are read in one piece (the rows between included).
const ROWS_GAP: usize = 4;

impl Rows {
    fn new(dim: usize) -> Self {
        Self {
            dim,
            source: None,
            base_len: 0,
            moved: HashMap::new(),
            tail: Vec::new(),
            spill: Spill::default(),
        }
    }

    /// Appends the tail to the spill when it is due and the source rows are exactly what
    /// the spill holds (none yet, or all of them: a removal that shrank the loaded rows, or
    /// a source from elsewhere, ends spilling). A failed append ends spilling too; the
    /// rows stay in RAM.
    fn spill_tail(&mut self) {
        let d = self.dim.max(1);
        let Some(to) = &self.spill.to else { return };
        if self.tail.len() / d < self.spill.every.max(1) {
            return;
        }
        let ours = match &self.source {
            None => self.spill.rows == 0 && self.base_len == 0,
            Some(_) => self.spill.rows > 0 && self.base_len == self.spill.rows,
        };
        if !ours {
            self.spill.to = None;
            return;
        }
        let bytes: Vec<u8> = self.tail.iter().flat_map(|x| x.to_le_bytes()).collect();
        if to.append(&bytes).is_err() {
            self.spill.to = None;
            return;
        }
        let n = self.tail.len() / d;
        self.source = Some(to.clone() as Arc<dyn RowSource>);
        self.base_len += n;
        self.spill.rows += n;
        self.tail.clear();
    }

    /// `count` consecutive source rows from `first`, appended to `out`.
    fn read_source(&self, first: usize, count: usize, out: &mut Vec<f32>) -> Result<(), CoreError> {
        let Some(src) = &self.source else {
            return Err(CoreError::RowRead("no rows to read from".into()));
        };
        let mut bytes = vec![0u8; count * self.dim * 4];
        let offset = (first * self.dim * 4) as u64;
        src.read_at(offset, &mut bytes)
            .map_err(|e| CoreError::RowRead(e.to_string()))?;
        out.extend(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
        Ok(())
    }

    /// The row of `slot` (< the number of slots).
    fn get(&self, slot: usize) -> Result<Cow<'_, [f32]>, CoreError> {
        let d = self.dim;
        if slot >= self.base_len {
            let at = (slot - self.base_len) * d;
            return Ok(Cow::Borrowed(&self.tail[at..at + d]));
        }
        let from = match self.moved.get(&slot) {
            Some(Row::Ram(v)) => return Ok(Cow::Borrowed(v)),
            Some(Row::Source(r)) => *r,
            None => slot,
        };
        let mut v = Vec::with_capacity(d);
        self.read_source(from, 1, &mut v)?;
        Ok(Cow::Owned(v))
    }

    /// Calls `f` with the row of each of `slots` (ascending), reading source rows that are
    /// close together in one piece.
    fn for_slots(
        &self,
        slots: &[usize],
        mut f: impl FnMut(usize, &[f32]),
    ) -> Result<(), CoreError> {
        let d = self.dim;
        let mut buf = Vec::new();
        let mut i = 0;
        while i < slots.len() {
            let first = slots[i];
            if first >= self.base_len {
                f(first, &self.get(first)?);
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < slots.len()
                && slots[j] < self.base_len
                && slots[j] - first < ROWS_PER_READ
                && slots[j] - slots[j - 1] <= ROWS_GAP
            {
                j += 1;
            }
            buf.clear();
            self.read_source(first, slots[j - 1] + 1 - first, &mut buf)?;
            for &slot in &slots[i..j] {
                match self.moved.get(&slot) {
                    None => f(slot, &buf[(slot - first) * d..(slot - first + 1) * d]),
                    Some(Row::Ram(v)) => f(slot, v),
                    Some(Row::Source(_)) => f(slot, &self.get(slot)?),
                }
            }
            i = j;
        }
        Ok(())
    }

    fn push(&mut self, v: &[f32]) {
        self.tail.extend_from_slice(v);
        self.spill_tail();
    }

    fn set(&mut self, slot: usize, v: &[f32]) {
        let d = self.dim;
        if slot >= self.base_len {
            let at = (slot - self.base_len) * d;
            self.tail[at..at + d].copy_from_slice(v);
        } else {
            self.moved.insert(slot, Row::Ram(v.into()));
        }
    }

    /// Moves the row of the last of `len` slots into `slot` and drops the last slot.
    fn swap_remove(&mut self, slot: usize, len: usize) {
        let d = self.dim;
        let last = len - 1;
        if last >= self.base_len {
            let at = (last - self.base_len) * d;
            if slot != last {
                if slot >= self.base_len {
                    self.tail
                        .copy_within(at..at + d, (slot - self.base_len) * d);
                } else {
                    self.moved
                        .insert(slot, Row::Ram(self.tail[at..at + d].into()));
                }
            }
            self.tail.truncate(at);
        } else {
            // nothing in the tail: the last slot is a loaded one
            let row = self.moved.remove(&last).unwrap_or(Row::Source(last));
            if slot != last {
                self.moved.insert(slot, row);
            }
            self.base_len = last;
            if self.base_len == 0 && self.moved.is_empty() {
                self.source = None;
            }
        }
    }

    /// Calls `f` with every row in slot order (`len` slots), reading the source in runs.
    fn for_each(&self, len: usize, mut f: impl FnMut(usize, &[f32])) -> Result<(), CoreError> {
        let d = self.dim.max(1);
        let mut buf = Vec::new();
        let mut first = 0;
        while first < self.base_len {
            let count = ROWS_PER_READ.min(self.base_len - first);
            buf.clear();
            self.read_source(first, count, &mut buf)?;
            for (i, row) in buf.chunks_exact(d).enumerate() {
                let slot = first + i;
                match self.moved.get(&slot) {
                    None => f(slot, row),
                    Some(Row::Ram(v)) => f(slot, v),
                    Some(Row::Source(_)) => f(slot, &self.get(slot)?),
                }
            }
            first += count;
        }
        for (i, row) in self.tail.chunks_exact(d).enumerate() {
            let slot = self.base_len + i;
            if slot < len {
                f(slot, row);
            }
        }
        Ok(())
    }

    /// Bytes of rows held in RAM.
    fn heap_bytes(&self) -> usize {
        let moved = self
            .moved
            .values()
            .filter(|r| matches!(r, Row::Ram(_)))
            .count();
        (self.tail.len() + moved * self.dim) * 4
    }
}

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

/// One bit per dimension, set where the component is positive; unused bits stay 0.
fn sign_code(v: &[f32], out: &mut [u64]) {
    out.iter_mut().for_each(|w| *w = 0);
    for (i, x) in v.iter().enumerate() {
        if *x > 0.0 {
            out[i / 64] |= 1 << (i % 64);
        }
    }
}

#[inline]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Chunked so LLVM vectorises it (pmaddwd on SSE2, vpmaddwd on AVX2 / AVX-512).
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

/// How far a query's int8 score of a row can lie from its f32 cosine.
///
/// With the normalised query `q = q̂ + δq` and a stored unit row `x = x̂ + δx` (`q̂`,
/// `x̂` their dequantised codes), `q·x − q̂·x̂ = q̂·δx + δq·x`. Rounding to the nearest
/// code keeps each `|δx_i| ≤ s_x / 2` (`s_x` the row's scale), so `|q̂·δx| ≤ s_x · Σ|q̂_i|
/// / 2`; and `|δq·x| ≤ ‖δq‖` (Cauchy–Schwarz, `‖x‖ = 1`). A candidate whose upper bound
/// lies below the `k`-th best lower bound has `k` others surely above it: dropping it
/// changes nothing in the `k` best by f32.
struct Int8Bound {
    q_scale: f32,
    /// `Σ|q̂_i| / 2`
    half_abs: f32,
    /// `‖δq‖` plus room for f32 rounding in the sums and scores (~1e-6 each)
    fixed: f32,
}

impl Int8Bound {
    fn new(query: &[f32], q: &[i8], q_scale: f32) -> Self {
        let abs = q.iter().map(|&b| f32::from(b).abs()).sum::<f32>() * q_scale;
        let dq = query
            .iter()
            .zip(q)
            .map(|(x, &b)| {
                let e = x - f32::from(b) * q_scale;
                e * e
            })
            .sum::<f32>()
            .sqrt();
        Int8Bound {
            q_scale,
            half_abs: abs / 2.0,
            fixed: dq + 1e-4,
        }
    }

    /// (lower, upper) bound of the cosine of a row with int8 `score` (its dot product
    /// with the query's codes times `row_scale`, as the scans give it).
    fn range(&self, score: f32, row_scale: f32) -> (f32, f32) {
        let approx = score * self.q_scale;
        let err = row_scale * self.half_abs + self.fixed;
        (approx - err, approx + err)
    }
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

/// Codes whose distances are computed first, spread evenly over the memory, to guess a
/// cut-off distance for the one full pass of [`nearest_codes_sampled`].
const SAMPLE_CODES: usize = 4096;

/// Hamming distance of two codes of `W` words.
#[inline]
fn hamming<const W: usize>(code: &[u64], q: &[u64; W]) -> u32 {
    let mut d = 0u32;
    for i in 0..W {
        d += (code[i] ^ q[i]).count_ones();
    }
    d
}

/// The slots of the `want` codes (`W` words each) nearest to `q`: exactly what
/// [`nearest_codes`] returns over all distances, in one pass that keeps only the codes
/// within a cut-off guessed from a sample (twice the wanted share of the sample, and more).
/// If fewer than `want` codes are within it, all distances are counted after all.
fn nearest_codes_sampled<const W: usize>(codes: &[u64], q: &[u64], want: usize) -> Vec<u32> {
    let mut qw = [0u64; W];
    qw.copy_from_slice(&q[..W]);
    let n = codes.len() / W;
    if want >= n {
        return (0..n as u32).collect();
    }
    let stride = (n / SAMPLE_CODES).max(1);
    let mut hist = vec![0usize; W * 64 + 1];
    let mut sampled = 0usize;
    for code in codes.chunks_exact(W).step_by(stride) {
        hist[hamming(code, &qw) as usize] += 1;
        sampled += 1;
    }
    let need = (2 * want * sampled).div_ceil(n) + 16;
    let (mut cut, mut seen) = (0usize, 0usize);
    while cut + 1 < hist.len() && seen + hist[cut] < need {
        seen += hist[cut];
        cut += 1;
    }
    let mut near: Vec<(u16, u32)> = Vec::with_capacity(4 * want);
    for (slot, code) in codes.chunks_exact(W).enumerate() {
        let d = hamming(code, &qw) as usize;
        if d <= cut {
            near.push((d as u16, slot as u32));
        }
    }
    if near.len() < want {
        let mut dist = Vec::with_capacity(n);
        dist.extend(codes.chunks_exact(W).map(|c| hamming(c, &qw) as u16));
        return nearest_codes(&dist, want);
    }
    // every code not in `near` is farther than every code in it
    pick_nearest(near.iter().copied(), want)
}

/// Hamming distance of two codes of any (the same) number of words.
#[inline]
fn hamming_slices(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

#[inline]
fn hamming_any(codes: &[u64], q: &[u64], words: usize, out: &mut Vec<u16>) {
    out.extend(
        codes
            .chunks_exact(words.max(1))
            .map(|c| hamming_slices(c, q) as u16),
    );
}

/// The slots of the `want` smallest distances: all below the cut-off distance, then
/// those at it in slot order. Counting (distances are at most `dim`), so O(n).
fn nearest_codes(dist: &[u16], want: usize) -> Vec<u32> {
    pick_nearest(
        dist.iter().enumerate().map(|(slot, &d)| (d, slot as u32)),
        want,
    )
}

/// The slots of the `want` smallest distances among `(distance, slot)` pairs given in
/// slot order: all below the cut-off distance, then those at it in slot order.
fn pick_nearest(pairs: impl Iterator<Item = (u16, u32)> + Clone, want: usize) -> Vec<u32> {
    let max = pairs.clone().map(|(d, _)| d).max();
    let mut hist = vec![0usize; max.map_or(0, usize::from) + 1];
    for (d, _) in pairs.clone() {
        hist[d as usize] += 1;
    }
    // the cut-off: the smallest t with at least `want` distances <= t
    let (mut t, mut below) = (0usize, 0usize);
    while t < hist.len() && below + hist[t] < want {
        below += hist[t];
        t += 1;
    }
    let mut at_cut = want.saturating_sub(below);
    let mut out = Vec::with_capacity(want.min(hist.iter().sum()));
    for (d, slot) in pairs {
        let d = d as usize;
        if d < t {
            out.push(slot);
        } else if d == t && at_cut > 0 {
            out.push(slot);
            at_cut -= 1;
        }
    }
    out
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

    /// The slots of the `want` codes nearest to `query`'s by Hamming distance.
    fn prefilter_slots(&self, query: &[f32], want: usize) -> Vec<u32> {
        let mut qc = vec![0u64; self.words];
        sign_code(query, &mut qc);
        let n = self.ids.len();
        if let Some(lists) = self.lists.as_ref().filter(|_| self.reads_lists()) {
            let min_scan = (n / LISTS_SCAN_FRACTION).max(2 * want);
            let near = lists.near(&qc, min_scan);
            let mut slots = pick_nearest(near.iter().copied(), want);
            // in slot order, as the full pass gives them: the int8 scan reads rows in order
            slots.sort_unstable();
            return slots;
        }
        match self.words {
            6 => nearest_codes_sampled::<6>(&self.codes, &qc, want),
            12 => nearest_codes_sampled::<12>(&self.codes, &qc, want),
            w => {
                let mut dist = Vec::with_capacity(self.ids.len());
                hamming_any(&self.codes, &qc, w, &mut dist);
                nearest_codes(&dist, want)
            }
        }
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

    /// Writes the index (ids in slot order, int8 vectors and scales, sign codes) for
    /// [`VectorIndex::decode`]; the f32 rows are written apart ([`VectorIndex::encode_rows`]),
    /// so that a reader can leave them where they are. Thread count and prefilter are not
    /// stored.
    pub fn encode(&self, e: &mut Encoder) {
        let _ = self.encode_drained::<std::convert::Infallible>(e, &mut |_| Ok(()));
    }

    /// [`VectorIndex::encode`] handing the bytes to `drain` as they pile up (a 100k-note
    /// index is ~45 MB, which a writer need not hold at once).
    pub fn encode_drained<E>(&self, e: &mut Encoder, drain: Drain<'_, E>) -> Result<(), E> {
        e.len32(self.dim);
        e.len32(self.ids.len());
        for id in &self.ids {
            e.id(id);
            e.drain_if_full(&mut *drain)?;
        }
        e.i8s_drained(&self.quant, &mut *drain)?;
        e.f32s_drained(&self.scales, &mut *drain)?;
        e.u64s_drained(&self.codes, drain)
    }

    /// Writes the f32 rows in slot order ([`row_bytes`](VectorIndex::row_bytes) bytes),
    /// the layout a [`RowSource`] reads.
    pub fn encode_rows(&self, e: &mut Encoder) -> Result<(), CoreError> {
        self.full.for_each(self.ids.len(), |_, row| e.f32s(row))
    }

    /// Reads an index written by [`VectorIndex::encode`], exactly as it was (same slots),
    /// its f32 rows left in `rows` (which must hold [`row_bytes`](VectorIndex::row_bytes)
    /// bytes written by [`VectorIndex::encode_rows`]; the caller checks their length and
    /// checksum).
    pub fn decode(d: &mut Decoder<'_>, rows: Arc<dyn RowSource>) -> Result<Self, SnapshotError> {
        let dim = d.u32()? as usize;
        if dim == 0 || dim > 1 << 16 {
            return Err(snapshot::invalid(format!("vector dimension {dim}")));
        }
        let n = d.count(1)?;
        let mut ix = VectorIndex::new(dim);
        ix.ids.reserve_exact(n);
        ix.slot_of.reserve(n);
        for slot in 0..n {
            let id = d.id()?;
            if ix.slot_of.insert(id.clone(), slot).is_some() {
                return Err(snapshot::invalid(format!(
                    "note {id} is in the vector index twice"
                )));
            }
            ix.ids.push(id);
        }
        let cells = n
            .checked_mul(dim)
            .ok_or_else(|| snapshot::invalid("vector index size overflows"))?;
        ix.full.source = Some(rows);
        ix.full.base_len = n;
        ix.quant = d.i8s(cells)?;
        ix.scales = d.f32s(n)?;
        ix.codes = d.u64s(n * ix.words)?;
        ix.refresh_lists();
        Ok(ix)
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

    /// The stored vector of `id` (empty if there is none).
    fn row(ix: &VectorIndex, id: &NoteId) -> Vec<f32> {
        ix.get(id)
            .ok()
            .flatten()
            .map(|v| v.to_vec())
            .unwrap_or_default()
    }

    /// Rows in a byte buffer, as the engine's snapshot file holds them; counts the rows
    /// read and can be made to fail.
    #[derive(Debug, Default)]
    struct Bytes {
        bytes: Vec<u8>,
        row_len: usize,
        rows_read: std::sync::atomic::AtomicUsize,
        broken: std::sync::atomic::AtomicBool,
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
    fn reloaded(ix: &VectorIndex) -> (VectorIndex, Arc<Bytes>) {
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
        let back = VectorIndex::decode(&mut dec, src.clone()).unwrap();
        dec.finish().unwrap();
        (back, src)
    }

    /// Every (id, vector bits) in slot order.
    fn vectors(ix: &VectorIndex) -> Vec<(NoteId, Vec<u32>)> {
        let mut out = Vec::new();
        let walked = ix.for_each_vector(|id, v| {
            out.push((id.clone(), v.iter().map(|x| x.to_bits()).collect()));
        });
        assert!(walked.is_ok());
        out
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
        ix.set_prefilter(None);
        ix.set_threads(4);
        let q = rand_vec(&mut rng, d);
        let par = ix.search(&q, 10).unwrap_or_default();
        ix.set_threads(1);
        let ser = ix.search(&q, 10).unwrap_or_default();
        assert_eq!(par, ser);
        assert_matches_exact(&ix, &q, 10);
    }

    /// Clustered vectors, like sentence embeddings: 50 topics, each note a topic plus noise.
    fn clustered(rng: &mut StdRng, centers: &[Vec<f32>], d: usize) -> Vec<f32> {
        let c = &centers[rng.random_range(0..centers.len())];
        (0..d)
            .map(|i| c[i] + 0.35 * rng.random_range(-1.0f32..1.0))
            .collect()
    }

    #[test]
    fn prefilter_keeps_the_nearest_codes() {
        let mut rng = StdRng::seed_from_u64(5);
        let d = 96; // two words, the last half-used
        let mut ix = VectorIndex::new(d);
        for i in 0..2000 {
            assert!(ix.upsert(id(i), &rand_vec(&mut rng, d)).is_ok());
        }
        let q = normalized(&rand_vec(&mut rng, d)).unwrap_or_default();
        let mut qc = vec![0u64; ix.words];
        sign_code(&q, &mut qc);
        let dist: Vec<u32> = ix
            .codes
            .chunks_exact(ix.words)
            .map(|c| c.iter().zip(&qc).map(|(a, b)| (a ^ b).count_ones()).sum())
            .collect();
        // the sign code agrees with the vector
        let v = row(&ix, &id(0));
        let bits: u32 = ix.codes[..ix.words].iter().map(|w| w.count_ones()).sum();
        assert_eq!(bits as usize, v.iter().filter(|x| **x > 0.0).count());
        for want in [1, 37, 500, 1999, 2000, 5000] {
            let slots = ix.prefilter_slots(&q, want);
            assert_eq!(slots.len(), want.min(2000), "want {want}");
            let mut taken = vec![false; 2000];
            for &s in &slots {
                assert!(!taken[s as usize], "slot {s} twice");
                taken[s as usize] = true;
            }
            let worst_in = slots.iter().map(|&s| dist[s as usize]).max();
            let best_out = (0..2000).filter(|&s| !taken[s]).map(|s| dist[s]).min();
            if let (Some(a), Some(b)) = (worst_in, best_out) {
                assert!(a <= b, "want {want}: kept distance {a}, dropped {b}");
            }
        }
        assert_eq!(nearest_codes(&[3, 0, 3, 1, 3], 3), vec![0, 1, 3]);
        assert!(nearest_codes(&[], 3).is_empty());
    }

    #[test]
    fn the_sampled_cut_off_keeps_what_counting_every_distance_keeps() {
        let mut rng = StdRng::seed_from_u64(17);
        let n = 30_000;
        let all = |codes: &[u64], q: &[u64]| -> Vec<u16> {
            codes
                .chunks_exact(6)
                .map(|c| {
                    c.iter()
                        .zip(q)
                        .map(|(a, b)| (a ^ b).count_ones())
                        .sum::<u32>() as u16
                })
                .collect()
        };
        // random codes: many ties at every distance
        let codes: Vec<u64> = (0..n * 6).map(|_| rng.random()).collect();
        let q: Vec<u64> = (0..6).map(|_| rng.random()).collect();
        let dist = all(&codes, &q);
        for want in [1, 10, 600, 2000, 29_999, 30_000, 40_000] {
            assert_eq!(
                nearest_codes_sampled::<6>(&codes, &q, want),
                nearest_codes(&dist, want),
                "want {want}"
            );
        }
        // a sample that lies: the codes it looks at are the query's own, every other code
        // is far, so its cut-off keeps too few and every distance is counted after all
        let stride = n / SAMPLE_CODES;
        let mut codes = codes;
        for slot in 0..n {
            let near = slot % stride == 0;
            for w in 0..6 {
                codes[slot * 6 + w] = if near {
                    q[w]
                } else {
                    !q[w] ^ (slot as u64 & 7)
                };
            }
        }
        let dist = all(&codes, &q);
        for want in [100, 5000, 9000] {
            let got = nearest_codes_sampled::<6>(&codes, &q, want);
            assert_eq!(got, nearest_codes(&dist, want), "want {want}");
            assert_eq!(got.len(), want);
        }
    }

    /// `n` clustered vectors around `centers`, prefiltered from 1,000 vectors on, read
    /// by lists from `lists_min` on.
    fn clustered_index(
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
    fn clustered_recall(
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

    #[test]
    fn prefiltered_search_equals_brute_force_on_clustered_vectors_after_churn() {
        let mut rng = StdRng::seed_from_u64(13);
        let d = 384;
        let centers: Vec<Vec<f32>> = (0..50).map(|_| rand_vec(&mut rng, d)).collect();
        let mut ix = clustered_index(&mut rng, &centers, 6000, usize::MAX);
        let check = |ix: &VectorIndex, rng: &mut StdRng| clustered_recall(ix, rng, &centers, 30);
        assert!(check(&ix, &mut rng) >= 0.99);
        for i in (0..6000).step_by(3) {
            assert!(ix.remove(&id(i)));
        }
        for i in (1..6000).step_by(3) {
            assert!(ix.upsert(id(i), &clustered(&mut rng, &centers, d)).is_ok());
        }
        assert_eq!(ix.len(), 4000);
        assert!(check(&ix, &mut rng) >= 0.99);
        // a stored vector is always its own nearest neighbour (Hamming distance 0)
        for i in (1..6000).step_by(96) {
            let v = row(&ix, &id(i));
            let hits = ix.search(&v, 1).unwrap_or_default();
            assert_eq!(hits[0].0, id(i));
        }
    }

    /// The index's lists hold every slot once, with its code, through inserts,
    /// replacements and removals, across a retraining and after a snapshot load.
    fn assert_lists_consistent(ix: &VectorIndex) {
        match &ix.lists {
            Some(l) => l.assert_consistent(&ix.codes),
            None => panic!("no lists at {} vectors", ix.len()),
        }
    }

    #[test]
    fn the_lists_keep_every_code_through_churn() {
        let mut rng = StdRng::seed_from_u64(21);
        let d = 96;
        let mut ix = VectorIndex::new(d);
        ix.set_lists_min(1000);
        for i in 0..999 {
            assert!(ix.upsert(id(i), &rand_vec(&mut rng, d)).is_ok());
        }
        assert!(ix.lists.is_none(), "no lists below the threshold");
        assert!(ix.upsert(id(999), &rand_vec(&mut rng, d)).is_ok());
        assert_lists_consistent(&ix);
        assert!(ix.lists.as_ref().is_some_and(|l| l.trained_at() == 1000));
        for i in 1000..2100 {
            assert!(ix.upsert(id(i), &rand_vec(&mut rng, d)).is_ok());
        }
        // the index doubled since the lists were built: trained again
        assert!(ix.lists.as_ref().is_some_and(|l| l.trained_at() == 2000));
        assert_lists_consistent(&ix);
        for round in 0..3 {
            // replacements, removals (the last slot moves) and inserts, interleaved
            for i in (round..3000).step_by(7) {
                assert!(ix.upsert(id(i), &rand_vec(&mut rng, d)).is_ok());
            }
            for i in (round..3000).step_by(5) {
                ix.remove(&id(i));
            }
            assert_lists_consistent(&ix);
        }
        // a loaded index builds its lists again (they are not in the snapshot)
        let (mut back, _) = reloaded(&ix);
        back.set_lists_min(1000);
        assert_lists_consistent(&back);
        // below half the threshold the lists go
        let ids: Vec<NoteId> = ix.ids().to_vec();
        for i in &ids[..ids.len() - 400] {
            ix.remove(i);
        }
        assert!(ix.lists.is_none());
    }

    #[test]
    fn searching_the_nearest_lists_finds_the_nearest_vectors_of_clustered_data() {
        let mut rng = StdRng::seed_from_u64(17);
        let d = 384;
        let centers: Vec<Vec<f32>> = (0..80).map(|_| rand_vec(&mut rng, d)).collect();
        let ix = clustered_index(&mut rng, &centers, 8000, 4000);
        assert!(ix.lists.is_some());
        let recall = clustered_recall(&ix, &mut rng, &centers, 40);
        assert!(recall >= 0.99, "recall {recall}");
        // a stored vector is its own nearest neighbour (its list is read first)
        for i in (0..8000).step_by(97) {
            let v = row(&ix, &id(i));
            let hits = ix.search(&v, 1).unwrap_or_default();
            assert_eq!(hits[0].0, id(i));
        }
        // the lists read what a loaded index reads
        let (mut back, _) = reloaded(&ix);
        back.set_lists_min(4000);
        let q = clustered(&mut rng, &centers, d);
        assert_eq!(ix.search(&q, 10).ok(), back.search(&q, 10).ok());
    }

    /// Vectors of three shapes: uniform, clustered, and spiky (one large component, the
    /// worst case for a per-row scale).
    fn mixed_vectors(rng: &mut StdRng, n: usize, d: usize) -> Vec<Vec<f32>> {
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

    #[test]
    fn the_int8_bound_holds_for_every_row_and_query() {
        let mut rng = StdRng::seed_from_u64(31);
        let d = 384;
        let vectors = mixed_vectors(&mut rng, 1500, d);
        let mut ix = VectorIndex::new(d);
        for (i, v) in vectors.iter().enumerate() {
            assert!(ix.upsert(id(i), v).is_ok());
        }
        let mut widest = 0f32;
        for query in mixed_vectors(&mut rng, 30, d) {
            let qn = normalized(&query).unwrap_or_default();
            let mut q = vec![0i8; d];
            let qs = quantize(&qn, &mut q);
            let bound = Int8Bound::new(&qn, &q, qs);
            for slot in 0..ix.len() {
                let exact = dot_f32(&qn, &ix.full.get(slot).unwrap_or_default());
                let score =
                    dot_i8(&q, &ix.quant[slot * d..(slot + 1) * d]) as f32 * ix.scales[slot];
                let (lo, hi) = bound.range(score, ix.scales[slot]);
                assert!(
                    lo <= exact && exact <= hi,
                    "slot {slot}: {exact} outside {lo}..{hi}"
                );
                widest = widest.max(hi - lo);
            }
        }
        // and it is a bound worth having: far narrower than the cosine's range
        assert!(widest < 0.2, "widest bound {widest}");
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

    #[test]
    fn a_decoded_index_answers_exactly_as_the_encoded_one_after_churn() {
        let mut rng = StdRng::seed_from_u64(23);
        let d = 96;
        let mut ix = VectorIndex::new(d);
        for i in 0..600 {
            assert!(ix.upsert(id(i), &rand_vec(&mut rng, d)).is_ok());
        }
        for i in (0..600).step_by(4) {
            assert!(ix.remove(&id(i)));
        }
        for i in (1..600).step_by(5) {
            assert!(ix.upsert(id(i), &rand_vec(&mut rng, d)).is_ok());
        }
        // written in pieces (as the engine writes a snapshot), the same bytes
        let mut whole = Encoder::new();
        ix.encode(&mut whole);
        for at in [1, 100, 4096] {
            let mut e = Encoder::new().draining_at(at);
            let mut out = Vec::new();
            let drained = ix.encode_drained(&mut e, &mut |e: &mut Encoder| {
                out.extend_from_slice(e.as_bytes());
                e.clear();
                Ok::<(), ()>(())
            });
            assert!(drained.is_ok());
            out.extend_from_slice(e.as_bytes());
            assert_eq!(out, whole.as_bytes(), "draining at {at}");
        }
        let (back, _) = reloaded(&ix);
        assert_eq!(back.len(), ix.len());
        assert_eq!(back.dim(), d);
        assert_eq!(back.ids, ix.ids);
        assert_eq!(back.slot_of, ix.slot_of);
        assert_eq!(back.quant, ix.quant);
        assert_eq!(back.codes, ix.codes);
        assert_eq!(vectors(&back), vectors(&ix));
        assert!(
            back.scales
                .iter()
                .zip(&ix.scales)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        for _ in 0..10 {
            let q = rand_vec(&mut rng, d);
            assert_eq!(back.search(&q, 10).unwrap(), ix.search(&q, 10).unwrap());
        }
        // updates keep working on the decoded index
        let mut back = back;
        assert!(back.remove(&id(1)));
        assert!(back.upsert(id(9999), &rand_vec(&mut rng, d)).is_ok());
        assert_eq!(back.len(), ix.len());
    }

    /// The same writes on an index built in RAM and on one whose rows were left in the
    /// snapshot: same vectors, same answers (and those equal brute force), at every step.
    #[test]
    fn rows_left_in_the_snapshot_answer_as_rows_in_ram_through_inserts_replacements_and_removals() {
        use std::sync::atomic::Ordering::SeqCst;
        let mut rng = StdRng::seed_from_u64(29);
        let d = 384;
        let centers: Vec<Vec<f32>> = (0..40).map(|_| rand_vec(&mut rng, d)).collect();
        let mut ram = VectorIndex::new(d);
        let small = Some(Prefilter {
            min_len: 500,
            min_candidates: 200,
            fraction: 20,
            per_cut: 16,
        });
        ram.set_prefilter(small);
        for i in 0..3000 {
            assert!(ram.upsert(id(i), &clustered(&mut rng, &centers, d)).is_ok());
        }
        let (mut disk, src) = reloaded(&ram);
        disk.set_prefilter(small);
        // the rows are not in RAM: only the quantised vectors, scales and codes are
        let row_bytes = 3000 * d * 4;
        assert_eq!(ram.memory_bytes() - disk.memory_bytes(), row_bytes);

        let same = |ram: &VectorIndex, disk: &VectorIndex, rng: &mut StdRng| {
            assert_eq!(ram.len(), disk.len());
            assert_eq!(vectors(disk), vectors(ram));
            for _ in 0..8 {
                let q = clustered(rng, &centers, d);
                let before = src.rows_read.load(SeqCst);
                let hits = disk.search(&q, 10).unwrap();
                // a search reads the 64 rows it rescores (and those between two of them
                // close together), not the whole index
                let read = src.rows_read.load(SeqCst) - before;
                assert!(read <= 64 * (ROWS_GAP + 1), "{read} rows read");
                assert_eq!(hits, ram.search(&q, 10).unwrap());
                assert_eq!(
                    disk.search_exact(&q, 10).unwrap(),
                    ram.search_exact(&q, 10).unwrap()
                );
                assert_matches_exact(disk, &q, 10);
            }
            for i in (0..4000).step_by(37) {
                assert_eq!(row(disk, &id(i)), row(ram, &id(i)), "note {i}");
            }
        };
        same(&ram, &disk, &mut rng);

        fn both(a: &mut VectorIndex, b: &mut VectorIndex, mut f: impl FnMut(&mut VectorIndex)) {
            f(a);
            f(b);
        }
        // inserts on top of the loaded rows
        let fresh: Vec<Vec<f32>> = (0..300).map(|_| clustered(&mut rng, &centers, d)).collect();
        both(&mut ram, &mut disk, |ix| {
            for (i, v) in fresh.iter().enumerate() {
                assert!(ix.upsert(id(3000 + i), v).is_ok());
            }
        });
        // replacements of loaded and of inserted slots
        let again: Vec<Vec<f32>> = (0..3300)
            .step_by(7)
            .map(|_| clustered(&mut rng, &centers, d))
            .collect();
        both(&mut ram, &mut disk, |ix| {
            for (i, v) in (0..3300).step_by(7).zip(&again) {
                assert!(ix.upsert(id(i), v).is_ok());
            }
        });
        same(&ram, &disk, &mut rng);
        // in RAM: the inserted rows and those of loaded slots replaced since the load
        let replaced = (0..3000).step_by(7).count();
        assert_eq!(
            ram.memory_bytes() - disk.memory_bytes(),
            row_bytes - replaced * d * 4
        );
        // removals: inserted slots, loaded slots (the last slot's row moves into them)
        both(&mut ram, &mut disk, |ix| {
            for i in (0..3300).step_by(3) {
                assert!(ix.remove(&id(i)));
            }
        });
        same(&ram, &disk, &mut rng);
        // remove every inserted note, then loaded ones down to a handful: the loaded
        // slots shrink, moved rows move again
        both(&mut ram, &mut disk, |ix| {
            for i in (3000..3300).chain(0..2990) {
                ix.remove(&id(i));
            }
        });
        assert!(!disk.is_empty() && disk.len() < 10);
        same(&ram, &disk, &mut rng);
        both(&mut ram, &mut disk, |ix| {
            for i in 0..3300 {
                ix.remove(&id(i));
            }
        });
        assert!(disk.is_empty());
        assert!(disk.full.source.is_none());
        both(&mut ram, &mut disk, |ix| {
            for (i, v) in fresh.iter().enumerate().take(50) {
                assert!(ix.upsert(id(i), v).is_ok());
            }
        });
        same(&ram, &disk, &mut rng);
    }

    /// An append-only row file in RAM; appends fail once `fail_after` have succeeded.
    #[derive(Debug)]
    struct Growing {
        bytes: std::sync::Mutex<Vec<u8>>,
        appends: std::sync::atomic::AtomicUsize,
        fail_after: usize,
    }

    impl Growing {
        fn new(fail_after: usize) -> Arc<Self> {
            Arc::new(Growing {
                bytes: std::sync::Mutex::new(Vec::new()),
                appends: Default::default(),
                fail_after,
            })
        }
        fn len(&self) -> usize {
            self.bytes.lock().map_or(0, |b| b.len())
        }
    }

    impl RowSource for Growing {
        fn read_at(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            let b = self
                .bytes
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?;
            let at = usize::try_from(offset).map_err(std::io::Error::other)?;
            let src = b
                .get(at..at + out.len())
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
            out.copy_from_slice(src);
            Ok(())
        }
    }

    impl RowSpill for Growing {
        fn append(&self, bytes: &[u8]) -> std::io::Result<()> {
            use std::sync::atomic::Ordering::SeqCst;
            if self.appends.fetch_add(1, SeqCst) >= self.fail_after {
                // half written, as a full disk leaves it
                if let Ok(mut b) = self.bytes.lock() {
                    b.extend_from_slice(&bytes[..bytes.len() / 2]);
                }
                return Err(std::io::Error::other("no space left"));
            }
            let mut b = self
                .bytes
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?;
            b.extend_from_slice(bytes);
            Ok(())
        }
    }

    #[test]
    fn a_growing_index_that_spills_its_rows_answers_as_one_that_keeps_them() {
        let mut rng = StdRng::seed_from_u64(31);
        let d = 384;
        let every = 100;
        let centers: Vec<Vec<f32>> = (0..40).map(|_| rand_vec(&mut rng, d)).collect();
        let small = Some(Prefilter {
            min_len: 500,
            min_candidates: 200,
            fraction: 20,
            per_cut: 16,
        });
        let same = |ram: &VectorIndex, spilled: &VectorIndex, rng: &mut StdRng| {
            assert_eq!(vectors(spilled), vectors(ram));
            for _ in 0..6 {
                let q = clustered(rng, &centers, d);
                assert_eq!(spilled.search(&q, 10).unwrap(), ram.search(&q, 10).unwrap());
                assert_eq!(
                    spilled.search_exact(&q, 10).unwrap(),
                    ram.search_exact(&q, 10).unwrap()
                );
            }
            for i in (0..3000).step_by(41) {
                assert_eq!(row(spilled, &id(i)), row(ram, &id(i)), "note {i}");
            }
        };
        for fail_after in [usize::MAX, 7] {
            let mut ram = VectorIndex::new(d);
            let mut spilled = VectorIndex::new(d);
            let file = Growing::new(fail_after);
            spilled.spill_rows_to(file.clone());
            spilled.full.spill.every = every;
            for ix in [&mut ram, &mut spilled] {
                ix.set_prefilter(small);
            }
            let vs: Vec<Vec<f32>> = (0..2550)
                .map(|_| clustered(&mut rng, &centers, d))
                .collect();
            for (i, v) in vs.iter().enumerate() {
                assert!(ram.upsert(id(i), v).is_ok());
                assert!(spilled.upsert(id(i), v).is_ok());
                // never more than a spill's worth of rows in RAM while it works
                let in_ram = spilled.full.heap_bytes() / (d * 4);
                if spilled.full.spill.to.is_some() {
                    assert!(in_ram < every, "{in_ram} rows in RAM after {i}");
                }
            }
            if fail_after == usize::MAX {
                assert_eq!(file.len(), 2500 * d * 4);
                assert_eq!(spilled.full.base_len, 2500);
            } else {
                // the failed append ended spilling: what was spilled is read from it, the
                // rest stays in RAM
                assert!(spilled.full.spill.to.is_none());
                assert_eq!(spilled.full.base_len, 7 * every);
                assert_eq!(spilled.full.heap_bytes(), (2550 - 7 * every) * d * 4);
            }
            same(&ram, &spilled, &mut rng);
            // a clone reads what was spilled but does not append to the same file
            let mut copy = spilled.clone();
            let before = file.len();
            for i in 2550..2800 {
                assert!(
                    copy.upsert(id(i), &clustered(&mut rng, &centers, d))
                        .is_ok()
                );
            }
            assert_eq!(file.len(), before);
            // replacements, removals (spilled slots too), then inserts again
            let again: Vec<Vec<f32>> = (0..2550)
                .step_by(5)
                .map(|_| clustered(&mut rng, &centers, d))
                .collect();
            for ix in [&mut ram, &mut spilled] {
                for (i, v) in (0..2550).step_by(5).zip(&again) {
                    assert!(ix.upsert(id(i), v).is_ok());
                }
                for i in (0..2550).step_by(3) {
                    assert!(ix.remove(&id(i)));
                }
            }
            same(&ram, &spilled, &mut rng);
            let more: Vec<Vec<f32>> = (0..450).map(|_| clustered(&mut rng, &centers, d)).collect();
            for ix in [&mut ram, &mut spilled] {
                for (i, v) in more.iter().enumerate() {
                    assert!(ix.upsert(id(2550 + i), v).is_ok());
                }
            }
            same(&ram, &spilled, &mut rng);
            // removing down to the spilled rows' middle, then growing: spilling stops (the
            // file holds rows the index no longer has) and nothing is read wrong
            for ix in [&mut ram, &mut spilled] {
                for i in 0..3000 {
                    if ix.len() <= 150 {
                        break;
                    }
                    ix.remove(&id(i));
                }
            }
            for ix in [&mut ram, &mut spilled] {
                for (i, v) in more.iter().enumerate() {
                    assert!(ix.upsert(id(5000 + i), v).is_ok());
                }
            }
            same(&ram, &spilled, &mut rng);
        }
    }

    #[test]
    fn a_spill_is_ignored_by_an_index_that_has_vectors_or_a_snapshot() {
        let mut rng = StdRng::seed_from_u64(37);
        let d = 64;
        let mut ix = VectorIndex::new(d);
        assert!(ix.upsert(id(0), &rand_vec(&mut rng, d)).is_ok());
        ix.spill_rows_to(Growing::new(usize::MAX));
        assert!(ix.full.spill.to.is_none());
        let (mut loaded, _) = reloaded(&ix);
        loaded.spill_rows_to(Growing::new(usize::MAX));
        assert!(loaded.full.spill.to.is_none());
        // emptied, it has neither: a spill is taken
        loaded.remove(&id(0));
        loaded.spill_rows_to(Growing::new(usize::MAX));
        assert!(loaded.full.spill.to.is_some());
    }

    #[test]
    fn rows_that_cannot_be_read_are_errors_not_panics() {
        use std::sync::atomic::Ordering::SeqCst;
        let mut rng = StdRng::seed_from_u64(31);
        let mut ix = VectorIndex::new(16);
        for i in 0..50 {
            assert!(ix.upsert(id(i), &rand_vec(&mut rng, 16)).is_ok());
        }
        let (back, src) = reloaded(&ix);
        src.broken.store(true, SeqCst);
        let q = rand_vec(&mut rng, 16);
        assert!(matches!(back.search(&q, 5), Err(CoreError::RowRead(_))));
        assert!(matches!(
            back.search_exact(&q, 5),
            Err(CoreError::RowRead(_))
        ));
        assert!(back.get(&id(3)).is_err());
        assert!(back.for_each_vector(|_, _| {}).is_err());
        assert!(back.encode_rows(&mut Encoder::new()).is_err());
        // fewer bytes than rows: an error too
        let short = Arc::new(Bytes {
            bytes: vec![0; 16 * 4 * 49],
            row_len: 64,
            ..Bytes::default()
        });
        let mut e = Encoder::new();
        ix.encode(&mut e);
        let bytes = e.into_bytes();
        let back = VectorIndex::decode(&mut Decoder::new(&bytes), short).unwrap();
        assert!(back.get(&id(49)).is_err());
        assert!(back.get(&id(48)).is_ok());
    }

    #[test]
    fn damaged_vector_bytes_are_errors_not_panics() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut ix = VectorIndex::new(16);
        for i in 0..20 {
            assert!(ix.upsert(id(i), &rand_vec(&mut rng, 16)).is_ok());
        }
        let rows: Arc<dyn RowSource> = Arc::new(Bytes::default());
        let mut e = Encoder::new();
        ix.encode(&mut e);
        let bytes = e.into_bytes();
        for cut in 0..bytes.len() {
            let mut dec = Decoder::new(&bytes[..cut]);
            assert!(
                VectorIndex::decode(&mut dec, rows.clone()).is_err(),
                "cut at {cut}"
            );
        }
        // an id repeated
        let mut twice = VectorIndex::new(16);
        let mut e = Encoder::new();
        twice.upsert(id(1), &rand_vec(&mut rng, 16)).unwrap();
        twice.ids.push(id(1));
        twice.encode(&mut e);
        let bytes = e.into_bytes();
        assert!(VectorIndex::decode(&mut Decoder::new(&bytes), rows.clone()).is_err());
        // a dimension of zero
        let mut e = Encoder::new();
        e.u32(0);
        e.u32(0);
        assert!(VectorIndex::decode(&mut Decoder::new(&e.into_bytes()), rows).is_err());
    }
}
