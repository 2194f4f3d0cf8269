//! The sign-code prefilter: the candidates whose codes are nearest the query's by
//! Hamming distance, found in one pass over every code or in the nearest lists.

use super::VectorIndex;
use super::kernels::{hamming, hamming_any, sign_code};

/// The share of all codes (1 / this) the prefilter reads when it reads lists.
pub(super) const LISTS_SCAN_FRACTION: usize = 8;

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
    pub(super) fn candidates(&self, n: usize, cut: usize) -> usize {
        self.min_candidates
            .max(n / self.fraction.max(1))
            .max(self.per_cut * cut)
            .min(n)
    }
}

/// Codes whose distances are computed first, spread evenly over the memory, to guess a
/// cut-off distance for the one full pass of [`nearest_codes_sampled`].
const SAMPLE_CODES: usize = 4096;

/// The slots of the `want` codes (`W` words each) nearest to `q`: exactly what
/// [`nearest_codes`] returns over all distances, in one pass that keeps only the codes
/// within a cut-off guessed from a sample (twice the wanted share of the sample, and more).
/// If fewer than `want` codes are within it, all distances are counted after all.
pub(super) fn nearest_codes_sampled<const W: usize>(
    codes: &[u64],
    q: &[u64],
    want: usize,
) -> Vec<u32> {
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

/// The slots of the `want` smallest distances: all below the cut-off distance, then
/// those at it in slot order. Counting (distances are at most `dim`), so O(n).
pub(super) fn nearest_codes(dist: &[u16], want: usize) -> Vec<u32> {
    pick_nearest(
        dist.iter().enumerate().map(|(slot, &d)| (d, slot as u32)),
        want,
    )
}

/// The slots of the `want` smallest distances among `(distance, slot)` pairs given in
/// slot order: all below the cut-off distance, then those at it in slot order.
pub(super) fn pick_nearest(
    pairs: impl Iterator<Item = (u16, u32)> + Clone,
    want: usize,
) -> Vec<u32> {
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
    /// The slots of the `want` codes nearest to `query`'s by Hamming distance.
    pub(super) fn prefilter_slots(&self, query: &[f32], want: usize) -> Vec<u32> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::kernels::normalized;
    use crate::vector::test_util::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

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
}
