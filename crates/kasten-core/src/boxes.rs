//! Boxes: groups of notes whose links and contexts hang together (the A-Mem paper's
//! "boxes"). A note may sit in several.
//!
//! **Algorithm: Louvain modularity optimisation** on an undirected weighted graph (petgraph)
//! whose edges are accepted links (weight = confidence) plus strong embedding similarity
//! (added by the engine). Why Louvain rather than label propagation: label propagation is
//! non-deterministic (random order and tie-breaking) and tends to flood a single giant
//! community on dense similarity graphs; Louvain is deterministic here (nodes visited in id
//! order, ties broken towards the lower community), optimises a quantity we can report
//! (modularity), and its resolution parameter controls Box size. At 10k notes it runs in
//! milliseconds — the cost of a recompute is the similarity graph, not the clustering.
//!
//! **Overlap**: after clustering, a note also joins a neighbouring community when its edge
//! weight into that community is at least [`BoxParams::overlap_ratio`] of its weight into
//! its own, through at least two neighbours.
//!
//! **Stable ids**: new communities are matched to the previous Boxes by the Jaccard
//! similarity of their core members (greedy, best first); a match of at least
//! [`BoxParams::keep_id_jaccard`] keeps the old id.
//!
//! **Labels**: the members' most distinctive tags (count in the Box × ln(N/df) over the
//! memory), falling back to keywords or content terms for notes the LLM
//! has not annotated.

use std::collections::{BTreeMap, HashMap, HashSet};

use petgraph::graph::{NodeIndex, UnGraph};
use petgraph::visit::EdgeRef;

use crate::{BoxId, NoteId};

/// Tunables of Box computation.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxParams {
    /// Louvain resolution γ: higher gives more, smaller Boxes.
    pub resolution: f64,
    /// Communities smaller than this are not Boxes (their notes stay unboxed).
    pub min_size: usize,
    /// See the module docs.
    pub overlap_ratio: f64,
    pub keep_id_jaccard: f64,
}

impl Default for BoxParams {
    fn default() -> Self {
        Self {
            resolution: 1.0,
            min_size: 3,
            overlap_ratio: 0.5,
            keep_id_jaccard: 0.5,
        }
    }
}

/// The graph Boxes are computed from. Parallel edges are summed; self-loops ignored.
#[derive(Debug, Default, Clone)]
pub struct BoxGraph {
    graph: UnGraph<NoteId, f64>,
    index: HashMap<NoteId, NodeIndex>,
}

impl BoxGraph {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_note(&mut self, id: &NoteId) -> NodeIndex {
        if let Some(i) = self.index.get(id) {
            return *i;
        }
        let i = self.graph.add_node(id.clone());
        self.index.insert(id.clone(), i);
        i
    }

    /// Adds `w` to the edge between `a` and `b` (creating the notes if needed). Weights
    /// that are not positive and finite are ignored.
    pub fn add_edge(&mut self, a: &NoteId, b: &NoteId, w: f64) {
        if a == b || !(w.is_finite() && w > 0.0) {
            return;
        }
        let (ia, ib) = (self.add_note(a), self.add_note(b));
        match self.graph.find_edge(ia, ib) {
            Some(e) => {
                if let Some(x) = self.graph.edge_weight_mut(e) {
                    *x += w;
                }
            }
            None => {
                self.graph.add_edge(ia, ib, w);
            }
        }
    }

    pub fn note_count(&self) -> usize {
        self.graph.node_count()
    }

    pub fn edge_count(&self) -> usize {
        self.graph.edge_count()
    }

    /// Summed edge weight from `id` into each of the given groups of notes.
    pub fn weight_into(
        &self,
        id: &NoteId,
        group_of: &HashMap<NoteId, Vec<usize>>,
    ) -> Vec<(usize, f64, usize)> {
        let Some(&i) = self.index.get(id) else {
            return Vec::new();
        };
        let mut acc: BTreeMap<usize, (f64, usize)> = BTreeMap::new();
        for e in self.graph.edges(i) {
            let other = if e.source() == i {
                e.target()
            } else {
                e.source()
            };
            if let Some(gs) = group_of.get(&self.graph[other]) {
                for g in gs {
                    let x = acc.entry(*g).or_insert((0.0, 0));
                    x.0 += *e.weight();
                    x.1 += 1;
                }
            }
        }
        acc.into_iter().map(|(g, (w, n))| (g, w, n)).collect()
    }
}

