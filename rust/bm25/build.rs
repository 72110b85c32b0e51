//! The parallel build: documents tokenized and counted in blocks on all threads, the blocks'
//! vocabularies merged, then the postings scattered into flat arrays by a counting sort.

use std::marker::PhantomData;

use rayon::prelude::*;

use super::vocab::{FxHashMap, Vocab};
use super::{idf, Bm25Index, Bm25Params, BuildError};
use crate::memory::{collapse_huge_pages, huge_zeroed};
use crate::tokenizer::{for_each_token, TokenizerConfig};

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
        // (advice: a refusal leaves the arrays as they are, only slower to search)
        let _ = collapse_huge_pages(&built.doc_ids);
        let _ = collapse_huge_pages(&built.contrib);
        let _ = collapse_huge_pages(&built.ranges.cells);
        let _ = collapse_huge_pages(&built.ranges.maxima);
        let _ = collapse_huge_pages(&built.term_ids.slots);
        Ok(built)
    }
}

/// Mean of `lens` (0 when empty).
pub(super) fn mean(lens: &[u32]) -> f64 {
    let total: u64 = lens.iter().map(|&l| u64::from(l)).sum();
    if lens.is_empty() {
        0.0
    } else {
        total as f64 / lens.len() as f64
    }
}

/// Length normalisation `k1 · (1 − b + b · dl / avgdl)` of every document (`dl / avgdl`
/// is 1 when `avgdl` is 0).
pub(super) fn norms(doc_lens: &[u32], avgdl: f64, Bm25Params { k1, b }: Bm25Params) -> Vec<f64> {
    let ratio = |dl: u32| {
        if avgdl > 0.0 {
            f64::from(dl) / avgdl
        } else {
            1.0
        }
    };
    doc_lens
        .iter()
        .map(|&dl| k1 * (1.0 - b + b * ratio(dl)))
        .collect()
}

/// The stored contribution of a posting: `idf · tf · (k1 + 1) / (tf + norm)`, computed in
/// `f64` and rounded once (the one formula of the build and of [`Bm25Index::merge`]).
#[inline]
pub(super) fn contribution(idf: f64, tf: f64, k1: f64, norm: f64) -> f32 {
    (idf * tf * (k1 + 1.0) / (tf + norm)) as f32
}

/// The three posting arrays of [`Bm25Index`].
pub(super) struct Postings {
    pub(super) offsets: Vec<u32>,
    pub(super) doc_ids: Vec<u32>,
    pub(super) contrib: Vec<f32>,
}

/// Flat postings of the blocks' documents, grouped by term with a counting sort (so doc ids
/// increase within each term), each with its precomputed contribution.
///
/// The blocks are cut into one contiguous group per thread, and each group writes its own
/// postings in parallel: within term `t`, group `g`'s postings go after those of the groups
/// before it (its own cursor per term), so the arrays come out exactly as a sequential pass
/// would write them. The cursors cost 4 bytes per term and thread. Sequential, the scatter
/// was the build's largest single-threaded step (build times by corpus size: `benches/RESULTS.md`,
/// "Scaling with corpus size").
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
    let norms = norms(doc_lens, avgdl, Bm25Params { k1, b });

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
                    let c = contribution(idfs[t], tf, k1, norms[doc]);
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
