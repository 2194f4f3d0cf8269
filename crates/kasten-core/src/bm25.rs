//! The in-process BM25 full-text index (Okapi BM25, k1 = 1.2, b = 0.75).
//!
//! Terms come from [`crate::text::Tokenizer`], so Chinese and Japanese are indexed as
//! character bigrams and unigrams (queries are cut into bigrams only). Like the vector
//! index it is derived state, rebuilt from the store at open (or read back from a
//! snapshot, [`TextIndex::encode`]) and kept in step with every write.

use std::collections::{BinaryHeap, HashMap};
use std::sync::Mutex;

use crate::NoteId;
use crate::snapshot::{self, Decoder, Drain, Encoder, SnapshotError};
use crate::text::Tokenizer;
use crate::vector::Cand;

const K1: f32 = 1.2;
const B: f32 = 0.75;

/// Document lengths below this have the weight of a single occurrence looked up, not
/// computed, in a query (most postings are one occurrence in a short note).
const ONCE_TABLE: usize = 256;

/// BM25's inverse document frequency of a term held by `df` of `n` notes.
fn idf(n: usize, df: usize) -> f32 {
    let (n, df) = (n as f32, df as f32);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// BM25's term-frequency weight for a given average document length, with the length
/// normalisation's constants worked out once per query: `f·(k1+1) / (f + c1 + c2·len)`,
/// where `c1 = k1·(1−b)` and `c2 = k1·b / avg` (one division per posting instead of two).
struct LengthNorm {
    c1: f32,
    c2: f32,
}

impl LengthNorm {
    fn new(avg_len: f32) -> Self {
        LengthNorm {
            c1: K1 * (1.0 - B),
            c2: K1 * B / avg_len.max(1.0),
        }
    }

    /// The weight of `f` occurrences in a document of `len` terms (multiplied by the
    /// term's idf for its score).
    #[inline]
    fn weight(&self, f: u32, len: u32) -> f32 {
        let f = f as f32;
        f * (K1 + 1.0) / (f + self.c1 + self.c2 * len as f32)
    }
}

#[derive(Debug, Clone)]
struct Doc {
    id: NoteId,
    len: u32,
    /// The distinct term ids of the doc, ascending, each with the position of the doc's
    /// posting in that term's list: removal touches only these postings.
    terms: Box<[(u32, u32)]>,
}

pub struct TextIndex {
    tokenizer: Tokenizer,
    term_ids: HashMap<String, u32>,
    /// Per term id: (doc slot, term frequency).
    postings: Vec<Vec<(u32, u32)>>,
    docs: Vec<Option<Doc>>,
    free: Vec<u32>,
    slot_of: HashMap<NoteId, u32>,
    total_len: u64,
    /// Per doc slot: its length in terms (0 for a free slot), next to the postings so the
    /// scoring loop reads a dense array.
    lens: Vec<u32>,
    /// Per doc slot score accumulator, reused by queries (all zero between queries).
    scratch: Mutex<Vec<f32>>,
    /// Postings looked at by removals (tests check that removal does not scan lists).
    #[cfg(test)]
    removal_work: usize,
}

impl Default for TextIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl TextIndex {
    pub fn new() -> Self {
        Self {
            tokenizer: Tokenizer::default(),
            term_ids: HashMap::new(),
            postings: Vec::new(),
            docs: Vec::new(),
            free: Vec::new(),
            slot_of: HashMap::new(),
            total_len: 0,
            lens: Vec::new(),
            scratch: Mutex::new(Vec::new()),
            #[cfg(test)]
            removal_work: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.slot_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slot_of.is_empty()
    }

    pub fn contains(&self, id: &NoteId) -> bool {
        self.slot_of.contains_key(id)
    }

    /// Room for `additional` more documents.
    pub fn reserve(&mut self, additional: usize) {
        let more = additional.saturating_sub(self.free.len());
        self.docs.reserve_exact(more);
        self.lens.reserve_exact(more);
        self.slot_of.reserve(additional);
    }

    /// Indexes (or re-indexes) `text` as the document of `id`.
    pub fn upsert(&mut self, id: NoteId, text: &str) {
        self.remove(&id);
        let tokens = self.tokenizer.tokenize_document(text);
        let n_tokens = tokens.len();
        // (term id, frequency); notes are short, so a linear search beats a hash map
        let mut tf: Vec<(u32, u32)> = Vec::with_capacity(n_tokens);
        for t in tokens {
            let tid = match self.term_ids.get(&t) {
                Some(&tid) => tid,
                None => {
                    let tid = self.term_ids.len() as u32;
                    self.term_ids.insert(t, tid);
                    self.postings.push(Vec::new());
                    tid
                }
            };
            match tf.iter_mut().find(|(x, _)| *x == tid) {
                Some((_, f)) => *f += 1,
                None => tf.push((tid, 1)),
            }
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.docs.push(None);
                self.lens.push(0);
                (self.docs.len() - 1) as u32
            }
        };
        let mut terms: Vec<(u32, u32)> = Vec::with_capacity(tf.len());
        for &(tid, f) in &tf {
            let list = &mut self.postings[tid as usize];
            terms.push((tid, list.len() as u32));
            list.push((slot, f));
        }
        terms.sort_unstable();
        self.total_len += n_tokens as u64;
        self.lens[slot as usize] = n_tokens as u32;
        self.docs[slot as usize] = Some(Doc {
            id: id.clone(),
            len: n_tokens as u32,
            terms: terms.into(),
        });
        self.slot_of.insert(id, slot);
    }

    /// Removes the document of `id`; returns whether it was there.
    pub fn remove(&mut self, id: &NoteId) -> bool {
        let Some(slot) = self.slot_of.remove(id) else {
            return false;
        };
        if let Some(doc) = self.docs.get_mut(slot as usize).and_then(Option::take) {
            for &(tid, pos) in doc.terms.iter() {
                let Some(p) = self.postings.get_mut(tid as usize) else {
                    continue;
                };
                if p.get(pos as usize).map(|e| e.0) != Some(slot) {
                    continue; // cannot happen: positions are kept in step below
                }
                // The last posting takes this one's place (scores do not depend on the
                // order within a list: each doc gets one addition per term) and its doc
                // learns its new position.
                p.swap_remove(pos as usize);
                #[cfg(test)]
                {
                    self.removal_work += 1;
                }
                if let Some(&(moved, _)) = p.get(pos as usize)
                    && let Some(Some(other)) = self.docs.get_mut(moved as usize)
                    && let Ok(i) = other.terms.binary_search_by_key(&tid, |&(t, _)| t)
                {
                    other.terms[i].1 = pos;
                }
            }
            self.total_len = self.total_len.saturating_sub(doc.len as u64);
        }
        if let Some(l) = self.lens.get_mut(slot as usize) {
            *l = 0;
        }
        self.free.push(slot);
        true
    }

    /// The best `k` documents for `query` by BM25, best first. Documents with no query
    /// term are never returned.
    pub fn search(&self, query: &str, k: usize) -> Vec<(NoteId, f32)> {
        let n = self.slot_of.len();
        if n == 0 || k == 0 {
            return Vec::new();
        }
        let mut terms: Vec<u32> = self
            .tokenizer
            .tokenize(query)
            .iter()
            .filter_map(|t| self.term_ids.get(t).copied())
            .collect();
        terms.sort_unstable();
        terms.dedup();
        let norm = LengthNorm::new(self.total_len as f32 / n as f32);
        // the weight of one occurrence by document length, for the usual posting (a term
        // once in a note of fewer than `ONCE_TABLE` terms): a table lookup, not a division
        let mut once = [0f32; ONCE_TABLE];
        for (len, w) in once.iter_mut().enumerate() {
            *w = norm.weight(1, len as u32);
        }
        // Term at a time into a dense accumulator (one f32 per doc slot), in term id order
        // as before, so every sum is the same; `touched` lists the docs that matched.
        let mut owned = Vec::new();
        let mut guard = self.scratch.try_lock().ok();
        let acc: &mut Vec<f32> = match guard.as_deref_mut() {
            Some(v) => v,
            // another query holds the shared accumulator: use a fresh one
            None => &mut owned,
        };
        acc.resize(self.docs.len(), 0.0);
        let mut touched: Vec<u32> = Vec::new();
        for tid in terms {
            let p = &self.postings[tid as usize];
            if p.is_empty() {
                continue;
            }
            let idf = idf(n, p.len());
            for &(slot, f) in p {
                let len = self.lens[slot as usize];
                let w = match once.get(len as usize) {
                    Some(&w) if f == 1 => w,
                    _ => norm.weight(f, len),
                };
                let s = idf * w;
                let a = &mut acc[slot as usize];
                if *a == 0.0 {
                    touched.push(slot);
                }
                *a += s;
            }
        }
        // The k best by (score, then slot), in one pass over the matches: a heap of k
        // whose top is the worst kept, so most matches cost one comparison.
        // (`Cand` orders best first: a higher score, then a lower slot, is `Less`.)
        let mut best: BinaryHeap<Cand> = BinaryHeap::with_capacity(k.min(touched.len()));
        for slot in touched {
            let hit = Cand {
                score: std::mem::take(&mut acc[slot as usize]),
                slot: slot as usize,
            };
            if best.len() < k {
                best.push(hit);
            } else if best.peek().is_some_and(|worst| hit < *worst) {
                best.pop();
                best.push(hit);
            }
        }
        best.into_sorted_vec()
            .into_iter()
            .filter_map(|h| self.docs[h.slot].as_ref().map(|d| (d.id.clone(), h.score)))
            .collect()
    }

    /// The share (0–1) of `query`'s keyword weight that indexed notes hold at all: the IDF
    /// of its words that occur in some note, against that plus the IDF a word in no note
    /// would have (the largest) for each of the others. 1 when every word occurs somewhere,
    /// for an empty query and for an empty index.
    pub fn known_share(&self, query: &str) -> f32 {
        let n = self.slot_of.len();
        if n == 0 {
            return 1.0;
        }
        let mut words = self.tokenizer.tokenize(query);
        words.sort_unstable();
        words.dedup();
        let (mut known, mut all) = (0f32, 0f32);
        for w in &words {
            let df = self
                .term_ids
                .get(w)
                .and_then(|&tid| self.postings.get(tid as usize))
                .map_or(0, Vec::len);
            let weight = idf(n, df);
            all += weight;
            if df > 0 {
                known += weight;
            }
        }
        if all > 0.0 { known / all } else { 1.0 }
    }

    /// The share of indexed notes (0–1) that hold `term`: for a phrase, the share of its
    /// rarest word (a phrase occurs at most as often). 0 for an empty index or a term with
    /// no words.
    pub fn doc_share(&self, term: &str) -> f64 {
        let n = self.len();
        if n == 0 {
            return 0.0;
        }
        self.tokenizer
            .tokenize(term)
            .iter()
            .map(|t| {
                self.term_ids
                    .get(t)
                    .and_then(|&tid| self.postings.get(tid as usize))
                    .map_or(0, Vec::len)
            })
            .min()
            .map_or(0.0, |df| df as f64 / n as f64)
    }

    /// The terms of a document with their frequencies, sorted by term (None if it is not
    /// indexed): what the index holds for it, independent of slots and term ids.
    pub fn terms_of(&self, id: &NoteId) -> Option<Vec<(&str, u32)>> {
        let slot = *self.slot_of.get(id)?;
        let doc = self.docs.get(slot as usize)?.as_ref()?;
        let mut names: Vec<&str> = vec![""; self.term_ids.len()];
        for (t, &tid) in &self.term_ids {
            if let Some(n) = names.get_mut(tid as usize) {
                *n = t;
            }
        }
        let mut out: Vec<(&str, u32)> = doc
            .terms
            .iter()
            .filter_map(|&(tid, pos)| {
                let (s, f) = *self.postings.get(tid as usize)?.get(pos as usize)?;
                (s == slot).then_some(())?;
                Some((*names.get(tid as usize)?, f))
            })
            .collect();
        out.sort_unstable();
        Some(out)
    }

    /// Writes the index (terms in id order with their postings, documents by slot, free
    /// slots) for [`TextIndex::decode`].
    pub fn encode(&self, e: &mut Encoder) {
        let _ = self.encode_drained::<std::convert::Infallible>(e, &mut |_| Ok(()));
    }

    /// [`TextIndex::encode`] handing the bytes to `drain` as they pile up.
    pub fn encode_drained<E>(&self, e: &mut Encoder, drain: Drain<'_, E>) -> Result<(), E> {
        let mut terms: Vec<&str> = vec![""; self.term_ids.len()];
        for (t, &tid) in &self.term_ids {
            if let Some(slot) = terms.get_mut(tid as usize) {
                *slot = t;
            }
        }
        e.len32(terms.len());
        for (t, p) in terms.iter().zip(&self.postings) {
            e.str(t);
            e.len32(p.len());
            for &(slot, f) in p {
                e.u32(slot);
                e.u32(f);
            }
            e.drain_if_full(&mut *drain)?;
        }
        e.len32(self.docs.len());
        for doc in &self.docs {
            match doc {
                Some(d) => {
                    e.u8(1);
                    e.id(&d.id);
                    e.u32(d.len);
                }
                None => e.u8(0),
            }
            e.drain_if_full(&mut *drain)?;
        }
        e.len32(self.free.len());
        for &s in &self.free {
            e.u32(s);
        }
        e.drain_if_full(drain)
    }

    /// Reads an index written by [`TextIndex::encode`]: the same term ids, slots and
    /// postings, so every score is the same to the bit.
    pub fn decode(d: &mut Decoder<'_>) -> Result<Self, SnapshotError> {
        let mut ix = TextIndex::new();
        let n_terms = d.count(8)?;
        ix.term_ids.reserve(n_terms);
        ix.postings.reserve_exact(n_terms);
        for tid in 0..n_terms {
            let t = d.str()?;
            if ix.term_ids.insert(t.to_owned(), tid as u32).is_some() {
                return Err(snapshot::invalid(format!("term {t:?} is indexed twice")));
            }
            let n = d.count(8)?;
            let mut p = Vec::with_capacity(n);
            for _ in 0..n {
                p.push((d.u32()?, d.u32()?));
            }
            ix.postings.push(p);
        }
        let n_docs = d.count(1)?;
        ix.docs.reserve_exact(n_docs);
        ix.lens.reserve_exact(n_docs);
        let mut terms_of: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n_docs];
        for slot in 0..n_docs {
            if d.u8()? == 0 {
                ix.docs.push(None);
                ix.lens.push(0);
                continue;
            }
            let id = d.id()?;
            let len = d.u32()?;
            if ix.slot_of.insert(id.clone(), slot as u32).is_some() {
                return Err(snapshot::invalid(format!(
                    "note {id} is in the text index twice"
                )));
            }
            ix.total_len += len as u64;
            ix.lens.push(len);
            ix.docs.push(Some(Doc {
                id,
                len,
                terms: Box::default(),
            }));
        }
        // a document's terms with their place in each posting list, in term id order as
        // `upsert` keeps them
        for (tid, p) in ix.postings.iter().enumerate() {
            for (pos, &(slot, _)) in p.iter().enumerate() {
                match terms_of.get_mut(slot as usize) {
                    Some(v) if ix.docs[slot as usize].is_some() => v.push((tid as u32, pos as u32)),
                    _ => {
                        return Err(snapshot::invalid(format!(
                            "a posting names document slot {slot}, which is empty"
                        )));
                    }
                }
            }
        }
        for (doc, terms) in ix.docs.iter_mut().zip(terms_of) {
            if let Some(doc) = doc {
                doc.terms = terms.into();
            }
        }
        let n_free = d.count(4)?;
        for _ in 0..n_free {
            let s = d.u32()?;
            if !matches!(ix.docs.get(s as usize), Some(None)) || ix.free.contains(&s) {
                return Err(snapshot::invalid(format!("free slot {s} is not free")));
            }
            ix.free.push(s);
        }
        if ix.free.len() + ix.slot_of.len() != ix.docs.len() {
            return Err(snapshot::invalid(
                "the text index's free slots do not add up",
            ));
        }
        Ok(ix)
    }
}

#[cfg(test)]
mod tests;
