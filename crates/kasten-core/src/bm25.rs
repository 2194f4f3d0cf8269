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
            let df = p.len() as f32;
            let idf = (1.0 + (n as f32 - df + 0.5) / (df + 0.5)).ln();
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
mod tests {
    use super::*;

    fn id(s: &str) -> NoteId {
        NoteId::parse(s).unwrap_or_else(|_| NoteId::generate())
    }

    fn ids(hits: &[(NoteId, f32)]) -> Vec<&str> {
        hits.iter().map(|(i, _)| i.as_str()).collect()
    }

    #[test]
    fn ranks_by_term_rarity_and_frequency() {
        let mut ix = TextIndex::new();
        ix.upsert(id("a"), "Melanie painted a sunrise over the lake");
        ix.upsert(id("b"), "Caroline went to the LGBTQ support group");
        ix.upsert(
            id("c"),
            "Melanie and Caroline talked about painting and painting classes",
        );
        let hits = ix.search("painting", 10);
        assert_eq!(ids(&hits), vec!["c", "a"]);
        assert_eq!(ids(&ix.search("support group", 10)), vec!["b"]);
        assert!(ix.search("quantum", 10).is_empty());
        assert!(
            ix.search("the and", 10).is_empty(),
            "stop words match nothing"
        );
    }

    #[test]
    fn doc_share_counts_notes_and_a_phrase_by_its_rarest_word() {
        let mut ix = TextIndex::new();
        assert_eq!(ix.doc_share("gina"), 0.0);
        ix.upsert(id("a"), "Gina: the dance studio opens");
        ix.upsert(id("b"), "Gina: thanks for the dance");
        ix.upsert(id("c"), "Jon: the lease is signed");
        ix.upsert(id("d"), "Gina: 舞蹈工作室开业了");
        assert_eq!(ix.doc_share("gina"), 0.75);
        assert_eq!(ix.doc_share("Dance"), 0.5);
        assert_eq!(ix.doc_share("dance studio"), 0.25);
        assert_eq!(ix.doc_share("工作室"), 0.25);
        assert_eq!(ix.doc_share("kayak"), 0.0);
        assert_eq!(ix.doc_share("the"), 0.0, "stop words are not indexed");
        ix.remove(&id("a"));
        assert_eq!(ix.doc_share("gina"), 2.0 / 3.0);
    }

    #[test]
    fn removal_and_update_take_effect() {
        let mut ix = TextIndex::new();
        ix.upsert(id("a"), "red apple");
        ix.upsert(id("b"), "green apple");
        assert!(ix.remove(&id("a")));
        assert_eq!(ids(&ix.search("apple", 10)), vec!["b"]);
        ix.upsert(id("b"), "green pear");
        assert!(ix.search("apple", 10).is_empty());
        assert_eq!(ids(&ix.search("pear", 10)), vec!["b"]);
        ix.upsert(id("c"), "apple pie"); // reuses the freed slot
        assert_eq!(ids(&ix.search("apple", 10)), vec!["c"]);
        assert_eq!(ix.len(), 2);
        assert!(!ix.remove(&id("zzz")));
    }

    #[test]
    fn chinese_queries_match_inside_sentences() {
        let mut ix = TextIndex::new();
        ix.upsert(id("zh1"), "我昨天去了北京的向量数据库会议");
        ix.upsert(id("zh2"), "今天天气很好，我们去公园散步");
        assert_eq!(ids(&ix.search("数据库", 10)), vec!["zh1"]);
        assert_eq!(ids(&ix.search("公园", 10)), vec!["zh2"]);
    }

    #[test]
    fn one_chinese_character_finds_the_words_it_is_part_of() {
        let mut ix = TextIndex::new();
        ix.upsert(id("cat"), "我家的小猫很可爱");
        ix.upsert(id("dog"), "小狗在公园里跑");
        ix.upsert(id("alone"), "猫");
        let hits = ix.search("猫", 10);
        let mut found = ids(&hits);
        found.sort();
        assert_eq!(found, vec!["alone", "cat"]);
        assert_eq!(ids(&ix.search("狗", 10)), vec!["dog"]);
        // longer queries still match by bigrams: "小" alone is in both notes
        assert_eq!(ids(&ix.search("小猫", 10)), vec!["cat"]);
        assert_eq!(ids(&ix.search("小", 10)).len(), 2);
    }

