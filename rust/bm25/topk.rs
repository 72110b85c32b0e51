//! Top-k selection: the branch-free pass over dense scores of the exhaustive scan, and the
//! running top k of the pruned search, both in the order of search results.

use std::collections::BinaryHeap;

use super::is_allowed;

/// The `k >= 1` best `(doc, score)` pairs of `scores` with a positive score and an allowed
/// doc, ranked; leaves `scores` all zero. One pass with a bounded candidate buffer and a
/// rising score threshold, over blocks of 16 scores: a branch-free test (it vectorizes) skips
/// the blocks with no score above the threshold, and each block is zeroed as it is left.
pub(super) fn top_k(
    scores: &mut [f32],
    k: usize,
    allowed: Option<&[u8]>,
    ranked: &mut Vec<(u32, f32)>,
) -> Vec<(u32, f32)> {
    const BLOCK: usize = 16;
    let capacity = k.max(32).saturating_mul(2);
    let mut threshold = 0.0f32;
    ranked.clear();
    for (b, block) in scores.chunks_mut(BLOCK).enumerate() {
        if block.iter().fold(false, |any, &s| any | (s > threshold)) {
            for (i, &score) in block.iter().enumerate() {
                let doc = b * BLOCK + i;
                // a later doc tying with the k-th best ranks after it: strict `>` is exact
                if score > threshold && is_allowed(allowed, doc) {
                    ranked.push((doc as u32, score));
                    if ranked.len() == capacity {
                        ranked.select_nth_unstable_by(k - 1, by_rank);
                        ranked.truncate(k);
                        threshold = ranked[k - 1].1;
                    }
                }
            }
        }
        block.fill(0.0);
    }
    if ranked.len() > k {
        ranked.select_nth_unstable_by(k - 1, by_rank);
        ranked.truncate(k);
    }
    ranked.sort_unstable_by(by_rank);
    ranked.clone()
}

/// `(score desc, doc id asc)`: the order of search results.
pub(super) fn by_rank(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// A hit, ordered by rank: the greatest is the worst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Hit(u32, f32);

impl Eq for Hit {}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Hit {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        by_rank(&(self.0, self.1), &(other.0, other.1))
    }
}

/// The best `k` hits offered so far, in any order of documents.
pub(super) struct TopK {
    k: usize,
    heap: BinaryHeap<Hit>,
    /// The k-th best hit once there are k (a score of 0 before: scores are positive).
    worst: Hit,
}

impl TopK {
    pub(super) fn new(k: usize, mut heap: BinaryHeap<Hit>) -> Self {
        heap.clear();
        Self {
            k,
            heap,
            worst: Hit(u32::MAX, 0.0),
        }
    }

    /// Score a hit needs at least to enter (ties may enter by doc id).
    pub(super) fn threshold(&self) -> f32 {
        self.worst.1
    }

    /// Whether `(doc, score)` would enter: a positive score ranking before the k-th best.
    pub(super) fn admits(&self, doc: u32, score: f32) -> bool {
        score > self.worst.1 || (score == self.worst.1 && score > 0.0 && doc < self.worst.0)
    }

    /// Adds a hit that [`admits`](Self::admits) accepts.
    pub(super) fn push(&mut self, doc: u32, score: f32) {
        if self.heap.len() == self.k {
            if let Some(mut worst) = self.heap.peek_mut() {
                *worst = Hit(doc, score);
            }
        } else {
            self.heap.push(Hit(doc, score));
        }
        if self.heap.len() == self.k {
            if let Some(&worst) = self.heap.peek() {
                self.worst = worst;
            }
        }
    }

    pub(super) fn into_heap(self) -> BinaryHeap<Hit> {
        self.heap
    }

    /// The hits, ranked, and the emptied heap (for reuse).
    pub(super) fn finish(mut self) -> (Vec<(u32, f32)>, BinaryHeap<Hit>) {
        let mut hits: Vec<(u32, f32)> = self.heap.drain().map(|Hit(d, s)| (d, s)).collect();
        hits.sort_unstable_by(by_rank);
        (hits, self.heap)
    }
}
