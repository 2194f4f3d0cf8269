//! The sign codes grouped by cluster (an inverted file), so that the prefilter of a large
//! memory reads the codes of the clusters nearest the query instead of every code.
//!
//! At 100k notes the Hamming pass over every 48-byte code (4.8 MB) was most of a vector
//! search, bound by memory bandwidth. Here the codes are split into [`LISTS`] lists, each
//! around a centre code (the bitwise majority of its members, found by a few rounds of
//! k-modes on a sample); a query ranks the centres by Hamming distance and reads the
//! nearest lists until it has seen a fixed share of all codes (`min_scan`). Each list
//! keeps its own copy of its members' codes, contiguous, so a query streams ~1/8 of the
//! bytes. This is approximate where the full pass was not: a near code in a list that is
//! not read is missed. On 100k MiniLM vectors of the bench memory the exact top 10 was
//! still found for 300 of 300 queries reading 9 % of the codes (docs/BENCHMARKS.md).
//!
//! The lists are derived from the codes alone (same codes in the same slots, same
//! lists), so they are not written to the snapshot: a loaded index builds them again.
//! Writes keep them in step: a new vector joins the list of its nearest centre, a
//! replaced one moves, a removed one leaves (and the slot that moves into its place is
//! renamed in its list). The centres are found again when the index has doubled since.

/// Lists the codes are split into.
const LISTS: usize = 256;
/// Codes the centres are trained on (spread evenly over the slots).
const TRAIN_SAMPLE: usize = 16_384;
/// Rounds of k-modes (assign to the nearest centre, then majority per bit).
const TRAIN_ROUNDS: usize = 5;

use super::kernels::{hamming, hamming_slices};

/// The index of the centre (`words` words each) nearest to `code`; the first on ties.
fn nearest_centre(centres: &[u64], words: usize, code: &[u64]) -> usize {
    fn go(centres: &[u64], words: usize, dist: impl Fn(&[u64]) -> u32) -> usize {
        let mut best = (u32::MAX, 0);
        for (j, c) in centres.chunks_exact(words.max(1)).enumerate() {
            let d = dist(c);
            if d < best.0 {
                best = (d, j);
            }
        }
        best.1
    }
    match words {
        6 => {
            let q: [u64; 6] = std::array::from_fn(|i| code[i]);
            go(centres, 6, |c| hamming(c, &q))
        }
        12 => {
            let q: [u64; 12] = std::array::from_fn(|i| code[i]);
            go(centres, 12, |c| hamming(c, &q))
        }
        w => go(centres, w, |c| hamming_slices(c, code)),
    }
}

/// Appends `(distance, slot)` for every code of one list.
fn scan_list<const W: usize>(codes: &[u64], slots: &[u32], q: &[u64], out: &mut Vec<(u16, u32)>) {
    let q: [u64; W] = std::array::from_fn(|i| q[i]);
    out.extend(
        codes
            .chunks_exact(W)
            .zip(slots)
            .map(|(c, &s)| (hamming(c, &q) as u16, s)),
    );
}

#[derive(Debug, Clone)]
pub(super) struct Lists {
    words: usize,
    /// `LISTS` centre codes (fewer for tiny indexes), `words` words each.
    centres: Vec<u64>,
    /// Per slot: its list.
    list_of: Vec<u32>,
    /// Per slot: its place in its list.
    pos: Vec<u32>,
    /// Per list: its slots.
    slots: Vec<Vec<u32>>,
    /// Per list: the codes of its slots, in the same order.
    codes: Vec<Vec<u64>>,
    /// How many codes there were when the centres were found.
    trained_at: usize,
}

impl Lists {
    /// Lists over `codes` (slot order, `words` words each).
    pub(super) fn build(codes: &[u64], words: usize) -> Lists {
        let words = words.max(1);
        let n = codes.len() / words;
        let lists = LISTS.min(n).max(1);
        let mut centres = Vec::with_capacity(lists * words);
        if n == 0 {
            centres.resize(words, 0);
        }
        for j in 0..lists.min(n) {
            let s = j * n / lists;
            centres.extend_from_slice(&codes[s * words..(s + 1) * words]);
        }
        let bits = words * 64;
        let stride = (n / TRAIN_SAMPLE).max(1);
        let mut ones = vec![0u32; lists * bits];
        let mut members = vec![0u32; lists];
        for _ in 0..TRAIN_ROUNDS {
            ones.iter_mut().for_each(|c| *c = 0);
            members.iter_mut().for_each(|m| *m = 0);
            for code in codes.chunks_exact(words).step_by(stride) {
                let j = nearest_centre(&centres, words, code);
                members[j] += 1;
                let row = &mut ones[j * bits..(j + 1) * bits];
                for (w, &word) in code.iter().enumerate() {
                    let mut x = word;
                    while x != 0 {
                        row[w * 64 + x.trailing_zeros() as usize] += 1;
                        x &= x - 1;
                    }
                }
            }
            for (j, &m) in members.iter().enumerate() {
                // a centre no code chose keeps its code
                if m == 0 {
                    continue;
                }
                let row = &ones[j * bits..(j + 1) * bits];
                for (w, word) in centres[j * words..(j + 1) * words].iter_mut().enumerate() {
                    let mut v = 0u64;
                    for b in 0..64 {
                        if 2 * row[w * 64 + b] > m {
                            v |= 1 << b;
                        }
                    }
                    *word = v;
                }
            }
        }
        let mut out = Lists {
            words,
            centres,
            list_of: Vec::with_capacity(n),
            pos: Vec::with_capacity(n),
            slots: vec![Vec::new(); lists],
            codes: vec![Vec::new(); lists],
            trained_at: n,
        };
        for code in codes.chunks_exact(words) {
            out.push(code);
        }
        out
    }

