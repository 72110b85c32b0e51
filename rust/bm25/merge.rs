//! One index over several (or over runs of documents of several): the shards' documents one after another, scored with the
//! statistics of the whole (document frequencies, document count, average length).
//!
//! A shard stores each posting's contribution, not its term frequency; the frequency is
//! recovered by inverting the contribution formula under the shard's own statistics and then
//! checked: the contribution recomputed from it must equal the stored one bit for bit (else
//! the merge fails rather than guess). The merged contributions come from the same formula
//! ([`contribution`]) with the global statistics, and every score sums in increasing term id —
//! the same order in each shard as in the union, vocabularies being sorted — so the merged
//! index scores every document exactly as an index built over all the documents at once.

use std::ops::Range;

use rayon::prelude::*;

use super::build::{contribution, mean, norms, Postings};
use super::vocab::Vocab;
use super::{idf, Bm25Index, BuildError};

/// A run of documents of one index: documents `docs` of `index`, in order.
#[derive(Debug, Clone)]
pub struct Piece<'a> {
    /// The index the documents are read from.
    pub index: &'a Bm25Index,
    /// Their ids in it.
    pub docs: Range<u32>,
}

impl<'a> Piece<'a> {
    /// All the documents of `index`.
    pub fn whole(index: &'a Bm25Index) -> Self {
        Self {
            index,
            docs: 0..index.num_docs() as u32,
        }
    }

    /// The postings of `term` (an id of the piece's index) that fall in the piece's documents:
    /// a term's postings are sorted by document, so two binary searches bound them.
    fn postings(&self, term: usize) -> Range<usize> {
        let all = self.index.postings(term);
        let ids = &self.index.doc_ids[all.clone()];
        let lo = ids.partition_point(|&d| d < self.docs.start);
        let hi = ids.partition_point(|&d| d < self.docs.end);
        all.start + lo..all.start + hi
    }
}

impl Bm25Index {
    /// The index of all documents of `shards`, in order (document `d` of shard `s` becomes
    /// `d` plus the number of documents of the shards before `s`), with global statistics:
    /// equal, array for array, to [`build`](Self::build) over the shards' documents
    /// concatenated. The shards must share their parameters and tokenizer.
    pub fn merge(shards: &[&Bm25Index]) -> Result<Self, BuildError> {
        let pieces: Vec<Piece<'_>> = shards.iter().map(|s| Piece::whole(s)).collect();
        Self::concat(&pieces)
    }

