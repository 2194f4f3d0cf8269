//! The byte format of the in-memory indexes, so a memory can reopen without rebuilding
//! them from the store. Pure: the indexes turn themselves into bytes and back here; the
//! engine adds a header with a checksum and does the file IO.
//!
//! Everything is little-endian. Numbers are fixed width, strings and arrays are a `u32`
//! length followed by their bytes or elements. Decoding never panics and never trusts a
//! length: every read is checked against what is left, and each index validates what it
//! decoded (slots in range, no id twice) before it is used.

use thiserror::Error;

use crate::NoteId;

/// Why bytes could not be decoded into an index.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("the index snapshot ends early (wanted {wanted} more bytes at offset {at})")]
    Truncated { at: usize, wanted: usize },
    #[error("the index snapshot is damaged: {0}")]
    Invalid(String),
}

pub(crate) fn invalid(msg: impl Into<String>) -> SnapshotError {
    SnapshotError::Invalid(msg.into())
}

/// A streaming encoder's bytes go out at this size unless it is told otherwise
/// ([`Encoder::draining_at`]): a `drain` (see [`Encoder::drain_if_full`]) takes them
/// once the buffer holds this much.
pub const STREAM_BYTES: usize = 1 << 20;

/// Takes an encoder's bytes (and clears it): where a streaming encode writes to.
pub type Drain<'a, E> = &'a mut dyn FnMut(&mut Encoder) -> Result<(), E>;