    /// The scoring as first written (a hash map per query), the reference for the dense
    /// accumulator.
    fn reference(ix: &TextIndex, query: &str, k: usize) -> Vec<(NoteId, f32)> {
        let n = ix.slot_of.len();
        let mut terms: Vec<u32> = ix
            .tokenizer
            .tokenize(query)
            .iter()
            .filter_map(|t| ix.term_ids.get(t).copied())
            .collect();
        terms.sort_unstable();
        terms.dedup();
        let norm = LengthNorm::new(ix.total_len as f32 / n.max(1) as f32);
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for tid in terms {
            let p = &ix.postings[tid as usize];
            let df = p.len() as f32;
            let idf = (1.0 + (n as f32 - df + 0.5) / (df + 0.5)).ln();
            for &(slot, f) in p {
                let len = ix.docs[slot as usize].as_ref().map_or(0, |d| d.len);
                *scores.entry(slot).or_insert(0.0) += idf * norm.weight(f, len);
            }
        }
        let mut ranked: Vec<(u32, f32)> = scores.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        ranked.truncate(k);
        ranked
            .into_iter()
            .filter_map(|(slot, s)| ix.docs[slot as usize].as_ref().map(|d| (d.id.clone(), s)))
            .collect()
    }

    #[test]
    fn the_worked_out_weight_is_okapi_bm25s() {
        for avg in [0.5f32, 1.0, 7.3, 40.0, 900.0] {
            let norm = LengthNorm::new(avg);
            for f in [1u32, 2, 3, 17, 400] {
                for len in [0u32, 1, 5, 12, 255, 256, 3000, 70_000] {
                    let (ff, l) = (f as f32, len as f32);
                    let textbook = ff * (K1 + 1.0) / (ff + K1 * (1.0 - B + B * l / avg.max(1.0)));
                    let w = norm.weight(f, len);
                    assert!(
                        (w - textbook).abs() <= 1e-5 * textbook,
                        "f={f} len={len} avg={avg}: {w} vs {textbook}"
                    );
                }
            }
        }
    }

