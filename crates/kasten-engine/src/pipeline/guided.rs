//! The shortlists a small model chooses from: the tags and keyword candidates nearest a
//! note, without the terms that name the whole memory.

use crate::{Engine, EngineError};

/// Tags and keyword candidates a small model chooses from, per note.
pub(super) const GUIDED_TAGS: usize = 3;
pub(super) const GUIDED_TERMS: usize = 10;
/// A term in more than this share of the memory's notes names the whole memory (a
/// speaker's name in a chat log: 70-76 % of the turns of a LoCoMo conversation; its theme:
/// "dance", 25 %), not what one note is about or two notes share: it is not offered to a
/// small model as a keyword or a link's reason.
pub(super) const COMMON_TERM_SHARE: f64 = 0.15;
/// Below this many notes the shares say too little to judge a term by.
pub(super) const COMMON_MIN_NOTES: usize = 40;

impl Engine {
    /// Those of `terms` (lowercased) found in more than [`COMMON_TERM_SHARE`] of the
    /// memory's notes, once it has [`COMMON_MIN_NOTES`].
    pub(super) fn common_terms(
        &self,
        terms: &[String],
    ) -> Result<std::collections::HashSet<String>, EngineError> {
        let ix = self.read_indexes()?;
        if ix.text.len() < COMMON_MIN_NOTES {
            return Ok(Default::default());
        }
        Ok(terms
            .iter()
            .map(|t| t.to_lowercase())
            .filter(|t| ix.text.doc_share(t) > COMMON_TERM_SHARE)
            .collect())
    }

    /// The `n` of `items` closest in meaning to `note_vec` (cosine of the embeddings of
    /// `text(item)`), closest first. Embeddings are cached by that text (tags recur on
    /// every note).
    pub(super) async fn shortlist(
        &self,
        note_vec: &[f32],
        items: Vec<String>,
        n: usize,
        text: fn(&str) -> &str,
    ) -> Result<Vec<String>, EngineError> {
        if items.len() <= 1 || note_vec.is_empty() {
            return Ok(items.into_iter().take(n).collect());
        }
        let missing: Vec<String> = {
            let cache = self
                .term_vectors
                .lock()
                .map_err(|_| EngineError::Internal("term cache poisoned".into()))?;
            items
                .iter()
                .map(|t| text(t).to_owned())
                .filter(|t| !cache.contains_key(t))
                .collect()
        };
        let fresh = if missing.is_empty() {
            Vec::new()
        } else {
            self.embed_blocking(missing.clone()).await?
        };
        let mut cache = self
            .term_vectors
            .lock()
            .map_err(|_| EngineError::Internal("term cache poisoned".into()))?;
        if cache.len() > 20_000 {
            cache.clear();
        }
        for (t, v) in missing.into_iter().zip(fresh) {
            cache.insert(t, v);
        }
        let mut scored: Vec<(f32, usize)> = items
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let s = cache.get(text(t)).map_or(f32::MIN, |v| {
                    v.iter().zip(note_vec).map(|(a, b)| a * b).sum::<f32>()
                });
                (s, i)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(scored
            .into_iter()
            .take(n)
            .map(|(_, i)| items[i].clone())
            .collect())
    }
}
