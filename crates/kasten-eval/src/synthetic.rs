//! The synthetic corpus of `kasten bench search` and the criterion benchmarks: short notes
//! from a small vocabulary ("Caroline visited the pottery class last weekend …"), so BM25
//! posting lists are long (the worst case for the keyword half of hybrid search). One
//! generator, so the CLI's figures and the criterion benchmarks measure the same text.

use rand::Rng;

const NAMES: &[&str] = &[
    "Caroline", "Melanie", "Jon", "Gina", "Maria", "John", "Audrey", "Andrew", "James", "Deborah",
    "Evan", "Sam", "Calvin", "Dave", "Jolene", "Nate", "Tim", "Joanna", "Priya", "Wei", "Ling",
    "Kenji", "Amara", "Lucas",
];
const VERBS: &[&str] = &[
    "visited",
    "talked about",
    "started learning",
    "finished reading",
    "painted",
    "cooked",
    "planned a trip to",
    "wrote a poem about",
    "volunteered at",
    "bought",
    "lost",
    "fixed",
    "recommended",
    "argued about",
    "photographed",
    "signed up for",
    "dreamed about",
    "complained about",
    "celebrated",
    "researched",
];
const OBJECTS: &[&str] = &[
    "the pottery class",
    "a new guitar",
    "the adoption agency",
    "the marathon",
    "a sunset over the lake",
    "the LGBTQ support group",
    "their grandmother's recipe",
    "a science fiction novel",
    "the dance studio",
    "the animal shelter",
    "a vintage camera",
    "the mountain cabin",
    "a job interview",
    "the community garden",
    "the chess tournament",
    "a watercolor of the harbor",
    "the startup pitch",
    "the family reunion",
    "a hiking trail",
    "the jazz concert",
    "the budget spreadsheet",
    "an old friend",
    "the new puppy",
    "the book club",
    "a broken bicycle",
    "the art exhibition",
    "a coding bootcamp",
    "the camping trip",
];
const WHEN: &[&str] = &[
    "yesterday",
    "last weekend",
    "this morning",
    "in May",
    "two weeks ago",
    "on her birthday",
    "after work",
    "during the holidays",
    "last summer",
    "on Friday night",
];
const WHY: &[&str] = &[
    "because it felt meaningful",
    "with a close friend",
    "for the first time",
    "to relieve stress",
    "and loved it",
    "but it was harder than expected",
    "as a surprise",
    "to help the kids",
    "",
    "",
];

/// One synthetic note, e.g. "Caroline visited the pottery class last weekend and loved it
/// (#412)".
pub fn sentence<R: Rng>(rng: &mut R) -> String {
    let pick = |rng: &mut R, xs: &[&str]| xs[rng.random_range(0..xs.len())].to_owned();
    let (n, v, o, w, y) = (
        pick(rng, NAMES),
        pick(rng, VERBS),
        pick(rng, OBJECTS),
        pick(rng, WHEN),
        pick(rng, WHY),
    );
    let num = rng.random_range(1..1000);
    format!("{n} {v} {o} {w} {y} (#{num})").replace("  ", " ")
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn the_corpus_is_reproducible_and_tidy() {
        let gen_ = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..200)
                .map(|_| super::sentence(&mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(gen_(7), gen_(7));
        assert_ne!(gen_(7), gen_(8));
        for s in gen_(7) {
            assert!(!s.contains("  ") && s.ends_with(')'), "{s}");
        }
    }
}
