//! How the merge rule treats real near-duplicates (a measurement, run by hand).

/// Measures the merge rule on real near-duplicates: the turns of a LoCoMo file (path in
/// `KASTEN_LOCOMO`) embedded with the real model; every pair of turns of one conversation
/// at or above the default thresholds, and how many of them the facts rule still merges.
/// `cargo test -p kasten-eval locomo_near_duplicates -- --ignored --nocapture`
#[cfg(test)]
mod locomo_measure {
    #![allow(clippy::panic)]
    use kasten_core::facts;
    use kasten_core::text::Tokenizer;
    use kasten_embed::{Embedder, FastEmbedder};
    use kasten_engine::MergeOptions;
    use kasten_engine::merge_jaccard as jaccard;

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    #[ignore = "a measurement: needs the embedding model and KASTEN_LOCOMO=<a LoCoMo file>"]
    fn locomo_near_duplicates() {
        let path = std::env::var("KASTEN_LOCOMO")
            .unwrap_or_else(|_| panic!("set KASTEN_LOCOMO to a LoCoMo JSON file"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let samples = crate::locomo::parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
        let embedder = FastEmbedder::load_default().unwrap_or_else(|e| panic!("{e}"));
        let opts = MergeOptions::default();
        let tokenizer = Tokenizer::default();
        // the default thresholds, and looser ones for a larger sample of similar turns
        let levels = [
            (opts.min_cosine, opts.min_jaccard),
            (0.85, 0.4),
            (0.80, 0.3),
        ];
        // per level: pairs, within one session, still merged, kept apart
        let mut counts = [[0usize; 4]; 3];
        let mut turns = 0;
        let mut examples = Vec::new();
        for s in &samples {
            let notes: Vec<(u32, String)> = s
                .turns()
                .map(|(session, t)| (session.number, t.note_content()))
                .collect();
            turns += notes.len();
            let mut vectors = Vec::new();
            for chunk in notes.chunks(64) {
                let texts: Vec<&str> = chunk.iter().map(|(_, t)| t.as_str()).collect();
                vectors.extend(embedder.embed(&texts).unwrap_or_else(|e| panic!("{e}")));
            }
            for i in 0..notes.len() {
                for j in 0..i {
                    let cos = dot(&vectors[i], &vectors[j]);
                    if cos < 0.80 {
                        continue;
                    }
                    let jac = jaccard(&tokenizer, &notes[i].1, &notes[j].1);
                    let d = facts::differences(&notes[i].1, &notes[j].1);
                    for (l, (c, jm)) in levels.iter().enumerate() {
                        if cos < *c || jac < *jm {
                            continue;
                        }
                        counts[l][0] += 1;
                        counts[l][1] += usize::from(notes[i].0 == notes[j].0);
                        counts[l][if d.is_empty() { 2 } else { 3 }] += 1;
                        if l == 1 {
                            examples.push(format!(
                                "{} cos {cos:.3} jac {jac:.2} | {} | {} | {}",
                                if d.is_empty() { "MERGE" } else { "APART" },
                                notes[j].1,
                                notes[i].1,
                                d.join("; ")
                            ));
                        }
                    }
                }
            }
        }
        println!("{} conversations, {turns} turns", samples.len());
        for ((c, j), [pairs, same, kept, apart]) in levels.iter().zip(counts) {
            println!(
                "cosine >= {c} and jaccard >= {j}: {pairs} pairs ({same} within one session); \
                 still merged {kept}, kept apart {apart}"
            );
        }
        for e in &examples {
            println!("{e}");
        }
        assert!(turns > 0, "no turns in {path}");
    }
}
