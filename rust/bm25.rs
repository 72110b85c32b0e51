//! BM25 inverted index in flat arrays (bm25s-style): no per-posting objects, and every
//! posting's score contribution is precomputed at build time, so a query is a sum of
//! contiguous `f32` slices followed by a top-k selection.
//!
//! Postings of term `t` are `doc_ids[offsets[t]..offsets[t + 1]]` (increasing) with the
//! matching `contrib` values `idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))`,
//! where `idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))` (Lucene / bm25s).
//!
//! Search is rank-safe dynamic pruning over fixed ranges of doc ids ([`RangeMax`]), block-max
//! style. The query's terms give every range an upper bound: the sum of each term's largest
//! contribution in that range, read from a precomputed row of byte-sized maxima for frequent
//! terms and from the postings for rare ones (which are cut into per-range runs on the way).
//! Then:
//!
//! 1. *seed*: the few ranges the rare terms occur in with the best bounds are scored, which
//!    sets the k-th best score θ close to its final value (on the vLLM questions, 0.98 of it);
//! 2. every other range whose bound reaches θ is scored, best bound first, until no bound
//!    left reaches θ (which keeps rising).
//!
//! Before a range is scored, each document's own bound — its rare terms' contributions plus,
//! for each frequent term it contains (a bit mask per term and range), the term's largest
//! contribution in the range — is checked against θ; two ranges in three stop there, without
//! reading the frequent terms' contributions. Ranges are checked in batches, and the memory
//! of a whole batch (the frequent terms' cells, then the contributions of the ranges that
//! pass) is requested at once before it is read: from cold caches — a query served between
//! interpreter calls — a search waits on memory more than it computes. Every sum (score, range bound, document bound) adds its terms in increasing term
//! id, exactly as [`score_docs`](Bm25Index::score_docs) and the exhaustive scan do: rounding
//! is monotone, so a bound is never below a score it covers (no epsilon), and all three ways
//! agree to the bit. A range without an `allowed` document gets a zero bound, so a restrictive
//! mask visits fewer ranges, not more. Queries for which pruning would not pay (too many
//! ranges to visit, e.g. a large `k`) fall back to the exhaustive scan.

#![warn(missing_docs)]

use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::marker::PhantomData;
use std::ops::Range;

use rayon::prelude::*;

use crate::memory::{collapse_huge_pages, huge_zeroed};
use crate::tokenizer::{for_each_token, tokenize, TokenizerConfig};

/// Largest accepted `k1`; beyond it contributions could overflow.
const MAX_K1: f64 = 1e6;

/// BM25 parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation, in `[0, 1e6]`.
    pub k1: f64,
    /// Document-length normalisation, in `[0, 1]`.
    pub b: f64,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Self { k1: 1.2, b: 0.75 }
    }
}

impl Bm25Params {
    /// Checks that both parameters are finite and in range.
    pub fn validate(&self) -> Result<(), BuildError> {
        if !(0.0..=MAX_K1).contains(&self.k1) {
            return Err(BuildError(format!(
                "k1 must be a number in [0, {MAX_K1}], got {}",
                self.k1
            )));
        }
        if !(0.0..=1.0).contains(&self.b) {
            return Err(BuildError(format!(
                "b must be a number in [0, 1], got {}",
                self.b
            )));
        }
        Ok(())
    }
}

/// Why an index could not be built (bad parameter or a corpus too large for `u32` ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError(pub String);

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BuildError {}

/// BM25 inverse document frequency of a term found in `df` of `n` documents.
pub fn idf(n: usize, df: usize) -> f64 {
    let (n, df) = (n as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// Sorted vocabulary in one string: term `i` is `text[ends[i]..ends[i + 1]]`.
///
/// Lookups are binary searches, so loading needs no hashing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocab {
    pub(crate) text: String,
    pub(crate) ends: Vec<u32>,
}

impl Vocab {
    /// Number of terms.
    pub fn len(&self) -> usize {
        self.ends.len().saturating_sub(1)
    }

    /// Whether the vocabulary has no terms.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Term with id `id` (`id < len()`).
    pub fn term(&self, id: usize) -> &str {
        &self.text[self.ends[id] as usize..self.ends[id + 1] as usize]
    }

    /// Id of `term`, if present.
    pub fn id(&self, term: &str) -> Option<u32> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.term(mid).cmp(term) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid as u32),
            }
        }
        None
    }
}

/// An immutable BM25 index; see the module documentation for the layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Bm25Index {
    pub(crate) params: Bm25Params,
    pub(crate) tokenizer: TokenizerConfig,
    pub(crate) vocab: Vocab,
    pub(crate) offsets: Vec<u32>,
    pub(crate) doc_ids: Vec<u32>,
    pub(crate) contrib: Vec<f32>,
    pub(crate) doc_lens: Vec<u32>,
    pub(crate) avgdl: f64,
    /// Pruning bounds, derived from the postings (not stored on disk).
    pub(crate) ranges: RangeMax,
    /// Hash index of the vocabulary, for query terms (not stored on disk).
    pub(crate) term_ids: TermTable,
}

/// Per-thread buffers of a search: dense scores and top-k candidates of the exhaustive scan,
/// range bounds, posting runs, candidate ranges and the running top k of the pruned search.
#[derive(Debug, Clone, Default)]
pub struct Scratch {
    scores: Vec<f32>,
    ranked: Vec<(u32, f32)>,
    /// Upper bound of every range for the current query.
    bounds: Vec<f32>,
    /// Row in [`RangeMax`] of each query term, or [`SPARSE`].
    rows: Vec<usize>,
    /// Runs of rare-term postings, one per (term, range), by term then range, linked per
    /// range.
    runs: Vec<Run>,
    /// Per range: its first run (lowest term), or [`NONE`].
    heads: Vec<u32>,
    /// Per range: its last run so far, while runs are cut.
    tails: Vec<u32>,
    /// Candidate ranges, by bound: `bound bits << 32 | range`.
    queue: Vec<u64>,
    /// Ranges the rare terms occur in (their heads are set until the next query's bounds).
    cands: Vec<u32>,
    /// Running top k (the worst hit on top).
    top: BinaryHeap<Hit>,
}

impl Scratch {
    /// Buffers for an index of `num_docs` documents.
    pub fn new(num_docs: usize) -> Self {
        Self {
            scores: vec![0.0; num_docs],
            ..Self::default()
        }
    }
}