/// One community found by [`detect`].
#[derive(Debug, Clone, PartialEq)]
pub struct Community {
    /// Notes Louvain put here, in id order.
    pub core: Vec<NoteId>,
    /// Core plus the notes that joined by overlap, in id order.
    pub members: Vec<NoteId>,
}

/// The outcome of [`detect`].
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    /// Largest first (ties by first member id).
    pub communities: Vec<Community>,
    /// Modularity of the partition (before dropping small communities and adding overlap).
    pub modularity: f64,
    pub levels: usize,
}

/// A weighted graph as adjacency lists, for the Louvain passes.
struct Level {
    adj: Vec<Vec<(usize, f64)>>,
    /// Weight of edges inside each node (from earlier aggregation), counted once.
    internal: Vec<f64>,
}

impl Level {
    fn degree(&self, i: usize) -> f64 {
        2.0 * self.internal[i] + self.adj[i].iter().map(|(_, w)| w).sum::<f64>()
    }
}

/// Moves nodes between communities until no move gains modularity. Returns the
/// community of each node (renumbered 0..) and whether anything moved.
fn local_moving(level: &Level, m2: f64, gamma: f64) -> (Vec<usize>, bool) {
    let n = level.adj.len();
    let k: Vec<f64> = (0..n).map(|i| level.degree(i)).collect();
    let mut comm: Vec<usize> = (0..n).collect();
    let mut tot: Vec<f64> = k.clone();
    let mut moved_any = false;
    let mut weights: HashMap<usize, f64> = HashMap::new();
    for _pass in 0..50 {
        let mut moved = false;
        for i in 0..n {
            weights.clear();
            for &(j, w) in &level.adj[i] {
                if j != i {
                    *weights.entry(comm[j]).or_insert(0.0) += w;
                }
            }
            let own = comm[i];
            tot[own] -= k[i];
            let gain = |c: usize, w_in: f64| w_in - gamma * tot[c] * k[i] / m2;
            let mut best = own;
            let mut best_gain = gain(own, weights.get(&own).copied().unwrap_or(0.0));
            let mut cands: Vec<(usize, f64)> = weights.iter().map(|(c, w)| (*c, *w)).collect();
            cands.sort_by_key(|(c, _)| *c);
            for (c, w) in cands {
                let g = gain(c, w);
                if g > best_gain + 1e-12 {
                    best = c;
                    best_gain = g;
                }
            }
            tot[best] += k[i];
            if best != own {
                comm[i] = best;
                moved = true;
                moved_any = true;
            }
        }
        if !moved {
            break;
        }
    }
    // renumber in order of first appearance
    let mut map: HashMap<usize, usize> = HashMap::new();
    for c in comm.iter_mut() {
        let next = map.len();
        *c = *map.entry(*c).or_insert(next);
    }
    (comm, moved_any)
}

fn aggregate(level: &Level, comm: &[usize]) -> Level {
    let nc = comm.iter().copied().max().map_or(0, |m| m + 1);
    let mut internal = vec![0.0; nc];
    let mut adj: Vec<BTreeMap<usize, f64>> = vec![BTreeMap::new(); nc];
    for (i, edges) in level.adj.iter().enumerate() {
        internal[comm[i]] += level.internal[i];
        for &(j, w) in edges {
            let (a, b) = (comm[i], comm[j]);
            if a == b {
                // each undirected edge appears twice in the lists
                internal[a] += w / 2.0;
            } else {
                *adj[a].entry(b).or_insert(0.0) += w;
            }
        }
    }
    Level {
        adj: adj.into_iter().map(|m| m.into_iter().collect()).collect(),
        internal,
    }
}

fn modularity(level: &Level, comm: &[usize], m2: f64, gamma: f64) -> f64 {
    if m2 <= 0.0 {
        return 0.0;
    }
    let nc = comm.iter().copied().max().map_or(0, |m| m + 1);
    let mut inside = vec![0.0; nc];
    let mut tot = vec![0.0; nc];
    for i in 0..level.adj.len() {
        inside[comm[i]] += 2.0 * level.internal[i];
        tot[comm[i]] += level.degree(i);
        for &(j, w) in &level.adj[i] {
            if comm[j] == comm[i] {
                inside[comm[i]] += w;
            }
        }
    }
    (0..nc)
        .map(|c| inside[c] / m2 - gamma * (tot[c] / m2).powi(2))
        .sum()
}

