//! Rank-safe dynamic pruning over fixed ranges of doc ids: the per-term range bounds
//! ([`RangeMax`]) built with the index, and the search that scores only the ranges whose
//! bound reaches the running k-th best score (see the parent module's documentation).

use rayon::prelude::*;

use super::simd::{add_row, prefetch, select};
use super::topk::TopK;
use super::{is_allowed, Bm25Index, Scratch};
use crate::memory::huge_zeroed;

impl Bm25Index {
    /// [`search_terms`](Self::search_terms) with the given settings (tests try others).
    pub(super) fn search_pruned(
        &self,
        terms: &[u32],
        k: usize,
        allowed: Option<&[u8]>,
        scratch: &mut Scratch,
        Pruning { fallback, seed }: Pruning,
    ) -> Vec<(u32, f32)> {
        if terms.is_empty() || k == 0 || self.num_docs() == 0 {
            return Vec::new();
        }
        let rm = &self.ranges;
        scratch.rows.clear();
        scratch.rows.extend(
            terms
                .iter()
                .map(|t| rm.dense.binary_search(t).unwrap_or(SPARSE)),
        );
        let postings: usize = terms.iter().map(|&t| self.postings(t as usize).len()).sum();
        // past this many ranges scored one by one, the exhaustive scan is faster
        let most = if fallback {
            (postings + self.num_docs() * 3 / 4) / (terms.len() * RANGE_COST)
        } else {
            usize::MAX
        };
        if k / WIDTH > most {
            return self.search_terms_exhaustive(terms, k, allowed, scratch);
        }
        let mut top_bound = self.range_bounds(terms, scratch);
        if let Some(mask) = allowed {
            top_bound = Self::mask_bounds(mask, scratch);
        }
        let mut top = TopK::new(k, std::mem::take(&mut scratch.top));
        // 1. seed the k-th best score with the `seed` best ranges among those the rare terms
        // occur in (or, without rare terms, the top band of bounds)
        let key = |r: usize, u: f32| u64::from(u.to_bits()) << 32 | r as u64;
        let mut queue = std::mem::take(&mut scratch.queue);
        queue.clear();
        let bounds = &scratch.bounds;
        if scratch.cands.is_empty() {
            select(bounds, top_bound * 0.5, None, |r, u| queue.push(key(r, u)));
        } else {
            queue.extend(
                scratch
                    .cands
                    .iter()
                    .filter(|&&r| bounds[r as usize] > 0.0) // masked out
                    .map(|&r| key(r as usize, bounds[r as usize])),
            );
        }
        // bounds are positive: the keys order like them
        if queue.len() > seed && seed > 0 {
            queue.select_nth_unstable_by(seed - 1, |a, b| b.cmp(a));
        }
        queue.truncate(seed);
        queue.sort_unstable_by(|a, b| b.cmp(a));
        self.score_best_first(&queue, usize::MAX, &mut top, allowed, scratch);
        for &e in &queue {
            // scored, or unable to reach the k-th best score
            scratch.bounds[e as u32 as usize] = 0.0;
        }
        // 2. every other range whose bound reaches the k-th best score, best bound first
        let theta = top.threshold();
        queue.clear();
        select(&scratch.bounds, theta, None, |r, u| queue.push(key(r, u)));
        queue.sort_unstable_by(|a, b| b.cmp(a));
        let scored = self.score_best_first(&queue, most, &mut top, allowed, scratch);
        scratch.queue = queue;
        if scored > most {
            scratch.top = top.into_heap();
            return self.search_terms_exhaustive(terms, k, allowed, scratch);
        }
        let (hits, heap) = top.finish();
        scratch.top = heap;
        hits
    }

    /// Zeroes the bound of every range without an allowed document (none of its scores may be
    /// returned, so it is never scored: a restrictive mask then visits fewer ranges, not more)
    /// and returns the largest bound left.
    pub(super) fn mask_bounds(mask: &[u8], scratch: &mut Scratch) -> f32 {
        let mut top = 0.0f32;
        for (r, bound) in scratch.bounds.iter_mut().enumerate() {
            if *bound > 0.0 {
                let docs = mask.get(r * WIDTH..).unwrap_or(&[]);
                if docs.iter().take(WIDTH).all(|&b| b == 0) {
                    *bound = 0.0;
                }
                top = top.max(*bound);
            }
        }
        top
    }