/// Appends little-endian values to a byte buffer.
#[derive(Debug)]
pub struct Encoder {
    buf: Vec<u8>,
    /// [`Encoder::drain_if_full`] drains from this many bytes on.
    drain_at: usize,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl Encoder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        Self {
            buf: Vec::with_capacity(n),
            drain_at: STREAM_BYTES,
        }
    }

    /// Drains at `n` bytes instead of [`STREAM_BYTES`] (at least one byte).
    pub fn draining_at(mut self, n: usize) -> Self {
        self.drain_at = n.max(1);
        self
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// What was written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Forgets what was written, keeping the buffer's capacity (a writer that streams a
    /// large section flushes and clears it as it goes).
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn u8(&mut self, x: u8) {
        self.buf.push(x);
    }

    pub fn u32(&mut self, x: u32) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }

    pub fn u64(&mut self, x: u64) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }

    pub fn i64(&mut self, x: i64) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }

    /// A length or count; the format caps them at `u32::MAX`.
    pub fn len32(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    pub fn str(&mut self, s: &str) {
        self.len32(s.len());
        self.buf.extend_from_slice(s.as_bytes());
    }

    pub fn id(&mut self, id: &NoteId) {
        self.str(id.as_str());
    }

    /// A slice of `f32` without its length (the reader knows it).
    pub fn f32s(&mut self, xs: &[f32]) {
        self.buf.reserve(xs.len() * 4);
        for x in xs {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
    }

    /// A slice of `i8` without its length.
    pub fn i8s(&mut self, xs: &[i8]) {
        self.buf.extend(xs.iter().map(|&x| x as u8));
    }

    /// A slice of `u64` without its length.
    pub fn u64s(&mut self, xs: &[u64]) {
        self.buf.reserve(xs.len() * 8);
        for x in xs {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
    }

    /// Hands what was written to `drain` once it is [`STREAM_BYTES`] or more (or what
    /// [`Encoder::draining_at`] set). An index calls this between its records, so a
    /// large index is written in pieces and never held whole in the buffer.
    pub fn drain_if_full<E>(&mut self, drain: Drain<'_, E>) -> Result<(), E> {
        if self.buf.len() >= self.drain_at {
            drain(self)
        } else {
            Ok(())
        }
    }

    /// `xs` written by `write` in pieces of about the drain size (`size` bytes an
    /// element), drained between them.
    fn pieces_drained<T, E>(
        &mut self,
        xs: &[T],
        size: usize,
        write: fn(&mut Encoder, &[T]),
        drain: Drain<'_, E>,
    ) -> Result<(), E> {
        for piece in xs.chunks((self.drain_at / size).max(1)) {
            write(self, piece);
            self.drain_if_full(&mut *drain)?;
        }
        Ok(())
    }

    /// [`Encoder::f32s`] in pieces, drained between them.
    pub fn f32s_drained<E>(&mut self, xs: &[f32], drain: Drain<'_, E>) -> Result<(), E> {
        self.pieces_drained(xs, 4, Encoder::f32s, drain)
    }

    /// [`Encoder::i8s`] in pieces, drained between them.
    pub fn i8s_drained<E>(&mut self, xs: &[i8], drain: Drain<'_, E>) -> Result<(), E> {
        self.pieces_drained(xs, 1, Encoder::i8s, drain)
    }

    /// [`Encoder::u64s`] in pieces, drained between them.
    pub fn u64s_drained<E>(&mut self, xs: &[u64], drain: Drain<'_, E>) -> Result<(), E> {
        self.pieces_drained(xs, 8, Encoder::u64s, drain)
    }
}

/// Reads what an [`Encoder`] wrote, checking every length.
#[derive(Debug)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, at: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    /// Fails unless everything was read (trailing bytes mean a different layout).
    pub fn finish(&self) -> Result<(), SnapshotError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(invalid(format!(
                "{} unexpected bytes at the end",
                self.remaining()
            )))
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        if n > self.remaining() {
            return Err(SnapshotError::Truncated {
                at: self.at,
                wanted: n,
            });
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, SnapshotError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn i64(&mut self) -> Result<i64, SnapshotError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// A count of elements of at least `min_size` bytes each: a count that cannot fit in
    /// what is left is refused before anything is allocated for it.
    pub fn count(&mut self, min_size: usize) -> Result<usize, SnapshotError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size.max(1)) > self.remaining() {
            return Err(SnapshotError::Truncated {
                at: self.at,
                wanted: n.saturating_mul(min_size.max(1)),
            });
        }
        Ok(n)
    }

    pub fn str(&mut self) -> Result<&'a str, SnapshotError> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?).map_err(|_| invalid("a string is not UTF-8"))
    }

    pub fn id(&mut self) -> Result<NoteId, SnapshotError> {
        let s = self.str()?;
        NoteId::parse(s).map_err(|_| invalid("a note id is not valid"))
    }

    /// `n` values of `f32`.
    pub fn f32s(&mut self, n: usize) -> Result<Vec<f32>, SnapshotError> {
        let bytes = self.take(n.checked_mul(4).ok_or_else(|| invalid("size overflow"))?)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// `n` values of `i8`.
    pub fn i8s(&mut self, n: usize) -> Result<Vec<i8>, SnapshotError> {
        Ok(self.take(n)?.iter().map(|&b| b as i8).collect())
    }

    /// `n` values of `u64`.
    pub fn u64s(&mut self, n: usize) -> Result<Vec<u64>, SnapshotError> {
        let bytes = self.take(n.checked_mul(8).ok_or_else(|| invalid("size overflow"))?)?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let mut e = Encoder::new();
        e.u8(7);
        e.u32(0xdead_beef);
        e.u64(u64::MAX - 3);
        e.i64(-42);
        e.str("héllo");
        e.id(&NoteId::parse("01JD3Q8W5V2T6Y9K3M4N5P6Q7R").unwrap());
        e.f32s(&[1.5, -0.25]);
        e.i8s(&[-127, 0, 127]);
        e.u64s(&[1, u64::MAX]);
        let bytes = e.into_bytes();
        let mut d = Decoder::new(&bytes);
        assert_eq!(d.u8().unwrap(), 7);
        assert_eq!(d.u32().unwrap(), 0xdead_beef);
        assert_eq!(d.u64().unwrap(), u64::MAX - 3);
        assert_eq!(d.i64().unwrap(), -42);
        assert_eq!(d.str().unwrap(), "héllo");
        assert_eq!(d.id().unwrap().as_str(), "01JD3Q8W5V2T6Y9K3M4N5P6Q7R");
        assert_eq!(d.f32s(2).unwrap(), vec![1.5, -0.25]);
        assert_eq!(d.i8s(3).unwrap(), vec![-127, 0, 127]);
        assert_eq!(d.u64s(2).unwrap(), vec![1, u64::MAX]);
        d.finish().unwrap();
    }

    #[test]
    fn short_input_and_huge_counts_are_errors_not_panics() {
        let mut d = Decoder::new(&[1, 2]);
        assert!(matches!(d.u32(), Err(SnapshotError::Truncated { .. })));
        // a count claiming 4 billion elements in 4 bytes
        let bytes = u32::MAX.to_le_bytes();
        let mut d = Decoder::new(&bytes);
        assert!(d.count(1).is_err());
        let mut e = Encoder::new();
        e.str("not an id!");
        let bytes = e.into_bytes();
        assert!(Decoder::new(&bytes).id().is_err());
        let mut d = Decoder::new(&[0, 0]);
        assert!(d.finish().is_err());
        d.u8().unwrap();
        d.u8().unwrap();
        d.finish().unwrap();
    }
}