    /// How many codes there were when the centres were found.
    pub(super) fn trained_at(&self) -> usize {
        self.trained_at
    }

    /// Bytes held on the heap.
    pub(super) fn heap_bytes(&self) -> usize {
        self.centres.capacity() * 8
            + (self.list_of.capacity() + self.pos.capacity()) * 4
            + self.slots.iter().map(|s| s.capacity() * 4).sum::<usize>()
            + self.codes.iter().map(|c| c.capacity() * 8).sum::<usize>()
    }

    /// Adds the code of a new slot (the next one).
    pub(super) fn push(&mut self, code: &[u64]) {
        let slot = self.list_of.len() as u32;
        let j = nearest_centre(&self.centres, self.words, code);
        self.list_of.push(j as u32);
        self.pos.push(self.slots[j].len() as u32);
        self.slots[j].push(slot);
        self.codes[j].extend_from_slice(code);
    }

    /// `slot` has a new code.
    pub(super) fn set(&mut self, slot: usize, code: &[u64]) {
        self.take_out(slot);
        let j = nearest_centre(&self.centres, self.words, code);
        self.list_of[slot] = j as u32;
        self.pos[slot] = self.slots[j].len() as u32;
        self.slots[j].push(slot as u32);
        self.codes[j].extend_from_slice(code);
    }

    /// `slot` is removed and the last slot moves into it (as the index's slots do).
    pub(super) fn swap_remove(&mut self, slot: usize) {
        let Some(last) = self.list_of.len().checked_sub(1) else {
            return;
        };
        self.take_out(slot);
        if slot != last {
            let (j, p) = (self.list_of[last], self.pos[last]);
            self.slots[j as usize][p as usize] = slot as u32;
            self.list_of[slot] = j;
            self.pos[slot] = p;
        }
        self.list_of.pop();
        self.pos.pop();
    }

    /// Takes `slot` out of its list (its `list_of` / `pos` entries are left to the caller).
    fn take_out(&mut self, slot: usize) {
        let (j, p) = (self.list_of[slot] as usize, self.pos[slot] as usize);
        let w = self.words;
        let list = &mut self.slots[j];
        list.swap_remove(p);
        let codes = &mut self.codes[j];
        // the list holds `slot`, so it is not empty
        let Some(last) = (codes.len() / w).checked_sub(1) else {
            return;
        };
        if p != last {
            codes.copy_within(last * w..(last + 1) * w, p * w);
        }
        codes.truncate(last * w);
        if let Some(&moved) = list.get(p) {
            self.pos[moved as usize] = p as u32;
        }
    }

    /// `(distance, slot)` of every code in the lists nearest to `q`, read nearest centre
    /// first until at least `min_scan` codes are in (whole lists).
    pub(super) fn near(&self, q: &[u64], min_scan: usize) -> Vec<(u16, u32)> {
        let w = self.words;
        let mut order: Vec<(u32, u32)> = self
            .centres
            .chunks_exact(w)
            .enumerate()
            .map(|(j, c)| (hamming_slices(c, q), j as u32))
            .collect();
        order.sort_unstable();
        let mut out = Vec::with_capacity(min_scan + min_scan / 4);
        for (_, j) in order {
            if out.len() >= min_scan {
                break;
            }
            let (codes, slots) = (&self.codes[j as usize], &self.slots[j as usize]);
            match w {
                6 => scan_list::<6>(codes, slots, q, &mut out),
                12 => scan_list::<12>(codes, slots, q, &mut out),
                _ => out.extend(
                    codes
                        .chunks_exact(w)
                        .zip(slots)
                        .map(|(c, &s)| (hamming_slices(c, q) as u16, s)),
                ),
            }
        }
        out
    }

    /// Checks that every slot of `codes` is in exactly one list, with its code, where
    /// `list_of` and `pos` say.
    #[cfg(test)]
    pub(super) fn assert_consistent(&self, codes: &[u64]) {
        let w = self.words;
        let n = codes.len() / w;
        assert_eq!(self.list_of.len(), n);
        assert_eq!(self.pos.len(), n);
        let total: usize = self.slots.iter().map(Vec::len).sum();
        assert_eq!(total, n, "every slot in one list");
        for (j, (slots, lcodes)) in self.slots.iter().zip(&self.codes).enumerate() {
            assert_eq!(slots.len() * w, lcodes.len());
            for (p, &s) in slots.iter().enumerate() {
                let s = s as usize;
                assert_eq!(self.list_of[s] as usize, j);
                assert_eq!(self.pos[s] as usize, p);
                assert_eq!(&lcodes[p * w..(p + 1) * w], &codes[s * w..(s + 1) * w]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::NoteId;
    use crate::vector::VectorIndex;
    use crate::vector::test_util::*;
    use rand::{SeedableRng, rngs::StdRng};

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
}