/// The `k >= 1` best `(doc, score)` pairs of `scores` with a positive score and an allowed
/// doc, ranked; leaves `scores` all zero. One pass with a bounded candidate buffer and a
/// rising score threshold, over blocks of 16 scores: a branch-free test (it vectorizes) skips
/// the blocks with no score above the threshold, and each block is zeroed as it is left.
fn top_k(
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

/// `bounds[r] += max * step` for every range `r` (`= max * step` without `add`), `max` from
/// `row[r]` (see [`RangeMax::maxima`]).
///
/// Runs the AVX-512 or AVX2 build of the loop when the CPU has it (16 or 8 ranges per
/// instruction instead of 4; the same results: no fused multiply-add).
fn add_row(bounds: &mut [f32], row: &[u8], step: f32, add: bool) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU supports AVX-512F
        return unsafe { add_row_avx512(bounds, row, step, add) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2
        return unsafe { add_row_avx2(bounds, row, step, add) };
    }
    add_row_portable(bounds, row, step, add);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn add_row_avx2(bounds: &mut [f32], row: &[u8], step: f32, add: bool) {
    add_row_portable(bounds, row, step, add);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn add_row_avx512(bounds: &mut [f32], row: &[u8], step: f32, add: bool) {
    add_row_portable(bounds, row, step, add);
}

#[inline(always)]
fn add_row_portable(bounds: &mut [f32], row: &[u8], step: f32, add: bool) {
    if add {
        for (u, &max) in bounds.iter_mut().zip(row) {
            *u += f32::from(max) * step;
        }
    } else {
        for (u, &max) in bounds.iter_mut().zip(row) {
            *u = f32::from(max) * step;
        }
    }
}

/// Calls `f(r, bounds[r])` for every `r` (increasing) with a positive bound in `lo..below`
/// (`lo..` without `below`), 16 bounds at a time with a branch-free test.
fn select(bounds: &[f32], lo: f32, below: Option<f32>, mut f: impl FnMut(usize, f32)) {
    let (limit, limited) = (below.unwrap_or(f32::INFINITY), below.is_some());
    let wanted = |u: f32| (u >= lo) & ((u < limit) | !limited) & (u > 0.0);
    for (c, chunk) in bounds.chunks(16).enumerate() {
        let mut mask = chunk
            .iter()
            .enumerate()
            .fold(0u32, |mask, (i, &u)| mask | u32::from(wanted(u)) << i);
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            f(c * 16 + i, chunk[i]);
            mask &= mask - 1;
        }
    }
}

/// Whether `doc` may be returned under the mask `allowed` (docs past its end may not).
fn is_allowed(allowed: Option<&[u8]>, doc: usize) -> bool {
    allowed.is_none_or(|m| m.get(doc).is_some_and(|&b| b != 0))
}

/// Checks that the vocabulary is well formed and sorted.
fn check_vocab(vocab: &Vocab) -> Result<(), &'static str> {
    let (ends, text) = (&vocab.ends, &vocab.text);
    if ends.first() != Some(&0) || ends.last().map(|&e| e as usize) != Some(text.len()) {
        return Err("vocabulary offsets do not span the vocabulary text");
    }
    if !ends.iter().all(|&e| text.is_char_boundary(e as usize)) {
        return Err("vocabulary offsets fall inside a character");
    }
    if !increasing(ends) {
        return Err("vocabulary offsets are not increasing");
    }
    if !(1..vocab.len()).all(|i| vocab.term(i - 1) < vocab.term(i)) {
        return Err("vocabulary is not sorted");
    }
    Ok(())
}

/// Checks that the postings of `n_terms` terms are well formed for `n_docs` documents.
fn check_postings(
    n_terms: usize,
    offsets: &[u32],
    doc_ids: &[u32],
    contrib: &[f32],
    n_docs: u64,
) -> Result<(), &'static str> {
    if offsets.len() != n_terms + 1 || offsets[0] != 0 || offsets[n_terms] as usize != doc_ids.len()
    {
        return Err("posting offsets do not match the postings");
    }
    if doc_ids.len() != contrib.len() {
        return Err("doc ids and contributions differ in length");
    }
    if !increasing(offsets) {
        return Err("posting offsets are not increasing");
    }
    // one pass per array, on two threads: they are read from memory, not cache
    let (ids_ok, contrib_ok) = rayon::join(
        || {
            offsets.windows(2).all(|w| {
                let ids = &doc_ids[w[0] as usize..w[1] as usize];
                increasing(ids) & ids.last().is_some_and(|&d| u64::from(d) < n_docs)
            })
        },
        // branch-free so it vectorizes; NaN fails both comparisons
        || {
            contrib
                .iter()
                .fold(true, |ok, &c| ok & (c > 0.0) & (c < f32::INFINITY))
        },
    );
    if !ids_ok {
        return Err("postings hold unsorted or out-of-range doc ids");
    }
    if !contrib_ok {
        return Err("contributions are not all finite and positive");
    }
    Ok(())
}

/// Whether `v` is strictly increasing (branch-free, so it vectorizes).
fn increasing(v: &[u32]) -> bool {
    v.iter()
        .zip(v.iter().skip(1))
        .fold(true, |ok, (a, b)| ok & (a < b))
}

