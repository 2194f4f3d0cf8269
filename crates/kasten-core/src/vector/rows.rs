//! Where the f32 rows live: in RAM, in a snapshot file read through a [`RowSource`], or
//! appended to a [`RowSpill`] while a large index grows.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use crate::CoreError;

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
pub(super) const SPILL_ROWS: usize = 4096;

/// The spill of a growing index. A clone of the index does not append to it (two
/// indexes appending to one file would interleave their rows); it keeps reading the rows
/// spilled before the clone, which never change.
#[derive(Debug, Default)]
pub(super) struct Spill {
    pub(super) to: Option<Arc<dyn RowSpill>>,
    /// Rows appended so far: the spill holds exactly the source rows `0..rows`.
    pub(super) rows: usize,
    /// Rows in RAM that make the tail go to the spill.
    pub(super) every: usize,
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
pub(super) struct Rows {
    dim: usize,
    pub(super) source: Option<Arc<dyn RowSource>>,
    pub(super) base_len: usize,
    moved: HashMap<usize, Row>,
    tail: Vec<f32>,
    pub(super) spill: Spill,
}

/// Rows read from the source at once by whole-index walks.
const ROWS_PER_READ: usize = 256;
/// Rows wanted this close together are read in one piece (the rows between included).
const ROWS_GAP: usize = 4;

impl Rows {
    pub(super) fn new(dim: usize) -> Self {
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
    pub(super) fn get(&self, slot: usize) -> Result<Cow<'_, [f32]>, CoreError> {
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
    pub(super) fn for_slots(
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

    pub(super) fn push(&mut self, v: &[f32]) {
        self.tail.extend_from_slice(v);
        self.spill_tail();
    }

    pub(super) fn set(&mut self, slot: usize, v: &[f32]) {
        let d = self.dim;
        if slot >= self.base_len {
            let at = (slot - self.base_len) * d;
            self.tail[at..at + d].copy_from_slice(v);
        } else {
            self.moved.insert(slot, Row::Ram(v.into()));
        }
    }

    /// Moves the row of the last of `len` slots into `slot` and drops the last slot.
    pub(super) fn swap_remove(&mut self, slot: usize, len: usize) {
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
    pub(super) fn for_each(
        &self,
        len: usize,
        mut f: impl FnMut(usize, &[f32]),
    ) -> Result<(), CoreError> {
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
    pub(super) fn heap_bytes(&self) -> usize {
        let moved = self
            .moved
            .values()
            .filter(|r| matches!(r, Row::Ram(_)))
            .count();
        (self.tail.len() + moved * self.dim) * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Decoder, Encoder};
    use crate::vector::test_util::*;
    use crate::vector::{Prefilter, VectorIndex};
    use rand::{SeedableRng, rngs::StdRng};

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
}