    /// Fills `scratch.bounds` with the upper bound of every range for `terms` (0 for the
    /// ranges none of them occurs in), cuts the rare terms' postings into `scratch.runs` (one
    /// run per term and range, linked per range from `scratch.heads` in increasing term id)
    /// and lists in `scratch.cands` the ranges the rare terms occur in (`scratch.rows` holds
    /// each term's row in [`RangeMax`]); returns the largest bound.
    ///
    /// A document's score adds its contributions in increasing term id; a range's bound adds
    /// each term's largest contribution in the range in the same order. Rounding is monotone,
    /// so every score of the range is at most the bound, exactly (no epsilon).
    fn range_bounds(&self, terms: &[u32], scratch: &mut Scratch) -> f32 {
        let rm = &self.ranges;
        let n = rm.n_ranges;
        let Scratch {
            bounds,
            rows,
            runs,
            heads,
            tails,
            cands,
            ..
        } = scratch;
        // fetch every rare term's postings from memory now, so that they arrive while the
        // buffers are cleared (a cache line holds 16 postings)
        for (&t, &row) in terms.iter().zip(rows.iter()) {
            if row == SPARSE {
                for i in self.postings(t as usize).step_by(16) {
                    prefetch(&self.doc_ids, i);
                    prefetch(&self.contrib, i);
                }
            }
        }
        // every head is NONE between queries but those of the last query's ranges (`cands`)
        for &r in cands.iter() {
            if let Some(head) = heads.get_mut(r as usize) {
                *head = NONE;
            }
        }
        heads.resize(n, NONE);
        tails.resize(n, NONE);
        runs.clear();
        cands.clear();
        // the first term's row, if it has one, is written rather than added to zeros (the
        // same bits: `0 + x == x`)
        let first_row = rows.first().is_some_and(|&row| row != SPARSE);
        if !first_row {
            bounds.clear();
        }
        bounds.resize(n, 0.0);
        for (j, (&t, &row)) in terms.iter().zip(rows.iter()).enumerate() {
            if row != SPARSE {
                let maxima = &rm.maxima[row * n..(row + 1) * n];
                add_row(bounds, maxima, rm.scale[row], j > 0 || !first_row);
                continue;
            }
            // postings of one range are adjacent: one run per range
            let range = self.postings(t as usize);
            let (ids, contrib) = (&self.doc_ids[..range.end], &self.contrib[..range.end]);
            let mut i = range.start;
            while i < range.end {
                let (start, r) = (i, ids[i] >> SHIFT);
                let mut m = contrib[i];
                i += 1;
                while i < range.end && ids[i] >> SHIFT == r {
                    m = m.max(contrib[i]);
                    i += 1;
                }
                let r = r as usize;
                bounds[r] += m;
                let id = runs.len() as u32;
                if heads[r] == NONE {
                    heads[r] = id;
                    cands.push(r as u32);
                } else {
                    runs[tails[r] as usize].next = id;
                }
                tails[r] = id;
                runs.push(Run {
                    term: j as u32,
                    next: NONE,
                    start: start as u32,
                    end: i as u32,
                });
            }
        }
        // bounds are never negative nor NaN, so their bits order like them (and an integer
        // maximum vectorizes)
        f32::from_bits(bounds.iter().fold(0, |m, u| m.max(u.to_bits())))
    }

