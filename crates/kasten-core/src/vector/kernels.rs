//! The arithmetic every query runs: normalising, int8 quantisation, sign codes, dot
//! products, Hamming distances, and the bound on how far an int8 score lies from the
//! f32 cosine.

use std::collections::BinaryHeap;

use super::Cand;
use crate::CoreError;

pub(super) fn normalized(v: &[f32]) -> Result<Vec<f32>, CoreError> {
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

pub(super) fn quantize(v: &[f32], out: &mut [i8]) -> f32 {
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
pub(super) fn sign_code(v: &[f32], out: &mut [u64]) {
    out.iter_mut().for_each(|w| *w = 0);
    for (i, x) in v.iter().enumerate() {
        if *x > 0.0 {
            out[i / 64] |= 1 << (i % 64);
        }
    }
}

#[inline]
pub(super) fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
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
pub(super) fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
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
pub(super) struct Int8Bound {
    q_scale: f32,
    /// `Σ|q̂_i| / 2`
    half_abs: f32,
    /// `‖δq‖` plus room for f32 rounding in the sums and scores (~1e-6 each)
    fixed: f32,
}

impl Int8Bound {
    pub(super) fn new(query: &[f32], q: &[i8], q_scale: f32) -> Self {
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
    pub(super) fn range(&self, score: f32, row_scale: f32) -> (f32, f32) {
        let approx = score * self.q_scale;
        let err = row_scale * self.half_abs + self.fixed;
        (approx - err, approx + err)
    }
}

pub(super) fn push_top(heap: &mut BinaryHeap<Cand>, cap: usize, c: Cand) {
    if heap.len() < cap {
        heap.push(c);
    } else if let Some(min) = heap.peek()
        && c.score > min.score
    {
        heap.pop();
        heap.push(c);
    }
}

/// Hamming distance of two codes of `W` words.
#[inline]
pub(super) fn hamming<const W: usize>(code: &[u64], q: &[u64; W]) -> u32 {
    let mut d = 0u32;
    for i in 0..W {
        d += (code[i] ^ q[i]).count_ones();
    }
    d
}

/// Hamming distance of two codes of any (the same) number of words.
#[inline]
pub(super) fn hamming_slices(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

#[inline]
pub(super) fn hamming_any(codes: &[u64], q: &[u64], words: usize, out: &mut Vec<u16>) {
    out.extend(
        codes
            .chunks_exact(words.max(1))
            .map(|c| hamming_slices(c, q) as u16),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::VectorIndex;
    use crate::vector::test_util::*;
    use rand::{SeedableRng, rngs::StdRng};

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
}