    #[test]
    fn dense_scoring_equals_the_reference_across_queries_and_churn() {
        const WORDS: &[&str] = &[
            "pottery", "guitar", "adoption", "marathon", "sunset", "lake", "recipe", "novel",
            "studio", "shelter", "camera", "cabin", "garden", "chess", "harbor", "concert",
        ];
        // a deterministic mix (no RNG needed): doc i takes words by a few strides
        let doc = |i: usize| -> String {
            (0..1 + i % 7)
                .map(|j| WORDS[(i * (j + 3) + j * j) % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut ix = TextIndex::new();
        for i in 0..600 {
            ix.upsert(id(&format!("d{i}")), &doc(i));
        }
        let queries = [
            "pottery lake",
            "guitar",
            "chess harbor concert cabin",
            "sunset sunset novel",
            "nothing matches",
        ];
        let check = |ix: &TextIndex| {
            for q in queries {
                for k in [1, 10, 1000] {
                    // bitwise-equal scores, same order
                    assert_eq!(ix.search(q, k), reference(ix, q, k), "{q} k={k}");
                }
            }
        };
        check(&ix);
        for i in (0..600).step_by(4) {
            assert!(ix.remove(&id(&format!("d{i}"))));
        }
        for i in (1..600).step_by(5) {
            ix.upsert(id(&format!("d{i}")), &doc(i + 11));
        }
        for i in 600..700 {
            ix.upsert(id(&format!("d{i}")), &doc(i));
        }
        // long notes too (their weights are computed, not looked up)
        for i in 700..720 {
            ix.upsert(id(&format!("d{i}")), &vec![doc(i); 60 + i % 5].join(" "));
        }
        check(&ix);
    }

    #[test]
    fn removal_touches_only_the_removed_docs_postings() {
        let mut ix = TextIndex::new();
        for i in 0..2000 {
            ix.upsert(id(&format!("d{i}")), &format!("common word w{i}"));
        }
        // three terms: common, word, w17 — not the 2,000-long lists of common and word
        assert!(ix.remove(&id("d17")));
        assert_eq!(ix.removal_work, 3);
        // the doc moved into d17's place is still found and removable
        assert!(
            ix.search("w1999", 5)
                .iter()
                .any(|(d, _)| d.as_str() == "d1999")
        );
        assert!(ix.remove(&id("d1999")));
        assert!(ix.search("w1999", 5).is_empty());
        assert_eq!(ix.search("common", 5000).len(), 1998);
        for i in (0..1999).filter(|i| *i != 17) {
            assert!(ix.remove(&id(&format!("d{i}"))), "d{i}");
        }
        assert!(ix.search("common", 10).is_empty());
        assert!(ix.postings.iter().all(Vec::is_empty));
    }

    #[test]
    fn k_limits_results() {
        let mut ix = TextIndex::new();
        for i in 0..50 {
            ix.upsert(id(&format!("d{i}")), &format!("common word {i}"));
        }
        assert_eq!(ix.search("common", 7).len(), 7);
        assert!(ix.search("common", 0).is_empty());
    }

    fn churned() -> TextIndex {
        let mut ix = TextIndex::new();
        for i in 0..300 {
            ix.upsert(
                id(&format!("d{i}")),
                &format!("note {i} about lake {} and 向量数据库 {}", i % 7, i % 13),
            );
        }
        for i in (0..300).step_by(3) {
            assert!(ix.remove(&id(&format!("d{i}"))));
        }
        for i in (1..300).step_by(4) {
            ix.upsert(
                id(&format!("d{i}")),
                &format!("edited pottery {} guitar", i % 5),
            );
        }
        ix.upsert(id("empty"), "");
        ix
    }

    fn encoded(ix: &TextIndex) -> Vec<u8> {
        let mut e = Encoder::new();
        ix.encode(&mut e);
        e.into_bytes()
    }

    #[test]
    fn an_index_written_in_pieces_is_the_same_bytes() {
        let ix = churned();
        for at in [1, 7, 300] {
            let mut e = Encoder::new().draining_at(at);
            let (mut out, mut drains) = (Vec::new(), 0);
            let mut drain = |e: &mut Encoder| {
                assert!(e.len() >= at);
                out.extend_from_slice(e.as_bytes());
                e.clear();
                drains += 1;
                Ok::<(), ()>(())
            };
            assert!(ix.encode_drained(&mut e, &mut drain).is_ok());
            out.extend_from_slice(e.as_bytes());
            assert_eq!(out, encoded(&ix), "draining at {at}");
            assert!(drains > 1);
        }
        // a drain that fails stops the writing with its error
        let mut e = Encoder::new().draining_at(10);
        assert_eq!(
            ix.encode_drained(&mut e, &mut |_| Err("disk full")),
            Err("disk full")
        );
    }

    #[test]
    fn a_decoded_index_scores_to_the_bit_as_the_encoded_one() {
        let ix = churned();
        let bytes = encoded(&ix);
        let mut d = Decoder::new(&bytes);
        let mut back = TextIndex::decode(&mut d).unwrap();
        d.finish().unwrap();
        assert_eq!(back.len(), ix.len());
        assert_eq!(back.total_len, ix.total_len);
        assert_eq!(back.lens, ix.lens);
        assert_eq!(back.free, ix.free);
        assert_eq!(back.term_ids, ix.term_ids);
        assert_eq!(back.postings, ix.postings);
        assert_eq!(back.slot_of, ix.slot_of);
        for (a, b) in back.docs.iter().zip(&ix.docs) {
            assert_eq!(
                a.as_ref().map(|d| (&d.id, d.len, &d.terms)),
                b.as_ref().map(|d| (&d.id, d.len, &d.terms))
            );
        }
        for q in ["lake 3", "pottery guitar", "数据库", "note 17", "absent"] {
            for k in [1, 10, 500] {
                assert_eq!(back.search(q, k), ix.search(q, k), "{q} k={k}");
            }
        }
        // the decoded index keeps working: the same further changes give the same index
        let mut ix = ix;
        for x in [&mut ix, &mut back] {
            assert!(x.remove(&id("d2")));
            x.upsert(id("d5"), "lake lake lake");
            x.upsert(id("new"), "a new lake note");
        }
        assert_eq!(back.search("lake", 50), ix.search("lake", 50));
        assert_eq!(encoded(&back), encoded(&ix));
    }

    #[test]
    fn damaged_text_bytes_are_errors_not_panics() {
        let mut ix = TextIndex::new();
        ix.upsert(id("a"), "pottery lake");
        ix.upsert(id("b"), "lake");
        ix.remove(&id("a"));
        let bytes = encoded(&ix);
        for cut in 0..bytes.len() {
            let mut d = Decoder::new(&bytes[..cut]);
            assert!(TextIndex::decode(&mut d).is_err(), "cut at {cut}");
        }
        // flipping any single byte never panics (it may still decode: the engine's
        // checksum is what catches that)
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x5a;
            let _ = TextIndex::decode(&mut Decoder::new(&b));
        }
    }
}