    /// Scores exactly the ranges of `ranges` (`bound bits << 32 | range`, by decreasing
    /// bound) in order, until a bound cannot reach the k-th best score; returns how many were
    /// taken (`limit + 1` if it gave up past `limit`).
    ///
    /// Ranges go in batches of [`BATCH`]: the documents' bounds of the whole batch are
    /// checked first (against the k-th best score then: it only rises), and the
    /// contributions of every range that may reach it fetched from memory at once, so that
    /// their cache misses overlap; then the batch is scored.
    fn score_best_first(
        &self,
        ranges: &[u64],
        limit: usize,
        top: &mut TopK,
        allowed: Option<&[u8]>,
        scratch: &Scratch,
    ) -> usize {
        let rm = &self.ranges;
        let unpack = |e: u64| (f32::from_bits((e >> 32) as u32), e as u32 as usize);
        let mut taken = 0;
        for batch in ranges.chunks(BATCH) {
            let mut may = [false; BATCH];
            let threshold = top.threshold();
            for &e in batch {
                let r = e as u32 as usize;
                for &row in &scratch.rows {
                    if row != SPARSE {
                        prefetch(&rm.cells, row * rm.n_ranges + r);
                    }
                }
            }
            for (m, &e) in may.iter_mut().zip(batch) {
                let (bound, r) = unpack(e);
                if bound < threshold {
                    break;
                }
                *m = self.may_reach(r, threshold, scratch);
                if *m {
                    for &row in &scratch.rows {
                        if row != SPARSE {
                            let (start, mask) = rm.postings(row, r);
                            if mask != 0 {
                                prefetch(&self.contrib, start);
                                prefetch(&self.contrib, start + mask.count_ones() as usize - 1);
                            }
                        }
                    }
                }
            }
            for (&m, &e) in may.iter().zip(batch) {
                let (bound, r) = unpack(e);
                // a later document tying with the k-th best ranks after it: `<` is exact
                if bound < top.threshold() || taken == limit {
                    return taken + usize::from(taken == limit);
                }
                taken += 1;
                if m {
                    self.score_range(r, top, allowed, scratch);
                }
            }
        }
        taken
    }

    /// Scores range `r` exactly into `top`, its documents' contributions added term by term
    /// in increasing term id (the summation order of `score_docs`).
    fn score_range(&self, r: usize, top: &mut TopK, allowed: Option<&[u8]>, scratch: &Scratch) {
        let acc = self.range_sums(r, scratch, |row, acc| {
            let (start, mask) = self.ranges.postings(row, r);
            self.add_masked(start, mask, acc);
        });
        let threshold = top.threshold();
        if !acc.iter().fold(false, |any, &s| any | (s >= threshold)) {
            return;
        }
        let base = r * WIDTH;
        for (i, &score) in acc.iter().enumerate() {
            let doc = (base + i) as u32;
            if top.admits(doc, score) && is_allowed(allowed, doc as usize) {
                top.push(doc, score);
            }
        }
    }

    /// Whether a document of range `r` may score at least `threshold`: its bound adds, in
    /// increasing term id, its rare terms' contributions and the largest contribution in the
    /// range of each frequent term it contains (rounding is monotone: exact).
    fn may_reach(&self, r: usize, threshold: f32, scratch: &Scratch) -> bool {
        let rm = &self.ranges;
        let acc = self.range_sums(r, scratch, |row, acc| {
            let cell = rm.cell(row, r);
            let max = f32::from((cell >> 16) as u8) * rm.scale[row];
            let mut mask = cell & 0xffff;
            while mask != 0 {
                acc[mask.trailing_zeros() as usize & (WIDTH - 1)] += max;
                mask &= mask - 1;
            }
        });
        acc.iter().fold(false, |any, &s| any | (s >= threshold))
    }

    /// Sums over the query's terms, in increasing term id, for the documents of range `r`:
    /// each rare term's run in the range adds its contributions; each frequent term (its
    /// row) adds what `frequent` adds (exact contributions, or the term's range maximum).
    #[inline(always)]
    fn range_sums(
        &self,
        r: usize,
        scratch: &Scratch,
        mut frequent: impl FnMut(usize, &mut [f32; WIDTH]),
    ) -> [f32; WIDTH] {
        let mut acc = [0f32; WIDTH];
        // the rare terms' runs in this range, by increasing term
        let mut link = scratch.heads[r];
        for (j, &row) in scratch.rows.iter().enumerate() {
            if row != SPARSE {
                frequent(row, &mut acc);
            } else if let Some(run) = scratch
                .runs
                .get(link as usize)
                .filter(|run| run.term == j as u32)
            {
                self.add_postings(run.start, run.end, &mut acc);
                link = run.next;
            }
        }
        acc
    }