/// `(score desc, doc id asc)`: the order of search results.
fn by_rank(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

impl Bm25Index {
    /// Tokenizes `docs` in parallel (rayon's current pool) and builds the index.
    pub fn build<S: AsRef<str> + Sync>(
        docs: &[S],
        params: Bm25Params,
        tokenizer: TokenizerConfig,
    ) -> Result<Self, BuildError> {
        params.validate()?;
        if u32::try_from(docs.len()).is_err() {
            return Err(BuildError(format!("too many documents: {}", docs.len())));
        }
        let block_len = docs
            .len()
            .div_ceil(rayon::current_num_threads() * 4)
            .max(64);
        let mut blocks: Vec<Block> = docs
            .par_chunks(block_len)
            .map(|chunk| Block::count(chunk, &tokenizer))
            .collect();
        let vocab = merge_vocabularies(&mut blocks)?;
        let doc_lens: Vec<u32> = blocks
            .iter()
            .flat_map(|b| b.doc_lens.iter().copied())
            .collect();
        let avgdl = mean(&doc_lens);
        let postings = postings(&blocks, vocab.len(), &doc_lens, avgdl, params)?;
        let built = Self::assemble(params, tokenizer, vocab, postings, doc_lens);
        // memory freed by the build's own buffers came back already written: see `crate::memory`
        collapse_huge_pages(&built.doc_ids);
        collapse_huge_pages(&built.contrib);
        collapse_huge_pages(&built.ranges.cells);
        collapse_huge_pages(&built.ranges.maxima);
        collapse_huge_pages(&built.term_ids.slots);
        Ok(built)
    }

    /// Assembles an index from its arrays (as read from disk), checking every invariant the
    /// search relies on; the error says which one fails.
    pub fn from_parts(
        params: Bm25Params,
        tokenizer: TokenizerConfig,
        vocab: Vocab,
        offsets: Vec<u32>,
        doc_ids: Vec<u32>,
        contrib: Vec<f32>,
        doc_lens: Vec<u32>,
    ) -> Result<Self, String> {
        params.validate().map_err(|e| e.0)?;
        let n_docs = doc_lens.len() as u64;
        let (words, postings) = rayon::join(
            || check_vocab(&vocab),
            || check_postings(vocab.len(), &offsets, &doc_ids, &contrib, n_docs),
        );
        words.and(postings).map_err(String::from)?;
        let postings = Postings {
            offsets,
            doc_ids,
            contrib,
        };
        Ok(Self::assemble(params, tokenizer, vocab, postings, doc_lens))
    }

    /// The index of checked arrays, with the search structures derived from them (range
    /// bounds, term hash table).
    fn assemble(
        params: Bm25Params,
        tokenizer: TokenizerConfig,
        vocab: Vocab,
        Postings {
            offsets,
            doc_ids,
            contrib,
        }: Postings,
        doc_lens: Vec<u32>,
    ) -> Self {
        let (ranges, term_ids) = rayon::join(
            || RangeMax::new(&offsets, &doc_ids, &contrib, doc_lens.len()),
            || TermTable::new(&vocab),
        );
        Self {
            params,
            tokenizer,
            vocab,
            avgdl: mean(&doc_lens),
            offsets,
            doc_ids,
            contrib,
            doc_lens,
            ranges,
            term_ids,
        }
    }

    /// Number of indexed documents.
    pub fn num_docs(&self) -> usize {
        self.doc_lens.len()
    }

    /// Number of distinct terms.
    pub fn num_terms(&self) -> usize {
        self.vocab.len()
    }

    /// Number of postings (distinct (term, document) pairs).
    pub fn num_postings(&self) -> usize {
        self.doc_ids.len()
    }

    /// Mean document length in tokens (0 for an empty index).
    pub fn avgdl(&self) -> f64 {
        self.avgdl
    }

    /// Length in tokens of document `doc`, if it exists.
    pub fn doc_len(&self, doc: usize) -> Option<u32> {
        self.doc_lens.get(doc).copied()
    }

    /// BM25 parameters of the index.
    pub fn params(&self) -> Bm25Params {
        self.params
    }

    /// Tokenizer configuration used for documents and queries.
    pub fn tokenizer(&self) -> TokenizerConfig {
        self.tokenizer
    }

    /// The sorted vocabulary.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// IDF of the exact term `term` (not tokenized), or `None` if it is not in the vocabulary.
    pub fn idf(&self, term: &str) -> Option<f64> {
        let t = self.vocab.id(term)? as usize;
        Some(idf(self.num_docs(), self.postings(t).len()))
    }

    /// Tokens of `text` under the index's tokenizer configuration.
    pub fn tokenize(&self, text: &str) -> Vec<String> {
        tokenize(text, &self.tokenizer)
    }

    /// Distinct known term ids of `query`, increasing (the order scores are summed in).
    pub fn query_terms(&self, query: &str) -> Vec<u32> {
        self.lookup_terms(|push| for_each_token(query, &self.tokenizer, push))
    }

    /// Distinct known term ids of already tokenized `tokens` (taken as they are: not
    /// lowercased, split or stemmed), increasing.
    pub fn token_terms<S: AsRef<str>>(&self, tokens: &[S]) -> Vec<u32> {
        self.lookup_terms(|push| tokens.iter().for_each(|t| push(t.as_ref())))
    }

    /// The ids of the tokens `tokens` hands to its callback, looked up in one batch: every
    /// token's slot is requested from memory before any is read.
    fn lookup_terms(&self, tokens: impl FnOnce(&mut dyn FnMut(&str))) -> Vec<u32> {
        thread_local! {
            static TOKENS: std::cell::RefCell<Tokens> = std::cell::RefCell::default();
        }
        let mut terms = Vec::new();
        TOKENS.with_borrow_mut(|buf| {
            buf.clear();
            let table = &self.term_ids;
            tokens(&mut |tok| {
                let hash = TermTable::hash(tok);
                prefetch(&table.slots, table.home(hash));
                buf.push(tok, hash);
            });
            table.get_all(&self.vocab, buf, &mut terms);
        });
        terms.sort_unstable();
        terms.dedup();
        terms
    }

    fn postings(&self, term: usize) -> Range<usize> {
        self.offsets[term] as usize..self.offsets[term + 1] as usize
    }

    /// The top `k` documents for `query` as `(doc id, score)`, by score desc then id asc;
    /// only documents with a positive score and, if `allowed` is given, a nonzero byte
    /// `allowed[doc]` (documents past its end are not allowed).
    ///
    /// Works in a thread-local scratch, so repeated calls allocate only the result.
    pub fn search(&self, query: &str, k: usize, allowed: Option<&[u8]>) -> Vec<(u32, f32)> {
        let terms = self.query_terms(query);
        with_scratch(|scratch| self.search_terms(&terms, k, allowed, scratch))
    }

    /// [`search`](Self::search) of a query already tokenized (see [`token_terms`](Self::token_terms)).
    pub fn search_tokens<S: AsRef<str>>(
        &self,
        tokens: &[S],
        k: usize,
        allowed: Option<&[u8]>,
    ) -> Vec<(u32, f32)> {
        let terms = self.token_terms(tokens);
        with_scratch(|scratch| self.search_terms(&terms, k, allowed, scratch))
    }

    /// [`search`](Self::search) without pruning: every posting of every query term summed
    /// into dense scores, then one top-k pass over all documents. Same results, bit for bit;
    /// kept for benchmarks and tests.
    #[doc(hidden)]
    pub fn search_exhaustive(
        &self,
        query: &str,
        k: usize,
        allowed: Option<&[u8]>,
    ) -> Vec<(u32, f32)> {
        let terms = self.query_terms(query);
        with_scratch(|scratch| self.search_terms_exhaustive(&terms, k, allowed, scratch))
    }

    /// [`search`](Self::search) of every query, in parallel on rayon's current pool.
    pub fn search_batch<S: AsRef<str> + Sync>(
        &self,
        queries: &[S],
        k: usize,
        allowed: Option<&[u8]>,
    ) -> Vec<Vec<(u32, f32)>> {
        // each worker thread reuses its own thread-local scratch
        queries
            .par_iter()
            .map(|q| self.search(q.as_ref(), k, allowed))
            .collect()
    }

    /// The search of `terms` (distinct, increasing: see [`query_terms`](Self::query_terms)),
    /// with dynamic pruning (see the module documentation).
    pub fn search_terms(
        &self,
        terms: &[u32],
        k: usize,
        allowed: Option<&[u8]>,
        scratch: &mut Scratch,
    ) -> Vec<(u32, f32)> {
        self.search_pruned(terms, k, allowed, scratch, Pruning::DEFAULT)
    }

    /// [`search_terms`](Self::search_terms) with the given settings (tests try others).
    fn search_pruned(
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
    fn mask_bounds(mask: &[u8], scratch: &mut Scratch) -> f32 {
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

    /// The exhaustive search: sum the postings of `terms` into dense scores, then select the
    /// top k over all documents.
    #[doc(hidden)]
    pub fn search_terms_exhaustive(
        &self,
        terms: &[u32],
        k: usize,
        allowed: Option<&[u8]>,
        scratch: &mut Scratch,
    ) -> Vec<(u32, f32)> {
        if terms.is_empty() || k == 0 {
            return Vec::new();
        }
        let Scratch { scores, ranked, .. } = scratch;
        // all zero between searches (`top_k` zeroes what it reads)
        scores.resize(self.num_docs(), 0.0);
        for &t in terms {
            let range = self.postings(t as usize);
            for (&doc, &c) in self.doc_ids[range.clone()].iter().zip(&self.contrib[range]) {
                // SAFETY: `build` and `from_parts` check that every doc id is below
                // `num_docs()`, and `scores` holds `num_docs()` entries
                unsafe { *scores.get_unchecked_mut(doc as usize) += c };
            }
        }
        top_k(scores, k, allowed, ranked)
    }

    /// BM25 score of each of `docs` for `query` (0 for unmatched or unknown documents),
    /// bit-identical to the scores [`search`](Self::search) reports.
    pub fn score_docs(&self, query: &str, docs: &[u32]) -> Vec<f32> {
        let terms = self.query_terms(query);
        docs.iter()
            .map(|&doc| {
                terms.iter().fold(0.0f32, |score, &t| {
                    let range = self.postings(t as usize);
                    match self.doc_ids[range.clone()].binary_search(&doc) {
                        Ok(i) => score + self.contrib[range.start + i],
                        Err(_) => score,
                    }
                })
            })
            .collect()
    }
}

/// Runs `f` with this thread's search scratch (kept between calls).
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
    }
    SCRATCH.with_borrow_mut(f)
}

/// log2 of the documents per range of [`RangeMax`].
const SHIFT: u32 = 4;
/// Documents per range.
const WIDTH: usize = 1 << SHIFT;
/// Cost of one query term in one range checked or scored one by one, in postings of the exhaustive
/// scan (measured on the vLLM corpus: ~7 ns against ~0.55 ns).
const RANGE_COST: usize = 12;
/// Ranges checked, and their memory fetched, before they are scored.
const BATCH: usize = 16;
/// Terms in at least `ranges / ROW_MIN_DF_DIVISOR` documents get a row of range bounds
/// ([`RangeMax`]). Measured on the vLLM corpus with `benches/peers.py` (p50 per query from
/// cold caches, divisors run alternately, three rounds): 1 → 29-30 µs, 2 → 21-22 µs,
/// 3 → 19-21 µs, 4 → 18-20 µs, 6 → 18-20 µs, 8 → 18-19 µs; 4 is the smallest that reaches
/// the plateau (rows: 205, 416, 754 and 1298 for divisors 1, 2, 4 and 8).
const ROW_MIN_DF_DIVISOR: usize = 4;
/// No run.
const NONE: u32 = u32::MAX;
/// Row of a term without precomputed range bounds.
const SPARSE: usize = usize::MAX;

/// How a search prunes.
#[derive(Debug, Clone, Copy)]
struct Pruning {
    /// Whether to fall back to the exhaustive scan when pruning would cost more.
    fallback: bool,
    /// Ranges scored first, to seed the k-th best score: those with the best bounds from
    /// the rare terms.
    seed: usize,
}

impl Pruning {
    /// Measured on the vLLM corpus: 4 to 32 seed ranges perform alike at k = 10 with warm
    /// caches; from cold memory (between interpreter calls) 6 is 5 % faster than 16.
    const DEFAULT: Self = Self {
        fallback: true,
        seed: 6,
    };
}

/// Asks the CPU to start loading `v[i]` into cache (nothing if out of bounds or not x86-64).
#[inline(always)]
fn prefetch<T>(v: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = v.get(i) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of the x86-64 baseline, and a prefetch has no effect on
        // memory; `x` is a valid reference anyway
        unsafe { _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, i);
}

/// Per-term upper bounds of the contributions over fixed ranges of [`WIDTH`] doc ids, and
/// where each range's postings are: range `r` holds documents `r * WIDTH .. (r + 1) * WIDTH`.
///
/// Only terms in at least a quarter as many documents as there are ranges get a row (their
/// postings touch many ranges, so a dense row is cheaper than reading them); the others'
/// bounds are computed from their postings at query time. A row costs 9 bytes a range, at
/// most 36 bytes per posting of the terms that have one (13.5 MB for the 754 rows of the vLLM
/// corpus: 31,772 chunks, 1,986 ranges, 2.5 M postings). See [`ROW_MIN_DF_DIVISOR`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RangeMax {
    n_ranges: usize,
    /// Terms with a row, increasing.
    dense: Vec<u32>,
    /// `maxima[row * n_ranges + r]`: the row's term's largest contribution in range `r`,
    /// rounded up to a multiple of `scale[row]` (`f32::from(max) * scale[row]` is at least
    /// the contribution). The bounds of a query read whole rows of these.
    maxima: Vec<u8>,
    /// `cells[row * n_ranges + r]`, for the row's term in range `r`: the documents it occurs
    /// in (bit `i` of the low 16 bits: document `r * WIDTH + i`), its maximum (bits 16..24,
    /// as in `maxima`) and its first posting in the range (bits 32..64): all a range's check
    /// and scoring need of the term, in one read (only the ranges a query looks at are read).
    cells: Vec<u64>,
    /// Per row: the term's largest contribution / 255, rounded up.
    scale: Vec<f32>,
}

