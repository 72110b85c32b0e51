//! BM25 inverted index in flat arrays (bm25s-style): no per-posting objects, and every
//! posting's score contribution is precomputed at build time, so a query is a sum of
//! contiguous `f32` slices followed by a top-k selection.
//!
//! Postings of term `t` are `doc_ids[offsets[t]..offsets[t + 1]]` (increasing) with the
//! matching `contrib` values `idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))`,
//! where `idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))` (Lucene / bm25s).

#![warn(missing_docs)]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

use rayon::prelude::*;

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
}

/// Per-thread buffers of a search: dense scores and top-k candidates.
#[derive(Debug, Clone, Default)]
pub struct Scratch {
    scores: Vec<f32>,
    ranked: Vec<(u32, f32)>,
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
/// doc, ranked. One pass with a bounded candidate buffer and a rising score threshold.
fn top_k(
    scores: &[f32],
    k: usize,
    allowed: Option<&[u8]>,
    ranked: &mut Vec<(u32, f32)>,
) -> Vec<(u32, f32)> {
    let is_allowed = |doc: usize| allowed.is_none_or(|m| m.get(doc).is_some_and(|&b| b != 0));
    let capacity = k.max(32).saturating_mul(2);
    let mut threshold = 0.0f32;
    ranked.clear();
    for (doc, &score) in scores.iter().enumerate() {
        // a later doc tying with the k-th best ranks after it: strict `>` is exact
        if score > threshold && is_allowed(doc) {
            ranked.push((doc as u32, score));
            if ranked.len() == capacity {
                ranked.select_nth_unstable_by(k - 1, by_rank);
                ranked.truncate(k);
                threshold = ranked[k - 1].1;
            }
        }
    }
    if ranked.len() > k {
        ranked.select_nth_unstable_by(k - 1, by_rank);
        ranked.truncate(k);
    }
    ranked.sort_unstable_by(by_rank);
    ranked.clone()
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
        let Postings {
            offsets,
            doc_ids,
            contrib,
        } = postings(&blocks, vocab.len(), &doc_lens, avgdl, params)?;
        Ok(Self {
            params,
            tokenizer,
            vocab,
            offsets,
            doc_ids,
            contrib,
            doc_lens,
            avgdl,
        })
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
        let avgdl = mean(&doc_lens);
        Ok(Self {
            params,
            tokenizer,
            vocab,
            offsets,
            doc_ids,
            contrib,
            doc_lens,
            avgdl,
        })
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
        let mut terms = Vec::new();
        for_each_token(query, &self.tokenizer, |tok| {
            terms.extend(self.vocab.id(tok))
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
    /// Scores accumulate in a thread-local buffer, so repeated calls allocate only the result.
    pub fn search(&self, query: &str, k: usize, allowed: Option<&[u8]>) -> Vec<(u32, f32)> {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
        }
        let terms = self.query_terms(query);
        SCRATCH.with_borrow_mut(|scratch| self.search_terms(&terms, k, allowed, scratch))
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

    /// The hot loop: sum the postings of `terms` into dense scores, then select the top k.
    pub fn search_terms(
        &self,
        terms: &[u32],
        k: usize,
        allowed: Option<&[u8]>,
        scratch: &mut Scratch,
    ) -> Vec<(u32, f32)> {
        if terms.is_empty() || k == 0 {
            return Vec::new();
        }
        let Scratch { scores, ranked } = scratch;
        scores.resize(self.num_docs(), 0.0);
        for &t in terms {
            let range = self.postings(t as usize);
            for (&doc, &c) in self.doc_ids[range.clone()].iter().zip(&self.contrib[range]) {
                scores[doc as usize] += c;
            }
        }
        let top = top_k(scores, k, allowed, ranked);
        scores.fill(0.0);
        top
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
fn postings(
    blocks: &[Block],
    n_terms: usize,
    doc_lens: &[u32],
    avgdl: f64,
    Bm25Params { k1, b }: Bm25Params,
) -> Result<Postings, BuildError> {
    let mut df = vec![0u32; n_terms];
    for &t in blocks.iter().flat_map(|b| &b.terms) {
        df[t as usize] += 1;
    }
    let mut offsets = Vec::with_capacity(n_terms + 1);
    let mut end = 0u32;
    offsets.push(0);
    for &d in &df {
        end = end
            .checked_add(d)
            .ok_or_else(|| BuildError("more than 2^32 postings".into()))?;
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

    let mut next: Vec<u32> = offsets[..n_terms].to_vec();
    let mut doc_ids = vec![0u32; end as usize];
    let mut contrib = vec![0f32; end as usize];
    let docs = blocks.iter().flat_map(|block| {
        block
            .doc_ends
            .windows(2)
            .map(|w| (&block.terms[w[0]..w[1]], &block.tfs[w[0]..w[1]]))
    });
    for (doc, (terms, tfs)) in docs.enumerate() {
        for (&t, &tf) in terms.iter().zip(tfs) {
            let (t, tf) = (t as usize, f64::from(tf));
            let pos = next[t] as usize;
            next[t] += 1;
            doc_ids[pos] = doc as u32;
            contrib[pos] = (idfs[t] * tf * (k1 + 1.0) / (tf + norms[doc])) as f32;
        }
    }
    Ok(Postings {
        offsets,
        doc_ids,
        contrib,
    })
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
    fn vocab_lookup() {
        let idx =
            Bm25Index::build(&corpus(), Bm25Params::default(), TokenizerConfig::default()).unwrap();
        for i in 0..idx.num_terms() {
            assert_eq!(idx.vocab().id(idx.vocab().term(i)), Some(i as u32));
        }
        assert_eq!(idx.vocab().id("zzzz"), None);
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
}