    /// Adds the contributions of postings `start..end`, all in one range, to the range's
    /// scores.
    #[inline]
    fn add_postings(&self, start: u32, end: u32, acc: &mut [f32; WIDTH]) {
        let (s, e) = (start as usize, end as usize);
        for (&doc, &c) in self.doc_ids[s..e].iter().zip(&self.contrib[s..e]) {
            acc[doc as usize & (WIDTH - 1)] += c;
        }
    }

    /// Adds the contributions of a frequent term's postings in one range (from `start`, on
    /// the documents of `mask`, see [`RangeMax::cells`]) to the range's scores.
    #[inline]
    fn add_masked(&self, start: usize, mask: u16, acc: &mut [f32; WIDTH]) {
        let mut mask = u32::from(mask);
        let mut i = start;
        while mask != 0 {
            acc[mask.trailing_zeros() as usize & (WIDTH - 1)] += self.contrib[i];
            mask &= mask - 1;
            i += 1;
        }
    }
}

/// log2 of the documents per range of [`RangeMax`].
pub(super) const SHIFT: u32 = 4;
/// Documents per range.
pub(super) const WIDTH: usize = 1 << SHIFT;
/// Cost of one query term in one range checked or scored one by one, in postings of the
/// exhaustive scan (a ratio measured on the vLLM corpus: `docs/history.md`, "Constants of the
/// pruned search").
const RANGE_COST: usize = 12;
/// Ranges checked, and their memory fetched, before they are scored.
const BATCH: usize = 16;
/// Terms in at least `ranges / ROW_MIN_DF_DIVISOR` documents get a row of range bounds
/// ([`RangeMax`]): the smallest divisor whose query latency reached the plateau of larger ones
/// (measured with `benches/peers.py`: `docs/history.md`, "Constants of the pruned search").
const ROW_MIN_DF_DIVISOR: usize = 4;
/// No run.
pub(super) const NONE: u32 = u32::MAX;
/// Row of a term without precomputed range bounds.
pub(super) const SPARSE: usize = usize::MAX;

/// How a search prunes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pruning {
    /// Whether to fall back to the exhaustive scan when pruning would cost more.
    pub(super) fallback: bool,
    /// Ranges scored first, to seed the k-th best score: those with the best bounds from
    /// the rare terms.
    pub(super) seed: usize,
}

impl Pruning {
    /// 4 to 32 seed ranges perform alike at k = 10 with warm caches; from cold memory (between
    /// interpreter calls) 6 was the fastest measured (`docs/history.md`, "Constants of the
    /// pruned search").
    pub(super) const DEFAULT: Self = Self {
        fallback: true,
        seed: 6,
    };
}

/// Per-term upper bounds of the contributions over fixed ranges of [`WIDTH`] doc ids, and
/// where each range's postings are: range `r` holds documents `r * WIDTH .. (r + 1) * WIDTH`.
///
/// Only terms in at least a quarter as many documents as there are ranges get a row (their
/// postings touch many ranges, so a dense row is cheaper than reading them); the others'
/// bounds are computed from their postings at query time. A row costs 9 bytes a range, at
/// most 36 bytes per posting of the terms that have one. See [`ROW_MIN_DF_DIVISOR`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RangeMax {
    pub(super) n_ranges: usize,
    /// Terms with a row, increasing.
    dense: Vec<u32>,
    /// `maxima[row * n_ranges + r]`: the row's term's largest contribution in range `r`,
    /// rounded up to a multiple of `scale[row]` (`f32::from(max) * scale[row]` is at least
    /// the contribution). The bounds of a query read whole rows of these.
    pub(super) maxima: Vec<u8>,
    /// `cells[row * n_ranges + r]`, for the row's term in range `r`: the documents it occurs
    /// in (bit `i` of the low 16 bits: document `r * WIDTH + i`), its maximum (bits 16..24,
    /// as in `maxima`) and its first posting in the range (bits 32..64): all a range's check
    /// and scoring need of the term, in one read (only the ranges a query looks at are read).
    pub(super) cells: Vec<u64>,
    /// Per row: the term's largest contribution / 255, rounded up.
    scale: Vec<f32>,
}