impl RangeMax {
    /// Bounds for postings of `n_docs` documents, with rows for terms in at least
    /// 1 / [`ROW_MIN_DF_DIVISOR`] as many documents as there are ranges.
    fn new(offsets: &[u32], doc_ids: &[u32], contrib: &[f32], n_docs: usize) -> Self {
        let min_df = n_docs.div_ceil(WIDTH).div_ceil(ROW_MIN_DF_DIVISOR);
        Self::with_rows(offsets, doc_ids, contrib, n_docs, min_df)
    }

    /// Bounds with rows for the terms in at least `min_df` documents.
    fn with_rows(
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
struct Run {
    term: u32,
    next: u32,
    start: u32,
    end: u32,
}

/// A hit, ordered by rank: the greatest is the worst.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Hit(u32, f32);

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
struct TopK {
    k: usize,
    heap: BinaryHeap<Hit>,
    /// The k-th best hit once there are k (a score of 0 before: scores are positive).
    worst: Hit,
}

impl TopK {
    fn new(k: usize, mut heap: BinaryHeap<Hit>) -> Self {
        heap.clear();
        Self {
            k,
            heap,
            worst: Hit(u32::MAX, 0.0),
        }
    }

    /// Score a hit needs at least to enter (ties may enter by doc id).
    fn threshold(&self) -> f32 {
        self.worst.1
    }

    /// Whether `(doc, score)` would enter: a positive score ranking before the k-th best.
    fn admits(&self, doc: u32, score: f32) -> bool {
        score > self.worst.1 || (score == self.worst.1 && score > 0.0 && doc < self.worst.0)
    }

    /// Adds a hit that [`admits`](Self::admits) accepts.
    fn push(&mut self, doc: u32, score: f32) {
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

    fn into_heap(self) -> BinaryHeap<Hit> {
        self.heap
    }

    /// The hits, ranked, and the emptied heap (for reuse).
    fn finish(mut self) -> (Vec<(u32, f32)>, BinaryHeap<Hit>) {
        let mut hits: Vec<(u32, f32)> = self.heap.drain().map(|Hit(d, s)| (d, s)).collect();
        hits.sort_unstable_by(by_rank);
        (hits, self.heap)
    }
}

/// Mean of `lens` (0 when empty).
fn mean(lens: &[u32]) -> f64 {
    let total: u64 = lens.iter().map(|&l| u64::from(l)).sum();
    if lens.is_empty() {
        0.0
    } else {
        total as f64 / lens.len() as f64
    }
}

/// The three posting arrays of [`Bm25Index`].
struct Postings {
    offsets: Vec<u32>,
    doc_ids: Vec<u32>,
    contrib: Vec<f32>,
}

/// Flat postings of the blocks' documents, grouped by term with a counting sort (so doc ids
/// increase within each term), each with its precomputed contribution.
///
/// The blocks are cut into one contiguous group per thread, and each group writes its own
/// postings in parallel: within term `t`, group `g`'s postings go after those of the groups
/// before it (its own cursor per term), so the arrays come out exactly as a sequential pass
/// would write them. The cursors cost 4 bytes per term and thread. On the vLLM corpus
/// replicated 8× (20 M postings, 252 k terms) the sequential scatter took 0.25–0.58 s of a
/// 3.2–3.6 s build on 2 threads, its largest single-threaded step.
fn postings(
    blocks: &[Block],
    n_terms: usize,
    doc_lens: &[u32],
    avgdl: f64,
    Bm25Params { k1, b }: Bm25Params,
) -> Result<Postings, BuildError> {
    let group_len = blocks.len().div_ceil(rayon::current_num_threads()).max(1);
    let groups: Vec<&[Block]> = blocks.chunks(group_len).collect();
    // per group, the document frequency of each term (then, in place, its first position)
    let mut cursors: Vec<Vec<u32>> = groups
        .par_iter()
        .map(|group| {
            let mut df = vec![0u32; n_terms];
            for &t in group.iter().flat_map(|b| &b.terms) {
                df[t as usize] += 1;
            }
            df
        })
        .collect();
    let mut df = vec![0u32; n_terms];
    let mut offsets = Vec::with_capacity(n_terms + 1);
    let mut end = 0u32;
    offsets.push(0);
    for (t, d) in df.iter_mut().enumerate() {
        for group in &mut cursors {
            let n = group[t];
            group[t] = end;
            // `end` only grows, so no group's positions overflow if the total does not
            end = end
                .checked_add(n)
                .ok_or_else(|| BuildError("more than 2^32 postings".into()))?;
            *d += n;
        }
        offsets.push(end);
    }
    let idfs: Vec<f64> = df
        .iter()
        .map(|&d| idf(doc_lens.len(), d as usize))
        .collect();
    let ratio = |dl: u32| {
        if avgdl > 0.0 {
            f64::from(dl) / avgdl
        } else {
            1.0
        }
    };
    let norms: Vec<f64> = doc_lens
        .iter()
        .map(|&dl| k1 * (1.0 - b + b * ratio(dl)))
        .collect();

    // the arrays a query reads at random: huge pages (see `crate::memory`)
    let mut doc_ids = huge_zeroed(end as usize, 0u32);
    let mut contrib = huge_zeroed(end as usize, 0f32);
    let first_docs = groups.iter().scan(0usize, |next, group| {
        let first = *next;
        *next += group.iter().map(|b| b.doc_lens.len()).sum::<usize>();
        Some(first)
    });
    let jobs: Vec<_> = groups.iter().zip(cursors).zip(first_docs).collect();
    let (ids_out, contrib_out) = (Scatter::new(&mut doc_ids), Scatter::new(&mut contrib));
    jobs.into_par_iter()
        .for_each(|((group, mut next), first_doc)| {
            let docs = group.iter().flat_map(|block| {
                block
                    .doc_ends
                    .windows(2)
                    .map(|w| (&block.terms[w[0]..w[1]], &block.tfs[w[0]..w[1]]))
            });
            for (doc, (terms, tfs)) in (first_doc..).zip(docs) {
                for (&t, &tf) in terms.iter().zip(tfs) {
                    let (t, tf) = (t as usize, f64::from(tf));
                    let pos = next[t] as usize;
                    next[t] += 1;
                    let c = (idfs[t] * tf * (k1 + 1.0) / (tf + norms[doc])) as f32;
                    // SAFETY: `pos` is below `end`, the arrays' length, and is this group's
                    // alone: group `g`'s positions for term `t` run from its cursor over its
                    // own count of `t`, and the groups' runs follow one another
                    unsafe {
                        ids_out.write(pos, doc as u32);
                        contrib_out.write(pos, c);
                    }
                }
            }
        });
    Ok(Postings {
        offsets,
        doc_ids,
        contrib,
    })
}

/// An array that several threads write at once, each at positions no other thread writes
/// (the parallel scatter of [`postings`]); it borrows the array mutably while it lives.
struct Scatter<'a, T> {
    ptr: *mut T,
    len: usize,
    _array: PhantomData<&'a mut [T]>,
}

// SAFETY: sharing it only lets threads `write`, whose callers promise disjoint elements
unsafe impl<T: Send> Sync for Scatter<'_, T> {}

impl<'a, T> Scatter<'a, T> {
    fn new(v: &'a mut [T]) -> Self {
        Self {
            ptr: v.as_mut_ptr(),
            len: v.len(),
            _array: PhantomData,
        }
    }

    /// Sets element `i` to `value`.
    ///
    /// # Safety
    /// No other thread reads or writes element `i` while the array is borrowed.
    unsafe fn write(&self, i: usize, value: T) {
        assert!(i < self.len, "scatter position {i} out of {}", self.len);
        // SAFETY: in bounds (checked above), and exclusive as the caller promises
        unsafe { self.ptr.add(i).write(value) };
    }
}

/// Term counts of a contiguous block of documents, with block-local term ids.
#[derive(Debug, Default)]
struct Block {
    /// Local vocabulary: `words[id]`.
    words: Vec<Box<str>>,
    /// Postings of document `i` of the block are `terms/tfs[doc_ends[i]..doc_ends[i + 1]]`.
    doc_ends: Vec<usize>,
    terms: Vec<u32>,
    tfs: Vec<u32>,
    doc_lens: Vec<u32>,
}

impl Block {
    /// Tokenizes `docs`, interning tokens straight to local ids (no `String` per token).
    fn count<S: AsRef<str>>(docs: &[S], cfg: &TokenizerConfig) -> Self {
        let mut ids: FxHashMap<Box<str>, u32> = FxHashMap::default();
        let mut counts: Vec<u32> = Vec::new();
        let mut seen: Vec<u32> = Vec::new();
        let mut block = Block {
            doc_ends: vec![0],
            ..Block::default()
        };
        for doc in docs {
            let mut len = 0u32;
            for_each_token(doc.as_ref(), cfg, |tok| {
                let id = match ids.get(tok) {
                    Some(&id) => id,
                    None => {
                        let id = counts.len() as u32;
                        ids.insert(tok.into(), id);
                        counts.push(0);
                        id
                    }
                };
                let count = &mut counts[id as usize];
                if *count == 0 {
                    seen.push(id);
                }
                *count += 1;
                len = len.saturating_add(1);
            });
            for id in seen.drain(..) {
                block.terms.push(id);
                block.tfs.push(std::mem::take(&mut counts[id as usize]));
            }
            block.doc_ends.push(block.terms.len());
            block.doc_lens.push(len);
        }
        block.words = vec![Box::default(); ids.len()];
        for (word, id) in ids {
            block.words[id as usize] = word;
        }
        block
    }
}

/// Merges the blocks' local vocabularies into one sorted vocabulary and rewrites every
/// block's term ids to the global ids.
fn merge_vocabularies(blocks: &mut [Block]) -> Result<Vocab, BuildError> {
    let mut global: FxHashMap<Box<str>, u32> = FxHashMap::default();
    let remaps: Vec<Vec<u32>> = blocks
        .iter_mut()
        .map(|block| {
            std::mem::take(&mut block.words)
                .into_iter()
                .map(|word| {
                    let next = global.len() as u32;
                    *global.entry(word).or_insert(next)
                })
                .collect()
        })
        .collect();
    let mut words: Vec<(Box<str>, u32)> = global.into_iter().collect();
    words.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let text_len: usize = words.iter().map(|w| w.0.len()).sum();
    if u32::try_from(text_len).is_err() {
        return Err(BuildError("vocabulary larger than 4 GiB".into()));
    }
    let mut rank = vec![0u32; words.len()];
    let mut vocab = Vocab {
        text: String::with_capacity(text_len),
        ends: Vec::with_capacity(words.len() + 1),
    };
    vocab.ends.push(0);
    for (new, (word, old)) in words.iter().enumerate() {
        rank[*old as usize] = new as u32;
        vocab.text.push_str(word);
        vocab.ends.push(vocab.text.len() as u32);
    }
    blocks
        .par_iter_mut()
        .zip(remaps)
        .for_each(|(block, remap)| {
            for t in &mut block.terms {
                *t = rank[remap[*t as usize] as usize];
            }
        });
    Ok(vocab)
}

/// Open-addressing hash index of a [`Vocab`]: a query term costs a probe or two instead of a
/// binary search's ~17 steps through the vocabulary (most of them cache misses).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct TermTable {
    /// `hash >> 32 << 32 | (term id + 1)`, or 0 for an empty slot; a power-of-two length over
    /// 1.5 times the number of terms (1 MB for the vLLM corpus), probed linearly from
    /// `hash & (len - 1)`.
    slots: Vec<u64>,
}

impl TermTable {
    fn new(vocab: &Vocab) -> Self {
        let n = (vocab.len() + vocab.len() / 2 + 1).next_power_of_two();
        let mut slots = huge_zeroed(n, 0u64);
        for id in 0..vocab.len() {
            let hash = Self::hash(vocab.term(id));
            let mut i = hash as usize & (n - 1);
            while slots[i] != 0 {
                i = (i + 1) & (n - 1);
            }
            slots[i] = hash >> 32 << 32 | (id as u64 + 1);
        }
        Self { slots }
    }