/// Louvain communities of `g` with overlap (see the module docs).
pub fn detect(g: &BoxGraph, params: &BoxParams) -> Detection {
    let n = g.graph.node_count();
    // nodes in id order so the result does not depend on insertion order
    let mut order: Vec<NodeIndex> = g.graph.node_indices().collect();
    order.sort_by(|a, b| g.graph[*a].cmp(&g.graph[*b]));
    let pos: HashMap<NodeIndex, usize> = order.iter().enumerate().map(|(p, i)| (*i, p)).collect();
    let mut adj: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    for e in g.graph.edge_references() {
        let (a, b) = (pos[&e.source()], pos[&e.target()]);
        adj[a].push((b, *e.weight()));
        adj[b].push((a, *e.weight()));
    }
    for l in adj.iter_mut() {
        l.sort_by_key(|(j, _)| *j);
    }
    let base = Level {
        adj,
        internal: vec![0.0; n],
    };
    let m2: f64 = (0..n).map(|i| base.degree(i)).sum();
    let gamma = params.resolution;
    // membership of each original node in the current level's nodes
    let mut assignment: Vec<usize> = (0..n).collect();
    let mut levels = 0;
    if m2 > 0.0 {
        let mut level = aggregate(&base, &assignment);
        loop {
            let (comm, moved) = local_moving(&level, m2, gamma);
            if !moved {
                break;
            }
            levels += 1;
            for a in assignment.iter_mut() {
                *a = comm[*a];
            }
            level = aggregate(&level, &comm);
            if level.adj.len() <= 1 || levels >= 32 {
                break;
            }
        }
    }
    let q = modularity(&base, &assignment, m2, gamma);

    // communities of original nodes, big enough to be Boxes
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (p, c) in assignment.iter().enumerate() {
        groups.entry(*c).or_default().push(p);
    }
    let mut kept: Vec<Vec<usize>> = groups
        .into_values()
        .filter(|v| v.len() >= params.min_size.max(1))
        .collect();
    let mut box_of: Vec<Option<usize>> = vec![None; n];
    for (b, v) in kept.iter().enumerate() {
        for p in v {
            box_of[*p] = Some(b);
        }
    }
    // overlap
    let mut extra: Vec<Vec<usize>> = vec![Vec::new(); kept.len()];
    for p in 0..n {
        let Some(own) = box_of[p] else { continue };
        let mut into: BTreeMap<usize, (f64, usize)> = BTreeMap::new();
        for &(j, w) in &base.adj[p] {
            if let Some(b) = box_of[j] {
                let x = into.entry(b).or_insert((0.0, 0));
                x.0 += w;
                x.1 += 1;
            }
        }
        let own_w = into.get(&own).map_or(0.0, |x| x.0);
        for (b, (w, cnt)) in into {
            if b != own && cnt >= 2 && own_w > 0.0 && w >= params.overlap_ratio * own_w {
                extra[b].push(p);
            }
        }
    }
    let id = |p: usize| g.graph[order[p]].clone();
    let mut communities: Vec<Community> = kept
        .iter_mut()
        .zip(extra)
        .map(|(core, more)| {
            let core_ids: Vec<NoteId> = core.iter().map(|p| id(*p)).collect();
            let mut members = core_ids.clone();
            members.extend(more.iter().map(|p| id(*p)));
            members.sort();
            members.dedup();
            Community {
                core: core_ids,
                members,
            }
        })
        .collect();
    communities.sort_by(|a, b| {
        b.members
            .len()
            .cmp(&a.members.len())
            .then_with(|| a.core.first().cmp(&b.core.first()))
    });
    Detection {
        communities,
        modularity: q,
        levels,
    }
}

fn jaccard(a: &HashSet<&NoteId>, b: &HashSet<&NoteId>) -> f64 {
    let inter = a.intersection(b).count();
    let union = a.len() + b.len() - inter;
    if union == 0 {
        0.0
    } else {
        inter as f64 / union as f64
    }
}