impl RangeMax {
    /// Bounds for postings of `n_docs` documents, with rows for terms in at least
    /// 1 / [`ROW_MIN_DF_DIVISOR`] as many documents as there are ranges.
    pub(super) fn new(offsets: &[u32], doc_ids: &[u32], contrib: &[f32], n_docs: usize) -> Self {
        let min_df = n_docs.div_ceil(WIDTH).div_ceil(ROW_MIN_DF_DIVISOR);
        Self::with_rows(offsets, doc_ids, contrib, n_docs, min_df)
    }

    /// Bounds with rows for the terms in at least `min_df` documents.
    pub(super) fn with_rows(
        offsets: &[u32],
        doc_ids: &[u32],
        contrib: &[f32],
        n_docs: usize,
        min_df: usize,
    ) -> Self {
        let n_ranges = n_docs.div_ceil(WIDTH);
        let dense: Vec<u32> = offsets
            .windows(2)
            .enumerate()
            .filter(|(_, w)| (w[1] - w[0]) as usize >= min_df.max(1))
            .map(|(t, _)| t as u32)
            .collect();
        let mut cells = huge_zeroed(dense.len() * n_ranges, 0u64);
        let mut scale = vec![0f32; dense.len()];
        let mut maxima = huge_zeroed(dense.len() * n_ranges, 0u8);
        if n_ranges > 0 {
            cells
                .par_chunks_mut(n_ranges)
                .zip(maxima.par_chunks_mut(n_ranges))
                .zip(scale.par_iter_mut())
                .zip(&dense)
                .for_each_init(Vec::new, |exact, (((cells, maxima), scale), &t)| {
                    let (first, end) = (offsets[t as usize], offsets[t as usize + 1]);
                    exact.clear();
                    exact.resize(n_ranges, 0f32);
                    for i in first..end {
                        let doc = doc_ids[i as usize] as usize;
                        cells[doc / WIDTH] |= 1 << (doc % WIDTH);
                        exact[doc / WIDTH] = exact[doc / WIDTH].max(contrib[i as usize]);
                    }
                    *scale = quantum(exact.iter().fold(0f32, |a, &b| a.max(b)));
                    let mut next = first;
                    let ranges = cells.iter_mut().zip(maxima.iter_mut()).zip(exact.iter());
                    for ((cell, max), &m) in ranges {
                        *max = quantize(m, *scale);
                        let count = (*cell & 0xffff).count_ones();
                        *cell |= u64::from(*max) << 16 | u64::from(next) << 32;
                        next += count;
                    }
                });
        }
        Self {
            n_ranges,
            dense,
            maxima,
            cells,
            scale,
        }
    }

    /// The cell of `row`'s term in range `r`.
    #[inline]
    fn cell(&self, row: usize, r: usize) -> u64 {
        self.cells[row * self.n_ranges + r]
    }

    /// The first posting of `row`'s term in range `r` and the documents of the range it
    /// occurs in (bit `i`: document `r * WIDTH + i`, in posting order).
    #[inline]
    fn postings(&self, row: usize, r: usize) -> (usize, u16) {
        let cell = self.cell(row, r);
        ((cell >> 32) as usize, cell as u16)
    }
}

/// Step of a row of maxima up to `top` in 255 steps: `255 * step >= top` in `f32`.
fn quantum(top: f32) -> f32 {
    let mut step = top / 255.0;
    while 255.0 * step < top {
        step = f32::from_bits(step.to_bits() + 1);
    }
    step
}

/// The smallest `q` with `f32::from(q) * step >= m` (`0 <= m <= 255 * step`).
fn quantize(m: f32, step: f32) -> u8 {
    let mut q = (m / step).clamp(0.0, 255.0) as u8;
    while f32::from(q) * step < m {
        q += 1;
    }
    q
}

/// The postings `start..end` of one rare query term (the `term`-th) in a range, and the next
/// run in the range ([`NONE`] after the last).
#[derive(Debug, Clone, Copy)]
pub(super) struct Run {
    term: u32,
    next: u32,
    start: u32,
    end: u32,
}
