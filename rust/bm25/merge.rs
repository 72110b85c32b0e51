//! One index over several: the shards' documents one after another, scored with the
//! statistics of the whole (document frequencies, document count, average length).
//!
//! A shard stores each posting's contribution, not its term frequency; the frequency is
//! recovered by inverting the contribution formula under the shard's own statistics and then
//! checked: the contribution recomputed from it must equal the stored one bit for bit (else
//! the merge fails rather than guess). The merged contributions come from the same formula
//! ([`contribution`]) with the global statistics, and every score sums in increasing term id —
//! the same order in each shard as in the union, vocabularies being sorted — so the merged
//! index scores every document exactly as an index built over all the documents at once.

use rayon::prelude::*;

use super::build::{contribution, mean, norms, Postings};
use super::vocab::Vocab;
use super::{idf, Bm25Index, BuildError};

impl Bm25Index {
    /// The index of all documents of `shards`, in order (document `d` of shard `s` becomes
    /// `d` plus the number of documents of the shards before `s`), with global statistics:
    /// equal, array for array, to [`build`](Self::build) over the shards' documents
    /// concatenated. The shards must share their parameters and tokenizer.
    pub fn merge(shards: &[&Bm25Index]) -> Result<Self, BuildError> {
        let first = shards
            .first()
            .ok_or_else(|| BuildError("no index to merge".into()))?;
        let (params, tokenizer) = (first.params, first.tokenizer);
        if shards
            .iter()
            .any(|s| s.params != params || s.tokenizer != tokenizer)
        {
            return Err(BuildError(
                "the indexes to merge differ in BM25 parameters or tokenizer".into(),
            ));
        }
        let n_docs: usize = shards.iter().map(|s| s.num_docs()).sum();
        if u32::try_from(n_docs).is_err() {
            return Err(BuildError(format!("too many documents: {n_docs}")));
        }
        let tfs: Vec<Vec<u32>> = shards
            .par_iter()
            .map(|s| s.term_frequencies())
            .collect::<Result<_, _>>()?;
        let (vocab, maps) = union_vocab(shards)?;
        let doc_lens: Vec<u32> = shards
            .iter()
            .flat_map(|s| s.doc_lens.iter().copied())
            .collect();
        let avgdl = mean(&doc_lens);
        let norms = norms(&doc_lens, avgdl, params);

        // document frequencies, then offsets, of the union's terms
        let mut df = vec![0u32; vocab.len()];
        for (shard, map) in shards.iter().zip(&maps) {
            for (local, &global) in map.iter().enumerate() {
                df[global as usize] += shard.postings(local).len() as u32;
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
        for ((shard, map), tf) in shards.iter().zip(&maps).zip(&tfs) {
            for (local, &global) in map.iter().enumerate() {
                let (g, range) = (global as usize, shard.postings(local));
                let at = next[g] as usize;
                for (i, p) in range.clone().enumerate() {
                    let doc = shard.doc_ids[p] + first_doc;
                    doc_ids[at + i] = doc;
                    contrib[at + i] =
                        contribution(idfs[g], f64::from(tf[p]), params.k1, norms[doc as usize]);
                }
                next[g] += range.len() as u32;
            }
            first_doc += shard.num_docs() as u32;
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

/// The sorted union of the shards' vocabularies, and for each shard the union id of each of
/// its terms (increasing, since both are sorted).
fn union_vocab(shards: &[&Bm25Index]) -> Result<(Vocab, Vec<Vec<u32>>), BuildError> {
    let mut words: Vec<&str> = shards
        .iter()
        .flat_map(|s| (0..s.num_terms()).map(|t| s.vocab.term(t)))
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
    let maps = shards
        .par_iter()
        .map(|s| {
            // both sorted: one forward walk
            let mut g = 0usize;
            (0..s.num_terms())
                .map(|t| {
                    let term = s.vocab.term(t);
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