/// Ids for `new` communities: the id of the previous Box whose core overlaps most (Jaccard
/// ≥ `min_jaccard`, each old id used once, best matches first), else a fresh id.
pub fn stable_ids(new: &[Community], old: &[(BoxId, Vec<NoteId>)], min_jaccard: f64) -> Vec<BoxId> {
    let new_sets: Vec<HashSet<&NoteId>> = new.iter().map(|c| c.core.iter().collect()).collect();
    let old_sets: Vec<HashSet<&NoteId>> = old.iter().map(|(_, m)| m.iter().collect()).collect();
    let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
    for (i, a) in new_sets.iter().enumerate() {
        for (j, b) in old_sets.iter().enumerate() {
            let s = jaccard(a, b);
            if s >= min_jaccard && s > 0.0 {
                pairs.push((s, i, j));
            }
        }
    }
    pairs.sort_by(|x, y| {
        y.0.partial_cmp(&x.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| x.1.cmp(&y.1))
            .then_with(|| x.2.cmp(&y.2))
    });
    let mut ids: Vec<Option<BoxId>> = vec![None; new.len()];
    let mut used = vec![false; old.len()];
    for (_, i, j) in pairs {
        if ids[i].is_none() && !used[j] {
            ids[i] = Some(old[j].0.clone());
            used[j] = true;
        }
    }
    ids.into_iter()
        .map(|x| x.unwrap_or_else(BoxId::generate))
        .collect()
}

/// Label terms of a Box: its members' most distinctive terms (count in the Box × ln(N/df)),
/// at most `max_terms`, each used by at least two members (or by the only one).
/// `terms_of` gives each note's candidate terms (tags; else keywords or content terms);
/// `df` counts, over the whole memory, the notes each term appears in, and `n` is the
/// number of notes.
pub fn label_terms(
    members: &[NoteId],
    terms_of: &HashMap<NoteId, Vec<String>>,
    df: &HashMap<String, usize>,
    n: usize,
    max_terms: usize,
) -> Vec<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for m in members {
        if let Some(ts) = terms_of.get(m) {
            let uniq: HashSet<&str> = ts.iter().map(String::as_str).collect();
            for t in uniq {
                *count.entry(t).or_insert(0) += 1;
            }
        }
    }
    let need = if members.len() > 1 { 2 } else { 1 };
    let mut scored: Vec<(f64, &str)> = count
        .into_iter()
        .filter(|(_, c)| *c >= need)
        .map(|(t, c)| {
            let d = df.get(t).copied().unwrap_or(1).max(1) as f64;
            (c as f64 * (n.max(1) as f64 / d).ln(), t)
        })
        // a term in (nearly) every note names nothing in particular
        .filter(|(score, _)| *score > 0.0)
        .collect();
    scored.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.1.cmp(b.1))
    });
    scored
        .into_iter()
        .take(max_terms)
        .map(|(_, t)| t.to_owned())
        .collect()
}