    fn hash(term: &str) -> u64 {
        let mut h = FxHasher::default();
        h.write(term.as_bytes());
        // FxHash's low bits are its weakest: spread the high ones over them
        let x = h.0;
        x ^ (x >> 29) ^ (x >> 43)
    }

    /// Slot where the probe for `hash` starts.
    #[inline]
    fn home(&self, hash: u64) -> usize {
        hash as usize & (self.slots.len() - 1)
    }

    /// Appends to `ids` the id in `vocab` (the vocabulary the table was built from) of every
    /// token of `tokens` found in it, in token order. The lookups go in steps over all the
    /// tokens (first slot, then vocabulary offsets, then text), each step's memory fetched
    /// for every token before it is read, so that their cache misses overlap.
    fn get_all(&self, vocab: &Vocab, tokens: &mut Tokens, ids: &mut Vec<u32>) {
        let n = self.slots.len();
        // the first slot of each token's probe holding its hash: a likely match
        for (t, &hash) in tokens.hashes.iter().enumerate() {
            let mut i = self.home(hash);
            let first = loop {
                let slot = self.slots[i];
                if slot == 0 {
                    break None;
                }
                if slot >> 32 == hash >> 32 {
                    break Some(i);
                }
                i = (i + 1) & (n - 1);
            };
            if let Some(i) = first {
                let id = (self.slots[i] as u32 - 1) as usize;
                prefetch(&vocab.ends, id);
                tokens.found.push((t as u32, i as u32));
            }
        }
        for &(_, i) in &tokens.found {
            let id = (self.slots[i as usize] as u32 - 1) as usize;
            prefetch(vocab.text.as_bytes(), vocab.ends[id] as usize);
        }
        for &(t, i) in &tokens.found {
            let (t, i) = (t as usize, i as usize);
            let id = self.slots[i] as u32 - 1;
            let tok = tokens.token(t);
            if vocab.term(id as usize) == tok {
                ids.push(id);
            } else {
                // another term with the same hash bits: probe on (rare)
                ids.extend(self.get_from(vocab, tok, tokens.hashes[t], (i + 1) & (n - 1)));
            }
        }
    }

