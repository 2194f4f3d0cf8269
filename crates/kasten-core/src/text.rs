//! The one tokenizer used for full-text indexing and for queries.
//!
//! Latin-script words are lowercased, stop words dropped and the rest Porter-stemmed
//! (Snowball English). Runs of CJK characters (Han, kana, Hangul) have no spaces between
//! words, so they are cut into overlapping character bigrams, the approach of Lucene's
//! CJK analyzer: "向量数据库" → 向量, 量数, 数据, 据库. A lone CJK character is kept as a
//! unigram. Digits stay as words ("2023", "7pm").
//!
//! A document is indexed with the unigrams of its CJK runs as well
//! ([`Tokenizer::tokenize_document`], as Lucene's CJK bigram filter does with
//! `outputUnigrams`): a one-character query ("猫") then finds the words it is part of
//! ("小猫"). Queries keep bigrams only ([`Tokenizer::tokenize`]), so a longer query is
//! matched as precisely, and as fast, as before.

use rust_stemmers::{Algorithm, Stemmer};

/// English stop words: too common to help ranking, and they bloat posting lists.
pub(crate) const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing", "for",
    "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i",
    "if", "in", "into", "is", "it", "its", "itself", "just", "me", "my", "myself", "of", "on",
    "or", "our", "ours", "she", "so", "some", "such", "than", "that", "the", "their", "theirs",
    "them", "then", "there", "these", "they", "this", "those", "to", "too", "us", "was", "we",
    "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with",
    "would", "you", "your", "yours",
];

pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF   // Hiragana, Katakana
        | 0x3400..=0x4DBF // CJK Extension A
        | 0x4E00..=0x9FFF // CJK Unified Ideographs
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // Extensions B.., Compatibility Supplement
}

/// A reusable tokenizer (holds the stemmer).
pub struct Tokenizer {
    stemmer: Stemmer,
}

impl Default for Tokenizer {
    fn default() -> Self {
        Self {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }
}

impl Tokenizer {
    /// Splits `text` into query terms, in order, with repeats: CJK runs as bigrams (a lone
    /// character as itself).
    pub fn tokenize(&self, text: &str) -> Vec<String> {
        self.terms(text, false)
    }

    /// Splits a document into index terms, in order, with repeats: [`Tokenizer::tokenize`]
    /// plus every character of a CJK run as a unigram ("小猫" → 小, 小猫, 猫).
    pub fn tokenize_document(&self, text: &str) -> Vec<String> {
        self.terms(text, true)
    }

    fn terms(&self, text: &str, unigrams: bool) -> Vec<String> {
        let mut out = Vec::new();
        let mut word = String::new();
        let mut cjk: Vec<char> = Vec::new();
        // set after "word'" so that a short tail ("s", "t", "ll", "ve") is dropped
        let mut tail = false;
        for c in text.chars() {
            if is_cjk(c) {
                self.flush_word(&mut word, &mut tail, &mut out);
                cjk.push(c);
            } else if c.is_alphanumeric() {
                flush_cjk(&mut cjk, unigrams, &mut out);
                word.extend(c.to_lowercase());
            } else if (c == '\'' || c == '’') && !word.is_empty() {
                // "Caroline's" → "caroline": the possessive/contraction tail is dropped.
                self.flush_word(&mut word, &mut tail, &mut out);
                tail = true;
            } else {
                self.flush_word(&mut word, &mut tail, &mut out);
                flush_cjk(&mut cjk, unigrams, &mut out);
            }
        }
        self.flush_word(&mut word, &mut tail, &mut out);
        flush_cjk(&mut cjk, unigrams, &mut out);
        out
    }

    fn flush_word(&self, word: &mut String, tail: &mut bool, out: &mut Vec<String>) {
        let was_tail = std::mem::take(tail);
        if word.is_empty() || (was_tail && word.chars().count() <= 2) {
            word.clear();
            return;
        }
        if !STOP_WORDS.contains(&word.as_str()) {
            out.push(self.stemmer.stem(word).into_owned());
        }
        word.clear();
    }
}

/// A CJK run as bigrams (a lone character as itself); with `unigrams`, each character
/// too, in order: 小, 小猫, 猫.
fn flush_cjk(run: &mut Vec<char>, unigrams: bool, out: &mut Vec<String>) {
    match run.len() {
        0 => {}
        1 => out.push(run[0].to_string()),
        n => {
            for i in 0..n {
                if unigrams {
                    out.push(run[i].to_string());
                }
                if let Some(pair) = run.get(i..i + 2) {
                    out.push(pair.iter().collect());
                }
            }
        }
    }
    run.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        Tokenizer::default().tokenize(s)
    }

    #[test]
    fn english_is_lowercased_stemmed_and_stopworded() {
        assert_eq!(toks("The Runners were running!"), vec!["runner", "run"]);
        assert_eq!(
            toks("Caroline's adoption agencies"),
            vec!["carolin", "adopt", "agenc"]
        );
        assert_eq!(toks("at 7pm in 2023"), vec!["7pm", "2023"]);
        assert_eq!(toks("'quoted' don't"), vec!["quot", "don"]);
    }

    #[test]
    fn chinese_is_cut_into_bigrams_not_one_token_per_sentence() {
        assert_eq!(toks("向量数据库"), vec!["向量", "量数", "数据", "据库"]);
        assert_eq!(toks("我"), vec!["我"]);
        // mixed scripts: each run is handled by its own rule
        assert_eq!(
            toks("SurrealDB是数据库"),
            vec!["surrealdb", "是数", "数据", "据库"]
        );
    }

    #[test]
    fn documents_keep_each_cjk_character_too() {
        let doc = |s: &str| Tokenizer::default().tokenize_document(s);
        assert_eq!(doc("小猫"), vec!["小", "小猫", "猫"]);
        assert_eq!(doc("我"), vec!["我"]);
        assert_eq!(
            doc("SurrealDB是数据库 ok"),
            vec![
                "surrealdb",
                "是",
                "是数",
                "数",
                "数据",
                "据",
                "据库",
                "库",
                "ok"
            ]
        );
        // queries are unchanged
        assert_eq!(toks("小猫"), vec!["小猫"]);
    }

    #[test]
    fn japanese_and_korean_are_cjk_too() {
        assert_eq!(toks("東京タワー"), vec!["東京", "京タ", "タワ", "ワー"]);
        assert_eq!(toks("안녕하세요"), vec!["안녕", "녕하", "하세", "세요"]);
    }

    #[test]
    fn punctuation_only_gives_nothing() {
        assert!(toks("... !!! ,,,").is_empty());
        assert!(toks("").is_empty());
    }
}