/// Document frequency of each term over all notes.
pub fn document_frequency(terms_of: &HashMap<NoteId, Vec<String>>) -> HashMap<String, usize> {
    let mut df: HashMap<String, usize> = HashMap::new();
    for ts in terms_of.values() {
        let uniq: HashSet<&String> = ts.iter().collect();
        for t in uniq {
            *df.entry(t.clone()).or_insert(0) += 1;
        }
    }
    df
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<NoteId> {
        (0..n)
            .map(|i| NoteId::parse(&format!("n{i:04}")).unwrap_or_else(|_| NoteId::generate()))
            .collect()
    }

    /// Two 5-cliques joined by one weak edge.
    fn two_cliques() -> (BoxGraph, Vec<NoteId>) {
        let v = ids(10);
        let mut g = BoxGraph::new();
        for block in [0..5, 5..10] {
            for i in block.clone() {
                for j in block.clone() {
                    if i < j {
                        g.add_edge(&v[i], &v[j], 1.0);
                    }
                }
            }
        }
        g.add_edge(&v[4], &v[5], 0.1);
        (g, v)
    }

    #[test]
    fn finds_two_cliques() {
        let (g, v) = two_cliques();
        let d = detect(&g, &BoxParams::default());
        assert_eq!(d.communities.len(), 2, "{d:?}");
        let mut cores: Vec<Vec<NoteId>> = d.communities.iter().map(|c| c.core.clone()).collect();
        cores.sort();
        assert_eq!(cores[0], v[0..5].to_vec());
        assert_eq!(cores[1], v[5..10].to_vec());
        // two equal cliques and a weak bridge: Q close to 0.5
        assert!(
            d.modularity > 0.45 && d.modularity < 0.5,
            "{}",
            d.modularity
        );
    }

    #[test]
    fn deterministic_whatever_the_insertion_order() {
        let (g, _) = two_cliques();
        let v = ids(10);
        let mut h = BoxGraph::new();
        for i in (0..10).rev() {
            h.add_note(&v[i]);
        }
        for e in g.graph.edge_references() {
            h.add_edge(&g.graph[e.target()], &g.graph[e.source()], *e.weight());
        }
        assert_eq!(
            detect(&g, &BoxParams::default()),
            detect(&h, &BoxParams::default())
        );
    }

    #[test]
    fn empty_and_edgeless_graphs_have_no_boxes() {
        let d = detect(&BoxGraph::new(), &BoxParams::default());
        assert!(d.communities.is_empty());
        let mut g = BoxGraph::new();
        for id in ids(5) {
            g.add_note(&id);
        }
        let d = detect(&g, &BoxParams::default());
        assert!(d.communities.is_empty());
        assert_eq!(d.modularity, 0.0);
    }

    #[test]
    fn bad_weights_are_ignored() {
        let v = ids(2);
        let mut g = BoxGraph::new();
        g.add_edge(&v[0], &v[1], f64::NAN);
        g.add_edge(&v[0], &v[1], -1.0);
        g.add_edge(&v[0], &v[0], 1.0);
        assert_eq!(g.edge_count(), 0);
    }

    #[test]
    fn a_note_tied_to_both_communities_sits_in_both() {
        let (mut g, v) = two_cliques();
        let bridge = NoteId::parse("bridge").unwrap_or_else(|_| NoteId::generate());
        for i in [0, 1, 2, 5, 6, 7] {
            g.add_edge(&bridge, &v[i], 1.0);
        }
        let d = detect(&g, &BoxParams::default());
        assert_eq!(d.communities.len(), 2);
        let holding = d
            .communities
            .iter()
            .filter(|c| c.members.contains(&bridge))
            .count();
        assert_eq!(holding, 2, "{d:?}");
        let cored = d
            .communities
            .iter()
            .filter(|c| c.core.contains(&bridge))
            .count();
        assert_eq!(cored, 1);
    }

    #[test]
    fn small_communities_are_not_boxes() {
        let v = ids(2);
        let mut g = BoxGraph::new();
        g.add_edge(&v[0], &v[1], 1.0);
        assert!(detect(&g, &BoxParams::default()).communities.is_empty());
    }

    #[test]
    fn ids_persist_when_membership_mostly_persists() {
        let (g, v) = two_cliques();
        let d = detect(&g, &BoxParams::default());
        let first = stable_ids(&d.communities, &[], 0.5);
        let old: Vec<(BoxId, Vec<NoteId>)> = first
            .iter()
            .cloned()
            .zip(d.communities.iter().map(|c| c.core.clone()))
            .collect();
        // one more note joins the first clique
        let mut g2 = g.clone();
        let extra = NoteId::parse("n9999").unwrap_or_else(|_| NoteId::generate());
        for n in &v[0..5] {
            g2.add_edge(&extra, n, 1.0);
        }
        let d2 = detect(&g2, &BoxParams::default());
        let second = stable_ids(&d2.communities, &old, 0.5);
        let mut a = first.clone();
        let mut b = second.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        // an unrelated community gets a fresh id
        let fresh = stable_ids(
            &[Community {
                core: ids(3),
                members: ids(3),
            }],
            &[(BoxId::generate(), vec![extra])],
            0.5,
        );
        assert_eq!(fresh.len(), 1);
        assert!(!old.iter().any(|(id, _)| id == &fresh[0]));
    }

    #[test]
    fn labels_prefer_distinctive_shared_terms() {
        let v = ids(4);
        let mut terms: HashMap<NoteId, Vec<String>> = HashMap::new();
        terms.insert(v[0].clone(), vec!["hiking".into(), "life".into()]);
        terms.insert(
            v[1].clone(),
            vec!["hiking".into(), "life".into(), "alps".into()],
        );
        terms.insert(v[2].clone(), vec!["cooking".into(), "life".into()]);
        terms.insert(v[3].clone(), vec!["cooking".into(), "life".into()]);
        let df = document_frequency(&terms);
        let label = label_terms(&v[0..2], &terms, &df, 4, 2);
        // "life" is on every note of the memory: it names nothing in particular
        assert_eq!(label, vec!["hiking".to_owned()]);
        // "alps" is on one member only: not a label of a two-note box
        assert!(!label.contains(&"alps".to_owned()));
    }
}