    /// Id of `term` in `vocab` (the vocabulary the table was built from).
    #[cfg(test)]
    fn get(&self, vocab: &Vocab, term: &str) -> Option<u32> {
        let hash = Self::hash(term);
        self.get_from(vocab, term, hash, self.home(hash))
    }

    /// [`get`](Self::get) of `term` (hashing to `hash`), probing from slot `i` on.
    fn get_from(&self, vocab: &Vocab, term: &str, hash: u64, mut i: usize) -> Option<u32> {
        let n = self.slots.len();
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                return None;
            }
            let id = (slot as u32 - 1) as usize;
            if slot >> 32 == hash >> 32 && vocab.term(id) == term {
                return Some(id as u32);
            }
            i = (i + 1) & (n - 1);
        }
    }
}

/// The tokens of a query, with their hashes, while their ids are looked up (per-thread
/// buffers, kept between queries).
#[derive(Debug, Default)]
struct Tokens {
    text: String,
    /// Token `i` is `text[ends[i]..ends[i + 1]]`.
    ends: Vec<usize>,
    hashes: Vec<u64>,
    /// `(token, slot)`: the first slot of the token's probe with its hash bits.
    found: Vec<(u32, u32)>,
}

impl Tokens {
    fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
        self.ends.push(0);
        self.hashes.clear();
        self.found.clear();
    }

    fn push(&mut self, token: &str, hash: u64) {
        self.text.push_str(token);
        self.ends.push(self.text.len());
        self.hashes.push(hash);
    }

    fn token(&self, i: usize) -> &str {
        &self.text[self.ends[i]..self.ends[i + 1]]
    }
}

/// FxHash (rustc's hasher): fast and good enough for interning short tokens.
#[derive(Debug, Default, Clone, Copy)]
struct FxHasher(u64);

type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

