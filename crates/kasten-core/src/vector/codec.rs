//! The index written to and read from a snapshot; the f32 rows are written apart so a
//! reader can leave them where they are.

use std::sync::Arc;

use super::{RowSource, VectorIndex};
use crate::CoreError;
use crate::snapshot::{self, Decoder, Drain, Encoder, SnapshotError};

impl VectorIndex {
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
    use crate::vector::test_util::*;
    use rand::{SeedableRng, rngs::StdRng};

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
