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
//! interpreter calls — a search waits on memory more than it computes. Every sum (score,
//! range bound, document bound) adds its terms in increasing term id, exactly as
//! [`score_docs`](Bm25Index::score_docs) and the exhaustive scan do: rounding is monotone, so
//! a bound is never below a score it covers (no epsilon), and all three ways agree to the
//! bit. A range without an `allowed` document gets a zero bound, so a restrictive mask visits
//! fewer ranges, not more. Queries for which pruning would not pay (too many ranges to visit,
//! e.g. a large `k`) fall back to the exhaustive scan.
//!
//! Where things are: this file holds the index, its parameters, loading from checked arrays
//! and the search entry points; `build` the parallel build (blocks, vocabulary merge, posting
//! scatter); `vocab` the sorted vocabulary and the hash table of query terms; `prune` the
//! range bounds and the pruned search; `merge` one index over several shards, with global
//! statistics; `spell` the respelling of query words the vocabulary lacks; `topk` the top-k selections; `simd` the vectorized
//! kernels and prefetch; `tests` the oracles and property tests.

#![warn(missing_docs)]

mod build;
mod merge;
mod prune;
mod simd;
mod spell;
mod topk;
mod vocab;

use std::collections::BinaryHeap;
use std::ops::Range;

use rayon::prelude::*;

use crate::tokenizer::{for_each_token, tokenize, TokenizerConfig};

use build::{mean, Postings};
pub use merge::Piece;
pub use prune::RangeMax;
use prune::{Pruning, Run};
use simd::prefetch;
use topk::{top_k, Hit};
pub use vocab::Vocab;
use vocab::{TermTable, Tokens};

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
        Self::DEFAULT
    }
}

impl Bm25Params {
    /// The standard BM25 values (Robertson & Zaragoza; Lucene), which measured recall on the
    /// public sets did not beat: fastrag's defaults, exported to Python as
    /// `fastrag._core.DEFAULT_K1` and `DEFAULT_B`.
    pub const DEFAULT: Self = Self { k1: 1.2, b: 0.75 };

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
    /// Row in [`RangeMax`] of each query term, or [`SPARSE`](prune::SPARSE).
    rows: Vec<usize>,
    /// Runs of rare-term postings, one per (term, range), by term then range, linked per
    /// range.
    runs: Vec<Run>,
    /// Per range: its first run (lowest term), or [`NONE`](prune::NONE).
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

impl Bm25Index {
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

    /// The exhaustive search: sum the postings of `terms` into dense scores, then select the
    /// top k over all documents.
    fn search_terms_exhaustive(
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

#[cfg(test)]
mod tests;