impl FxHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn finish(&self) -> u64 {
        // hashbrown takes the bucket from the low bits: move the well-mixed high bits there
        self.0.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Textbook BM25 straight from the token lists.
    fn naive_scores(
        docs: &[String],
        query: &str,
        p: Bm25Params,
        cfg: &TokenizerConfig,
    ) -> Vec<f64> {
        let toks: Vec<Vec<String>> = docs.iter().map(|d| tokenize(d, cfg)).collect();
        let n = docs.len();
        let avgdl = toks.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1) as f64;
        let mut q = tokenize(query, cfg);
        q.sort();
        q.dedup();
        toks.iter()
            .map(|d| {
                q.iter()
                    .map(|term| {
                        let tf = d.iter().filter(|t| *t == term).count() as f64;
                        let df = toks.iter().filter(|d| d.contains(term)).count();
                        if tf == 0.0 {
                            return 0.0;
                        }
                        let norm = p.k1 * (1.0 - p.b + p.b * d.len() as f64 / avgdl);
                        idf(n, df) * tf * (p.k1 + 1.0) / (tf + norm)
                    })
                    .sum()
            })
            .collect()
    }

    fn corpus() -> Vec<String> {
        [
            "def fused_moe(x): return FusedMoE(x)",
            "The KV cache stores keys and values",
            "class KVCache: pass  # cache of keys",
            "rope rope RoPE scaling for long context",
            "",
            "What is vLLM? vLLM is a fast inference engine",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn builds_and_searches() {
        let idx =
            Bm25Index::build(&corpus(), Bm25Params::default(), TokenizerConfig::default()).unwrap();
        assert_eq!(idx.num_docs(), 6);
        assert_eq!(idx.doc_len(4), Some(0));
        assert_eq!(idx.doc_len(6), None);
        let hits = idx.search("kv cache", 10, None);
        let mut found: Vec<u32> = hits.iter().map(|h| h.0).collect();
        found.sort();
        assert_eq!(found, [1, 2]);
        assert!(hits[0].1 >= hits[1].1);
        assert_eq!(idx.search("kv cache", 1, None).len(), 1);
        assert_eq!(idx.search("kv cache", usize::MAX, None), hits);
        assert!(idx.search("kv cache", 0, None).is_empty());
        assert!(idx.search("", 10, None).is_empty());
        assert!(idx.search("asdfghjkl", 10, None).is_empty());
        assert_eq!(
            idx.search("kv cache", 10, Some(&[1, 1, 0, 1, 1, 1])).len(),
            1
        );
        assert!(idx.search("kv cache", 10, Some(&[1])).is_empty());
        assert!(idx.idf("moe").unwrap() > 0.0);
        assert_eq!(idx.idf("Moe"), None);
        let ids = [hits[0].0, hits[1].0, 0, 99];
        assert_eq!(
            idx.score_docs("kv cache", &ids),
            [hits[0].1, hits[1].1, 0.0, 0.0]
        );
        let batch = idx.search_batch(&["kv cache", "fused moe", ""], 3, None);
        assert_eq!(batch[0], hits);
        assert_eq!(batch[1], idx.search("fused moe", 3, None));
    }

    #[test]
    fn thread_local_scratch_serves_indexes_of_any_size() {
        let big: Vec<String> = (0..500)
            .map(|i| format!("doc{i} common word{}", i % 7))
            .collect();
        let big =
            Bm25Index::build(&big, Bm25Params::default(), TokenizerConfig::default()).unwrap();
        let small =
            Bm25Index::build(&corpus(), Bm25Params::default(), TokenizerConfig::default()).unwrap();
        let expected = small.search("kv cache", 10, None);
        assert_eq!(big.search("common word3", 1000, None).len(), 500);
        assert_eq!(small.search("kv cache", 10, None), expected);
        assert_eq!(big.search("doc499", 3, None)[0].0, 499);
    }

    #[test]
    fn build_is_the_same_on_any_number_of_threads() {
        // 64 documents at least per block: 2,000 make one group of blocks on one thread and
        // up to 8 groups, scattering their postings at once, on 8 threads
        let docs: Vec<String> = (0..2000)
            .map(|i| {
                format!(
                    "doc{} load_{}_adapter cache{} {} shared text {i}",
                    i % 97,
                    i % 13,
                    i % 5,
                    "rope ".repeat(i % 7)
                )
            })
            .collect();
        let build = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    Bm25Index::build(&docs, Bm25Params::default(), TokenizerConfig::default())
                })
                .unwrap()
        };
        let one = build(1);
        assert_eq!(one.num_docs(), docs.len());
        for threads in [2, 3, 8] {
            assert_eq!(build(threads), one, "{threads} threads");
        }
    }

    #[test]
    fn empty_index() {
        let idx = Bm25Index::build::<&str>(&[], Bm25Params::default(), TokenizerConfig::default())
            .unwrap();
        assert_eq!((idx.num_docs(), idx.num_terms(), idx.avgdl()), (0, 0, 0.0));
        assert!(idx.search("anything", 5, None).is_empty());
    }

    #[test]
    fn rejects_bad_params() {
        for (k1, b) in [
            (-1.0, 0.5),
            (f64::NAN, 0.5),
            (1.2, 1.5),
            (1.2, f64::INFINITY),
            (1e7, 0.5),
        ] {
            assert!(
                Bm25Index::build(&corpus(), Bm25Params { k1, b }, TokenizerConfig::default())
                    .is_err()
            );
        }
    }

    #[test]
    fn add_row_paths_agree() {
        let row: Vec<u8> = (0..1000u32).map(|i| (i * 37 % 256) as u8).collect();
        let start: Vec<f32> = (0..1000u32).map(|i| i as f32 * 0.37).collect();
        for step in [0.0, 1e-30, 0.013, 3.7, 1e36] {
            for add in [false, true] {
                let mut want = start.clone();
                add_row_portable(&mut want, &row, step, add);
                let mut got = start.clone();
                // the dispatched path (AVX-512 or AVX2 where the CPU has them)
                add_row(&mut got, &row, step, add);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want));
                for (i, (&w, &s)) in want.iter().zip(&start).enumerate() {
                    let x = f32::from(row[i]) * step;
                    assert_eq!(w.to_bits(), if add { s + x } else { x }.to_bits());
                }
            }
        }
    }

    #[test]
    fn batched_lookup_probes_past_a_hash_match() {
        let idx =
            Bm25Index::build(&corpus(), Bm25Params::default(), TokenizerConfig::default()).unwrap();
        let (vocab, table) = (&idx.vocab, &idx.term_ids);
        let n = table.slots.len();
        // a table where the first slot holding the hash bits of a term is another term's
        let (a, b) = (vocab.term(1), vocab.term(2));
        let (id_a, id_b) = (1u32, 2u32);
        let hash = TermTable::hash(a);
        let mut slots = vec![0u64; n];
        let home = hash as usize & (n - 1);
        slots[home] = hash >> 32 << 32 | u64::from(id_b + 1);
        slots[(home + 1) & (n - 1)] = hash >> 32 << 32 | u64::from(id_a + 1);
        let forged = TermTable { slots };
        let mut tokens = Tokens::default();
        tokens.clear();
        for tok in [a, b, a] {
            tokens.push(tok, TermTable::hash(tok));
        }
        let mut ids = Vec::new();
        forged.get_all(vocab, &mut tokens, &mut ids);
        // `b` is absent from the forged table, unless it probes into the forged slots
        let found_b = forged.get(vocab, b);
        let want: Vec<u32> = [Some(id_a), found_b, Some(id_a)]
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(ids, want);
        assert_eq!(forged.get(vocab, a), Some(id_a));
        // the real table agrees with one lookup at a time on every token of the corpus
        let mut found = 0;
        for doc in corpus()
            .iter()
            .chain(&["kv caches, unknown words: zzzz".to_string()])
        {
            let mut one_by_one: Vec<u32> = Vec::new();
            for_each_token(doc, &idx.tokenizer, |t| {
                one_by_one.extend(table.get(vocab, t))
            });
            one_by_one.sort_unstable();
            one_by_one.dedup();
            assert_eq!(idx.query_terms(doc), one_by_one);
            found += one_by_one.len();
        }
        assert!(found > 10);
    }

    #[test]
    fn vocab_lookup() {
        let idx =
            Bm25Index::build(&corpus(), Bm25Params::default(), TokenizerConfig::default()).unwrap();
        for i in 0..idx.num_terms() {
            assert_eq!(idx.vocab().id(idx.vocab().term(i)), Some(i as u32));
            assert_eq!(
                idx.term_ids.get(&idx.vocab, idx.vocab().term(i)),
                Some(i as u32)
            );
        }
        assert_eq!(idx.vocab().id("zzzz"), None);
        for missing in ["zzzz", "", "cach", "caches"] {
            assert_eq!(
                idx.term_ids.get(&idx.vocab, missing),
                idx.vocab().id(missing)
            );
        }
    }

    fn word() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "alpha", "beta", "gamma", "fp8", "getValue", "the", "x_y", "Ω", "dé",
        ])
        .prop_map(String::from)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_naive_bm25(
            docs in prop::collection::vec(prop::collection::vec(word(), 0..12).prop_map(|w| w.join(" ")), 1..20),
            query in prop::collection::vec(word(), 0..5).prop_map(|w| w.join(" ")),
            k1 in 0.0f64..3.0,
            b in 0.0f64..=1.0,
            mask_seed: u64,
        ) {
            let p = Bm25Params { k1, b };
            let cfg = TokenizerConfig::default();
            let idx = Bm25Index::build(&docs, p, cfg).unwrap();
            let naive = naive_scores(&docs, &query, p, &cfg);
            let hits = idx.search(&query, docs.len(), None);
            prop_assert_eq!(hits.len(), naive.iter().filter(|&&s| s > 0.0).count());
            for w in hits.windows(2) {
                prop_assert!(by_rank(&w[0], &w[1]).is_lt());
            }
            for &(doc, score) in &hits {
                let want = naive[doc as usize];
                prop_assert!((f64::from(score) - want).abs() <= 1e-5 * want.max(1.0), "{} vs {}", score, want);
            }
            let all: Vec<u32> = (0..docs.len() as u32).collect();
            for (doc, s) in idx.score_docs(&query, &all).into_iter().enumerate() {
                prop_assert!((f64::from(s) - naive[doc]).abs() <= 1e-5 * naive[doc].max(1.0));
            }
            // top-k is a prefix of the full ranking
            for k in 0..=hits.len() {
                prop_assert_eq!(&idx.search(&query, k, None)[..], &hits[..k]);
            }
            // the mask removes exactly the masked documents
            let mask: Vec<u8> = (0..docs.len()).map(|i| ((mask_seed >> (i % 64)) & 1) as u8).collect();
            let masked: Vec<_> = hits.iter().copied().filter(|h| mask[h.0 as usize] != 0).collect();
            prop_assert_eq!(idx.search(&query, docs.len(), Some(&mask)), masked);
        }
    }

    impl Bm25Index {
        /// The index with pruning rows for the terms in at least `min_df` documents.
        fn with_range_rows(mut self, min_df: usize) -> Self {
            let n = self.num_docs();
            self.ranges =
                RangeMax::with_rows(&self.offsets, &self.doc_ids, &self.contrib, n, min_df);
            self
        }
    }

    /// Hits with their scores' exact bits (so that equality is bitwise).
    fn bits(v: &[(u32, f32)]) -> Vec<(u32, u32)> {
        v.iter().map(|&(d, s)| (d, s.to_bits())).collect()
    }

    /// Pruned search of `terms` without the exhaustive fallback, with several numbers of
    /// ranges scored one by one, and the default search, checked to agree exactly (same ids,
    /// same score bits) with the exhaustive search; returns its hits.
    fn check_pruned(
        idx: &Bm25Index,
        terms: &[u32],
        k: usize,
        allowed: Option<&[u8]>,
    ) -> Result<Vec<(u32, f32)>, TestCaseError> {
        let mut scratch = Scratch::default();
        let want = idx.search_terms_exhaustive(terms, k, allowed, &mut scratch);
        // the scratch is reused throughout, as a thread's is
        for seed in [0, 1, 3, 16, usize::MAX] {
            let pruning = Pruning {
                fallback: false,
                seed,
            };
            let got = idx.search_pruned(terms, k, allowed, &mut scratch, pruning);
            prop_assert_eq!(bits(&got), bits(&want), "seed = {}", seed);
        }
        prop_assert_eq!(
            bits(&idx.search_terms(terms, k, allowed, &mut scratch)),
            bits(&want)
        );
        Ok(want)
    }

    /// Words with skewed frequencies: word `i` of 40 is drawn with probability ~ 1 / (i + 1).
    fn skewed_word() -> impl Strategy<Value = String> {
        (0.0f64..1.0).prop_map(|u| format!("w{}", (41f64.powf(u) - 1.0) as usize))
    }

    fn mask_for(n: usize, seed: u64, density: u8) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                u8::from((x % 4) < u64::from(density))
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Pruned search == exhaustive search on built corpora with Zipf-like words, for every
        /// range shape, k and mask.
        #[test]
        fn pruning_is_exact_on_corpora(
            docs in prop::collection::vec(prop::collection::vec(skewed_word(), 0..30).prop_map(|w| w.join(" ")), 1..120),
            copies in prop::collection::vec(0usize..1000, 0..60),
            query in prop::collection::vec(skewed_word(), 1..8).prop_map(|w| w.join(" ")),
            min_df in prop::sample::select(vec![1usize, 2, 3, 8, 40, usize::MAX]),
            k in prop::sample::select(vec![0usize, 1, 2, 3, 10, 100, 1000]),
            mask_seed: u64,
            density in 0u8..=4,
            masked: bool,
        ) {
            // copies of documents further on tie with them: the k-th best score is often shared
            let mut docs = docs;
            docs.extend(copies.iter().map(|&i| docs[i % docs.len()].clone()).collect::<Vec<_>>());
            let cfg = TokenizerConfig { stopwords: false, ..TokenizerConfig::default() };
            let idx = Bm25Index::build(&docs, Bm25Params::default(), cfg)
                .unwrap()
                .with_range_rows(min_df);
            let terms = idx.query_terms(&query);
            let mask = mask_for(docs.len(), mask_seed, density);
            let allowed = masked.then_some(&mask[..]);
            let hits = check_pruned(&idx, &terms, k, allowed)?;
            prop_assert!(hits.len() <= k);
            let ids: Vec<u32> = hits.iter().map(|h| h.0).collect();
            let scores: Vec<f32> = hits.iter().map(|h| h.1).collect();
            prop_assert_eq!(idx.score_docs(&query, &ids), scores);
            // the same query handed over as tokens: the same hits, bit for bit
            let tokens = idx.tokenize(&query);
            prop_assert_eq!(idx.token_terms(&tokens), terms);
            prop_assert_eq!(
                bits(&idx.search_tokens(&tokens, k, allowed)),
                bits(&idx.search(&query, k, allowed))
            );
        }

        /// The same on hand-made postings whose contributions span many magnitudes (sums
        /// round, some overflow to infinity): the range bounds must hold without slack.
        #[test]
        fn pruning_is_exact_on_extreme_contributions(
            n_docs in 1usize..300,
            lists in prop::collection::vec(
                (prop::collection::btree_set(0u32..300, 1..120),
                 prop::collection::vec(prop::sample::select(vec![1e-30f32, 1e-3, 0.1, 1.0, 1.0 + f32::EPSILON, 3.0, 7.5, 1e3, 1e7, 1e30, 3e38]), 120),
                 prop::collection::vec(0.5f32..1.1, 120)),
                1..12),
            query_seed: u64,
            min_df in prop::sample::select(vec![1usize, 4, 30, usize::MAX]),
            k in prop::sample::select(vec![1usize, 3, 10, 500]),
        ) {
            let mut offsets = vec![0u32];
            let (mut doc_ids, mut contrib) = (Vec::new(), Vec::new());
            for (ids, scales, jitter) in &lists {
                let ids: std::collections::BTreeSet<u32> = ids.iter().map(|&d| d % n_docs as u32).collect();
                for (i, &d) in ids.iter().enumerate() {
                    doc_ids.push(d);
                    contrib.push(scales[i] * jitter[i]);
                }
                offsets.push(doc_ids.len() as u32);
            }
            let words: Vec<String> = (0..lists.len()).map(|i| format!("t{i:03}")).collect();
            let mut vocab = Vocab { text: String::new(), ends: vec![0] };
            for w in &words {
                vocab.text.push_str(w);
                vocab.ends.push(vocab.text.len() as u32);
            }
            let idx = Bm25Index::from_parts(
                Bm25Params::default(), TokenizerConfig::default(), vocab, offsets, doc_ids, contrib, vec![1; n_docs],
            )
            .unwrap()
            .with_range_rows(min_df);
            let terms: Vec<u32> = (0..lists.len() as u32).filter(|t| (query_seed >> (t % 64)) & 1 == 1).collect();
            check_pruned(&idx, &terms, k, None)?;
        }
    }

    #[test]
    fn infinite_scores_and_bounds() {
        // doc 1 scores 3e38 + 3e38 = inf: its range's bound is infinite too
        let vocab = Vocab {
            text: "ab".into(),
            ends: vec![0, 1, 2],
        };
        let idx = Bm25Index::from_parts(
            Bm25Params::default(),
            TokenizerConfig::default(),
            vocab,
            vec![0, 2, 4],
            vec![0, 1, 1, 2],
            vec![1.0, 3e38, 3e38, 2.0],
            vec![1; 3],
        )
        .unwrap();
        for min_df in [1, 3] {
            let idx = idx.clone().with_range_rows(min_df);
            for k in [1, 2, 3] {
                let hits = check_pruned(&idx, &[0, 1], k, None).unwrap();
                assert_eq!(hits[0], (1, f32::INFINITY));
                assert_eq!(hits.len(), k);
            }
        }
    }

    #[test]
    fn default_ranges_and_fallback() {
        // many documents sharing the query terms: the pruned path gives up and scans
        let docs: Vec<String> = (0..5000)
            .map(|i| format!("common shared w{} w{}", i % 13, i % 101))
            .collect();
        let idx =
            Bm25Index::build(&docs, Bm25Params::default(), TokenizerConfig::default()).unwrap();
        assert_eq!(idx.ranges.n_ranges, 5000usize.div_ceil(WIDTH));
        for query in ["common shared", "w7 w77 common", "w100", "nothing here"] {
            for k in [1, 10, 5000] {
                let terms = idx.query_terms(query);
                let mut scratch = Scratch::default();
                assert_eq!(
                    idx.search(query, k, None),
                    idx.search_terms_exhaustive(&terms, k, None, &mut scratch)
                );
                assert_eq!(
                    idx.search_pruned(
                        &terms,
                        k,
                        None,
                        &mut scratch,
                        Pruning {
                            fallback: false,
                            ..Pruning::DEFAULT
                        }
                    ),
                    idx.search_exhaustive(query, k, None)
                );
            }
        }
    }
}