    /// The index of the documents of `pieces`, one run after another (a piece's document `d`
    /// becomes `d - docs.start` plus the number of documents of the pieces before it), with the
    /// statistics of those documents: equal, array for array, to [`build`](Self::build) over
    /// them. An index rebuilt after an edit is the old index's unchanged runs around an index of
    /// the edited documents. The pieces' indexes must share their parameters and tokenizer.
    pub fn concat(pieces: &[Piece<'_>]) -> Result<Self, BuildError> {
        let first = pieces
            .first()
            .ok_or_else(|| BuildError("no index to merge".into()))?;
        let (params, tokenizer) = (first.index.params, first.index.tokenizer);
        if pieces
            .iter()
            .any(|p| p.index.params != params || p.index.tokenizer != tokenizer)
        {
            return Err(BuildError(
                "the indexes to merge differ in BM25 parameters or tokenizer".into(),
            ));
        }
        if let Some(p) = pieces
            .iter()
            .find(|p| p.docs.start > p.docs.end || p.docs.end as usize > p.index.num_docs())
        {
            return Err(BuildError(format!(
                "documents {}..{} are not in an index of {} documents",
                p.docs.start,
                p.docs.end,
                p.index.num_docs()
            )));
        }
        let n_docs: usize = pieces.iter().map(|p| p.docs.len()).sum();
        if u32::try_from(n_docs).is_err() {
            return Err(BuildError(format!("too many documents: {n_docs}")));
        }
        // each distinct index's term frequencies, recovered once however many pieces it gives
        let mut sources: Vec<&Bm25Index> = Vec::new();
        let source_of: Vec<usize> = pieces
            .iter()
            .map(
                |p| match sources.iter().position(|s| std::ptr::eq(*s, p.index)) {
                    Some(i) => i,
                    None => {
                        sources.push(p.index);
                        sources.len() - 1
                    }
                },
            )
            .collect();
        let tfs: Vec<Vec<u32>> = sources
            .par_iter()
            .map(|s| s.term_frequencies())
            .collect::<Result<_, _>>()?;
        let (vocab, maps) = union_vocab(pieces)?;
        let doc_lens: Vec<u32> = pieces
            .iter()
            .flat_map(|p| {
                p.index.doc_lens[p.docs.start as usize..p.docs.end as usize]
                    .iter()
                    .copied()
            })
            .collect();
        let avgdl = mean(&doc_lens);
        let norms = norms(&doc_lens, avgdl, params);

        // document frequencies, then offsets, of the union's terms
        let mut df = vec![0u32; vocab.len()];
        for (piece, map) in pieces.iter().zip(&maps) {
            for (local, &global) in map.iter().enumerate() {
                if global != ABSENT {
                    df[global as usize] += piece.postings(local).len() as u32;
                }
            }
        }
        let mut offsets = Vec::with_capacity(df.len() + 1);
        let mut end = 0u32;
        offsets.push(0);
        for &d in &df {
            end = end
                .checked_add(d)
                .ok_or_else(|| BuildError("more than 2^32 postings".into()))?;
            offsets.push(end);
        }
        let idfs: Vec<f64> = df.iter().map(|&d| idf(n_docs, d as usize)).collect();

        let mut doc_ids = vec![0u32; end as usize];
        let mut contrib = vec![0f32; end as usize];
        let mut next: Vec<u32> = offsets[..df.len()].to_vec();
        let mut first_doc = 0u32;
        for ((piece, map), &source) in pieces.iter().zip(&maps).zip(&source_of) {
            let (tf, index) = (&tfs[source], piece.index);
            for (local, &global) in map.iter().enumerate() {
                if global == ABSENT {
                    continue;
                }
                let (g, range) = (global as usize, piece.postings(local));
                let at = next[g] as usize;
                for (i, p) in range.clone().enumerate() {
                    let doc = index.doc_ids[p] - piece.docs.start + first_doc;
                    doc_ids[at + i] = doc;
                    contrib[at + i] =
                        contribution(idfs[g], f64::from(tf[p]), params.k1, norms[doc as usize]);
                }
                next[g] += range.len() as u32;
            }
            first_doc += piece.docs.len() as u32;
        }
        let postings = Postings {
            offsets,
            doc_ids,
            contrib,
        };
        Ok(Self::assemble(params, tokenizer, vocab, postings, doc_lens))
    }

    /// The term frequency of every posting, recovered from its contribution (see the module
    /// documentation); an error when one cannot be recovered exactly.
    fn term_frequencies(&self) -> Result<Vec<u32>, BuildError> {
        let k1 = self.params.k1;
        let norms = norms(&self.doc_lens, self.avgdl, self.params);
        let mut tfs = vec![0u32; self.doc_ids.len()];
        for t in 0..self.num_terms() {
            let range = self.postings(t);
            let w = idf(self.num_docs(), range.len());
            for p in range {
                let (c, norm) = (self.contrib[p], norms[self.doc_ids[p] as usize]);
                tfs[p] = recover_tf(c, w, k1, norm).ok_or_else(|| {
                    BuildError(format!(
                        "cannot recover the term frequency of a posting of {:?}",
                        self.vocab.term(t)
                    ))
                })?;
            }
        }
        Ok(tfs)
    }
}

/// The union id of a piece's term none of whose postings fall in the piece.
const ABSENT: u32 = u32::MAX;

/// The term frequency whose contribution under (`idf`, `k1`, `norm`) is exactly `c`, if any.
fn recover_tf(c: f32, idf: f64, k1: f64, norm: f64) -> Option<u32> {
    if k1 == 0.0 {
        // every frequency contributes `idf`: any will do, 1 is the build's smallest
        return (contribution(idf, 1.0, k1, norm) == c).then_some(1);
    }
    let x = f64::from(c) / idf;
    let guess = if x < k1 + 1.0 {
        (x * norm / (k1 + 1.0 - x))
            .round()
            .clamp(1.0, f64::from(u32::MAX))
    } else {
        f64::from(u32::MAX)
    };
    let guess = guess as u32;
    [guess, guess.saturating_sub(1), guess.saturating_add(1)]
        .into_iter()
        .find(|&tf| tf > 0 && contribution(idf, f64::from(tf), k1, norm) == c)
}

/// The sorted union of the terms that occur in the pieces' documents, and for each piece the
/// union id of each term of its index (increasing, since both are sorted; [`ABSENT`] for a
/// term that does not occur in the piece's documents).
fn union_vocab(pieces: &[Piece<'_>]) -> Result<(Vocab, Vec<Vec<u32>>), BuildError> {
    let present: Vec<Vec<bool>> = pieces
        .par_iter()
        .map(|p| {
            (0..p.index.num_terms())
                .map(|t| !p.postings(t).is_empty())
                .collect()
        })
        .collect();
    let mut words: Vec<&str> = pieces
        .iter()
        .zip(&present)
        .flat_map(|(p, here)| {
            (0..p.index.num_terms())
                .filter(|&t| here[t])
                .map(|t| p.index.vocab.term(t))
        })
        .collect();
    words.par_sort_unstable();
    words.dedup();
    let text_len: usize = words.iter().map(|w| w.len()).sum();
    if u32::try_from(text_len).is_err() {
        return Err(BuildError("vocabulary larger than 4 GiB".into()));
    }
    let mut vocab = Vocab {
        text: String::with_capacity(text_len),
        ends: Vec::with_capacity(words.len() + 1),
    };
    vocab.ends.push(0);
    for w in &words {
        vocab.text.push_str(w);
        vocab.ends.push(vocab.text.len() as u32);
    }
    let maps = pieces
        .par_iter()
        .zip(&present)
        .map(|(p, here)| {
            // both sorted: one forward walk over the union
            let mut g = 0usize;
            (0..p.index.num_terms())
                .map(|t| {
                    if !here[t] {
                        return ABSENT;
                    }
                    let term = p.index.vocab.term(t);
                    while words[g] != term {
                        g += 1;
                    }
                    g as u32
                })
                .collect()
        })
        .collect();
    Ok((vocab, maps))
}
