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
        "pottery", "guitar", "adoption", "marathon", "sunset", "lake", "recipe", "novel", "studio",
        "shelter", "camera", "cabin", "garden", "chess", "harbor", "concert",
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

#[test]
fn known_share_weighs_the_query_words_no_note_holds() {
    let mut ix = TextIndex::new();
    assert_eq!(ix.known_share("new dog"), 1.0, "an empty index");
    ix.upsert(id("a"), "Gina opened a new online clothing store");
    ix.upsert(id("b"), "I adopted a golden retriever puppy named Max");
    ix.upsert(id("c"), "Jon opened a dance studio");
    // every word held (stop words do not count), or no words at all
    assert_eq!(ix.known_share("the new store"), 1.0);
    assert_eq!(ix.known_share("the and"), 1.0);
    // "dog" is in no note: it weighs as much as the rarest word can
    let s = ix.known_share("new dog");
    let idf = |df: f32| (1.0 + (3.0 - df + 0.5) / (df + 0.5)).ln();
    assert!((s - idf(1.0) / (idf(1.0) + idf(0.0))).abs() < 1e-6, "{s}");
    assert!(s > 0.0 && s < 0.5, "{s}");
    // a common held word weighs less than a rare one against the same unknown word
    assert!(ix.known_share("opened dog") < s);
    assert_eq!(ix.known_share("quantum"), 0.0);
}
